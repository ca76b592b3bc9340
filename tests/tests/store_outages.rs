//! The runtime when its store fails at the worst moments, over real HTTP: a completion the
//! store does not take, a claim whose answer is lost, a release that fails, a shutdown with
//! results still waiting for the store. The store is the memory store behind `FaultyStore`,
//! which injects each fault exactly where the test says; the real stores' outages (a Redis or
//! PostgreSQL process killed or frozen) are in `redis_outages.rs` and `postgres_outages.rs`.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use axum::{Json, Router, extract::State, http::StatusCode, routing::post};
use idem::{Idempotency, IdempotencyLayer, MemoryStore, Policy, Scope};
use idem_conformance::{Call, Fault, FaultyStore};
use idem_tests::{Answer, Served, eventually, key};
use serde_json::{Value, json};

/// Long enough for any background retry to land on a slow machine.
const PATIENCE: Duration = Duration::from_secs(10);

#[derive(Clone, Default)]
struct Executions(Arc<AtomicUsize>);

impl Executions {
    fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

async fn create(
    State(executions): State<Executions>,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let n = executions.0.fetch_add(1, Ordering::SeqCst) + 1;
    (
        StatusCode::CREATED,
        Json(json!({ "execution": n, "amount": body["amount"] })),
    )
}

async fn explode(State(executions): State<Executions>) -> StatusCode {
    executions.0.fetch_add(1, Ordering::SeqCst);
    panic!("the handler fails");
}

struct Service {
    store: FaultyStore,
    idem: Idempotency,
    executions: Executions,
    served: Served,
    http: reqwest::Client,
}

impl Service {
    async fn start() -> Self {
        Self::with(|builder| builder).await
    }

    async fn with(
        configure: impl FnOnce(idem::IdempotencyBuilder) -> idem::IdempotencyBuilder,
    ) -> Self {
        let store = FaultyStore::new(MemoryStore::default());
        let idem = configure(Idempotency::builder(store.clone())).build();
        let executions = Executions::default();
        let router = Router::new()
            .route("/payments", post(create))
            .route("/explode", post(explode))
            .layer(IdempotencyLayer::new(
                idem.clone(),
                Policy::new().scope(Scope::Global),
            ))
            .with_state(executions.clone());
        Self {
            store,
            idem,
            executions,
            served: Served::start(router).await,
            http: reqwest::Client::new(),
        }
    }

    async fn post(&self, path: &str, key: &str, body: Value) -> Answer {
        Answer::of(
            self.http
                .post(self.served.url(path))
                .header("idempotency-key", key)
                .json(&body),
        )
        .await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_the_store_did_not_take_is_replayed_by_its_process_and_stored_later() {
    let service = Service::start().await;
    service.store.inject(Call::Complete, Fault::Fail, None);
    let key = key();

    let first = service
        .post("/payments", &key, json!({"amount": 9800}))
        .await;
    assert_eq!(first.status, StatusCode::CREATED, "the operation ran");
    assert_eq!(service.idem.pending_completions(), 1);

    // The store still shows the key in flight; this process answers from its own copy.
    let retry = service
        .post("/payments", &key, json!({"amount": 9800}))
        .await;
    assert_eq!(retry.status, StatusCode::CREATED);
    assert!(retry.replayed(), "a replay, not a second run: {retry:?}");
    assert_eq!(retry.body, first.body);
    let other = service.post("/payments", &key, json!({"amount": 1})).await;
    other.problem(StatusCode::UNPROCESSABLE_ENTITY, "key-reused");

    // The store comes back: the completion lands, and the store replays it from then on.
    service.store.heal_all();
    assert!(
        eventually(PATIENCE, async || service.idem.pending_completions() == 0).await,
        "the completion reached the store"
    );
    let later = service
        .post("/payments", &key, json!({"amount": 9800}))
        .await;
    assert!(later.replayed());
    assert_eq!(later.body, first.body);
    assert_eq!(service.executions.count(), 1, "one execution for one key");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_whose_answer_was_lost_is_sent_again_and_counts_once() {
    let service = Service::start().await;
    // The store applies the completion, and its answer times out.
    service
        .store
        .inject(Call::Complete, Fault::LoseAnswer, Some(1));
    let key = key();

    let first = service.post("/payments", &key, json!({"amount": 10})).await;
    assert_eq!(first.status, StatusCode::CREATED);
    assert!(
        eventually(PATIENCE, async || service.idem.pending_completions() == 0).await,
        "the repeated completion answered Ok"
    );
    assert_eq!(service.store.calls(Call::Complete), 2);
    let retry = service.post("/payments", &key, json!({"amount": 10})).await;
    assert!(retry.replayed());
    assert_eq!(retry.body, first.body);
    assert_eq!(service.executions.count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_whose_answer_was_lost_does_not_block_its_key() {
    let service = Service::start().await;
    // The claim lands under the request's token, and the request never learns it.
    service
        .store
        .inject(Call::Claim, Fault::LoseAnswer, Some(1));
    let key = key();

    let refused = service.post("/payments", &key, json!({"amount": 10})).await;
    let body = refused.problem(StatusCode::SERVICE_UNAVAILABLE, "store-unavailable");
    assert!(
        body["detail"].as_str().unwrap().contains("was not run"),
        "{body}"
    );
    assert_eq!(service.executions.count(), 0);

    // The runtime releases the orphaned claim in the background: the key is free again at
    // once, rather than after its 60 s lease.
    let mut answer = None;
    let freed = eventually(PATIENCE, async || {
        let retry = service.post("/payments", &key, json!({"amount": 10})).await;
        let done = retry.status == StatusCode::CREATED;
        answer = Some(retry);
        done
    })
    .await;
    assert!(freed, "the key stayed blocked: {answer:?}");
    assert_eq!(service.executions.count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_abandoned_by_its_client_does_not_block_its_key() {
    let service = Service::start().await;
    // The claim lands and its answer never comes; the client gives up and disconnects,
    // which drops the request on the server.
    service.store.inject(Call::Claim, Fault::Stall, Some(1));
    let key = key();
    let gave_up = service
        .http
        .post(service.served.url("/payments"))
        .header("idempotency-key", &key)
        .json(&json!({"amount": 10}))
        .timeout(Duration::from_millis(300))
        .send()
        .await;
    assert!(gave_up.is_err_and(|error| error.is_timeout()));

    let mut answer = None;
    let freed = eventually(PATIENCE, async || {
        let retry = service.post("/payments", &key, json!({"amount": 10})).await;
        let done = retry.status == StatusCode::CREATED;
        answer = Some(retry);
        done
    })
    .await;
    assert!(freed, "the key stayed blocked: {answer:?}");
    assert_eq!(service.executions.count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_handler_whose_release_failed_says_so_and_is_released_later() {
    let service = Service::start().await;
    service.store.inject(Call::Release, Fault::Fail, Some(1));
    let key = key();

    let failed = service.post("/explode", &key, json!({})).await;
    let body = failed.problem(StatusCode::INTERNAL_SERVER_ERROR, "handler-failed");
    let detail = body["detail"].as_str().unwrap();
    assert!(
        detail.contains("still held") && !detail.contains("was released"),
        "the answer says what happened to the key: {detail}"
    );
    assert!(failed.header("retry-after").is_some());

    // Released in the background: a retry runs the handler again.
    let ran_again = eventually(PATIENCE, async || {
        let retry = service.post("/explode", &key, json!({})).await;
        retry.status == StatusCode::INTERNAL_SERVER_ERROR
            && retry.json()["detail"]
                .as_str()
                .is_some_and(|detail| detail.contains("was released"))
    })
    .await;
    assert!(ran_again);
    assert!(service.executions.count() >= 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_handler_whose_release_worked_says_the_key_was_released() {
    let service = Service::start().await;
    let key = key();
    let failed = service.post("/explode", &key, json!({})).await;
    let body = failed.problem(StatusCode::INTERNAL_SERVER_ERROR, "handler-failed");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("the Idempotency-Key was released"),
        "{body}"
    );
    assert!(failed.header("retry-after").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_waits_for_a_pending_completion_that_lands() {
    let service = Service::start().await;
    service.store.inject(Call::Complete, Fault::Fail, Some(3));
    let key = key();
    let first = service.post("/payments", &key, json!({"amount": 5})).await;
    assert_eq!(first.status, StatusCode::CREATED);

    tokio::time::timeout(PATIENCE, service.idem.shutdown())
        .await
        .expect("shutdown ends");
    assert_eq!(service.idem.pending_completions(), 0);
    let retry = service.post("/payments", &key, json!({"amount": 5})).await;
    assert!(
        retry.replayed(),
        "the completion landed before shutdown ended"
    );
    assert_eq!(retry.body, first.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_gives_up_on_a_store_that_stays_down_after_its_timeout() {
    let service =
        Service::with(|builder| builder.shutdown_timeout(Duration::from_millis(200))).await;
    service.store.inject(Call::Complete, Fault::Fail, None);
    let first = service
        .post("/payments", &key(), json!({"amount": 5}))
        .await;
    assert_eq!(first.status, StatusCode::CREATED);
    assert_eq!(service.idem.pending_completions(), 1);

    // The store never comes back: shutdown stops retrying after its timeout, and forgets the
    // copy (the process is about to exit; it is logged as a result that was not stored).
    tokio::time::timeout(PATIENCE, service.idem.shutdown())
        .await
        .expect("shutdown ends though the store is down");
    assert_eq!(service.idem.pending_completions(), 0);
}
