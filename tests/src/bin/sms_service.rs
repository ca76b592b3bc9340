//! A service whose one route sends an SMS through a gateway without idempotency keys, as a
//! step called at most once, in a process of its own so that a test kills it with SIGKILL
//! after the SMS was sent and before its answer came (tests/tests/at_most_once.rs).
//!
//! - `POST /notify`: `#[idempotent(scope = "global", lease = "1s", resume_after = "100ms")]`,
//!   one step, `steps.at_most_once("sms", ..)`, which posts to `<SMS_GATEWAY>/sms` with the
//!   step's key in the `reference` header and answers 201 `{"sms": <the gateway's answer>}`.
//!
//! Its records are on the Redis at `SMS_REDIS_URL`, under the prefix `SMS_REDIS_PREFIX`; its
//! resumer finishes the operations a killed process left. Prints `listening on http://ADDR`
//! on stdout; logs on stderr.

use axum::{Extension, Json, Router, extract::State, http::StatusCode, routing::post};
use idem::{
    Idempotency, idempotent,
    redis::RedisStore,
    steps::{StepError, Steps},
};
use serde_json::{Value, json};

#[idempotent(scope = "global", lease = "1s", resume_after = "100ms")]
async fn notify(
    State(gateway): State<String>,
    mut steps: Steps,
    Json(_to): Json<Value>,
) -> Result<(StatusCode, Json<Value>), StepError> {
    let sms: String = steps
        .at_most_once("sms", |key| async move {
            let unanswered = |_| StepError::retryable(StatusCode::BAD_GATEWAY);
            let answer = reqwest::Client::new()
                .post(format!("{gateway}/sms"))
                .header("reference", key.as_str())
                .send()
                .await
                .map_err(unanswered)?;
            answer.text().await.map_err(unanswered)
        })
        .await?;
    Ok((StatusCode::CREATED, Json(json!({ "sms": sms }))))
}

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let variable = |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"));
    let store = RedisStore::builder()
        .prefix(variable("SMS_REDIS_PREFIX"))
        .expect("a prefix without braces")
        .connect(variable("SMS_REDIS_URL").as_str())
        .await
        .expect("the Redis of SMS_REDIS_URL answers");
    let idem = Idempotency::new(store);
    let app = Router::new()
        .route("/notify", post(notify))
        .with_state(variable("SMS_GATEWAY"))
        .layer(Extension(idem.clone()));
    idem.resumer(app.clone())
        .start()
        .expect("Redis keeps what a resumer needs");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    println!("listening on http://{}", listener.local_addr().unwrap());
    axum::serve(listener, app).await.unwrap();
}
