//! The application's own refusals as RFC 9457 Problem Details, next to idem's.
//!
//! idem answers what it refuses itself (a missing key, a reused one, a request in flight)
//! with Problem Details. What the handler's extractors refuse is the application's answer: a
//! body that is not JSON gets axum's `Json` rejection, a `text/plain` 400. An extractor that
//! wraps `Json` and answers its rejection as Problem Details makes every refusal of the route
//! the same kind of body. Under `#[idempotent]` the key is released either way, so the client
//! fixes the body and sends it again with the same key.
//!
//! ```sh
//! cargo run -p idem --example problem_json    # prints two answers; serves nothing
//! ```

use axum::{
    Extension, Json, Router,
    body::Body,
    extract::{FromRequest, Request, rejection::JsonRejection},
    http::{StatusCode, header},
    response::{IntoResponse, Response},
    routing::post,
};
use http_body_util::BodyExt;
use idem::{Idempotency, MemoryStore, PureBody, idempotent};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;
use tower::ServiceExt;

/// `Json<T>`, whose rejection is Problem Details.
struct ProblemJson<T>(T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ProblemJson<T> {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Response> {
        match Json::<T>::from_request(request, state).await {
            Ok(Json(value)) => Ok(Self(value)),
            Err(rejection) => Err(invalid_body(&rejection)),
        }
    }
}

/// It only parses the body, as `Json` does: a replay may skip it (see `PureBody`).
impl<T> PureBody for ProblemJson<T> {}

/// The members of an RFC 9457 Problem Details body, in the order a reader expects them.
#[derive(Serialize)]
struct Problem {
    r#type: &'static str,
    title: &'static str,
    status: u16,
    detail: String,
}

/// A JSON rejection as Problem Details: axum's status (400, 413, 415, 422) and its message.
fn invalid_body(rejection: &JsonRejection) -> Response {
    let status = rejection.status();
    let problem = Problem {
        r#type: "https://api.example.com/problems#invalid-body",
        title: "The request body is not valid",
        status: status.as_u16(),
        detail: rejection.body_text(),
    };
    let body = serde_json::to_string(&problem).expect("strings and a number");
    let media_type = [(header::CONTENT_TYPE, "application/problem+json")];
    (status, media_type, body).into_response()
}

#[idempotent(scope = "global")]
async fn create_order(ProblemJson(order): ProblemJson<Value>) -> (StatusCode, Json<Value>) {
    (StatusCode::CREATED, Json(order))
}

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt::init();
    let idem = Idempotency::new(MemoryStore::default());
    let app = Router::new()
        .route("/orders", post(create_order))
        .layer(Extension(idem.clone()));

    // A body that is not JSON: the extractor's Problem Details, and nothing stored...
    println!("{}", send(&app, "{\"item\":").await);
    // ...so the same key with the body fixed runs the order.
    println!("{}", send(&app, "{\"item\":\"tea\"}").await);
    idem.shutdown().await;
}

/// Sends `POST /orders` with `body` under one key, and shows the answer as a client sees it.
async fn send(app: &Router, body: &'static str) -> String {
    let request = Request::post("/orders")
        .header("idempotency-key", "order-1")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body))
        .expect("a valid request");
    let response = app.clone().oneshot(request).await.expect("infallible");
    let (parts, body) = response.into_parts();
    let body = body.collect().await.expect("an in-memory body").to_bytes();
    let media_type = parts.headers.get(header::CONTENT_TYPE);
    format!(
        "{} {}\n{}",
        parts.status,
        media_type.map_or("", |value| value.to_str().unwrap_or("")),
        String::from_utf8_lossy(&body)
    )
}
