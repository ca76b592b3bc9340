//! Operations of several steps (docs/steps.md), through real HTTP: a handler that orders money
//! at a bank (a foreign step) and then writes a ledger row (a local step), on the memory,
//! SQLite, Redis, PostgreSQL and MySQL stores.
//!
//! The bank and the ledger of these tests count what they do and fail on demand, so that a
//! test can stop an operation between its steps and see what the next run does. What is
//! asserted is what a client sees (status, `Idempotent-Replayed`, Problem Details) and what
//! the bank and the ledger did: how often, and under which key.

use std::{
    collections::VecDeque,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU32, Ordering},
    },
    time::Duration,
};

use axum::{
    Extension, Json, Router,
    extract::{FromRequestParts, State},
    http::{StatusCode, request::Parts},
    routing::post,
};
use idem::{
    Idempotency, IdempotencyKey, MemoryStore, Principal, ResumeError, Store, idempotent,
    steps::Resumption, steps::StepError, steps::Steps,
};
use idem_conformance::FaultyStore;
use idem_tests::{Answer, Served, eventually, key, redis_fixture, step_stores::step_stores};
use serde_json::{Value, json};

/// What the bank and the ledger do, and what they did.
#[derive(Clone, Default)]
struct World {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    /// The keys each bank order came under, in order.
    orders: Mutex<Vec<String>>,
    /// How the next bank orders fail, if they do.
    bank_failures: Mutex<VecDeque<Failure>>,
    /// The bank ids each ledger row was written for.
    rows: Mutex<Vec<String>>,
    /// How many of the next ledger writes fail, retryably.
    ledger_failures: AtomicU32,
    /// How many of the next runs panic after the ledger step.
    panics: AtomicU32,
    /// Whether the bank step is called `bank-v2` (the code changed under an operation).
    renamed: AtomicBool,
    /// Whether the bank step's output is read as a number (its type changed).
    retyped: AtomicBool,
}

#[derive(Clone, Copy)]
enum Failure {
    Retryable,
    Terminal,
}

impl World {
    fn fail_bank(&self, failures: &[Failure]) {
        self.inner
            .bank_failures
            .lock()
            .unwrap()
            .extend(failures.iter().copied());
    }

    fn fail_ledger(&self, times: u32) {
        self.inner.ledger_failures.store(times, Ordering::SeqCst);
    }

    fn orders(&self) -> Vec<String> {
        self.inner.orders.lock().unwrap().clone()
    }

    fn rows(&self) -> Vec<String> {
        self.inner.rows.lock().unwrap().clone()
    }

    /// The bank: records the order, then fails as told or answers a bank id.
    async fn order(&self, key: IdempotencyKey) -> Result<String, StepError> {
        let count = {
            let mut orders = self.inner.orders.lock().unwrap();
            orders.push(key.as_str().to_owned());
            orders.len()
        };
        match self.inner.bank_failures.lock().unwrap().pop_front() {
            Some(Failure::Retryable) => Err(StepError::retryable((
                StatusCode::BAD_GATEWAY,
                "the bank did not answer",
            ))),
            Some(Failure::Terminal) => Err(StepError::terminal((
                StatusCode::BAD_GATEWAY,
                "the bank refused the transfer",
            ))),
            None => Ok(format!("bt_{count}")),
        }
    }

    /// The ledger: fails as told, or writes a row and answers its number.
    async fn write(&self, bank: &str) -> Result<usize, StepError> {
        let failing = self
            .inner
            .ledger_failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if failing {
            return Err(StepError::retryable((
                StatusCode::SERVICE_UNAVAILABLE,
                "the ledger is down",
            )));
        }
        let mut rows = self.inner.rows.lock().unwrap();
        rows.push(bank.to_owned());
        Ok(rows.len())
    }
}

/// The transfer: the bank step, then the ledger step.
async fn transfer(world: World, mut steps: Steps) -> Result<(StatusCode, Json<Value>), StepError> {
    let name = if world.inner.renamed.load(Ordering::SeqCst) {
        "bank-v2"
    } else {
        "bank"
    };
    let bank: String = if world.inner.retyped.load(Ordering::SeqCst) {
        let number: u64 = steps.call(name, |_| async { Ok(0_u64) }).await?;
        number.to_string()
    } else {
        let world = world.clone();
        steps
            .call(name, |key| async move { world.order(key).await })
            .await?
    };
    let row = {
        let (world, bank) = (world.clone(), bank.clone());
        steps
            .local("ledger", || async move { world.write(&bank).await })
            .await?
    };
    let panic = world
        .inner
        .panics
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok();
    assert!(!panic, "the handler panics after its steps");
    Ok((
        StatusCode::CREATED,
        Json(json!({ "bank": bank, "row": row })),
    ))
}

#[idempotent(scope = "global")]
async fn global_transfer(
    State(world): State<World>,
    steps: Steps,
    Json(_order): Json<Value>,
) -> Result<(StatusCode, Json<Value>), StepError> {
    transfer(world, steps).await
}

#[idempotent(scope = "global", resume_after = "100ms")]
async fn resumed_transfer(
    State(world): State<World>,
    steps: Steps,
    Json(_order): Json<Value>,
) -> Result<(StatusCode, Json<Value>), StepError> {
    transfer(world, steps).await
}

#[idempotent(resume_after = "100ms", keep_headers = ["x-source"])]
async fn user_transfer(
    State(world): State<World>,
    user: User,
    steps: Steps,
    Json(_order): Json<Value>,
) -> Result<(StatusCode, Json<Value>), StepError> {
    let (status, Json(mut body)) = transfer(world, steps).await?;
    body["user"] = json!(user.0);
    Ok((status, Json(body)))
}

#[idempotent(scope = "global", required = false)]
async fn optional_transfer(
    State(world): State<World>,
    steps: Steps,
    Json(_order): Json<Value>,
) -> Result<(StatusCode, Json<Value>), StepError> {
    transfer(world, steps).await
}

/// `Authorization: Bearer <user>`, or the recorded principal of a resumption; 401 otherwise.
struct User(String);

impl<S: Send + Sync> FromRequestParts<S> for User {
    type Rejection = StatusCode;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, StatusCode> {
        let user = match Resumption::principal_of(parts) {
            Some(principal) => principal.as_str().to_owned(),
            None => parts
                .headers
                .get("authorization")
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.strip_prefix("Bearer "))
                .map(str::to_owned)
                .ok_or(StatusCode::UNAUTHORIZED)?,
        };
        parts.extensions.insert(Principal::new(user.as_str()));
        Ok(Self(user))
    }
}

/// The first answer of `send` that is not 409: the operation has settled.
async fn settled(mut send: impl AsyncFnMut() -> Answer) -> Answer {
    for _ in 0..500 {
        let answer = send().await;
        if answer.status != StatusCode::CONFLICT {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the operation is still in flight after 10 s");
}

fn app(world: &World, idem: &Idempotency) -> Router {
    Router::new()
        .route("/transfers", post(global_transfer))
        .route("/resumed", post(resumed_transfer))
        .route("/users", post(user_transfer))
        .route("/optional", post(optional_transfer))
        .with_state(world.clone())
        .layer(Extension(idem.clone()))
}

/// The stores the suite runs on.
async fn stores() -> Vec<(&'static str, Arc<dyn Store>)> {
    step_stores("the steps suite").await
}

/// A service on `store`, with a fresh bank and ledger.
struct Service {
    world: World,
    idem: Idempotency,
    served: Served,
    http: reqwest::Client,
}

impl Service {
    async fn on(store: Arc<dyn Store>) -> Self {
        let (world, idem) = (World::default(), Idempotency::from_arc(store));
        let served = Served::start(app(&world, &idem)).await;
        Self {
            world,
            idem,
            served,
            http: redis_fixture::client(Duration::from_secs(30)),
        }
    }

    async fn post(&self, path: &str, key: Option<&str>) -> Answer {
        self.post_as(path, key, None).await
    }

    async fn post_as(&self, path: &str, key: Option<&str>, user: Option<&str>) -> Answer {
        let mut request = self
            .http
            .post(self.served.url(path))
            .json(&json!({ "amount": 500 }));
        if let Some(key) = key {
            request = request.header("idempotency-key", key);
        }
        if let Some(user) = user {
            request = request.bearer_auth(user).header("x-source", "app");
        }
        Answer::of(request).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_that_ended_does_not_run_again_when_its_operation_resumes() {
    for (store, on) in stores().await {
        let service = Service::on(on).await;
        service.world.fail_ledger(1);
        let key = key();
        let first = service.post("/transfers", Some(&key)).await;
        assert_eq!(
            first.status,
            StatusCode::SERVICE_UNAVAILABLE,
            "{store}: {first:?}"
        );
        assert!(!first.replayed());
        let second = service.post("/transfers", Some(&key)).await;
        assert_eq!(
            second.created(),
            json!({ "bank": "bt_1", "row": 1 }),
            "{store}: the bank's recorded answer, and the row written once"
        );
        assert_eq!(
            service.world.orders().len(),
            1,
            "{store}: one order at the bank"
        );
        assert_eq!(service.world.rows(), ["bt_1"], "{store}");
        let third = service.post("/transfers", Some(&key)).await;
        assert!(third.replayed(), "{store}: {third:?}");
        assert_eq!(third.body, second.body, "{store}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_step_sends_the_same_key_on_every_run_of_its_operation() {
    for (store, on) in stores().await {
        let service = Service::on(on).await;
        service.world.fail_bank(&[Failure::Retryable]);
        let (key, other) = (key(), key());
        let first = service.post("/transfers", Some(&key)).await;
        assert_eq!(first.status, StatusCode::BAD_GATEWAY, "{store}: {first:?}");
        service.post("/transfers", Some(&key)).await.created();
        service.post("/transfers", Some(&other)).await.created();
        let orders = service.world.orders();
        assert_eq!(orders.len(), 3, "{store}: {orders:?}");
        assert_eq!(
            orders[0], orders[1],
            "{store}: one operation, one key at the bank"
        );
        assert_ne!(
            orders[0], orders[2],
            "{store}: another operation, another key"
        );
        assert!(
            orders[0].starts_with("idem-step:") && orders[0].ends_with(":bank"),
            "{store}: {}",
            orders[0]
        );
        assert!(
            !orders[0].contains(&key),
            "{store}: the client's key is not sent on"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_failure_completes_the_operation_with_its_answer() {
    for (store, on) in stores().await {
        let service = Service::on(on).await;
        service.world.fail_bank(&[Failure::Terminal]);
        let key = key();
        let first = service.post("/transfers", Some(&key)).await;
        assert_eq!(first.status, StatusCode::BAD_GATEWAY, "{store}: {first:?}");
        assert!(!first.replayed());
        for _ in 0..2 {
            let again = service.post("/transfers", Some(&key)).await;
            assert_eq!(again.status, StatusCode::BAD_GATEWAY, "{store}");
            assert!(
                again.replayed(),
                "{store}: the refusal is stored: {again:?}"
            );
            assert_eq!(again.body, first.body, "{store}");
        }
        assert_eq!(
            service.world.orders().len(),
            1,
            "{store}: never asked again"
        );
        assert!(service.world.rows().is_empty(), "{store}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renamed_step_stops_the_run_and_reuses_no_output() {
    for (store, on) in stores().await {
        let service = Service::on(on).await;
        service.world.fail_ledger(1);
        let key = key();
        let first = service.post("/transfers", Some(&key)).await;
        assert_eq!(first.status, StatusCode::SERVICE_UNAVAILABLE, "{store}");
        // A new version of the service, under the operation in flight.
        service.world.inner.renamed.store(true, Ordering::SeqCst);
        for _ in 0..2 {
            let again = service.post("/transfers", Some(&key)).await;
            let problem = again.problem(StatusCode::INTERNAL_SERVER_ERROR, "steps-changed");
            assert!(
                problem["detail"]
                    .as_str()
                    .unwrap()
                    .contains("step 1 is `bank-v2` in this run and `bank` in the recorded one"),
                "{store}: {problem}"
            );
            assert!(!again.replayed(), "{store}");
        }
        assert_eq!(
            service.world.orders().len(),
            1,
            "{store}: the renamed step did not run"
        );
        assert!(
            service.world.rows().is_empty(),
            "{store}: nothing after it ran either"
        );
        // The old version again: the operation resumes where it stopped.
        service.world.inner.renamed.store(false, Ordering::SeqCst);
        let resumed = service.post("/transfers", Some(&key)).await;
        assert_eq!(
            resumed.created(),
            json!({ "bank": "bt_1", "row": 1 }),
            "{store}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_output_that_does_not_read_back_stops_the_run() {
    for (store, on) in stores().await {
        let service = Service::on(on).await;
        service.world.fail_ledger(1);
        let key = key();
        service.post("/transfers", Some(&key)).await;
        service.world.inner.retyped.store(true, Ordering::SeqCst);
        let again = service.post("/transfers", Some(&key)).await;
        let problem = again.problem(StatusCode::INTERNAL_SERVER_ERROR, "steps-changed");
        assert!(
            problem["detail"]
                .as_str()
                .unwrap()
                .contains("does not read back"),
            "{store}: {problem}"
        );
        assert_eq!(service.world.orders().len(), 1, "{store}");
        assert!(service.world.rows().is_empty(), "{store}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_after_a_step_keeps_the_operation_for_its_retry() {
    for (store, on) in stores().await {
        let service = Service::on(on).await;
        service.world.inner.panics.store(1, Ordering::SeqCst);
        let key = key();
        let first = service.post("/transfers", Some(&key)).await;
        first.problem(StatusCode::INTERNAL_SERVER_ERROR, "handler-failed");
        let again = service.post("/transfers", Some(&key)).await;
        assert_eq!(
            again.created(),
            json!({ "bank": "bt_1", "row": 1 }),
            "{store}"
        );
        assert_eq!(service.world.orders().len(), 1, "{store}");
        assert_eq!(service.world.rows().len(), 1, "{store}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simultaneous_requests_with_one_key_order_once() {
    for (store, on) in stores().await {
        let service = Arc::new(Service::on(on).await);
        let key = key();
        let answers: Vec<_> = (0..64)
            .map(|_| {
                let (service, key) = (Arc::clone(&service), key.clone());
                tokio::spawn(async move { service.post("/transfers", Some(&key)).await.status })
            })
            .collect();
        let mut created = 0;
        for answer in answers {
            match answer.await.unwrap() {
                StatusCode::CREATED => created += 1,
                StatusCode::CONFLICT => {}
                other => panic!("{store}: {other}"),
            }
        }
        assert!(created >= 1, "{store}");
        assert_eq!(service.world.orders().len(), 1, "{store}: one order");
        assert_eq!(service.world.rows().len(), 1, "{store}: one row");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_finishes_an_operation_its_client_abandoned() {
    for (store, on) in stores().await {
        let service = Service::on(on).await;
        let router = app(&service.world, &service.idem);
        service
            .idem
            .resumer(router)
            .poll(Duration::from_millis(20))
            .start()
            .unwrap();
        service.world.fail_ledger(2);
        let key = key();
        let first = service.post("/resumed", Some(&key)).await;
        assert_eq!(
            first.status,
            StatusCode::SERVICE_UNAVAILABLE,
            "{store}: {first:?}"
        );
        // The client never comes back: the service resumes the operation (twice: the ledger
        // fails once more), with its backoff.
        let world = service.world.clone();
        assert!(
            eventually(Duration::from_secs(20), async || world.rows().len() == 1).await,
            "{store}: the operation was not finished"
        );
        assert_eq!(
            service.world.orders().len(),
            1,
            "{store}: the bank was asked once"
        );
        // The row is written; the resumed run's completion follows.
        let retry = settled(async || service.post("/resumed", Some(&key)).await).await;
        assert!(retry.replayed(), "{store}: {retry:?}");
        assert_eq!(retry.json(), json!({ "bank": "bt_1", "row": 1 }), "{store}");
        service.idem.shutdown().await;
        assert_eq!(
            service.world.rows().len(),
            1,
            "{store}: and nothing ran twice"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_run_is_its_recorded_user_and_no_one_else() {
    for (store, on) in stores().await {
        let service = Service::on(on).await;
        let router = app(&service.world, &service.idem);
        service
            .idem
            .resumer(router)
            .poll(Duration::from_millis(20))
            .start()
            .unwrap();
        service.world.fail_ledger(1);
        let key = key();
        let first = service.post_as("/users", Some(&key), Some("alice")).await;
        assert_eq!(first.status, StatusCode::SERVICE_UNAVAILABLE, "{store}");
        let world = service.world.clone();
        assert!(
            eventually(Duration::from_secs(20), async || world.rows().len() == 1).await,
            "{store}: the operation was not finished"
        );
        let alice =
            settled(async || service.post_as("/users", Some(&key), Some("alice")).await).await;
        assert!(alice.replayed(), "{store}: {alice:?}");
        assert_eq!(alice.json()["user"], "alice", "{store}");
        // Bob's key of the same value is his own operation, which runs.
        let bob = service.post_as("/users", Some(&key), Some("bob")).await;
        assert_eq!(bob.created()["user"], "bob", "{store}");
        assert!(!bob.replayed(), "{store}");
        // And no one gets in without credentials.
        let anonymous = service.post("/users", Some(&key)).await;
        assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED, "{store}");
        service.idem.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_without_a_record_runs_its_steps_as_plain_code() {
    let service = Service::on(Arc::new(MemoryStore::default())).await;
    service.post("/optional", None).await.created();
    service.post("/optional", None).await.created();
    let orders = service.world.orders();
    assert_eq!(
        orders.len(),
        2,
        "two requests without a key are two operations"
    );
    assert_ne!(orders[0], orders[1], "each order gets a key of its own");
    assert_eq!(service.world.rows().len(), 2);
}

/// A store of the application's own that keeps no steps: it keeps `Store`'s defaults.
#[derive(Debug)]
struct Stepless(MemoryStore);

#[async_trait::async_trait]
impl Store for Stepless {
    async fn claim(
        &self,
        claim: idem::store::Claim<'_>,
    ) -> Result<idem::store::ClaimOutcome, idem::store::StoreError> {
        self.0.claim(claim).await
    }

    async fn complete(
        &self,
        key: &idem::StoreKey,
        token: idem::store::LeaseToken,
        response: &idem::replay::StoredResponse,
        ttl: Duration,
    ) -> Result<(), idem::store::StoreError> {
        self.0.complete(key, token, response, ttl).await
    }

    async fn release(
        &self,
        key: &idem::StoreKey,
        token: idem::store::LeaseToken,
    ) -> Result<(), idem::store::StoreError> {
        self.0.release(key, token).await
    }

    async fn renew(
        &self,
        key: &idem::StoreKey,
        token: idem::store::LeaseToken,
        lease: Duration,
    ) -> Result<(), idem::store::StoreError> {
        self.0.renew(key, token, lease).await
    }

    async fn look_up(
        &self,
        key: &idem::StoreKey,
    ) -> Result<Option<idem::store::Held>, idem::store::StoreError> {
        self.0.look_up(key).await
    }

    async fn remove(
        &self,
        key: &idem::StoreKey,
    ) -> Result<Option<idem::store::RecordState>, idem::store::StoreError> {
        self.0.remove(key).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_keeps_no_steps_says_so() {
    let service = Service::on(Arc::new(Stepless(MemoryStore::default()))).await;
    let answer = service.post("/transfers", Some(&key())).await;
    answer.problem(StatusCode::INTERNAL_SERVER_ERROR, "misconfigured");
    assert!(service.world.orders().is_empty(), "nothing ran");
    let router = app(&service.world, &service.idem);
    assert!(matches!(
        service.idem.resumer(router).start(),
        Err(ResumeError::StoreKeepsNoSteps)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_whose_record_the_store_did_not_take_runs_again_under_its_key() {
    let store = FaultyStore::new(MemoryStore::default());
    store.inject(
        idem_conformance::Call::RecordStep,
        idem_conformance::Fault::Fail,
        Some(1),
    );
    let service = Service::on(Arc::new(store)).await;
    let key = key();
    let first = service.post("/transfers", Some(&key)).await;
    first.problem(StatusCode::SERVICE_UNAVAILABLE, "store-unavailable");
    service.post("/transfers", Some(&key)).await.created();
    let orders = service.world.orders();
    assert_eq!(
        orders.len(),
        2,
        "the order whose record was lost is sent again"
    );
    assert_eq!(
        orders[0], orders[1],
        "under the same key, for the bank to answer once"
    );
}
