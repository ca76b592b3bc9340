//! A service set up wrong in the two ways a first day meets, in a process of its own so that a
//! test reads what it prints, as its operator would (tests/tests/first_day.rs):
//!
//! - `POST /orders`: an `#[idempotent]` handler on a router that does not carry the runtime
//!   (no `.layer(Extension(idempotency))`);
//! - `POST /payments`: a per-user `#[idempotent]` handler whose authentication extractor
//!   accepts the caller and forgets to insert the `Principal`;
//! - `POST /layered`: a route behind `IdempotencyLayer` added with `Router::layer`, which also
//!   wraps the router's fallback.
//!
//! `GET /mark?n=N` logs `mark N`: every line logged before it was asked is in the log before
//! that one, which is how a test knows it has read all of them.
//!
//! Prints `listening on http://ADDR` on stdout; logs on stderr.

use axum::{
    Extension, Json, Router,
    extract::{FromRequestParts, Query},
    http::{StatusCode, request::Parts},
    routing::{get, post},
};
use idem::{Idempotency, IdempotencyLayer, MemoryStore, Policy, Scope, idempotent};
use serde::Deserialize;
use serde_json::Value;

/// Authenticates the caller and forgets to name it to idem: the bug under test.
struct Authenticated;

impl<S: Send + Sync> FromRequestParts<S> for Authenticated {
    type Rejection = StatusCode;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, StatusCode> {
        match parts.headers.get("authorization") {
            Some(_) => Ok(Self),
            None => Err(StatusCode::UNAUTHORIZED),
        }
    }
}

#[idempotent(scope = "global")]
async fn create_order(Json(order): Json<Value>) -> (StatusCode, Json<Value>) {
    (StatusCode::CREATED, Json(order))
}

#[idempotent]
async fn create_payment(_: Authenticated, Json(payment): Json<Value>) -> (StatusCode, Json<Value>) {
    (StatusCode::CREATED, Json(payment))
}

async fn mark(Query(mark): Query<Mark>) -> StatusCode {
    tracing::info!("mark {}", mark.n);
    StatusCode::NO_CONTENT
}

#[derive(Deserialize)]
struct Mark {
    n: u32,
}

async fn create_layered(Json(body): Json<Value>) -> (StatusCode, Json<Value>) {
    (StatusCode::CREATED, Json(body))
}

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let idem = Idempotency::new(MemoryStore::default());
    let without_runtime = Router::new().route("/orders", post(create_order));
    let with_runtime = Router::new()
        .route("/payments", post(create_payment))
        .layer(Extension(idem.clone()));
    let layered =
        Router::new()
            .route("/layered", post(create_layered))
            .layer(IdempotencyLayer::new(
                idem,
                Policy::new().scope(Scope::Global),
            ));
    let app = without_runtime
        .merge(with_runtime)
        .merge(layered)
        .route("/mark", get(mark));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    println!("listening on http://{}", listener.local_addr().unwrap());
    axum::serve(listener, app).await.unwrap();
}
