//! The shared PostgreSQL, for the tests that use it: the database URL, a fresh table per test, a service
//! instance on its own runtime, and a TCP proxy that can cut the database off.
//!
//! Tests read the URL from `IDEM_TEST_DATABASE_URL` and skip, saying so, when it is unset.
//! Every test works in tables of its own in the schema `idem_tests`, named
//! `t<unix seconds>_<random>`, so runs never collide; tables older than an hour (left by an
//! interrupted run) are dropped when a test starts.

use std::{
    collections::VecDeque,
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    thread,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use axum::{
    Json, Router,
    extract::State,
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::post,
};
use idem::{Idempotency, IdempotencyLayer, Policy, Scope, extract::Tx, postgres::PostgresStore};
use serde_json::{Value, json};
use sqlx::{AssertSqlSafe, PgPool, postgres::PgConnectOptions};
use tokio::{
    net::{TcpListener, TcpStream},
    sync::{Notify, broadcast, oneshot},
};

use crate::Answer;

/// The schema every test table is in.
pub const SCHEMA: &str = "idem_tests";

/// The test database, or `None` (with a note on stderr) when `IDEM_TEST_DATABASE_URL` is unset.
pub fn database_url(test: &str) -> Option<String> {
    match std::env::var("IDEM_TEST_DATABASE_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            eprintln!("skipped {test}: IDEM_TEST_DATABASE_URL is not set");
            None
        }
    }
}

/// A pool for the test's own queries (setup and assertions).
pub async fn admin_pool(url: &str) -> PgPool {
    sqlx::postgres::PgPoolOptions::new()
        .max_connections(4)
        .connect(url)
        .await
        .expect("cannot connect to IDEM_TEST_DATABASE_URL")
}

static SWEPT_STALE: AtomicBool = AtomicBool::new(false);

/// A new table name in the test schema, which this creates if needed.
pub async fn fresh_name(pool: &PgPool, prefix: &str) -> String {
    // Concurrent `CREATE SCHEMA IF NOT EXISTS` can still collide: serialize it.
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext('idem_tests schema'))")
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query("CREATE SCHEMA IF NOT EXISTS idem_tests")
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    if !SWEPT_STALE.swap(true, Ordering::SeqCst) {
        drop_stale_tables(pool, now).await;
    }
    format!("{SCHEMA}.{prefix}{now}_{:016x}", rand::random::<u64>())
}

async fn drop_stale_tables(pool: &PgPool, now: u64) {
    let tables: Vec<String> =
        sqlx::query_scalar("SELECT tablename::text FROM pg_tables WHERE schemaname = 'idem_tests'")
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
            let drop = format!("DROP TABLE IF EXISTS idem_tests.\"{table}\"");
            let _ = sqlx::query(AssertSqlSafe(drop)).execute(pool).await;
        }
    }
}

/// Drops a table the test made.
pub async fn drop_table(pool: &PgPool, table: &str) {
    sqlx::query(AssertSqlSafe(format!("DROP TABLE IF EXISTS {table}")))
        .execute(pool)
        .await
        .unwrap();
}

/// The number of rows in `table`.
pub async fn count(pool: &PgPool, table: &str) -> i64 {
    sqlx::query_scalar(AssertSqlSafe(format!("SELECT count(*) FROM {table}")))
        .fetch_one(pool)
        .await
        .unwrap()
}

/// A store on a fresh, migrated table, with a pool that waits long for connections (the
/// conformance suite races 1,000 claims on it).
pub async fn fresh_store(url: &str) -> PostgresStore {
    let admin = admin_pool(url).await;
    let table = fresh_name(&admin, "r").await;
    admin.close().await;
    let store = PostgresStore::builder()
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

/// What the test service's handler does on its next run.
#[derive(Clone, Debug)]
pub enum Step {
    /// Write the payment and answer 201.
    Succeed,
    /// Write the payment, then answer 500.
    Fail,
    /// Write the payment, then panic.
    Panic,
    /// Write the payment, signal `written`, wait for `proceed`, then answer 201.
    Wait {
        /// Notified once the payment is written.
        written: Arc<Notify>,
        /// Waited for before answering.
        proceed: Arc<Notify>,
    },
    /// Write the payment, hold the transaction this long, then answer 201.
    Hold(Duration),
    /// Write the payment, then write it again: the duplicate id fails the statement (and
    /// aborts the transaction), and the handler answers 409 as an application would.
    Duplicate,
    /// Write the payment and break a deferred constraint, so that the `COMMIT` fails.
    FailAtCommit,
}

/// The test service: `POST /payments` writes a row into `payments` in the request's
/// transaction and answers it as JSON. What each run does next is scripted.
#[derive(Clone, Debug)]
pub struct Shop {
    /// The payments table.
    pub payments: Arc<str>,
    /// How many times the handler ran.
    pub executions: Arc<AtomicUsize>,
    script: Arc<Mutex<VecDeque<Step>>>,
}

impl Shop {
    /// The service, writing into the table `payments`.
    pub fn new(payments: &str) -> Self {
        Self {
            payments: payments.into(),
            executions: Arc::default(),
            script: Arc::default(),
        }
    }

    /// Queues what the next runs of the handler do; after the script, they succeed.
    pub fn then(&self, step: Step) -> &Self {
        self.script.lock().unwrap().push_back(step);
        self
    }

    /// How many times the handler ran.
    pub fn executions(&self) -> usize {
        self.executions.load(Ordering::SeqCst)
    }

    /// Creates the payments table.
    pub async fn create_table(&self, pool: &PgPool) {
        let ddl = format!(
            "CREATE TABLE {} (id bigserial PRIMARY KEY, amount bigint NOT NULL, execution bigint NOT NULL)",
            self.payments
        );
        sqlx::query(AssertSqlSafe(ddl)).execute(pool).await.unwrap();
    }

    /// The service, on `store`.
    pub fn router(&self, store: PostgresStore, policy: Policy) -> Router {
        let idem = Idempotency::new(store);
        Router::new()
            .route("/payments", post(create_payment))
            .layer(IdempotencyLayer::new(idem, policy))
            .with_state(self.clone())
    }
}

/// The policy of the test service: one key space, a lease that outlives every test.
pub fn policy() -> Policy {
    Policy::new().scope(Scope::Global)
}

/// The handler of `POST /payments`: a plain axum handler, for `IdempotencyLayer` or for
/// `#[idempotent]` to wrap.
pub async fn create_payment(
    State(shop): State<Shop>,
    mut tx: Tx,
    Json(body): Json<Value>,
) -> Response {
    let execution = shop.executions.fetch_add(1, Ordering::SeqCst) as i64 + 1;
    let step = shop
        .script
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or(Step::Succeed);
    let conn = match tx.conn::<sqlx::PgConnection>().await {
        Ok(conn) => conn,
        Err(error) => return error.into_response(),
    };
    let insert = format!(
        "INSERT INTO {} (amount, execution) VALUES ($1, $2) RETURNING id",
        shop.payments
    );
    let id: i64 = match sqlx::query_scalar(AssertSqlSafe(insert))
        .bind(body["amount"].as_i64().unwrap_or(0))
        .bind(execution)
        .fetch_one(conn)
        .await
    {
        Ok(id) => id,
        Err(error) => {
            return (StatusCode::INTERNAL_SERVER_ERROR, error.to_string()).into_response();
        }
    };
    match step {
        Step::Succeed => {}
        Step::Fail => {
            return (StatusCode::INTERNAL_SERVER_ERROR, "the payment failed").into_response();
        }
        Step::Panic => panic!("the payment handler panicked"),
        Step::Wait { written, proceed } => {
            written.notify_one();
            proceed.notified().await;
        }
        Step::Hold(duration) => tokio::time::sleep(duration).await,
        Step::FailAtCommit => {
            let conn = match tx.conn::<sqlx::PgConnection>().await {
                Ok(conn) => conn,
                Err(error) => return error.into_response(),
            };
            // A deferred unique constraint is checked at COMMIT: the server refuses the
            // commit and rolls everything back.
            for statement in [
                "CREATE TEMP TABLE commit_check (n int UNIQUE DEFERRABLE INITIALLY DEFERRED) ON COMMIT DROP",
                "INSERT INTO commit_check VALUES (1), (1)",
            ] {
                sqlx::query(statement).execute(&mut *conn).await.unwrap();
            }
        }
        Step::Duplicate => {
            let again = format!(
                "INSERT INTO {} (id, amount, execution) VALUES ($1, 0, 0)",
                shop.payments
            );
            let conn = match tx.conn::<sqlx::PgConnection>().await {
                Ok(conn) => conn,
                Err(error) => return error.into_response(),
            };
            let duplicate = sqlx::query(AssertSqlSafe(again))
                .bind(id)
                .execute(conn)
                .await;
            assert!(duplicate.is_err(), "the duplicate id must be refused");
            let conflict = json!({ "error": "payment already exists", "execution": execution });
            return (StatusCode::CONFLICT, Json(conflict)).into_response();
        }
    }
    let payment = json!({ "id": id, "amount": body["amount"], "execution": execution });
    (StatusCode::CREATED, Json(payment)).into_response()
}

/// A service instance on its own thread, runtime, pool and loopback port. Dropping it stops
/// the server and drops the runtime and everything on it.
#[derive(Debug)]
pub struct Instance {
    /// Where it listens.
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    kill: Option<oneshot::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Instance {
    /// Starts the shop on a store that `connect` builds inside the instance's runtime.
    pub fn start<F, Fut>(shop: &Shop, policy: Policy, connect: F) -> Self
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = PostgresStore>,
    {
        let shop = shop.clone();
        Self::serve(move || async move { shop.router(connect().await, policy) })
    }

    /// Serves the router that `build` makes inside the instance's runtime.
    pub fn serve<F, Fut>(build: F) -> Self
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Router>,
    {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = oneshot::channel::<()>();
        let (kill, killed) = oneshot::channel::<()>();
        let thread = thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let app = build().await;
                let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
                ready_tx.send(listener.local_addr().unwrap()).unwrap();
                let serve = axum::serve(listener, app).with_graceful_shutdown(async {
                    let _ = stopped.await;
                });
                tokio::select! {
                    served = serve => served.unwrap(),
                    _ = killed => {}
                }
            });
            // Dropping the runtime ends every task on it, and the pool with them.
            drop(runtime);
        });
        let addr = ready_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the instance did not start");
        Self {
            addr,
            stop: Some(stop),
            kill: Some(kill),
            thread: Some(thread),
        }
    }

    /// Starts the shop on a store in `table`, connected to `url`.
    pub fn on_table(shop: &Shop, url: &str, table: &str) -> Self {
        let (url, table) = (url.to_owned(), table.to_owned());
        Self::start(shop, policy(), move || async move {
            PostgresStore::builder()
                .table(&table)
                .unwrap()
                .acquire_timeout(Duration::from_secs(10))
                .connect(&url)
                .await
                .unwrap()
        })
    }

    /// The URL of `path` on this instance.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Stops the server and waits for its thread.
    pub fn stop(mut self) {
        self.shut_down();
    }

    /// Ends the instance as a crash would: no graceful shutdown, running handlers dropped
    /// mid-way with the runtime, connections closed.
    pub fn kill(mut self) {
        if let Some(kill) = self.kill.take() {
            let _ = kill.send(());
        }
        self.shut_down();
    }

    fn shut_down(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            thread.join().expect("the instance thread panicked");
        }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if !thread::panicking() {
            self.shut_down();
        }
    }
}

/// Sends `POST /payments` with `key` and `body`.
pub async fn pay(client: &reqwest::Client, instance: &Instance, key: &str, body: &Value) -> Answer {
    let response = client
        .post(instance.url("/payments"))
        .header("idempotency-key", key)
        .json(body)
        .send()
        .await
        .expect("the request failed");
    Answer::read(response).await
}

/// Sends `POST /payments` from a task of its own, to answer while the test goes on.
pub fn spawn_pay(
    client: &reqwest::Client,
    instance: &Instance,
    key: &str,
    body: Value,
) -> tokio::task::JoinHandle<Answer> {
    let (client, url, key) = (client.clone(), instance.url("/payments"), key.to_owned());
    tokio::spawn(async move {
        let response = client
            .post(url)
            .header("idempotency-key", key)
            .json(&body)
            .send()
            .await
            .expect("the request failed");
        Answer::read(response).await
    })
}

/// Connect options for `url` that go through `proxy`.
pub fn through(url: &str, proxy: &Proxy) -> PgConnectOptions {
    let options: PgConnectOptions = url.parse().unwrap();
    options.host("127.0.0.1").port(proxy.addr.port())
}

/// A TCP proxy to the database that a test can cut (every connection through it is closed,
/// new ones are closed at once) and restore.
#[derive(Debug)]
pub struct Proxy {
    /// Where it listens.
    pub addr: SocketAddr,
    up: Arc<AtomicBool>,
    cut: broadcast::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// A proxy to the database at `url`, passing traffic through.
    pub async fn start(url: &str) -> Self {
        let options: PgConnectOptions = url.parse().unwrap();
        let upstream = format!("{}:{}", options.get_host(), options.get_port());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let up = Arc::new(AtomicBool::new(true));
        let (cut, _) = broadcast::channel(1);
        let task = tokio::spawn({
            let (up, cut) = (Arc::clone(&up), cut.clone());
            async move {
                loop {
                    let Ok((mut client, _)) = listener.accept().await else {
                        continue;
                    };
                    if !up.load(Ordering::SeqCst) {
                        drop(client);
                        continue;
                    }
                    let mut cut = cut.subscribe();
                    let upstream = upstream.clone();
                    tokio::spawn(async move {
                        let Ok(mut server) = TcpStream::connect(&upstream).await else {
                            return;
                        };
                        tokio::select! {
                            _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                            _ = cut.recv() => {}
                        }
                    });
                }
            }
        });
        Self {
            addr,
            up,
            cut,
            task,
        }
    }

    /// The database becomes unreachable: open connections break, new ones are refused.
    pub fn cut(&self) {
        self.up.store(false, Ordering::SeqCst);
        let _ = self.cut.send(());
    }

    /// The database is reachable again.
    pub fn restore(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A table name for the test's business rows, next to its records table.
pub fn payments_of(records: &str) -> String {
    records.replacen(".r", ".p", 1)
}
