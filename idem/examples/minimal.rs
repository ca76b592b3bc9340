//! The smallest complete idempotent service: two POST routes, one made idempotent by
//! `#[idempotent]` and one by the layer, with the records in memory.
//!
//! ```sh
//! cargo run -p idem --example minimal     # serves 127.0.0.1:3010; Ctrl-C stops it
//! cargo run -p idem --example minimal -- --addr 127.0.0.1:3011    # elsewhere
//! ```
//!
//! In another terminal, the same order twice with one key: the second answer is the first
//! one replayed (the same `id`, and `idempotent-replayed: true`), and only one order exists.
//!
//! ```sh
//! curl -i 127.0.0.1:3010/orders -H 'Idempotency-Key: order-1' -H 'Content-Type: application/json' -d '{"item":"tea"}' -w '\n'
//! curl -i 127.0.0.1:3010/orders -H 'Idempotency-Key: order-1' -H 'Content-Type: application/json' -d '{"item":"tea"}' -w '\n'
//! # The same key with another body: 422. Without a key: 400.
//! curl -i 127.0.0.1:3010/orders -H 'Idempotency-Key: order-1' -H 'Content-Type: application/json' -d '{"item":"coffee"}' -w '\n'
//! curl -i 127.0.0.1:3010/orders -H 'Content-Type: application/json' -d '{"item":"tea"}' -w '\n'
//! # The route behind the layer answers the same way.
//! curl -i 127.0.0.1:3010/refunds -H 'Idempotency-Key: refund-1' -H 'Content-Type: application/json' -d '{"order":1}' -w '\n'
//! ```
//!
//! The `type` of each refusal (`/problems/idempotency#key-reused`) leads to the page that says
//! what it means, which this service serves: `curl 127.0.0.1:3010/problems/idempotency`.
//!
//! Both routes use `scope = "global"`: every caller shares one key space, which suits a
//! demonstration without authentication. A real service keeps the default scope, `user`, and
//! has its authentication insert an `idem::Principal` into each request.

use std::{
    process::ExitCode,
    sync::atomic::{AtomicU64, Ordering},
};

use axum::{
    Extension, Json, Router,
    http::StatusCode,
    routing::{get, post},
};
use idem::{Idempotency, IdempotencyLayer, MemoryStore, Policy, Scope, idempotent, problem};
use serde_json::{Value, json};

#[path = "support/mod.rs"]
mod support;

/// How many times a handler has run: a retry that is replayed does not count.
static RUNS: AtomicU64 = AtomicU64::new(0);

/// Creates an order; runs once per `Idempotency-Key`.
#[idempotent(scope = "global")]
async fn create_order(Json(order): Json<Value>) -> (StatusCode, Json<Value>) {
    let id = RUNS.fetch_add(1, Ordering::Relaxed) + 1;
    (
        StatusCode::CREATED,
        Json(json!({ "id": id, "order": order })),
    )
}

/// Creates a refund; the layer around its route makes it idempotent.
async fn create_refund(Json(refund): Json<Value>) -> (StatusCode, Json<Value>) {
    let id = RUNS.fetch_add(1, Ordering::Relaxed) + 1;
    (
        StatusCode::CREATED,
        Json(json!({ "id": id, "refund": refund })),
    )
}

#[tokio::main]
async fn main() -> ExitCode {
    // idem says what it does, and what is set up wrong, through `tracing`: print it.
    tracing_subscriber::fmt::init();
    // One runtime, one store, shared by both forms.
    let idem = Idempotency::new(MemoryStore::default());

    // The layer on the route's method router, with `route_layer`: it wraps the POST handler
    // alone, so a request to no route, or with a method the route does not serve, gets the
    // router's own 404 or 405, key or no key.
    let layer = IdempotencyLayer::new(idem.clone(), Policy::new().scope(Scope::Global));
    let app = Router::new()
        .route("/orders", post(create_order))
        .route("/refunds", post(create_refund).route_layer(layer))
        // Where the `type` of idem's Problem Details leads: what each refusal means.
        .route(problem::CATALOGUE_PATH, get(problem::catalogue))
        // `#[idempotent]` handlers find the runtime as a request extension.
        .layer(Extension(idem.clone()));
    // Not 3000, where the shop listens.
    support::serve("minimal", "127.0.0.1:3010", app, idem).await
}
