//! What a replay checks with `IdempotencyLayer`, over real HTTP: the application's checks go
//! in a middleware outside the layer, and run for every replay as for the first request.
//!
//! - A signed webhook: a middleware outside the layer verifies an HMAC over the body and puts
//!   the body back. A retry without the signature, or with a wrong one, is refused 401 and
//!   never replayed; only a correctly signed retry gets the stored answer.
//! - A user-scoped route: authentication outside the layer names the principal; inside it, the
//!   layer finds none and answers 500 `principal-missing` (the service's fault).

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use axum::{
    Json, Router,
    body::Body,
    extract::{Request, State},
    http::StatusCode,
    middleware::{self, Next},
    response::{IntoResponse, Response},
    routing::post,
};
use hmac::{Hmac, KeyInit, Mac};
use idem::{Idempotency, IdempotencyLayer, Policy, Principal, Scope};
use idem_tests::{Answer, Served};
use serde_json::{Value, json};
use sha2::Sha256;

const SECRET: &[u8] = b"whsec_layer_test";

fn sign(body: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(SECRET).unwrap();
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

/// Refuses a request whose `Signature` is not the HMAC of its body; passes the body on.
async fn verify_signature(request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let Ok(body) = axum::body::to_bytes(body, 64 * 1024).await else {
        return StatusCode::PAYLOAD_TOO_LARGE.into_response();
    };
    let signature = parts
        .headers
        .get("signature")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| hex::decode(value).ok());
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(SECRET).unwrap();
    mac.update(&body);
    if signature.is_none_or(|signature| mac.verify_slice(&signature).is_err()) {
        let problem = json!({
            "type": "https://example.com/problems#invalid-signature",
            "title": "The signature is not valid",
            "status": 401,
            "detail": "the Signature header is not the HMAC-SHA256 of this body",
        });
        return (
            StatusCode::UNAUTHORIZED,
            [("content-type", "application/problem+json")],
            problem.to_string(),
        )
            .into_response();
    }
    next.run(Request::from_parts(parts, Body::from(body))).await
}

/// Names the principal from `Authorization: Bearer <user>`, or refuses with 401.
async fn authenticate(mut request: Request, next: Next) -> Response {
    let user = request
        .headers()
        .get("authorization")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::to_owned);
    let Some(user) = user else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    request.extensions_mut().insert(Principal::new(user));
    next.run(request).await
}

#[derive(Clone, Default)]
struct Runs(Arc<AtomicUsize>);

async fn settle(State(runs): State<Runs>, Json(event): Json<Value>) -> Json<Value> {
    let run = runs.0.fetch_add(1, Ordering::SeqCst) + 1;
    Json(json!({ "transfer": event["transfer"], "status": "settled", "run": run }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_passes_the_signature_check_outside_the_layer_again() {
    let runs = Runs::default();
    let router = Router::new()
        .route("/webhooks/bank", post(settle))
        .layer(IdempotencyLayer::new(
            Idempotency::default(),
            Policy::new().scope(Scope::Global),
        ))
        .layer(middleware::from_fn(verify_signature))
        .with_state(runs.clone());
    let served = Served::start(router).await;
    let http = reqwest::Client::new();
    let body = br#"{"type":"transfer.settled","transfer":"tr_1"}"#;
    let delivery = |signature: Option<String>| {
        let request = http
            .post(served.url("/webhooks/bank"))
            .header("idempotency-key", "\"evt_1\"")
            .header("content-type", "application/json")
            .body(body.to_vec());
        match signature {
            Some(signature) => request.header("signature", signature),
            None => request,
        }
    };

    let first = Answer::of(delivery(Some(sign(body)))).await;
    assert_eq!(first.status, StatusCode::OK);
    assert!(!first.replayed());

    for forged in [None, Some("00".repeat(32)), Some(sign(b"another body"))] {
        let refused = Answer::of(delivery(forged.clone())).await;
        assert_eq!(refused.status, StatusCode::UNAUTHORIZED, "{forged:?}");
        assert!(
            !refused.replayed(),
            "{forged:?}: a forged retry got the stored result"
        );
        assert!(
            !String::from_utf8_lossy(&refused.body).contains("tr_1"),
            "{forged:?}: the refusal leaks the result"
        );
    }

    let signed = Answer::of(delivery(Some(sign(body)))).await;
    assert!(signed.replayed(), "{signed:?}");
    assert_eq!(signed.body, first.body);
    assert_eq!(runs.0.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_scoped_keys_need_the_authentication_outside_the_layer() {
    let runs = Runs::default();
    let layer = IdempotencyLayer::new(Idempotency::default(), Policy::new());
    let outside = Router::new()
        .route("/outside", post(settle))
        .layer(layer.clone())
        .layer(middleware::from_fn(authenticate));
    let inside = Router::new()
        .route("/inside", post(settle))
        .route_layer(middleware::from_fn(authenticate))
        .layer(layer);
    let served = Served::start(outside.merge(inside).with_state(runs.clone())).await;
    let http = reqwest::Client::new();
    let pay = |path: &str, user: &str| {
        http.post(served.url(path))
            .header("idempotency-key", "k-1")
            .header("authorization", format!("Bearer {user}"))
            .json(&json!({ "transfer": "tr_2" }))
    };

    let alice = Answer::of(pay("/outside", "alice")).await;
    assert_eq!(alice.status, StatusCode::OK);
    assert!(Answer::of(pay("/outside", "alice")).await.replayed());
    // The same key is another user's own.
    let bob = Answer::of(pay("/outside", "bob")).await;
    assert!(!bob.replayed());
    let stranger = Answer::of(
        http.post(served.url("/outside"))
            .header("idempotency-key", "k-1")
            .json(&json!({ "transfer": "tr_2" })),
    )
    .await;
    assert_eq!(stranger.status, StatusCode::UNAUTHORIZED);
    assert!(!stranger.replayed());

    // Inside the layer the authentication has not run yet when the key is scoped.
    let misplaced = Answer::of(pay("/inside", "alice")).await;
    misplaced.problem(StatusCode::INTERNAL_SERVER_ERROR, "principal-missing");
    assert_eq!(runs.0.load(Ordering::SeqCst), 2);
}
