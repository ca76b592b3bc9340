//! One execution per key through MySQL outages, against a MariaDB server that each test
//! creates and starts itself (`mariadb-install-db`, `mariadbd`) and kills with SIGKILL while
//! a handler runs.
//!
//! Skipped when `IDEM_TEST_MYSQL_URL` is unset (CI sets it) or MariaDB is not installed.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use axum::{
    Json, Router,
    extract::State,
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::post,
};
use idem::{Idempotency, IdempotencyLayer, Policy, Scope, extract::Tx, mysql::MySqlStore};
use idem_tests::{Answer, Served, eventually, gate::Gate, mysql_server::MySqlServer};
use serde_json::{Value, json};
use sqlx::{MySqlConnection, MySqlPool};

/// Long enough for anything the runtime does in the background to land on a slow machine.
const PATIENCE: Duration = Duration::from_secs(30);

#[derive(Clone)]
struct Handler {
    executions: Arc<AtomicUsize>,
    gate: Gate,
}

impl Handler {
    fn gated() -> Self {
        Self {
            executions: Arc::default(),
            gate: Gate::closed(),
        }
    }

    fn executions(&self) -> usize {
        self.executions.load(Ordering::SeqCst)
    }
}

/// A payment that writes nothing of its own: the record is all the database holds.
async fn pay(State(handler): State<Handler>, Json(body): Json<Value>) -> Response {
    handler.gate.pass().await;
    let execution = handler.executions.fetch_add(1, Ordering::SeqCst) + 1;
    let id = format!("pay_{:016x}", rand::random::<u64>());
    let payment = json!({ "id": id, "execution": execution, "amount": body["amount"] });
    (StatusCode::CREATED, Json(payment)).into_response()
}

/// A payment that writes its row in the record's transaction, then waits at the gate: a
/// crash there cuts a transaction that holds a row.
async fn pay_in_transaction(
    State(handler): State<Handler>,
    mut tx: Tx,
    Json(body): Json<Value>,
) -> Response {
    let execution = handler.executions.fetch_add(1, Ordering::SeqCst) + 1;
    let id = format!("pay_{:016x}", rand::random::<u64>());
    let connection = match tx.conn::<MySqlConnection>().await {
        Ok(connection) => connection,
        Err(error) => return error.into_response(),
    };
    let written = sqlx::query("INSERT INTO payments (id, amount) VALUES (?, ?)")
        .bind(&id)
        .bind(body["amount"].as_i64())
        .execute(connection)
        .await;
    handler.gate.pass().await;
    match written {
        Ok(_) => (
            StatusCode::CREATED,
            Json(json!({ "id": id, "execution": execution })),
        )
            .into_response(),
        Err(_) => StatusCode::SERVICE_UNAVAILABLE.into_response(),
    }
}

struct Instance {
    idem: Idempotency,
    served: Served,
    http: reqwest::Client,
}

impl Instance {
    async fn start(url: &str, handler: &Handler) -> Self {
        let store = MySqlStore::builder()
            .acquire_timeout(Duration::from_millis(500))
            .connect(url)
            .await
            .expect("cannot connect to the test's MariaDB");
        store.migrate().await.unwrap();
        let idem = Idempotency::builder(store)
            .store_timeout(Duration::from_secs(2))
            .build();
        let policy = Policy::new()
            .scope(Scope::Global)
            .lease(Duration::from_millis(500));
        let router = Router::new()
            .route("/payments", post(pay))
            .route("/transactional-payments", post(pay_in_transaction))
            .layer(IdempotencyLayer::new(idem.clone(), policy))
            .with_state(handler.clone());
        Self {
            idem,
            served: Served::start(router).await,
            http: reqwest::Client::new(),
        }
    }

    fn request(&self, path: &str, key: &str) -> reqwest::RequestBuilder {
        self.http
            .post(self.served.url(path))
            .header("idempotency-key", key)
            .json(&json!({ "amount": 9800 }))
    }

    /// Sends `key` until it is answered 201, for at most [`PATIENCE`].
    async fn until_created(&self, path: &str, key: &str) -> Answer {
        let mut last = None;
        let created = eventually(PATIENCE, async || {
            let answer = Answer::of(self.request(path, key)).await;
            let done = answer.status == StatusCode::CREATED;
            last = Some(answer);
            done
        })
        .await;
        assert!(created, "never answered 201: {last:?}");
        last.unwrap()
    }
}

fn setup() -> Option<MySqlServer> {
    std::env::var("IDEM_TEST_MYSQL_URL")
        .ok()
        .filter(|url| !url.is_empty())
        .or_else(|| {
            eprintln!("skipped: IDEM_TEST_MYSQL_URL is not set");
            None
        })?;
    MySqlServer::start()
}

/// The server goes away after the handler ran and before its result is stored: the client
/// gets the result, this process answers retries from its copy, and the completion lands
/// once the server is back; another instance then replays it. The handler ran once.
#[cfg_attr(not(idem_test_mysql), ignore = "IDEM_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_result_that_finished_while_the_server_was_down_is_stored_when_it_is_back() {
    let Some(mut server) = setup() else { return };
    let handler = Handler::gated();
    let first = Instance::start(&server.url(), &handler).await;
    let key = "pay-while-the-database-restarts";

    let answer = tokio::spawn(Answer::of(first.request("/payments", key)));
    handler.gate.arrival(PATIENCE).await;
    server.crash();
    handler.gate.lift();
    let answer = answer.await.unwrap();
    assert_eq!(
        answer.status,
        StatusCode::CREATED,
        "the operation ran: {answer:?}"
    );
    assert_eq!(first.idem.pending_completions(), 1);
    let retry = Answer::of(first.request("/payments", key)).await;
    assert!(retry.replayed(), "{retry:?}");
    assert_eq!(retry.body, answer.body);

    server.restart();
    assert!(
        eventually(PATIENCE, async || first.idem.pending_completions() == 0).await,
        "the completion reached the server once it was back"
    );
    let second = Instance::start(&server.url(), &handler).await;
    let elsewhere = Answer::of(second.request("/payments", key)).await;
    assert!(elsewhere.replayed(), "{elsewhere:?}");
    assert_eq!(elsewhere.body, answer.body);
    assert_eq!(handler.executions(), 1, "one payment for one key");
}

/// The server goes away while the handler's transaction holds its row: the request is
/// answered 503 Problem Details (its outcome is unknown to the service), nothing of it
/// survives the crash, and once the server is back the retry runs once more: one row.
#[cfg_attr(not(idem_test_mysql), ignore = "IDEM_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_transaction_cut_by_a_crash_commits_nothing_and_its_retry_runs_once_more() {
    let Some(mut server) = setup() else { return };
    let handler = Handler::gated();
    let instance = Instance::start(&server.url(), &handler).await;
    let pool = MySqlPool::connect(&server.url()).await.unwrap();
    sqlx::query("CREATE TABLE payments (id VARCHAR(64) PRIMARY KEY, amount BIGINT)")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    let key = "pay-in-a-transaction-while-the-database-crashes";

    let answer = tokio::spawn(Answer::of(instance.request("/transactional-payments", key)));
    handler.gate.arrival(PATIENCE).await;
    server.crash();
    handler.gate.lift();
    let answer = answer.await.unwrap();
    answer.refusal(StatusCode::SERVICE_UNAVAILABLE, "store-unavailable");
    assert!(answer.header("retry-after").is_some(), "{answer:?}");

    server.restart();
    let retry = instance.until_created("/transactional-payments", key).await;
    assert!(!retry.replayed(), "nothing was committed the first time");
    assert_eq!(retry.json()["execution"], 2);
    let pool = MySqlPool::connect(&server.url()).await.unwrap();
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM payments")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(rows, 1, "one payment row for one key");
    let again = Answer::of(instance.request("/transactional-payments", key)).await;
    assert!(again.replayed());
    assert_eq!(again.body, retry.body);
}

/// With the server gone, a request is answered 503 Problem Details promptly and runs
/// nothing; once it is back, the same key runs.
#[cfg_attr(not(idem_test_mysql), ignore = "IDEM_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_server_that_is_gone_answers_503_promptly_and_runs_nothing() {
    let Some(mut server) = setup() else { return };
    let handler = Handler {
        gate: Gate::open(),
        ..Handler::gated()
    };
    let instance = Instance::start(&server.url(), &handler).await;
    server.crash();
    let started = Instant::now();
    let answer = Answer::of(instance.request("/payments", "pay-while-the-server-is-gone")).await;
    answer.refusal(StatusCode::SERVICE_UNAVAILABLE, "store-unavailable");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(handler.executions(), 0);

    server.restart();
    let created = instance
        .until_created("/payments", "pay-while-the-server-is-gone")
        .await;
    assert!(!created.replayed());
    assert_eq!(handler.executions(), 1);
}
