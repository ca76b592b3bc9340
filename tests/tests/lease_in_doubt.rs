//! A run whose store stops answering knows its lease is in doubt, by its own clock, within
//! the margin: `Steps::lease` says so, its next step does not start, and the operation is
//! resumed by the client's retry once the store answers again (docs/steps.md, *A lease in
//! doubt*).
//!
//! The store is a `redis-server` of the test's own, frozen with SIGSTOP (a stuck host: the
//! connection stays open and nothing answers); that test is skipped when `IDEM_TEST_REDIS_URL`
//! is unset (CI sets it) or `redis-server` is not on `PATH`. A lease the store answers lost
//! (an operator removed the record) is seen on the memory store.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU32, Ordering},
    },
    time::Duration,
};

use axum::{
    Json, Router,
    extract::State,
    http::{Method, StatusCode},
    routing::post,
};
use idem::{
    Idempotency, IdempotencyKey, IdempotencyLayer, MemoryStore, Policy, RecordAddress, Scope,
    steps::{LeaseStanding, StepError, StepErrorKind, Steps},
};
use idem_tests::{Answer, Served, gate::Gate, key, redis_fixture, redis_server::RedisServer};
use serde_json::{Value, json};
use tokio::{sync::mpsc, time::Instant};

const LEASE: Duration = Duration::from_secs(3);
/// The margin the runtime applies by default: a third of the lease.
const MARGIN: Duration = Duration::from_secs(1);
/// How often the handler looks at its lease while it waits for it to come into doubt.
const LOOK_EVERY: Duration = Duration::from_millis(20);

/// What the handler saw of its lease, once it was no longer held.
#[derive(Debug)]
struct Seen {
    at: Instant,
    standing: LeaseStanding,
    left: Duration,
    /// How the step it tried next failed.
    next_step: Option<StepErrorKind>,
}

#[derive(Clone)]
struct World {
    /// Where the first run waits, after its first step, for the test to freeze the store.
    gate: Gate,
    /// Whether the first run watches its lease (the retry does not).
    watching: Arc<AtomicU32>,
    seen: mpsc::UnboundedSender<Seen>,
    first: Arc<AtomicU32>,
    second: Arc<AtomicU32>,
}

async fn transfer(
    State(world): State<World>,
    mut steps: Steps,
    Json(_order): Json<Value>,
) -> Result<(StatusCode, Json<Value>), StepError> {
    let first = world.first.clone();
    steps
        .local("first", || async move {
            Ok(first.fetch_add(1, Ordering::SeqCst) + 1)
        })
        .await?;
    if world.watching.fetch_sub(1, Ordering::SeqCst) == 1 {
        let lease = steps.lease().expect("the run holds a record");
        assert_eq!(lease.standing(), LeaseStanding::Holds);
        world.gate.pass().await;
        let view = loop {
            let view = steps.lease().expect("the run holds a record");
            if !view.holds() {
                break view;
            }
            tokio::time::sleep(LOOK_EVERY).await;
        };
        let at = Instant::now();
        let second = world.second.clone();
        let next = steps
            .local("second", || async move {
                Ok(second.fetch_add(1, Ordering::SeqCst) + 1)
            })
            .await;
        let _ = world.seen.send(Seen {
            at,
            standing: view.standing(),
            left: view.left(),
            next_step: next.as_ref().err().map(StepError::kind),
        });
        next?;
    } else {
        let second = world.second.clone();
        steps
            .local("second", || async move {
                Ok(second.fetch_add(1, Ordering::SeqCst) + 1)
            })
            .await?;
    }
    Ok((StatusCode::CREATED, Json(json!({ "transferred": true }))))
}

/// The service on `idem`, its world, and what its first run reports.
async fn serve(
    idem: Idempotency,
    lease: Duration,
) -> (Served, World, mpsc::UnboundedReceiver<Seen>) {
    let (seen, seen_by_test) = mpsc::unbounded_channel();
    let world = World {
        gate: Gate::closed(),
        watching: Arc::new(AtomicU32::new(1)),
        seen,
        first: Arc::default(),
        second: Arc::default(),
    };
    let policy = Policy::new().scope(Scope::Global).lease(lease);
    let app = Router::new()
        .route("/transfers", post(transfer))
        .layer(IdempotencyLayer::new(idem, policy))
        .with_state(world.clone());
    (Served::start(app).await, world, seen_by_test)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_sees_its_lease_lost_once_the_store_says_so_and_its_next_step_does_not_start() {
    let idem = Idempotency::new(MemoryStore::default());
    let (served, world, mut seen_by_test) = serve(idem.clone(), Duration::from_millis(300)).await;
    let http = redis_fixture::client(Duration::from_secs(30));
    let key = key();
    let first_run = tokio::spawn(Answer::of(
        http.post(served.url("/transfers"))
            .header("idempotency-key", &key)
            .json(&json!({ "amount": 500 })),
    ));
    world.gate.arrival(Duration::from_secs(10)).await;
    let address = RecordAddress::new(
        Scope::Global,
        None,
        Method::POST,
        "/transfers",
        IdempotencyKey::new(key.as_str()).unwrap(),
    )
    .unwrap();
    idem.remove(&address, "the test").await.unwrap();
    world.gate.lift();
    let seen = tokio::time::timeout(Duration::from_secs(5), seen_by_test.recv())
        .await
        .expect("the handler never saw its lease lost")
        .expect("the handler reports what it saw");
    assert_eq!(seen.standing, LeaseStanding::Lost, "{seen:?}");
    assert_eq!(seen.next_step, Some(StepErrorKind::TakenOver), "{seen:?}");
    first_run
        .await
        .unwrap()
        .problem(StatusCode::CONFLICT, "request-in-flight");
    assert_eq!(world.second.load(Ordering::SeqCst), 0, "a step started");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_sees_its_lease_in_doubt_within_the_margin_when_its_store_stops_answering() {
    if redis_fixture::redis_url().is_none() {
        return;
    }
    let Some(server) = RedisServer::start(&[]).await else {
        return;
    };
    let store = redis_fixture::builder()
        .command_timeout(Duration::from_millis(300))
        .connection_timeout(Duration::from_millis(300))
        .connect(server.url().as_str())
        .await
        .expect("cannot connect to the test's redis-server");
    let idem = Idempotency::builder(store)
        .store_timeout(Duration::from_millis(500))
        .build();
    let (served, world, mut seen_by_test) = serve(idem, LEASE).await;
    let http = redis_fixture::client(Duration::from_secs(30));
    let key = key();
    let send = || {
        Answer::of(
            http.post(served.url("/transfers"))
                .header("idempotency-key", &key)
                .json(&json!({ "amount": 500 })),
        )
    };

    let first_run = tokio::spawn(send());
    world.gate.arrival(Duration::from_secs(10)).await;
    // Every confirmation the store gave was asked for before this instant.
    let frozen_at = Instant::now();
    server.signal("STOP");
    world.gate.lift();
    let seen = tokio::time::timeout(LEASE * 2, seen_by_test.recv())
        .await
        .expect("the handler never saw its lease in doubt")
        .expect("the handler reports what it saw");
    // The last confirmation holds until at most a lease after the freeze; the run gives it
    // up a margin before that.
    let waited = seen.at - frozen_at;
    assert!(
        waited <= LEASE - MARGIN + LOOK_EVERY * 5,
        "in doubt only {waited:?} after the store froze"
    );
    assert_eq!(seen.standing, LeaseStanding::InDoubt, "{seen:?}");
    assert!(seen.left < MARGIN, "{seen:?}");
    assert_eq!(
        seen.next_step,
        Some(StepErrorKind::LeaseInDoubt),
        "{seen:?}"
    );
    let answer = first_run.await.unwrap();
    answer.problem(StatusCode::SERVICE_UNAVAILABLE, "store-unavailable");
    assert_eq!(world.second.load(Ordering::SeqCst), 0, "a step started");

    // The store answers again: the retry takes the operation over once the lease lapsed and
    // resumes it after its first step.
    server.signal("CONT");
    let resumed = tokio::time::timeout(LEASE * 3, async {
        loop {
            let answer = send().await;
            if ![StatusCode::CONFLICT, StatusCode::SERVICE_UNAVAILABLE].contains(&answer.status) {
                break answer;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the operation is still in flight long after its lease lapsed");
    resumed.created();
    assert_eq!(
        world.first.load(Ordering::SeqCst),
        1,
        "the first step ran again"
    );
    assert_eq!(world.second.load(Ordering::SeqCst), 1);
    assert!(send().await.replayed());
}
