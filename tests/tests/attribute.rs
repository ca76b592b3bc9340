//! `#[idempotent]` handlers through real axum routers: each argument does what it says, and
//! the seven cases of docs/contract.md (*The seven cases*) hold for an annotated handler.
//!
//! Every handler counts its executions. Requests go through `tower::ServiceExt::oneshot`; the
//! assertions are what a client sees (status, `Idempotent-Replayed`, body bytes, Problem
//! Details) and how many times the handler ran.

use std::time::Duration;

use axum::{
    Extension, Json, Router,
    body::Bytes,
    extract::{FromRequest, FromRequestParts, Request, State},
    http::{StatusCode, header, request::Parts},
    middleware,
    routing::post,
};
use idem::{Idempotency, MemoryStore, Principal, PureBody, Scope, idempotent};
use idem_tests::inprocess::{Counter, authenticate, post_to, send, unreachable, with_header};
use serde_json::{Value, json};

/// The defaults: user scope, key required, reject conflicts, JSON fingerprints.
#[idempotent]
async fn user_payment(
    State(counter): State<Counter>,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    counter.run(body).await
}

#[idempotent(scope = "global")]
async fn global_payment(
    State(counter): State<Counter>,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    counter.run(body).await
}

#[idempotent(scope = "global", ttl = "200ms", lease = "100ms")]
async fn short_lived(
    State(counter): State<Counter>,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    counter.run(body).await
}

#[idempotent(scope = "global", required = false)]
async fn optional_key(
    State(counter): State<Counter>,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    counter.run(body).await
}

#[idempotent(scope = "global", on_conflict = "wait(2s)")]
async fn waiting(
    State(counter): State<Counter>,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    counter.run(body).await
}

#[idempotent(scope = "global", fingerprint = "raw")]
async fn raw_fingerprint(
    State(counter): State<Counter>,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    counter.run(body).await
}

#[idempotent(scope = "global", key_syntax = "strict")]
async fn strict_key(
    State(counter): State<Counter>,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    counter.run(body).await
}

#[idempotent(scope = "global", on_store_error = "run")]
async fn run_without_store(
    State(counter): State<Counter>,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    counter.run(body).await
}

#[idempotent(scope = "custom(tenant)")]
async fn tenant_payment(
    State(counter): State<Counter>,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    counter.run(body).await
}

/// Fails with 500 and a body that names the run.
async fn fail(counter: &Counter) -> (StatusCode, String) {
    let run = counter.count_run();
    (StatusCode::INTERNAL_SERVER_ERROR, format!("failure {run}"))
}

#[idempotent(scope = "global")]
async fn server_error(State(counter): State<Counter>, _body: String) -> (StatusCode, String) {
    fail(&counter).await
}

#[idempotent(scope = "global", store_server_errors = true)]
async fn stored_server_error(
    State(counter): State<Counter>,
    _body: String,
) -> (StatusCode, String) {
    fail(&counter).await
}

#[idempotent(scope = "global")]
async fn panics_once(State(counter): State<Counter>, _body: String) -> StatusCode {
    if counter.count_run() == 1 {
        panic!("the first run panics");
    }
    StatusCode::CREATED
}

/// The application's own authentication as an extractor: it names the principal, and runs
/// before the body extractor, so idem finds the principal when it resolves the key.
struct User;

impl<S: Send + Sync> FromRequestParts<S> for User {
    type Rejection = (StatusCode, &'static str);

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let user = parts
            .headers
            .get("x-api-user")
            .and_then(|value| value.to_str().ok())
            .ok_or((StatusCode::UNAUTHORIZED, "who are you?"))?;
        let principal = Principal::new(user);
        parts.extensions.insert(principal);
        Ok(Self)
    }
}

/// A body-less operation (a cancellation, say) whose authentication extractor comes last.
#[idempotent]
async fn extractor_auth_last(
    State(counter): State<Counter>,
    _user: User,
) -> (StatusCode, Json<Value>) {
    counter.run(Value::Null).await
}

#[idempotent]
async fn extractor_auth(
    State(counter): State<Counter>,
    _user: User,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    counter.run(body).await
}

/// The toy signature of a body that [`Signed`] checks: its length and byte sum.
fn signature(body: &[u8]) -> String {
    let sum: u64 = body.iter().map(|&byte| u64::from(byte)).sum();
    format!("len={};sum={sum}", body.len())
}

/// A body signed by its sender, checked over the raw bytes: a body extractor of the
/// application's own that does not implement `PureBody`, so a guard.
struct Signed(Value);

impl FromRequest<Counter> for Signed {
    type Rejection = (StatusCode, &'static str);

    async fn from_request(request: Request, counter: &Counter) -> Result<Self, Self::Rejection> {
        counter.count_extraction();
        let claimed = request.headers().get("x-signature").cloned();
        let body = Bytes::from_request(request, counter)
            .await
            .map_err(|_| (StatusCode::BAD_REQUEST, "unreadable body"))?;
        if claimed.as_ref().and_then(|value| value.to_str().ok()) != Some(&signature(&body)) {
            return Err((StatusCode::UNAUTHORIZED, "bad signature"));
        }
        let event =
            serde_json::from_slice(&body).map_err(|_| (StatusCode::BAD_REQUEST, "not JSON"))?;
        Ok(Self(event))
    }
}

#[idempotent(scope = "global", fingerprint = "raw")]
async fn signed_event(
    State(counter): State<Counter>,
    Signed(event): Signed,
) -> (StatusCode, Json<Value>) {
    counter.run(event).await
}

/// A body parsed and nothing else: it says so with `PureBody`, and replays skip it.
struct Parsed(Value);

impl FromRequest<Counter> for Parsed {
    type Rejection = (StatusCode, &'static str);

    async fn from_request(request: Request, counter: &Counter) -> Result<Self, Self::Rejection> {
        counter.count_extraction();
        let body = Bytes::from_request(request, counter)
            .await
            .map_err(|_| (StatusCode::BAD_REQUEST, "unreadable body"))?;
        let value =
            serde_json::from_slice(&body).map_err(|_| (StatusCode::BAD_REQUEST, "not JSON"))?;
        Ok(Self(value))
    }
}

impl PureBody for Parsed {}

#[idempotent(scope = "global")]
async fn parsed_payment(
    State(counter): State<Counter>,
    Parsed(body): Parsed,
) -> (StatusCode, Json<Value>) {
    counter.run(body).await
}

/// Handlers as associated functions, one of which names `Self`.
struct Payments;

impl Payments {
    fn label(answer: (StatusCode, Json<Value>)) -> (StatusCode, Json<Value>) {
        let (status, Json(mut body)) = answer;
        body["by"] = json!("Payments");
        (status, Json(body))
    }

    #[idempotent(scope = "global")]
    async fn create(
        State(counter): State<Counter>,
        Json(body): Json<Value>,
    ) -> (StatusCode, Json<Value>) {
        Self::label(counter.run(body).await)
    }

    #[idempotent(scope = "global")]
    async fn create_plain(
        State(counter): State<Counter>,
        Json(body): Json<Value>,
    ) -> (StatusCode, Json<Value>) {
        counter.run(body).await
    }
}

/// `#[axum::debug_handler]` above `#[idempotent]` checks the function as written, and
/// calls it directly, as it would call a plain handler.
#[axum::debug_handler]
#[idempotent(scope = "global")]
async fn debugged_above(
    State(counter): State<Counter>,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    counter.run(body).await
}

/// Below, it checks the original function, nested in the handler.
#[idempotent(scope = "global")]
#[axum::debug_handler(state = Counter)]
async fn debugged_below(
    State(counter): State<Counter>,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    counter.run(body).await
}

fn routes(counter: &Counter) -> Router {
    Router::new()
        .route("/user", post(user_payment))
        .route("/global", post(global_payment))
        .route("/short", post(short_lived))
        .route("/optional", post(optional_key))
        .route("/wait", post(waiting))
        .route("/raw", post(raw_fingerprint))
        .route("/strict", post(strict_key))
        .route("/run-without-store", post(run_without_store))
        .route("/tenant", post(tenant_payment))
        .route("/server-error", post(server_error))
        .route("/stored-server-error", post(stored_server_error))
        .route("/panic", post(panics_once))
        .route("/extractor-auth", post(extractor_auth))
        .route("/extractor-auth-last", post(extractor_auth_last))
        .route("/signed", post(signed_event))
        .route("/parsed", post(parsed_payment))
        .route("/associated", post(Payments::create))
        .route("/associated-plain", post(Payments::create_plain))
        .route("/debugged-above", post(debugged_above))
        .route("/debugged-below", post(debugged_below))
        .layer(middleware::from_fn(authenticate))
        .with_state(counter.clone())
}

fn app(idem: &Idempotency, counter: &Counter) -> Router {
    routes(counter).layer(Extension(idem.clone()))
}

fn runtime() -> Idempotency {
    Idempotency::new(MemoryStore::default())
}

const BODY: &str = r#"{"amount":9800,"currency":"JPY"}"#;

// ---- The seven cases (docs/contract.md), for an annotated handler ----

#[tokio::test(flavor = "multi_thread")]
async fn case_1_same_key_same_body_replays_the_first_result() {
    let counter = Counter::default();
    let app = app(&runtime(), &counter);
    let first = send(&app, post_to("/global", Some("k1"), BODY)).await;
    assert_eq!(first.status, StatusCode::CREATED);
    assert!(!first.replayed());
    let second = send(&app, post_to("/global", Some("k1"), BODY)).await;
    assert_eq!(second.status, StatusCode::CREATED);
    assert!(second.replayed());
    assert_eq!(second.body, first.body, "the same bytes");
    assert_eq!(second.headers[header::CONTENT_TYPE], "application/json");
    assert_eq!(counter.runs(), 1, "one payment");
}

#[tokio::test(flavor = "multi_thread")]
async fn case_2_same_key_another_body_is_422() {
    let counter = Counter::default();
    let app = app(&runtime(), &counter);
    send(&app, post_to("/global", Some("k2"), BODY)).await;
    let other = r#"{"amount":1,"currency":"JPY"}"#;
    send(&app, post_to("/global", Some("k2"), other))
        .await
        .refusal(StatusCode::UNPROCESSABLE_ENTITY, "key-reused");
    assert_eq!(counter.runs(), 1, "no new payment");
}

#[tokio::test(flavor = "multi_thread")]
async fn case_3_same_key_in_flight_is_409_with_retry_after_then_the_result() {
    let counter = Counter::slow(Duration::from_millis(300));
    let app = app(&runtime(), &counter);
    let first = tokio::spawn({
        let app = app.clone();
        async move { send(&app, post_to("/global", Some("k3"), BODY)).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let conflict = send(&app, post_to("/global", Some("k3"), BODY)).await;
    conflict.refusal(StatusCode::CONFLICT, "request-in-flight");
    assert_eq!(conflict.headers[header::RETRY_AFTER], "1");

    let first = first.await.unwrap();
    assert_eq!(first.status, StatusCode::CREATED);
    let retry = send(&app, post_to("/global", Some("k3"), BODY)).await;
    assert!(retry.replayed());
    assert_eq!(retry.body, first.body);
    assert_eq!(counter.runs(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn case_4_no_key_is_400_when_required() {
    let counter = Counter::default();
    let app = app(&runtime(), &counter);
    send(&app, post_to("/global", None, BODY))
        .await
        .refusal(StatusCode::BAD_REQUEST, "key-missing");
    assert_eq!(counter.runs(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn case_5_a_client_timeout_then_a_retry_gets_the_first_result() {
    let counter = Counter::slow(Duration::from_millis(300));
    let app = app(&runtime(), &counter);
    // The client gives up mid-handler: its request future is dropped, as hyper drops it
    // when the connection closes.
    let gave_up = tokio::time::timeout(
        Duration::from_millis(50),
        send(&app, post_to("/global", Some("k5"), BODY)),
    )
    .await;
    assert!(gave_up.is_err(), "the client timed out");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let retry = send(&app, post_to("/global", Some("k5"), BODY)).await;
    assert_eq!(retry.status, StatusCode::CREATED);
    assert!(retry.replayed(), "the first request's result");
    assert_eq!(retry.run(), 1);
    assert_eq!(counter.runs(), 1, "one transfer");
}

#[tokio::test(start_paused = true)]
async fn case_6_the_same_key_after_the_ttl_is_a_new_request() {
    // `ttl = "200ms"`: the memory store keeps time on tokio's clock, paused here.
    let counter = Counter::default();
    let app = app(&runtime(), &counter);
    let first = send(&app, post_to("/short", Some("k6"), BODY)).await;
    assert_eq!(first.run(), 1);
    tokio::time::advance(Duration::from_millis(150)).await;
    let within = send(&app, post_to("/short", Some("k6"), BODY)).await;
    assert!(within.replayed());
    assert_eq!(within.body, first.body);
    tokio::time::advance(Duration::from_millis(100)).await;
    let after = send(&app, post_to("/short", Some("k6"), BODY)).await;
    assert_eq!(after.status, StatusCode::CREATED);
    assert!(!after.replayed());
    assert_eq!(after.run(), 2);
    assert_eq!(counter.runs(), 2);
}

#[tokio::test(start_paused = true)]
async fn the_default_ttl_is_a_day() {
    let counter = Counter::default();
    let app = app(&runtime(), &counter);
    send(&app, post_to("/global", Some("day"), BODY)).await;
    tokio::time::advance(Duration::from_secs(24 * 60 * 60 - 1)).await;
    assert!(
        send(&app, post_to("/global", Some("day"), BODY))
            .await
            .replayed()
    );
    tokio::time::advance(Duration::from_secs(2)).await;
    assert!(
        !send(&app, post_to("/global", Some("day"), BODY))
            .await
            .replayed()
    );
    assert_eq!(counter.runs(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn case_7_a_500_releases_the_key_by_default() {
    let counter = Counter::default();
    let app = app(&runtime(), &counter);
    let first = send(&app, post_to("/server-error", Some("k7"), "x")).await;
    assert_eq!(first.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(first.body, "failure 1");
    let retry = send(&app, post_to("/server-error", Some("k7"), "x")).await;
    assert_eq!(retry.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(!retry.replayed());
    assert_eq!(retry.body, "failure 2", "the retry ran the handler again");
    assert_eq!(counter.runs(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn case_7_store_server_errors_replays_the_500() {
    let counter = Counter::default();
    let app = app(&runtime(), &counter);
    let first = send(&app, post_to("/stored-server-error", Some("k7"), "x")).await;
    assert_eq!(first.status, StatusCode::INTERNAL_SERVER_ERROR);
    let retry = send(&app, post_to("/stored-server-error", Some("k7"), "x")).await;
    assert_eq!(retry.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(retry.replayed());
    assert_eq!(retry.body, first.body);
    assert_eq!(retry.body, "failure 1");
    assert_eq!(counter.runs(), 1);
}

// ---- each argument ----

#[tokio::test(flavor = "multi_thread")]
async fn user_scope_keeps_each_users_keys_apart() {
    let counter = Counter::default();
    let app = app(&runtime(), &counter);
    let as_user = |user| with_header(post_to("/user", Some("shared"), BODY), "x-user", user);
    let alice = send(&app, as_user("alice")).await;
    let bob = send(&app, as_user("bob")).await;
    assert_eq!(
        (alice.status, bob.status),
        (StatusCode::CREATED, StatusCode::CREATED)
    );
    assert!(!bob.replayed(), "bob never sees alice's result");
    assert_eq!((alice.run(), bob.run()), (1, 2));
    let alice_again = send(&app, as_user("alice")).await;
    assert!(alice_again.replayed());
    assert_eq!(alice_again.body, alice.body);
    assert_eq!(counter.runs(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn global_scope_shares_one_key_space() {
    let counter = Counter::default();
    let app = app(&runtime(), &counter);
    let as_user = |user| with_header(post_to("/global", Some("shared"), BODY), "x-user", user);
    let alice = send(&app, as_user("alice")).await;
    let bob = send(&app, as_user("bob")).await;
    assert!(bob.replayed());
    assert_eq!(bob.body, alice.body);
    assert_eq!(counter.runs(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn user_scope_without_a_principal_is_the_services_fault_500() {
    let counter = Counter::default();
    let app = app(&runtime(), &counter);
    send(&app, post_to("/user", Some("k"), BODY))
        .await
        .refusal(StatusCode::INTERNAL_SERVER_ERROR, "principal-missing");
    assert_eq!(counter.runs(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_authentication_extractor_can_name_the_principal() {
    let counter = Counter::default();
    let app = app(&runtime(), &counter);
    let as_user = |user| {
        with_header(
            post_to("/extractor-auth", Some("shared"), BODY),
            "x-api-user",
            user,
        )
    };
    let alice = send(&app, as_user("alice")).await;
    assert_eq!(alice.status, StatusCode::CREATED);
    let bob = send(&app, as_user("bob")).await;
    assert!(!bob.replayed());
    assert!(send(&app, as_user("alice")).await.replayed());
    // The extractor's own rejection, before idem looks for a principal.
    let anonymous = send(&app, post_to("/extractor-auth", Some("shared"), BODY)).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    assert_eq!(anonymous.body, "who are you?");
    assert_eq!(counter.runs(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_authentication_extractor_in_last_place_names_the_principal_too() {
    let counter = Counter::default();
    let app = app(&runtime(), &counter);
    let as_user = |user| {
        with_header(
            post_to("/extractor-auth-last", Some("cancel-1"), ""),
            "x-api-user",
            user,
        )
    };
    let alice = send(&app, as_user("alice")).await;
    assert_eq!(alice.status, StatusCode::CREATED);
    assert!(!alice.replayed());
    assert!(
        !send(&app, as_user("bob")).await.replayed(),
        "bob's key is his own"
    );
    let again = send(&app, as_user("alice")).await;
    assert!(again.replayed());
    assert_eq!(again.body, alice.body);
    assert_eq!(counter.runs(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_custom_scope_takes_its_principal_from_the_runtimes_resolver() {
    let idem = Idempotency::builder(MemoryStore::default())
        .principal_resolver(|scope: &Scope, parts: &Parts| match scope {
            Scope::Custom("tenant") => parts
                .headers
                .get("x-tenant")
                .and_then(|value| value.to_str().ok())
                .map(Principal::new),
            _ => parts.extensions.get::<Principal>().cloned(),
        })
        .build();
    let counter = Counter::default();
    let app = app(&idem, &counter);
    let as_tenant =
        |tenant| with_header(post_to("/tenant", Some("shared"), BODY), "x-tenant", tenant);
    assert!(!send(&app, as_tenant("acme")).await.replayed());
    assert!(!send(&app, as_tenant("globex")).await.replayed());
    assert!(send(&app, as_tenant("acme")).await.replayed());
    send(&app, post_to("/tenant", Some("shared"), BODY))
        .await
        .refusal(StatusCode::INTERNAL_SERVER_ERROR, "principal-missing");
    assert_eq!(counter.runs(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn required_false_runs_unkeyed_requests_every_time() {
    let counter = Counter::default();
    let app = app(&runtime(), &counter);
    for run in 1..=2 {
        let seen = send(&app, post_to("/optional", None, BODY)).await;
        assert_eq!(seen.status, StatusCode::CREATED);
        assert!(!seen.replayed());
        assert_eq!(seen.run(), run);
    }
    // A key still makes the request idempotent.
    send(&app, post_to("/optional", Some("k"), BODY)).await;
    assert!(
        send(&app, post_to("/optional", Some("k"), BODY))
            .await
            .replayed()
    );
    assert_eq!(counter.runs(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn wait_gives_a_duplicate_the_first_result_instead_of_409() {
    let counter = Counter::slow(Duration::from_millis(300));
    let app = app(&runtime(), &counter);
    let first = tokio::spawn({
        let app = app.clone();
        async move { send(&app, post_to("/wait", Some("w"), BODY)).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let duplicate = send(&app, post_to("/wait", Some("w"), BODY)).await;
    let first = first.await.unwrap();
    assert_eq!(duplicate.status, StatusCode::CREATED);
    assert!(duplicate.replayed());
    assert_eq!(duplicate.body, first.body);
    assert_eq!(counter.runs(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn json_fingerprints_ignore_key_order_and_raw_ones_do_not() {
    let counter = Counter::default();
    let app = app(&runtime(), &counter);
    let reordered = "{ \"currency\": \"JPY\",\n  \"amount\": 9800 }";

    let first = send(&app, post_to("/global", Some("fp"), BODY)).await;
    let same = send(&app, post_to("/global", Some("fp"), reordered)).await;
    assert!(same.replayed());
    assert_eq!(same.body, first.body);

    send(&app, post_to("/raw", Some("fp"), BODY)).await;
    send(&app, post_to("/raw", Some("fp"), reordered))
        .await
        .refusal(StatusCode::UNPROCESSABLE_ENTITY, "key-reused");
    assert_eq!(counter.runs(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn strict_key_syntax_refuses_a_bare_key() {
    let counter = Counter::default();
    let app = app(&runtime(), &counter);
    send(&app, post_to("/strict", Some("bare-key"), BODY))
        .await
        .refusal(StatusCode::BAD_REQUEST, "key-malformed");
    let quoted = send(&app, post_to("/strict", Some("\"quoted-key\""), BODY)).await;
    assert_eq!(quoted.status, StatusCode::CREATED);
    assert_eq!(counter.runs(), 1);
    // The default, lenient, takes both spellings as one key.
    send(&app, post_to("/global", Some("\"either\""), BODY)).await;
    assert!(
        send(&app, post_to("/global", Some("either"), BODY))
            .await
            .replayed()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_store_outage_fails_closed_with_503_by_default() {
    let counter = Counter::default();
    let app = app(&Idempotency::new(unreachable()), &counter);
    let seen = send(&app, post_to("/global", Some("down"), BODY)).await;
    seen.refusal(StatusCode::SERVICE_UNAVAILABLE, "store-unavailable");
    assert_eq!(seen.headers[header::RETRY_AFTER], "1");
    assert_eq!(counter.runs(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn on_store_error_run_runs_the_handler_through_an_outage() {
    let counter = Counter::default();
    let app = app(&Idempotency::new(unreachable()), &counter);
    for run in 1..=2 {
        let seen = send(&app, post_to("/run-without-store", Some("down"), BODY)).await;
        assert_eq!(seen.status, StatusCode::CREATED);
        assert!(!seen.replayed());
        assert_eq!(seen.run(), run, "without a store, nothing is replayed");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_extractor_rejection_stores_nothing() {
    let counter = Counter::default();
    let app = app(&runtime(), &counter);
    let broken = send(&app, post_to("/global", Some("fix-me"), r#"{"amount": "#)).await;
    assert_eq!(
        broken.status,
        StatusCode::BAD_REQUEST,
        "axum's Json rejection"
    );
    assert!(!broken.replayed());
    assert_eq!(counter.runs(), 0);
    // Had the broken request claimed the key, its fingerprint would make this a 422.
    let fixed = send(&app, post_to("/global", Some("fix-me"), BODY)).await;
    assert_eq!(fixed.status, StatusCode::CREATED);
    assert!(!fixed.replayed());
    assert_eq!(counter.runs(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_panic_answers_500_and_releases_the_key() {
    let counter = Counter::default();
    let app = app(&runtime(), &counter);
    send(&app, post_to("/panic", Some("boom"), "x"))
        .await
        .refusal(StatusCode::INTERNAL_SERVER_ERROR, "handler-failed");
    let retry = send(&app, post_to("/panic", Some("boom"), "x")).await;
    assert_eq!(retry.status, StatusCode::CREATED);
    assert!(!retry.replayed());
    assert_eq!(counter.runs(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn without_the_runtime_a_handler_answers_500_misconfigured() {
    let counter = Counter::default();
    let app = routes(&counter);
    send(&app, post_to("/global", Some("k"), BODY))
        .await
        .refusal(StatusCode::INTERNAL_SERVER_ERROR, "misconfigured");
    assert_eq!(counter.runs(), 0);
}

// ---- what a replay checks ----

/// A delivery of `body` to `/signed` with `key`, signed with `signature` (none: unsigned).
fn delivery(key: &str, body: &str, signature: Option<&str>) -> Request {
    let request = post_to("/signed", Some(key), body);
    match signature {
        Some(signature) => with_header(request, "x-signature", signature),
        None => request,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_guard_body_extractor_runs_before_every_replay() {
    let counter = Counter::default();
    let app = app(&runtime(), &counter);
    let signed = signature(BODY.as_bytes());
    let first = send(&app, delivery("evt-1", BODY, Some(&signed))).await;
    assert_eq!(first.status, StatusCode::CREATED);
    assert_eq!((counter.runs(), counter.extractions()), (1, 1));

    let unsigned = send(&app, delivery("evt-1", BODY, None)).await;
    assert_eq!(unsigned.status, StatusCode::UNAUTHORIZED);
    assert_eq!(unsigned.body, "bad signature");
    assert!(
        !unsigned.replayed(),
        "no stored result without the signature"
    );

    let forged = send(&app, delivery("evt-1", BODY, Some("len=32;sum=0"))).await;
    assert_eq!(forged.status, StatusCode::UNAUTHORIZED);
    assert!(
        !forged.replayed(),
        "no stored result with a wrong signature"
    );

    let redelivered = send(&app, delivery("evt-1", BODY, Some(&signed))).await;
    assert!(redelivered.replayed());
    assert_eq!(redelivered.body, first.body);
    assert_eq!(counter.runs(), 1, "the handler ran once");
    assert_eq!(counter.extractions(), 4, "the guard ran for every request");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_guards_rejection_claims_nothing() {
    let counter = Counter::default();
    let app = app(&runtime(), &counter);
    let forged = send(&app, delivery("evt-2", BODY, Some("len=1;sum=1"))).await;
    assert_eq!(forged.status, StatusCode::UNAUTHORIZED);
    // Had the forged delivery claimed the key, this would be a 409 or a replay.
    let signed = signature(BODY.as_bytes());
    let genuine = send(&app, delivery("evt-2", BODY, Some(&signed))).await;
    assert_eq!(genuine.status, StatusCode::CREATED);
    assert!(!genuine.replayed());
    assert_eq!(counter.runs(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pure_body_extractor_is_skipped_on_a_replay() {
    let counter = Counter::default();
    let app = app(&runtime(), &counter);
    let first = send(&app, post_to("/parsed", Some("p-1"), BODY)).await;
    assert_eq!(first.status, StatusCode::CREATED);
    assert_eq!(counter.extractions(), 1);
    let retry = send(&app, post_to("/parsed", Some("p-1"), BODY)).await;
    assert!(retry.replayed());
    assert_eq!(retry.body, first.body);
    assert_eq!(
        counter.extractions(),
        1,
        "the replay did not parse the body"
    );
    assert_eq!(counter.runs(), 1);

    // Its rejection releases the key: the fixed body runs under the same key.
    let broken = send(&app, post_to("/parsed", Some("p-2"), "{")).await;
    assert_eq!(broken.status, StatusCode::BAD_REQUEST);
    let fixed = send(&app, post_to("/parsed", Some("p-2"), BODY)).await;
    assert_eq!(fixed.status, StatusCode::CREATED);
    assert!(!fixed.replayed());
    assert_eq!(counter.extractions(), 3);
}

#[test]
fn the_expansion_knows_which_last_arguments_are_guards() {
    assert!(signed_event.last_runs_on_replay());
    assert!(!parsed_payment.last_runs_on_replay());
    assert!(!global_payment.last_runs_on_replay(), "Json is pure");
    assert!(
        extractor_auth_last.last_runs_on_replay(),
        "a parts extractor"
    );
}

// ---- the handler as a function ----

#[tokio::test]
async fn an_annotated_handler_is_called_like_the_function_it_was() {
    let counter = Counter::default();
    let (status, Json(body)) =
        global_payment(State(counter.clone()), Json(json!({ "amount": 1 }))).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(body, json!({ "run": 1, "request": { "amount": 1 } }));
    assert_eq!(counter.runs(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_associated_function_may_name_self() {
    let counter = Counter::default();
    let app = app(&runtime(), &counter);
    let first = send(&app, post_to("/associated", Some("a-1"), BODY)).await;
    assert_eq!(first.status, StatusCode::CREATED);
    assert_eq!(first.json()["by"], "Payments");
    let retry = send(&app, post_to("/associated", Some("a-1"), BODY)).await;
    assert!(retry.replayed());
    assert_eq!(retry.body, first.body);
    let plain = send(&app, post_to("/associated-plain", Some("a-1"), BODY)).await;
    assert_eq!(plain.status, StatusCode::CREATED);
    assert!(!plain.replayed(), "another route, another key");
    assert_eq!(counter.runs(), 2);

    let (_, Json(direct)) = Payments::create(State(counter.clone()), Json(json!({}))).await;
    assert_eq!(direct["by"], "Payments");
    assert_eq!(direct["run"], 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn debug_handler_goes_above_or_below() {
    let counter = Counter::default();
    let app = app(&runtime(), &counter);
    for path in ["/debugged-above", "/debugged-below"] {
        let first = send(&app, post_to(path, Some("d-1"), BODY)).await;
        assert_eq!(first.status, StatusCode::CREATED, "{path}");
        let retry = send(&app, post_to(path, Some("d-1"), BODY)).await;
        assert!(retry.replayed(), "{path} is idempotent");
        assert_eq!(retry.body, first.body);
    }
    assert_eq!(counter.runs(), 2);
}
