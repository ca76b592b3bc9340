//! IdempotencyLayer through real axum routers, on a multi-thread runtime with real tasks.
//!
//! Every test builds a router with a handler that counts its executions, sends requests
//! with `tower::ServiceExt::oneshot`, and asserts what a client would see: status, headers,
//! body bytes, Problem Details, and how many times the handler ran.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use axum::{
    Extension, Json, Router,
    body::Body,
    extract::{DefaultBodyLimit, Request, State},
    http::{HeaderValue, Method, StatusCode, header},
    middleware,
    response::{IntoResponse, Response},
    routing::post,
};
use idem::{
    Idempotency, IdempotencyContext, IdempotencyLayer, MemoryStore, NoStore, OnConflict,
    OnStoreError, Policy, Scope, fingerprint::FingerprintMode,
};
use idem_conformance::{Call, Fault, FaultyStore};
use idem_tests::inprocess::{Counter, authenticate, hanging, post_to, send, unreachable};
use serde_json::{Value, json};

/// A payments-like handler: counts, waits, answers 201 with the run number and a cookie.
async fn create_payment(State(counter): State<Counter>, Json(body): Json<Value>) -> Response {
    let run = counter.start_run().await;
    let mut response = (
        StatusCode::CREATED,
        Json(json!({ "run": run, "request": body })),
    )
        .into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::LOCATION,
        HeaderValue::from_str(&format!("/payments/{run}")).unwrap(),
    );
    headers.insert(
        header::SET_COOKIE,
        HeaderValue::from_static("session=first-caller"),
    );
    response
}

fn app(idem: &Idempotency, policy: Policy, counter: &Counter) -> Router {
    Router::new()
        .route("/payments", post(create_payment))
        .route("/orders/{id}/pay", post(create_payment))
        .layer(IdempotencyLayer::new(idem.clone(), policy))
        .with_state(counter.clone())
}

fn global() -> Policy {
    Policy::new().scope(Scope::Global)
}

/// A POST to `/payments`.
fn request(key: Option<&str>, body: &str) -> Request {
    post_to("/payments", key, body)
}

const BODY: &str = r#"{"amount":9800,"currency":"JPY"}"#;

/// A layer whose policy leaves `/clientTimestamp` out of the fingerprint replays a retry that
/// differs only there, and refuses one that differs anywhere else; one whose pointer cannot
/// name a member is refused when it is built.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_member_left_out_of_the_fingerprint_is_not_the_request() {
    let (idem, counter) = (Idempotency::default(), Counter::default());
    let policy = global().fingerprint_omit(&["/clientTimestamp"]);
    let app = app(&idem, policy, &counter);
    let body = |stamp: &str, amount: u32| {
        json!({ "amount": amount, "currency": "JPY", "clientTimestamp": stamp }).to_string()
    };
    let first = send(&app, request(Some("k-ts"), &body("10:00:00", 9800))).await;
    assert_eq!(first.status, StatusCode::CREATED);
    let retry = send(&app, request(Some("k-ts"), &body("10:00:07", 9800))).await;
    assert!(retry.replayed());
    assert_eq!(retry.body, first.body);
    let changed = send(&app, request(Some("k-ts"), &body("10:00:07", 9801))).await;
    assert_eq!(changed.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(counter.runs(), 1);

    let refused = IdempotencyLayer::try_new(idem, global().fingerprint_omit(&["clientTimestamp"]));
    let error = refused
        .expect_err("a pointer without `/` is refused")
        .to_string();
    assert!(
        error.contains("`clientTimestamp` is not a JSON Pointer"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_retry_replays_the_first_response_and_runs_nothing() {
    let (idem, counter) = (Idempotency::default(), Counter::default());
    let app = app(&idem, global(), &counter);

    let first = send(&app, request(Some("k1"), BODY)).await;
    assert_eq!(first.status, StatusCode::CREATED);
    assert!(!first.replayed());
    assert_eq!(first.headers[header::SET_COOKIE], "session=first-caller");

    let replay = send(&app, request(Some("k1"), BODY)).await;
    assert_eq!(replay.status, StatusCode::CREATED);
    assert!(replay.replayed());
    assert_eq!(replay.body, first.body, "a replay sends the same bytes");
    assert_eq!(replay.headers[header::LOCATION], "/payments/1");
    assert_eq!(replay.headers[header::CONTENT_TYPE], "application/json");
    assert!(
        !replay.headers.contains_key(header::SET_COOKIE),
        "cookies are not replayed"
    );
    assert_eq!(counter.runs(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn quoted_and_bare_keys_and_reordered_json_are_one_request() {
    let (idem, counter) = (Idempotency::default(), Counter::default());
    let app = app(&idem, global(), &counter);
    let first = send(
        &app,
        request(Some("\"k2\""), r#"{"amount":1,"currency":"EUR"}"#),
    )
    .await;
    let answer = send(
        &app,
        request(Some("k2"), "{ \"currency\": \"EUR\",\n \"amount\": 1 }"),
    )
    .await;
    assert_eq!(answer.status, StatusCode::CREATED);
    assert!(answer.replayed());
    assert_eq!(answer.body, first.body);
    assert_eq!(counter.runs(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_thousand_concurrent_requests_with_one_key_run_the_handler_once() {
    let counter = Counter::slow(Duration::from_millis(200));
    let idem = Idempotency::default();
    let app = app(&idem, global(), &counter);
    let start = Arc::new(tokio::sync::Barrier::new(1000));
    let requests: Vec<_> = (0..1000)
        .map(|_| {
            let (app, start) = (app.clone(), Arc::clone(&start));
            tokio::spawn(async move {
                start.wait().await;
                send(&app, request(Some("race"), BODY)).await
            })
        })
        .collect();
    let (mut originals, mut replays, mut conflicts) = (Vec::new(), Vec::new(), 0);
    for request in requests {
        let answer = request.await.unwrap();
        match answer.status {
            StatusCode::CREATED if answer.replayed() => replays.push(answer.body),
            StatusCode::CREATED => originals.push(answer.body),
            StatusCode::CONFLICT => {
                answer.refusal(StatusCode::CONFLICT, "request-in-flight");
                assert_eq!(answer.headers[header::RETRY_AFTER], "1");
                conflicts += 1;
            }
            other => panic!("unexpected {other}: {:?}", answer.body),
        }
    }
    assert_eq!(counter.runs(), 1);
    assert_eq!(originals.len(), 1, "exactly one request ran the handler");
    assert!(replays.iter().all(|body| *body == originals[0]));
    assert_eq!(originals.len() + replays.len() + conflicts, 1000);
    assert!(
        conflicts > 0,
        "with a 200 ms handler, racing duplicates find it in flight"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn waiting_duplicates_all_get_the_first_result() {
    let counter = Counter::slow(Duration::from_millis(100));
    let policy = global().on_conflict(OnConflict::Wait(Duration::from_secs(5)));
    let app = app(&Idempotency::default(), policy, &counter);
    let requests: Vec<_> = (0..50)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move { send(&app, request(Some("wait"), BODY)).await })
        })
        .collect();
    let mut bodies = Vec::new();
    for request in requests {
        let answer = request.await.unwrap();
        assert_eq!(answer.status, StatusCode::CREATED);
        bodies.push(answer.body);
    }
    assert_eq!(counter.runs(), 1);
    assert!(bodies.iter().all(|body| *body == bodies[0]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_wait_that_runs_out_answers_409() {
    let counter = Counter::slow(Duration::from_millis(500));
    let policy = global().on_conflict(OnConflict::Wait(Duration::from_millis(50)));
    let app = app(&Idempotency::default(), policy, &counter);
    let first = tokio::spawn({
        let app = app.clone();
        async move { send(&app, request(Some("slow"), BODY)).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let answer = send(&app, request(Some("slow"), BODY)).await;
    answer.refusal(StatusCode::CONFLICT, "request-in-flight");
    assert_eq!(first.await.unwrap().status, StatusCode::CREATED);
    assert_eq!(counter.runs(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_client_that_disconnects_still_gets_its_result_on_retry() {
    let counter = Counter::slow(Duration::from_millis(300));
    let idem = Idempotency::default();
    let app = app(&idem, global(), &counter);

    // The client gives up after 50 ms: its request future is dropped mid-handler, as hyper
    // drops it when the connection closes.
    let gave_up = tokio::time::timeout(
        Duration::from_millis(50),
        send(&app, request(Some("gone"), BODY)),
    )
    .await;
    assert!(gave_up.is_err());
    assert_eq!(
        idem.running(),
        1,
        "the handler carries on without its client"
    );

    // A retry while it runs learns that; a retry after it finished gets its result.
    let answer = send(&app, request(Some("gone"), BODY)).await;
    answer.refusal(StatusCode::CONFLICT, "request-in-flight");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let answer = send(&app, request(Some("gone"), BODY)).await;
    assert_eq!(answer.status, StatusCode::CREATED);
    assert!(answer.replayed());
    assert_eq!(answer.run(), 1);
    assert_eq!(counter.runs(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn shutdown_waits_for_handlers_whose_clients_left() {
    let counter = Counter::slow(Duration::from_millis(200));
    let idem = Idempotency::default();
    let app = app(&idem, global(), &counter);
    let _ = tokio::time::timeout(
        Duration::from_millis(20),
        send(&app, request(Some("drain"), BODY)),
    )
    .await;
    assert_eq!(counter.runs(), 1);
    idem.shutdown().await;
    assert_eq!(idem.running(), 0);
    // The result was stored before shutdown returned.
    let answer = send(&app, request(Some("drain"), BODY)).await;
    assert_eq!(answer.status, StatusCode::CREATED);
    assert!(answer.replayed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_panic_answers_500_and_frees_the_key() {
    let runs = Arc::new(AtomicUsize::new(0));
    let handler = {
        let runs = Arc::clone(&runs);
        move || async move {
            if runs.fetch_add(1, Ordering::SeqCst) == 0 {
                panic!("the payment provider returned garbage");
            }
            (StatusCode::CREATED, "charged")
        }
    };
    let app = Router::new()
        .route("/payments", post(handler))
        .layer(IdempotencyLayer::new(Idempotency::default(), global()));
    let answer = send(&app, request(Some("boom"), BODY)).await;
    let json = answer.refusal(StatusCode::INTERNAL_SERVER_ERROR, "handler-failed");
    assert!(json["detail"].as_str().unwrap().contains("released"));
    let answer = send(&app, request(Some("boom"), BODY)).await;
    assert_eq!(
        (answer.status, &answer.body[..]),
        (StatusCode::CREATED, &b"charged"[..])
    );
    assert!(!answer.replayed());
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

/// A handler that fails with 503 on its first run, then succeeds.
fn flaky_router(policy: Policy, runs: &Arc<AtomicUsize>) -> Router {
    let runs = Arc::clone(runs);
    let handler = move || async move {
        match runs.fetch_add(1, Ordering::SeqCst) {
            0 => (StatusCode::SERVICE_UNAVAILABLE, "provider down"),
            _ => (StatusCode::CREATED, "charged"),
        }
    };
    Router::new()
        .route("/payments", post(handler))
        .layer(IdempotencyLayer::new(Idempotency::default(), policy))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn server_errors_release_the_key_by_default() {
    let runs = Arc::new(AtomicUsize::new(0));
    let app = flaky_router(global(), &runs);
    assert_eq!(
        send(&app, request(Some("5xx"), BODY)).await.status,
        StatusCode::SERVICE_UNAVAILABLE
    );
    let answer = send(&app, request(Some("5xx"), BODY)).await;
    assert_eq!(
        (answer.status, &answer.body[..]),
        (StatusCode::CREATED, &b"charged"[..])
    );
    assert!(!answer.replayed());
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn server_errors_are_replayed_when_the_policy_stores_them() {
    let runs = Arc::new(AtomicUsize::new(0));
    let app = flaky_router(global().store_server_errors(true), &runs);
    assert_eq!(
        send(&app, request(Some("5xx"), BODY)).await.status,
        StatusCode::SERVICE_UNAVAILABLE
    );
    let answer = send(&app, request(Some("5xx"), BODY)).await;
    assert_eq!(
        (answer.status, &answer.body[..]),
        (StatusCode::SERVICE_UNAVAILABLE, &b"provider down"[..])
    );
    assert!(answer.replayed());
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_handler_can_opt_a_response_out_of_storage() {
    let runs = Arc::new(AtomicUsize::new(0));
    let handler = {
        let runs = Arc::clone(&runs);
        move || async move {
            match runs.fetch_add(1, Ordering::SeqCst) {
                0 => (StatusCode::TOO_MANY_REQUESTS, NoStore, "come back later").into_response(),
                _ => (StatusCode::CREATED, "charged").into_response(),
            }
        }
    };
    let app = Router::new()
        .route("/payments", post(handler))
        .layer(IdempotencyLayer::new(Idempotency::default(), global()));
    assert_eq!(
        send(&app, request(Some("opt"), BODY)).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(
        send(&app, request(Some("opt"), BODY)).await.status,
        StatusCode::CREATED
    );
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn client_errors_are_stored_like_any_result() {
    let runs = Arc::new(AtomicUsize::new(0));
    let handler = {
        let runs = Arc::clone(&runs);
        move || async move {
            runs.fetch_add(1, Ordering::SeqCst);
            (StatusCode::PAYMENT_REQUIRED, "card declined")
        }
    };
    let app = Router::new()
        .route("/payments", post(handler))
        .layer(IdempotencyLayer::new(Idempotency::default(), global()));
    send(&app, request(Some("402"), BODY)).await;
    let answer = send(&app, request(Some("402"), BODY)).await;
    assert_eq!(
        (answer.status, &answer.body[..]),
        (StatusCode::PAYMENT_REQUIRED, &b"card declined"[..])
    );
    assert!(answer.replayed());
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_same_key_with_another_body_or_target_is_422() {
    let counter = Counter::default();
    let app = app(&Idempotency::default(), global(), &counter);
    send(&app, request(Some("reuse"), BODY)).await;
    let answer = send(
        &app,
        request(Some("reuse"), r#"{"amount":1,"currency":"JPY"}"#),
    )
    .await;
    let json = answer.refusal(StatusCode::UNPROCESSABLE_ENTITY, "key-reused");
    assert_eq!(json["title"], "Idempotency-Key is already used");

    send(&app, post_to("/orders/1/pay", Some("order-key"), BODY)).await;
    let answer = send(&app, post_to("/orders/2/pay", Some("order-key"), BODY)).await;
    answer.refusal(StatusCode::UNPROCESSABLE_ENTITY, "key-reused");
    assert_eq!(counter.runs(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn raw_fingerprints_tell_reordered_json_apart() {
    let counter = Counter::default();
    let app = app(
        &Idempotency::default(),
        global().fingerprint(FingerprintMode::Raw),
        &counter,
    );
    send(
        &app,
        request(Some("raw"), r#"{"amount":1,"currency":"EUR"}"#),
    )
    .await;
    let answer = send(
        &app,
        request(Some("raw"), r#"{"currency":"EUR","amount":1}"#),
    )
    .await;
    answer.refusal(StatusCode::UNPROCESSABLE_ENTITY, "key-reused");
    assert_eq!(counter.runs(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn keys_are_checked_before_anything_runs() {
    let counter = Counter::default();
    let app = app(&Idempotency::default(), global(), &counter);

    let answer = send(&app, request(None, BODY)).await;
    let json = answer.refusal(StatusCode::BAD_REQUEST, "key-missing");
    assert_eq!(json["title"], "Idempotency-Key is missing");

    for bad in ["\"unterminated", "a b", "a,b", "\"\""] {
        let answer = send(&app, request(Some(bad), BODY)).await;
        answer.refusal(StatusCode::BAD_REQUEST, "key-malformed");
    }
    let too_long = "k".repeat(256);
    let answer = send(&app, request(Some(&too_long), BODY)).await;
    let json = answer.refusal(StatusCode::BAD_REQUEST, "key-malformed");
    assert!(json["detail"].as_str().unwrap().contains("256"));

    let mut twice = request(Some("one"), BODY);
    twice
        .headers_mut()
        .append("idempotency-key", HeaderValue::from_static("two"));
    let answer = send(&app, twice).await;
    answer.refusal(StatusCode::BAD_REQUEST, "key-malformed");
    assert_eq!(counter.runs(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn strict_syntax_refuses_bare_keys() {
    let counter = Counter::default();
    let policy = global().key_syntax(idem::KeySyntax::Strict);
    let app = app(&Idempotency::default(), policy, &counter);
    let answer = send(&app, request(Some("bare"), BODY)).await;
    answer.refusal(StatusCode::BAD_REQUEST, "key-malformed");
    assert_eq!(
        send(&app, request(Some("\"quoted\""), BODY)).await.status,
        StatusCode::CREATED
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_optional_key_lets_unkeyed_requests_run_every_time() {
    let counter = Counter::default();
    let app = app(&Idempotency::default(), global().required(false), &counter);
    for _ in 0..3 {
        let answer = send(&app, request(None, BODY)).await;
        assert_eq!(answer.status, StatusCode::CREATED);
        assert!(!answer.replayed());
    }
    send(&app, request(Some("k"), BODY)).await;
    assert!(send(&app, request(Some("k"), BODY)).await.replayed());
    assert_eq!(counter.runs(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn safe_methods_pass_through_untouched() {
    let runs = Arc::new(AtomicUsize::new(0));
    let handler = {
        let runs = Arc::clone(&runs);
        move || async move { runs.fetch_add(1, Ordering::SeqCst).to_string() }
    };
    let app = Router::new()
        .route("/payments", axum::routing::get(handler))
        .layer(
            IdempotencyLayer::new(Idempotency::default(), global())
                .methods([Method::POST, Method::GET]),
        );
    for expected in ["0", "1"] {
        let get = Request::get("/payments")
            .header("idempotency-key", "k")
            .body(Body::empty())
            .unwrap();
        let answer = send(&app, get).await;
        assert_eq!(
            (answer.status, &answer.body[..]),
            (StatusCode::OK, expected.as_bytes())
        );
        assert!(!answer.replayed());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn user_scoped_keys_are_per_user_and_need_a_user() {
    let counter = Counter::default();
    let app = app(&Idempotency::default(), Policy::new(), &counter)
        .layer(middleware::from_fn(authenticate));
    let as_user = |user: Option<&str>| {
        let mut request = request(Some("shared-key"), BODY);
        if let Some(user) = user {
            request
                .headers_mut()
                .insert("x-user", HeaderValue::from_str(user).unwrap());
        }
        request
    };
    let alice = send(&app, as_user(Some("alice"))).await;
    let bob = send(&app, as_user(Some("bob"))).await;
    assert_eq!(bob.status, StatusCode::CREATED);
    assert!(!bob.replayed(), "bob never sees alice's result");
    assert_ne!(alice.body, bob.body);
    assert!(send(&app, as_user(Some("alice"))).await.replayed());

    let answer = send(&app, as_user(None)).await;
    answer.refusal(StatusCode::INTERNAL_SERVER_ERROR, "principal-missing");
    assert_eq!(counter.runs(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn request_bodies_over_the_limit_are_413() {
    let counter = Counter::default();
    let app = app(&Idempotency::default(), global(), &counter).layer(DefaultBodyLimit::max(64));
    let big = format!(r#"{{"amount":1,"note":"{}"}}"#, "x".repeat(100));
    let answer = send(&app, request(Some("big"), &big)).await;
    answer.refusal(StatusCode::PAYLOAD_TOO_LARGE, "body-too-large");
    assert_eq!(counter.runs(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn responses_over_the_stored_cap_reach_the_first_caller_and_are_not_rerun() {
    let counter = Counter::default();
    let app = app(
        &Idempotency::default(),
        global().max_stored_body(16),
        &counter,
    );
    let answer = send(&app, request(Some("huge"), BODY)).await;
    assert_eq!(answer.status, StatusCode::CREATED);
    assert!(answer.body.len() > 16);
    assert_eq!(answer.run(), 1, "the first caller gets it whole");
    let answer = send(&app, request(Some("huge"), BODY)).await;
    // Not a refusal: the stored outcome, which is that the response was not kept.
    let json = answer.problem(StatusCode::GONE, "response-not-replayable");
    assert_eq!(json["originalStatus"], 201);
    assert!(answer.replayed());
    assert_eq!(counter.runs(), 1);
}

#[tokio::test(start_paused = true)]
async fn records_expire_after_their_ttl() {
    let counter = Counter::default();
    let policy = global().ttl(Duration::from_secs(3600));
    let app = app(&Idempotency::default(), policy, &counter);
    send(&app, request(Some("ttl"), BODY)).await;
    tokio::time::advance(Duration::from_secs(3599)).await;
    assert!(send(&app, request(Some("ttl"), BODY)).await.replayed());
    tokio::time::advance(Duration::from_secs(2)).await;
    let answer = send(&app, request(Some("ttl"), BODY)).await;
    assert_eq!(answer.status, StatusCode::CREATED);
    assert!(!answer.replayed(), "after the TTL the key is a new request");
    assert_eq!(answer.run(), 2);
}

/// A runtime's `max_ttl` shortens a route's longer TTL, and never below the route's lease.
#[tokio::test(start_paused = true)]
async fn the_runtime_caps_a_routes_ttl_but_not_below_its_lease() {
    let counter = Counter::default();
    let idem = Idempotency::builder(MemoryStore::default())
        .max_ttl(Duration::from_secs(10))
        .build();
    let short_lease = global()
        .ttl(Duration::from_secs(3600))
        .lease(Duration::from_secs(5));
    let capped = app(&idem, short_lease, &counter);
    send(&capped, request(Some("capped"), BODY)).await;
    tokio::time::advance(Duration::from_secs(9)).await;
    assert!(
        send(&capped, request(Some("capped"), BODY))
            .await
            .replayed()
    );
    tokio::time::advance(Duration::from_secs(2)).await;
    let answer = send(&capped, request(Some("capped"), BODY)).await;
    assert!(!answer.replayed(), "after the cap the key is a new request");
    assert_eq!(answer.run(), 2);

    // With the default lease of 60 s, the record is kept for the lease, not the 10 s cap.
    let leased = global().ttl(Duration::from_secs(3600));
    let leased_app = app(&idem, leased, &counter);
    send(&leased_app, request(Some("leased"), BODY)).await;
    tokio::time::advance(Duration::from_secs(59)).await;
    assert!(
        send(&leased_app, request(Some("leased"), BODY))
            .await
            .replayed()
    );
    tokio::time::advance(Duration::from_secs(2)).await;
    assert!(
        !send(&leased_app, request(Some("leased"), BODY))
            .await
            .replayed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lapsed_lease_lets_a_retry_in_and_fences_the_old_holder() {
    // Renewals never reach the store, as from a process that stalled.
    let store = FaultyStore::new(MemoryStore::default());
    store.inject(Call::Renew, Fault::Skip, None);
    let idem = Idempotency::new(store);
    let counter = Counter::slow(Duration::from_millis(400));
    let policy = global().lease(Duration::from_millis(100));
    let app = app(&idem, policy, &counter);

    // The first run stalls past its lease; a retry then takes the key over and finishes
    // first. The old holder's late completion is fenced: the key keeps the retry's result.
    let first = tokio::spawn({
        let app = app.clone();
        async move { send(&app, request(Some("lapse"), BODY)).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let counter_fast = counter.clone();
    let second = send(&app, request(Some("lapse"), BODY)).await;
    let first = first.await.unwrap();
    assert_eq!(counter_fast.runs(), 2, "the lapsed lease let the retry run");
    assert_eq!(first.status, StatusCode::CREATED);
    assert_eq!(second.status, StatusCode::CREATED);
    let answer = send(&app, request(Some("lapse"), BODY)).await;
    assert!(answer.replayed());
    assert_eq!(
        answer.body, second.body,
        "the record is the retry's, not the fenced holder's"
    );
    assert_ne!(answer.body, first.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_live_lease_is_renewed_while_the_handler_runs() {
    let counter = Counter::slow(Duration::from_millis(400));
    let policy = global().lease(Duration::from_millis(100));
    let app = app(&Idempotency::default(), policy, &counter);
    let first = tokio::spawn({
        let app = app.clone();
        async move { send(&app, request(Some("renew"), BODY)).await }
    });
    tokio::time::sleep(Duration::from_millis(250)).await;
    let answer = send(&app, request(Some("renew"), BODY)).await;
    answer.refusal(StatusCode::CONFLICT, "request-in-flight");
    first.await.unwrap();
    assert_eq!(counter.runs(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_store_that_is_down_fails_closed_with_503() {
    let counter = Counter::default();
    let app = app(&Idempotency::new(unreachable()), global(), &counter);
    let answer = send(&app, request(Some("down"), BODY)).await;
    answer.refusal(StatusCode::SERVICE_UNAVAILABLE, "store-unavailable");
    assert_eq!(answer.headers[header::RETRY_AFTER], "1");
    assert_eq!(counter.runs(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_store_that_hangs_times_out_into_503() {
    let counter = Counter::default();
    let idem = Idempotency::builder(hanging())
        .store_timeout(Duration::from_millis(100))
        .build();
    let app = app(&idem, global(), &counter);
    let answered = tokio::time::timeout(
        Duration::from_secs(2),
        send(&app, request(Some("hang"), BODY)),
    )
    .await;
    let answer = answered.expect("a hanging store must not hang the request");
    answer.refusal(StatusCode::SERVICE_UNAVAILABLE, "store-unavailable");
    assert_eq!(counter.runs(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_store_that_is_down_runs_the_handler_when_the_policy_says_so() {
    let counter = Counter::default();
    let app = app(
        &Idempotency::new(unreachable()),
        global().on_store_error(OnStoreError::RunWithoutRecord),
        &counter,
    );
    for _ in 0..2 {
        let answer = send(&app, request(Some("run-anyway"), BODY)).await;
        assert_eq!(answer.status, StatusCode::CREATED);
        assert!(!answer.replayed());
    }
    assert_eq!(counter.runs(), 2, "without a store nothing can be replayed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_claim_whose_answer_was_lost_does_not_block_its_key() {
    // The first claim is applied, and its answer lost: the runtime sees a timeout.
    let store = FaultyStore::new(MemoryStore::default());
    store.inject(Call::Claim, Fault::LoseAnswer, Some(1));
    let idem = Idempotency::new(store);
    let counter = Counter::default();
    let app = app(&idem, global(), &counter);
    let answer = send(&app, request(Some("lost"), BODY)).await;
    answer.refusal(StatusCode::SERVICE_UNAVAILABLE, "store-unavailable");
    // The claim landed although its answer did not; without its release the retry would get
    // 409 for a whole lease (60 s), with no request running.
    idem.shutdown().await;
    let answer = send(&app, request(Some("lost"), BODY)).await;
    assert_eq!(answer.status, StatusCode::CREATED);
    assert!(!answer.replayed());
    assert_eq!(counter.runs(), 1);
}

#[test]
#[should_panic(expected = "`ttl` (30s) is shorter than `lease` (60s)")]
fn an_impossible_policy_is_refused_when_the_layer_is_built() {
    let policy = Policy::new().ttl(Duration::from_secs(30));
    let _ = IdempotencyLayer::new(Idempotency::default(), policy);
}

#[tokio::test]
async fn problem_type_uris_follow_the_runtime_s_base() {
    let counter = Counter::default();
    let idem = Idempotency::builder(MemoryStore::default())
        .problem_type_base("https://api.example.com/problems#")
        .build();
    let app = app(&idem, global(), &counter);
    let answer = send(&app, request(None, BODY)).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        answer.json()["type"],
        "https://api.example.com/problems#key-missing"
    );

    let default = send(
        &self::app(&Idempotency::default(), global(), &counter),
        request(None, BODY),
    )
    .await;
    assert_eq!(default.json()["type"], "/problems/idempotency#key-missing");
}

/// A response with more header values than a record can hold.
async fn crowded(State(counter): State<Counter>) -> Response {
    counter.count_run();
    let mut response = StatusCode::CREATED.into_response();
    for n in 0..70_000 {
        response
            .headers_mut()
            .append("x-item", HeaderValue::from(n));
    }
    response
}

#[tokio::test]
async fn a_response_no_store_can_keep_is_answered_and_its_key_released() {
    let counter = Counter::default();
    let app = Router::new()
        .route("/crowded", post(crowded))
        .layer(IdempotencyLayer::new(Idempotency::default(), global()))
        .with_state(counter.clone());
    for run in 1..=2 {
        let answer = send(&app, post_to("/crowded", Some("crowd"), BODY)).await;
        assert_eq!(
            answer.status,
            StatusCode::CREATED,
            "its caller gets the response"
        );
        assert_eq!(answer.headers.get_all("x-item").iter().count(), 70_000);
        assert!(!answer.replayed(), "nothing was stored to replay");
        assert_eq!(
            counter.runs(),
            run,
            "the key was released: a retry runs again"
        );
    }
}

/// Answers the `Retry-After` its request's context carries, in seconds, or 500 without one.
async fn context_retry_after(context: Option<Extension<IdempotencyContext>>) -> Response {
    match context {
        Some(Extension(context)) => (
            StatusCode::CREATED,
            context.retry_after().as_secs().to_string(),
        )
            .into_response(),
        None => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_handler_behind_the_layer_finds_its_context_wherever_it_runs() {
    // The layer gives a request its context only once its handler is to run, so that a
    // replay does not pay for one: every way the handler can be reached must still have it.
    let routes = |idem: Idempotency, policy: Policy| {
        Router::new()
            .route("/payments", post(context_retry_after))
            .layer(IdempotencyLayer::new(
                idem,
                policy.retry_after(Duration::from_secs(7)),
            ))
    };
    let claimed = routes(Idempotency::default(), global().required(false));
    let first = send(&claimed, request(Some("ctx"), BODY)).await;
    assert_eq!(
        (first.status, first.body.as_ref()),
        (StatusCode::CREATED, &b"7"[..])
    );
    let replay = send(&claimed, request(Some("ctx"), BODY)).await;
    assert!(replay.replayed());
    assert_eq!(replay.body, first.body);
    let unkeyed = send(&claimed, request(None, BODY)).await;
    assert_eq!(
        (unkeyed.status, unkeyed.body.as_ref()),
        (StatusCode::CREATED, &b"7"[..])
    );

    let store_down = routes(
        Idempotency::new(unreachable()),
        global().on_store_error(OnStoreError::RunWithoutRecord),
    );
    let unrecorded = send(&store_down, request(Some("ctx"), BODY)).await;
    assert_eq!(
        (unrecorded.status, unrecorded.body.as_ref()),
        (StatusCode::CREATED, &b"7"[..])
    );
}
