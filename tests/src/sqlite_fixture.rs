//! SQLite for the tests that use it: files in directories of each test's own, a fresh store
//! on one, and a payment service whose handler writes its row in the request's transaction.
//!
//! SQLite needs no service: every test that uses it runs. A test's directory is a
//! [`Scratch`], removed when it is dropped; the stores of the shared suites (steps, the
//! conformance suite) are on files in `idem-tests-sqlite` in the system's temporary
//! directory, named `<unix seconds>_<random>.db`, and files older than an hour (left by an
//! interrupted run) are removed when a store is made.

use std::{
    collections::VecDeque,
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use axum::{
    Json, Router,
    extract::State,
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::post,
};
use idem::{Idempotency, IdempotencyLayer, Policy, Scope, extract::Tx, sqlite::SqliteStore};
use serde_json::{Value, json};
use sqlx::{
    AssertSqlSafe, SqliteConnection, SqlitePool,
    sqlite::{SqliteConnectOptions, SqliteJournalMode},
};
use tokio::sync::Notify;

/// A directory of the test's own, removed with everything in it when dropped.
#[derive(Debug)]
pub struct Scratch(PathBuf);

impl Scratch {
    /// A new directory, named after `test` and a random number.
    pub fn new(test: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "idem-{}-{:016x}",
            test.replace("::", "-"),
            rand::random::<u64>()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    /// The path of `name` in the directory.
    pub fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A pool for the test's own statements on `file` (setup, assertions, locks), in WAL mode as
/// the store opens it.
pub async fn admin_pool(file: &Path) -> SqlitePool {
    let options = SqliteConnectOptions::new()
        .filename(file)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .busy_timeout(Duration::from_secs(30));
    sqlx::sqlite::SqlitePoolOptions::new()
        .max_connections(4)
        .connect_with(options)
        .await
        .expect("the test's SQLite file opens")
}

/// A store on `file`, migrated, whose pool waits as long as a test may take for a connection
/// (the tests race 1,000 claims on it) and whose writes wait `busy` for the write lock.
pub async fn store_on(file: &Path, busy: Duration) -> SqliteStore {
    let store = SqliteStore::builder()
        .acquire_timeout(Duration::from_secs(30))
        .busy_timeout(busy)
        .max_connections(8)
        .connect(file.to_str().expect("a UTF-8 path"))
        .await
        .unwrap();
    store.migrate().await.unwrap();
    store
}

static SWEPT_STALE: AtomicBool = AtomicBool::new(false);

/// A store on a new file in `idem-tests-sqlite`, for the suites that run on every store.
pub async fn fresh_store() -> SqliteStore {
    let dir = std::env::temp_dir().join("idem-tests-sqlite");
    std::fs::create_dir_all(&dir).unwrap();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    if !SWEPT_STALE.swap(true, Ordering::SeqCst) {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let made = name.split('_').next().and_then(|s| s.parse::<u64>().ok());
            if made.is_some_and(|made| made + 3600 < now) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    let file = dir.join(format!("{now}_{:016x}.db", rand::random::<u64>()));
    store_on(&file, Duration::from_secs(10)).await
}

/// The number of rows in `table`.
pub async fn count(pool: &SqlitePool, table: &str) -> i64 {
    sqlx::query_scalar(AssertSqlSafe(format!("SELECT count(*) FROM {table}")))
        .fetch_one(pool)
        .await
        .unwrap()
}

/// What the payment handler does on its next run.
#[derive(Clone, Debug)]
pub enum Step {
    /// Write the payment and answer 201.
    Succeed,
    /// Write the payment, then answer 500.
    Fail,
    /// Write the payment, signal `written`, wait for `proceed`, then answer 201.
    Wait {
        /// Notified once the payment is written.
        written: Arc<Notify>,
        /// Waited for before answering.
        proceed: Arc<Notify>,
    },
}

/// The test service: `POST /payments` writes a row into its payments table in the request's
/// transaction (which holds the file's write lock from that write to its end) and answers it
/// as JSON. What each run does next is scripted.
#[derive(Clone, Debug)]
pub struct Payments {
    /// The payments table.
    pub table: Arc<str>,
    executions: Arc<AtomicUsize>,
    script: Arc<Mutex<VecDeque<Step>>>,
}

impl Payments {
    /// The service, writing into `table`, which this creates.
    pub async fn create(pool: &SqlitePool, table: &str) -> Self {
        let ddl = format!(
            "CREATE TABLE {table} (id INTEGER PRIMARY KEY, amount INTEGER NOT NULL, \
             execution INTEGER NOT NULL) STRICT"
        );
        sqlx::query(AssertSqlSafe(ddl)).execute(pool).await.unwrap();
        Self {
            table: table.into(),
            executions: Arc::default(),
            script: Arc::default(),
        }
    }

    /// Queues what the next run of the handler does; after the script, runs succeed.
    pub fn then(&self, step: Step) -> &Self {
        self.script.lock().unwrap().push_back(step);
        self
    }

    /// How many times the handler ran.
    pub fn executions(&self) -> usize {
        self.executions.load(Ordering::SeqCst)
    }

    /// The service on `store`, every route keyed by one global key space.
    pub fn router(&self, store: SqliteStore) -> Router {
        self.router_with(Idempotency::new(store), Policy::new().scope(Scope::Global))
    }

    /// The service under `idem` and `policy`.
    pub fn router_with(&self, idem: Idempotency, policy: Policy) -> Router {
        Router::new()
            .route("/payments", post(create_payment))
            .layer(IdempotencyLayer::new(idem, policy))
            .with_state(self.clone())
    }
}

/// The handler of `POST /payments`.
async fn create_payment(
    State(payments): State<Payments>,
    mut tx: Tx,
    Json(body): Json<Value>,
) -> Response {
    let execution = payments.executions.fetch_add(1, Ordering::SeqCst) as i64 + 1;
    let step = payments
        .script
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or(Step::Succeed);
    let conn = match tx.conn::<SqliteConnection>().await {
        Ok(conn) => conn,
        Err(error) => return error.into_response(),
    };
    let insert = format!(
        "INSERT INTO {} (amount, execution) VALUES (?, ?)",
        payments.table
    );
    let written = sqlx::query(AssertSqlSafe(insert))
        .bind(body["amount"].as_i64().unwrap_or(0))
        .bind(execution)
        .execute(conn)
        .await;
    let id = match written {
        Ok(done) => done.last_insert_rowid(),
        Err(error) => {
            return (StatusCode::INTERNAL_SERVER_ERROR, error.to_string()).into_response();
        }
    };
    match step {
        Step::Succeed => {}
        Step::Fail => {
            return (StatusCode::INTERNAL_SERVER_ERROR, "the payment failed").into_response();
        }
        Step::Wait { written, proceed } => {
            written.notify_one();
            proceed.notified().await;
        }
    }
    let payment = json!({ "id": id, "amount": body["amount"], "execution": execution });
    (StatusCode::CREATED, Json(payment)).into_response()
}
