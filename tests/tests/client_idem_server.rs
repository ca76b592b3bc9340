//! The client against a real idem server over loopback HTTP: the first attempt that times out
//! and is collected through 409, a reused key, and both key forms.

use std::time::Duration;

use axum::{Extension, Json, Router, http::StatusCode, routing::post};
use idem::{Idempotency, MemoryStore, idempotent};
use idem_client::{IdempotencyKey, KeyForm, RetryPolicy};
use serde_json::{Value, json};
use tokio::net::TcpListener;

fn http() -> reqwest::Client {
    reqwest::Client::new()
}

/// Takes `delay_ms` from the body, sleeps that long, and answers 201 with the body.
#[idempotent(scope = "global")]
async fn slow_create(Json(body): Json<Value>) -> (StatusCode, Json<Value>) {
    let delay = body["delay_ms"].as_u64().unwrap_or(0);
    tokio::time::sleep(Duration::from_millis(delay)).await;
    (StatusCode::CREATED, Json(body))
}

#[idempotent(scope = "global", key_syntax = "strict")]
async fn strict_create(Json(body): Json<Value>) -> (StatusCode, Json<Value>) {
    (StatusCode::CREATED, Json(body))
}

async fn idem_server() -> String {
    let idem = Idempotency::new(MemoryStore::default());
    let app = Router::new()
        .route("/slow", post(slow_create))
        .route("/strict", post(strict_create))
        .layer(Extension(idem));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    base
}

/// Case 5 of docs/contract.md against idem itself: the first attempt times out, the retries meet 409
/// while it runs, and the call gets the first request's result, replayed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_first_attempt_is_collected_through_409() {
    let base = idem_server().await;
    let body = json!({ "delay_ms": 1500 });
    let answer = RetryPolicy::new()
        .attempt_timeout(Duration::from_millis(300))
        .send(http().post(format!("{base}/slow")).json(&body))
        .await
        .unwrap();
    assert_eq!(answer.status(), 201);
    assert!(answer.is_replayed(), "the first attempt's result");
    assert!(
        answer.attempts() >= 3,
        "timeout, 409, result: {}",
        answer.attempts()
    );
    assert_eq!(answer.json::<Value>().unwrap(), body);
}

/// A key reused with another body is answered 422 by idem, and the call says so at once.
#[tokio::test]
async fn a_reused_key_is_a_typed_error_after_one_attempt() {
    let base = idem_server().await;
    let key = IdempotencyKey::derive("order-pay", ["order-7"]).unwrap();
    let policy = RetryPolicy::new();
    let url = format!("{base}/slow");
    policy
        .send_with_key(&key, http().post(&url).json(&json!({ "n": 1 })))
        .await
        .unwrap();
    let error = policy
        .send_with_key(&key, http().post(&url).json(&json!({ "n": 2 })))
        .await
        .unwrap_err();
    assert!(error.is_key_reused(), "{error}");
    assert_eq!(error.attempts(), 1);
    assert_eq!(error.key(), &key);
    let problem = error.problem().unwrap();
    assert!(problem.type_uri().ends_with("#key-reused"), "{problem:?}");
    assert!(error.to_string().contains("already used"), "{error}");
}

/// Both key forms reach idem: the quoted one even under the strict syntax, the bare one is
/// refused there with a 400 (after one attempt) and accepted by a lenient route.
#[tokio::test]
async fn both_key_forms_reach_an_idem_server() {
    let base = idem_server().await;
    let strict = format!("{base}/strict");
    let quoted = RetryPolicy::new()
        .send(http().post(&strict).json(&json!({})))
        .await
        .unwrap();
    assert_eq!(quoted.status(), 201);

    let bare = RetryPolicy::new().key_form(KeyForm::Bare);
    let error = bare
        .send(http().post(&strict).json(&json!({})))
        .await
        .unwrap_err();
    assert_eq!(error.attempts(), 1);
    let problem = error.problem().unwrap();
    assert!(
        problem.type_uri().ends_with("#key-malformed"),
        "{problem:?}"
    );

    let key = IdempotencyKey::random();
    let url = format!("{base}/slow");
    let first = bare
        .send_with_key(&key, http().post(&url).json(&json!({})))
        .await
        .unwrap();
    let quoted = RetryPolicy::new()
        .send_with_key(&key, http().post(&url).json(&json!({})))
        .await
        .unwrap();
    assert!(
        quoted.is_replayed(),
        "a bare and a quoted key name the same key"
    );
    assert_eq!(quoted.body(), first.body());
}
