//! Two instances of a service, each with its own runtime and its own Redis connection, on
//! their own loopback ports, sharing one Redis: a key sent to both runs once.
//!
//! Needs `IDEM_TEST_REDIS_URL` (CI sets `redis://127.0.0.1:6379`); skipped without it.

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use axum::{Json, Router, extract::State, http::StatusCode, routing::post};
use idem::{Idempotency, IdempotencyLayer, Policy, Scope};
use idem_tests::{Served, redis_fixture::redis_url};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

/// What the two instances share besides Redis: the count of executions, and a gate the
/// slow route waits at (with the count of handlers that reached it).
#[derive(Clone)]
struct Shared {
    executions: Arc<AtomicUsize>,
    gate: Arc<Semaphore>,
    at_gate: Arc<AtomicUsize>,
}

async fn create_payment(
    State(shared): State<Shared>,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let n = shared.executions.fetch_add(1, Ordering::SeqCst) + 1;
    (
        StatusCode::CREATED,
        Json(json!({ "payment": n, "amount": body["amount"] })),
    )
}

async fn create_slow_payment(
    State(shared): State<Shared>,
    body: Json<Value>,
) -> (StatusCode, Json<Value>) {
    shared.at_gate.fetch_add(1, Ordering::SeqCst);
    let permit = shared
        .gate
        .acquire()
        .await
        .expect("the gate is never closed");
    permit.forget();
    create_payment(State(shared), body).await
}

/// One instance: its own Redis connection and runtime, on its own port.
async fn instance(url: &str, prefix: &str, shared: Shared) -> Served {
    let store = idem::redis::RedisStore::builder()
        .prefix(prefix)
        .unwrap()
        .connect(url)
        .await
        .expect("cannot connect to the test Redis");
    let idem = Idempotency::new(store);
    let app = Router::new()
        .route("/payments", post(create_payment))
        .route("/slow-payments", post(create_slow_payment))
        .layer(IdempotencyLayer::new(
            idem,
            Policy::new().scope(Scope::Global),
        ))
        .with_state(shared);
    Served::start(app).await
}

struct Fixture {
    one: Served,
    two: Served,
    shared: Shared,
    http: reqwest::Client,
}

async fn two_instances() -> Option<Fixture> {
    let url = redis_url()?;
    let prefix = idem_tests::redis_fixture::fresh_prefix();
    let shared = Shared {
        executions: Arc::new(AtomicUsize::new(0)),
        gate: Arc::new(Semaphore::new(0)),
        at_gate: Arc::new(AtomicUsize::new(0)),
    };
    let one = instance(&url, &prefix, shared.clone()).await;
    let two = instance(&url, &prefix, shared.clone()).await;
    assert_ne!(one.addr, two.addr);
    Some(Fixture {
        one,
        two,
        shared,
        http: idem_tests::redis_fixture::client(Duration::from_secs(10)),
    })
}

impl Fixture {
    async fn post(&self, to: SocketAddr, path: &str, key: &str, body: &Value) -> reqwest::Response {
        self.http
            .post(format!("http://{to}{path}"))
            .header("Idempotency-Key", key)
            .json(body)
            .send()
            .await
            .expect("the request failed")
    }

    fn executions(&self) -> usize {
        self.shared.executions.load(Ordering::SeqCst)
    }
}

fn header<'a>(response: &'a reqwest::Response, name: &str) -> Option<&'a str> {
    response
        .headers()
        .get(name)
        .map(|value| value.to_str().unwrap())
}

#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_second_instance_replays_the_first_ones_response() {
    let Some(fixture) = two_instances().await else {
        return;
    };
    let body = json!({ "amount": 1250 });

    let first = fixture
        .post(fixture.one.addr, "/payments", "pay-1", &body)
        .await;
    assert_eq!(first.status(), StatusCode::CREATED);
    assert_eq!(header(&first, "idempotent-replayed"), None);
    let first_body = first.bytes().await.unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&first_body).unwrap(),
        json!({ "payment": 1, "amount": 1250 })
    );

    for (round, to) in [fixture.two.addr, fixture.one.addr, fixture.two.addr]
        .into_iter()
        .enumerate()
    {
        let retry = fixture.post(to, "/payments", "pay-1", &body).await;
        assert_eq!(retry.status(), StatusCode::CREATED, "retry {round}");
        assert_eq!(
            header(&retry, "idempotent-replayed"),
            Some("true"),
            "retry {round}"
        );
        assert_eq!(header(&retry, "content-type"), Some("application/json"));
        assert_eq!(retry.bytes().await.unwrap(), first_body, "retry {round}");
    }
    assert_eq!(
        fixture.executions(),
        1,
        "the handler ran once across both instances"
    );

    // The same key with another body, on the other instance: 422, nothing run.
    let changed = fixture
        .post(
            fixture.two.addr,
            "/payments",
            "pay-1",
            &json!({ "amount": 9999 }),
        )
        .await;
    assert_eq!(changed.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        header(&changed, "content-type"),
        Some("application/problem+json")
    );
    assert_eq!(fixture.executions(), 1);

    // Another key is another operation.
    let other = fixture
        .post(fixture.two.addr, "/payments", "pay-2", &body)
        .await;
    assert_eq!(other.status(), StatusCode::CREATED);
    assert_eq!(header(&other, "idempotent-replayed"), None);
    assert_eq!(fixture.executions(), 2);
}

#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_in_flight_on_one_instance_is_a_conflict_on_the_other() {
    let Some(fixture) = two_instances().await else {
        return;
    };
    let fixture = Arc::new(fixture);
    let body = json!({ "amount": 500 });

    let first = tokio::spawn({
        let (fixture, body) = (Arc::clone(&fixture), body.clone());
        async move {
            fixture
                .post(fixture.one.addr, "/slow-payments", "slow-1", &body)
                .await
        }
    });
    // Once the handler waits at the gate, the first request holds the key.
    tokio::time::timeout(Duration::from_secs(10), async {
        while fixture.shared.at_gate.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the first request never reached its handler");
    let conflict = fixture
        .post(fixture.two.addr, "/slow-payments", "slow-1", &body)
        .await;
    assert_eq!(conflict.status(), StatusCode::CONFLICT);
    assert_eq!(
        header(&conflict, "content-type"),
        Some("application/problem+json")
    );
    let retry_after: u64 = header(&conflict, "retry-after")
        .expect("a 409 carries Retry-After")
        .parse()
        .unwrap();
    assert!(retry_after >= 1);
    let problem: Value = conflict.json().await.unwrap();
    assert_eq!(problem["status"], 409);
    assert_eq!(
        fixture.executions(),
        0,
        "nothing ran yet: the first waits at the gate"
    );
    assert_eq!(
        fixture.shared.at_gate.load(Ordering::SeqCst),
        1,
        "the second instance did not start the handler"
    );

    // The first request finishes; the other instance now replays its result.
    fixture.shared.gate.add_permits(1);
    let first = first.await.unwrap();
    assert_eq!(first.status(), StatusCode::CREATED);
    let first_body = first.bytes().await.unwrap();
    let replay = fixture
        .post(fixture.two.addr, "/slow-payments", "slow-1", &body)
        .await;
    assert_eq!(replay.status(), StatusCode::CREATED);
    assert_eq!(header(&replay, "idempotent-replayed"), Some("true"));
    assert_eq!(replay.bytes().await.unwrap(), first_body);
    assert_eq!(fixture.executions(), 1);
}

/// Many copies of one request, raced at both instances: one execution, and every answer is
/// either that execution's response, its replay, or a 409.
#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_at_both_instances_runs_once() {
    let Some(fixture) = two_instances().await else {
        return;
    };
    let fixture = Arc::new(fixture);
    let body = json!({ "amount": 42 });
    let requests: Vec<_> = (0..20)
        .map(|i| {
            let (fixture, body) = (Arc::clone(&fixture), body.clone());
            tokio::spawn(async move {
                let to = if i % 2 == 0 {
                    fixture.one.addr
                } else {
                    fixture.two.addr
                };
                let response = fixture.post(to, "/payments", "burst-1", &body).await;
                let status = response.status();
                let replayed = header(&response, "idempotent-replayed").is_some();
                (status, replayed, response.bytes().await.unwrap())
            })
        })
        .collect();
    let mut originals = 0;
    let mut bodies = Vec::new();
    for request in requests {
        let (status, replayed, body) = request.await.unwrap();
        match status {
            StatusCode::CREATED => {
                if !replayed {
                    originals += 1;
                }
                bodies.push(body);
            }
            StatusCode::CONFLICT => {}
            other => panic!("unexpected status {other}"),
        }
    }
    assert_eq!(originals, 1, "exactly one response is not a replay");
    assert!(
        bodies.windows(2).all(|pair| pair[0] == pair[1]),
        "every 201 has the same body"
    );
    assert_eq!(fixture.executions(), 1);
}
