//! One execution per key through PostgreSQL outages, against a PostgreSQL server that each
//! test creates and starts itself (`initdb`, `pg_ctl`) and crashes (`pg_ctl stop -m
//! immediate`) while a handler runs.
//!
//! Skipped when `IDEM_TEST_DATABASE_URL` is unset (CI sets it) or `pg_config` is not on
//! `PATH`.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use axum::{
    Json, Router,
    extract::State,
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::post,
};
use idem::{Idempotency, IdempotencyLayer, Policy, Scope, extract::Tx, postgres::PostgresStore};
use idem_tests::{Answer, Served, eventually, gate::Gate, postgres_server::PostgresServer};
use serde_json::{Value, json};

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

    /// Counts a run, after the gate lets it through.
    async fn run(&self) -> usize {
        self.gate.pass().await;
        self.executions.fetch_add(1, Ordering::SeqCst) + 1
    }

    fn executions(&self) -> usize {
        self.executions.load(Ordering::SeqCst)
    }
}

/// A payment that writes nothing of its own: the record is all the database holds.
async fn pay(State(handler): State<Handler>, Json(body): Json<Value>) -> Response {
    let execution = handler.run().await;
    let id = format!("pay_{:016x}", rand::random::<u64>());
    (
        StatusCode::CREATED,
        Json(json!({ "id": id, "execution": execution, "amount": body["amount"] })),
    )
        .into_response()
}

/// A payment that writes its row in the record's transaction.
async fn pay_in_transaction(
    State(handler): State<Handler>,
    mut tx: Tx,
    Json(body): Json<Value>,
) -> Response {
    let execution = handler.run().await;
    let id = format!("pay_{:016x}", rand::random::<u64>());
    let connection = match tx.conn::<sqlx::PgConnection>().await {
        Ok(connection) => connection,
        Err(error) => return error.into_response(),
    };
    let written = sqlx::query("INSERT INTO payments (id, amount) VALUES ($1, $2)")
        .bind(&id)
        .bind(body["amount"].as_i64())
        .execute(connection)
        .await;
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
        let store = PostgresStore::builder()
            .acquire_timeout(Duration::from_millis(500))
            .connect(url)
            .await
            .expect("cannot connect to the test's PostgreSQL");
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
}

fn setup() -> Option<PostgresServer> {
    std::env::var("IDEM_TEST_DATABASE_URL")
        .ok()
        .filter(|url| !url.is_empty())
        .or_else(|| {
            eprintln!("skipped: IDEM_TEST_DATABASE_URL is not set");
            None
        })?;
    PostgresServer::start()
}

#[cfg_attr(not(idem_test_postgres), ignore = "IDEM_TEST_DATABASE_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_result_that_finished_while_postgres_was_down_is_stored_when_it_is_back() {
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

    // The lease lapses meanwhile; this process answers from its copy, and nobody takes over.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let retry = Answer::of(first.request("/payments", key)).await;
    assert!(retry.replayed(), "{retry:?}");
    assert_eq!(retry.body, answer.body);

    server.restart();
    assert!(
        eventually(PATIENCE, async || first.idem.pending_completions() == 0).await,
        "the completion reached PostgreSQL once it was back"
    );
    let second = Instance::start(&server.url(), &handler).await;
    let elsewhere = Answer::of(second.request("/payments", key)).await;
    assert!(elsewhere.replayed(), "{elsewhere:?}");
    assert_eq!(elsewhere.body, answer.body);
    assert_eq!(handler.executions(), 1, "one payment for one key");
}

#[cfg_attr(not(idem_test_postgres), ignore = "IDEM_TEST_DATABASE_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_transaction_cut_by_a_crash_commits_nothing_and_its_retry_runs_once_more() {
    let Some(mut server) = setup() else { return };
    let handler = Handler::gated();
    let instance = Instance::start(&server.url(), &handler).await;
    let pool = sqlx::PgPool::connect(&server.url()).await.unwrap();
    sqlx::query("CREATE TABLE payments (id text PRIMARY KEY, amount bigint)")
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
    // The handler could not write, or its commit was cut: nothing it did is in the
    // database, and its client is not told it succeeded.
    assert_ne!(answer.status, StatusCode::CREATED, "{answer:?}");

    server.restart();
    let mut last = None;
    let ran = eventually(PATIENCE, async || {
        let retry = Answer::of(instance.request("/transactional-payments", key)).await;
        let done = retry.status == StatusCode::CREATED;
        last = Some(retry);
        done
    })
    .await;
    assert!(ran, "the retry ran once the database was back: {last:?}");
    let retry = last.unwrap();
    assert!(!retry.replayed(), "nothing was committed the first time");
    let pool = sqlx::PgPool::connect(&server.url()).await.unwrap();
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM payments")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(rows, 1, "one payment row for one key");
    let again = Answer::of(instance.request("/transactional-payments", key)).await;
    assert!(again.replayed());
    assert_eq!(again.body, retry.body);
}
