//! The shared MySQL or MariaDB, for the tests that use it: the URL, a fresh table per test,
//! and a payment service whose handler writes its row in the request's transaction.
//!
//! Tests read the URL from `IDEM_TEST_MYSQL_URL` and skip, saying so, when it is unset. Every
//! test works in tables of its own in the database `idem_tests`, named
//! `<prefix><unix seconds>_<random>`, so runs never collide; tables older than an hour (left
//! by an interrupted run) are dropped when a test starts.

use std::{
    collections::VecDeque,
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
use idem::{Idempotency, IdempotencyLayer, Policy, Scope, extract::Tx, mysql::MySqlStore};
use serde_json::{Value, json};
use sqlx::{AssertSqlSafe, MySqlConnection, MySqlPool};
use tokio::sync::Notify;

/// The database every test table is in.
pub const DATABASE: &str = "idem_tests";

/// The test server, or `None` (with a note on stderr) when `IDEM_TEST_MYSQL_URL` is unset.
pub fn mysql_url(test: &str) -> Option<String> {
    match std::env::var("IDEM_TEST_MYSQL_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            eprintln!("skipped {test}: IDEM_TEST_MYSQL_URL is not set");
            None
        }
    }
}

/// A pool for the test's own queries (setup and assertions).
pub async fn admin_pool(url: &str) -> MySqlPool {
    sqlx::mysql::MySqlPoolOptions::new()
        .max_connections(4)
        .connect(url)
        .await
        .expect("cannot connect to IDEM_TEST_MYSQL_URL")
}

static SWEPT_STALE: AtomicBool = AtomicBool::new(false);

/// A new table name in the test database, which this creates if needed.
pub async fn fresh_name(pool: &MySqlPool, prefix: &str) -> String {
    sqlx::query(AssertSqlSafe(format!(
        "CREATE DATABASE IF NOT EXISTS {DATABASE} CHARACTER SET utf8mb4"
    )))
    .execute(pool)
    .await
    .unwrap();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    if !SWEPT_STALE.swap(true, Ordering::SeqCst) {
        drop_stale_tables(pool, now).await;
    }
    format!("{DATABASE}.{prefix}{now}_{:016x}", rand::random::<u64>())
}

async fn drop_stale_tables(pool: &MySqlPool, now: u64) {
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT CAST(table_name AS CHAR) FROM information_schema.tables WHERE table_schema = ?",
    )
    .bind(DATABASE)
    .fetch_all(pool)
    .await
    .unwrap();
    for table in tables {
        let created = table
            .trim_start_matches(|c: char| c.is_ascii_alphabetic())
            .split('_')
            .next()
            .and_then(|secs| secs.parse::<u64>().ok());
        if created.is_some_and(|created| created + 3600 < now) {
            let drop = format!("DROP TABLE IF EXISTS {DATABASE}.`{table}`");
            let _ = sqlx::query(AssertSqlSafe(drop)).execute(pool).await;
        }
    }
}

/// Drops a table the test made.
pub async fn drop_table(pool: &MySqlPool, table: &str) {
    sqlx::query(AssertSqlSafe(format!("DROP TABLE IF EXISTS {table}")))
        .execute(pool)
        .await
        .unwrap();
}

/// The number of rows in `table`.
pub async fn count(pool: &MySqlPool, table: &str) -> i64 {
    sqlx::query_scalar(AssertSqlSafe(format!("SELECT count(*) FROM {table}")))
        .fetch_one(pool)
        .await
        .unwrap()
}

/// A store on a fresh, migrated table, with a pool that waits long for connections (the
/// tests race 1,000 claims on it).
pub async fn fresh_store(url: &str) -> MySqlStore {
    let admin = admin_pool(url).await;
    let table = fresh_name(&admin, "r").await;
    admin.close().await;
    let store = MySqlStore::builder()
        .table(&table)
        .unwrap()
        .acquire_timeout(Duration::from_secs(30))
        .max_connections(8)
        .connect(url)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    store
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
/// transaction and answers it as JSON. What each run does next is scripted.
#[derive(Clone, Debug)]
pub struct Payments {
    /// The payments table.
    pub table: Arc<str>,
    executions: Arc<AtomicUsize>,
    script: Arc<Mutex<VecDeque<Step>>>,
}

impl Payments {
    /// The service, writing into `table`, which this creates.
    pub async fn create(pool: &MySqlPool, table: &str) -> Self {
        let ddl = format!(
            "CREATE TABLE {table} (id BIGINT AUTO_INCREMENT PRIMARY KEY, amount BIGINT NOT NULL, \
             execution BIGINT NOT NULL) ENGINE = InnoDB"
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
    pub fn router(&self, store: MySqlStore) -> Router {
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
    let conn = match tx.conn::<MySqlConnection>().await {
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
        Ok(done) => done.last_insert_id(),
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
