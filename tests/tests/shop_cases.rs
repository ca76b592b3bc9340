//! The seven cases of docs/contract.md (*The seven cases*: the same key and body twice,
//! another body, a request in flight, no key, a client timeout then a retry, a key after its
//! TTL, a 500 then a retry), each over real HTTP against the shop, or, for the TTL and the
//! 5xx policy, against a small router built for the test.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use axum::{Extension, Json, Router, extract::State, http::StatusCode, routing::post};
use idem::{Idempotency, MemoryStore, idempotent};
use idem_tests::{
    Answer, key,
    shop_fixture::{Api, Server, TestShop, honour_retry_after, payment, settings, transfer, user},
};
use serde_json::{Value, json};
use shop::Settings;

/// Case 1: the same key and body twice. Both answers are 201 with the same bytes, the second
/// marked `Idempotent-Replayed: true`, and there is one payment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_1_same_key_same_body_twice_is_one_payment() {
    let test = TestShop::memory(settings()).await;
    let (alice, key) = (user(), key());
    let first = test.api.pay(&alice, &key, &payment(9800)).await;
    let created = first.created();
    assert!(!first.replayed());
    assert_eq!(created["amount"], 9800);
    assert_eq!(created["currency"], "JPY");
    assert_eq!(created["status"], "succeeded");
    let id = created["id"].as_str().unwrap();
    assert!(id.starts_with("pay_"), "{id}");
    assert_eq!(
        first.header("location"),
        Some(format!("/payments/{id}").as_str())
    );

    let second = test.api.pay(&alice, &key, &payment(9800)).await;
    assert_eq!(second.status, 201);
    assert!(second.replayed());
    assert_eq!(
        second.body, first.body,
        "the replay is the first answer's bytes"
    );
    assert_eq!(second.header("location"), first.header("location"));

    let payments = test.api.payments(&alice).await;
    assert_eq!(payments, [created], "exactly one payment");
}

/// Case 2: the same key with another body. 422 Problem Details, and no new payment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_2_same_key_different_body_is_422_and_no_new_payment() {
    let test = TestShop::memory(settings()).await;
    let (alice, key) = (user(), key());
    let first = test.api.pay(&alice, &key, &payment(9800)).await.created();

    let reused = test.api.pay(&alice, &key, &payment(1200)).await;
    let problem = reused.problem(StatusCode::UNPROCESSABLE_ENTITY, "key-reused");
    assert_eq!(problem["title"], "Idempotency-Key is already used");
    assert!(!reused.replayed());

    // The same key for another currency, or for another resource, is reused just as well.
    let other = json!({ "amount": 9800, "currency": "USD" });
    test.api
        .pay(&alice, &key, &other)
        .await
        .problem(StatusCode::UNPROCESSABLE_ENTITY, "key-reused");
    assert_eq!(test.api.payments(&alice).await, [first]);
}

/// Case 3: the same key while the first request is in flight. 409 Problem Details with
/// `Retry-After`; the client waits that long, retries, and gets the first result. One
/// transfer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_3_same_key_in_flight_is_409_then_the_retry_gets_the_result() {
    let test = TestShop::memory(Settings {
        transfer_delay: Duration::from_millis(1500),
        ..settings()
    })
    .await;
    let (alice, key) = (user(), key());
    let first = {
        let (api, alice, key) = (test.api.clone(), alice.clone(), key.clone());
        tokio::spawn(async move { api.transfer(&alice, &key, &transfer(50_000)).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second = test.api.transfer(&alice, &key, &transfer(50_000)).await;
    let first = first.await.unwrap();

    // Whichever of the two claimed the key first ran; the other was refused. (On a slow
    // machine the second may reach the store first.)
    let (ran, refused) = if first.status == 201 {
        (first, second)
    } else {
        (second, first)
    };
    let created = ran.created();
    assert!(!ran.replayed());
    let problem = refused.problem(StatusCode::CONFLICT, "request-in-flight");
    assert_eq!(
        problem["title"],
        "A request is outstanding for this Idempotency-Key"
    );

    honour_retry_after(&refused).await;
    let retried = test.api.transfer(&alice, &key, &transfer(50_000)).await;
    assert!(retried.replayed(), "{retried:?}");
    assert_eq!(retried.body, ran.body);
    assert_eq!(test.api.transfers(&alice).await, [created], "one transfer");
}

/// Case 4: no key. 400 Problem Details, and nothing is created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_4_no_key_is_400() {
    let test = TestShop::memory(settings()).await;
    let alice = user();
    for path in ["/payments", "/transfers"] {
        let body = if path == "/payments" {
            payment(9800)
        } else {
            transfer(50_000)
        };
        let answer = Answer::of(test.api.post(path, Some(&alice), None).json(&body)).await;
        let problem = answer.problem(StatusCode::BAD_REQUEST, "key-missing");
        assert_eq!(problem["title"], "Idempotency-Key is missing", "{path}");
    }
    assert!(test.api.payments(&alice).await.is_empty());
    assert!(test.api.transfers(&alice).await.is_empty());
}

/// Case 5: the first request times out on the client, and the client retries with the same
/// key, honouring 409 and `Retry-After` while the first is still running. The retry gets the
/// first request's result, and there is exactly one transfer: the handler went on running
/// after its client left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_5_client_timeout_then_retries_get_the_first_result() {
    let delay = Duration::from_millis(2000);
    let test = TestShop::memory(Settings {
        transfer_delay: delay,
        ..settings()
    })
    .await;
    let (alice, key) = (user(), key());
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let started = Instant::now();
    let timed_out = impatient
        .post(test.api.url("/transfers"))
        .bearer_auth(&alice)
        .header("idempotency-key", &key)
        .json(&transfer(50_000))
        .send()
        .await
        .unwrap_err();
    assert!(timed_out.is_timeout(), "{timed_out}");

    // The client's retry loop: the same key, until an answer that is not 409.
    let mut conflicts = 0;
    let answer = loop {
        let answer = test.api.transfer(&alice, &key, &transfer(50_000)).await;
        if answer.status != 409 {
            break answer;
        }
        answer.problem(StatusCode::CONFLICT, "request-in-flight");
        conflicts += 1;
        assert!(conflicts <= 10, "the first transfer never finished");
        honour_retry_after(&answer).await;
    };
    let created = answer.created();
    assert!(answer.replayed(), "the first request's result: {answer:?}");
    assert!(
        conflicts >= 1,
        "the first retry came while the transfer was running"
    );
    assert!(started.elapsed() >= delay);
    assert!(created["id"].as_str().unwrap().starts_with("tr_"));
    assert_eq!(test.api.transfers(&alice).await, [created], "one transfer");
}

/// How many times the test handlers ran.
#[derive(Clone, Default)]
struct Runs(Arc<AtomicUsize>);

impl Runs {
    fn next(&self) -> usize {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }

    fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// Remembered for 300 ms only, so that the test can outlive it.
#[idempotent(scope = "global", ttl = "300ms", lease = "300ms")]
async fn short_lived(
    State(runs): State<Runs>,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let run = runs.next();
    (
        StatusCode::CREATED,
        Json(json!({ "run": run, "body": body })),
    )
}

/// Case 6: the same key after the TTL is processed as a new request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_6_same_key_after_the_ttl_is_a_new_request() {
    let idem = Idempotency::new(MemoryStore::default());
    let runs = Runs::default();
    let router = Router::new()
        .route("/orders", post(short_lived))
        .with_state(runs.clone())
        .layer(Extension(idem.clone()));
    let server = Server::start(router, idem).await;
    let api = Api::new(&server);
    let key = key();
    let order = || {
        Answer::of(
            api.post("/orders", None, Some(&key))
                .json(&json!({ "sku": "A-1" })),
        )
    };

    let first = order().await;
    assert_eq!(first.json()["run"], 1);
    let within = order().await;
    assert!(within.replayed(), "within the TTL: the first answer");
    assert_eq!(within.body, first.body);

    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = order().await;
    assert_eq!(after.status, 201);
    assert!(!after.replayed(), "after the TTL: a new request");
    assert_eq!(after.json()["run"], 2);
    assert_eq!(runs.count(), 2);
}

/// Answers 500 on its first run, 201 after.
async fn fails_once(runs: &Runs) -> (StatusCode, Json<Value>) {
    match runs.next() {
        1 => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({ "error": "the ledger was locked", "run": 1 })),
        ),
        run => (StatusCode::CREATED, Json(json!({ "run": run }))),
    }
}

/// The default: a 5xx releases the key.
#[idempotent(scope = "global")]
async fn released_on_5xx(
    State(runs): State<Runs>,
    Json(_): Json<Value>,
) -> (StatusCode, Json<Value>) {
    fails_once(&runs).await
}

/// Stripe's way: a 5xx is stored and replayed.
#[idempotent(scope = "global", store_server_errors = true)]
async fn stored_on_5xx(
    State(runs): State<Runs>,
    Json(_): Json<Value>,
) -> (StatusCode, Json<Value>) {
    fails_once(&runs).await
}

/// Case 7: the first request ended 500, and the same key is sent again. By default the key
/// was released, so the retry runs the handler again (and succeeds); with
/// `store_server_errors = true` the 500 was stored, and the retry replays it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_7_after_a_500_the_retry_runs_again_or_replays_as_configured() {
    let idem = Idempotency::new(MemoryStore::default());
    let (released, stored) = (Runs::default(), Runs::default());
    let router = Router::new()
        .route("/released", post(released_on_5xx))
        .with_state(released.clone())
        .merge(
            Router::new()
                .route("/stored", post(stored_on_5xx))
                .with_state(stored.clone()),
        )
        .layer(Extension(idem.clone()));
    let server = Server::start(router, idem).await;
    let api = Api::new(&server);
    let call = |path: &'static str, key: String| {
        let api = api.clone();
        async move { Answer::of(api.post(path, None, Some(&key)).json(&json!({ "n": 1 }))).await }
    };

    let key = key();
    let failed = call("/released", key.clone()).await;
    assert_eq!(failed.status, 500);
    let retried = call("/released", key.clone()).await;
    assert!(
        !retried.replayed(),
        "the default releases a 5xx: the retry runs"
    );
    assert_eq!(retried.created()["run"], 2);
    let again = call("/released", key).await;
    assert!(again.replayed(), "and its success is stored");
    assert_eq!(released.count(), 2);

    let key = idem_tests::key();
    let failed = call("/stored", key.clone()).await;
    assert_eq!(failed.status, 500);
    let retried = call("/stored", key).await;
    assert_eq!(retried.status, 500);
    assert!(retried.replayed(), "store_server_errors replays the 500");
    assert_eq!(retried.body, failed.body);
    assert_eq!(stored.count(), 1, "and does not run again");
}
