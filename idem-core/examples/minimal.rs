//! The smallest complete idempotent service: two POST routes, one made idempotent by
//! `#[idempotent]` and one by the layer, with the records in memory.
//!
//! ```sh
//! cargo run -p idem-core --example minimal     # serves 127.0.0.1:3000; Ctrl-C stops it
//! ```
//!
//! In another terminal, the same order twice with one key: the second answer is the first
//! one replayed (the same `id`, and `idempotent-replayed: true`), and only one order exists.
//!
//! ```sh
//! curl -i localhost:3000/orders -H 'Idempotency-Key: order-1' -H 'Content-Type: application/json' -d '{"item":"tea"}'
//! curl -i localhost:3000/orders -H 'Idempotency-Key: order-1' -H 'Content-Type: application/json' -d '{"item":"tea"}'
//! # The same key with another body: 422. Without a key: 400.
//! curl -i localhost:3000/orders -H 'Idempotency-Key: order-1' -H 'Content-Type: application/json' -d '{"item":"coffee"}'
//! curl -i localhost:3000/orders -H 'Content-Type: application/json' -d '{"item":"tea"}'
//! # The route behind the layer answers the same way.
//! curl -i localhost:3000/refunds -H 'Idempotency-Key: refund-1' -H 'Content-Type: application/json' -d '{"order":1}'
//! ```
//!
//! Both routes use `scope = "global"`: every caller shares one key space, which suits a
//! demonstration without authentication. A real service keeps the default scope, `user`, and
//! has its authentication insert an `idem_core::Principal` into each request.

use std::sync::atomic::{AtomicU64, Ordering};

use axum::{Extension, Json, Router, http::StatusCode, routing::post};
use idem_core::{Idempotency, IdempotencyLayer, MemoryStore, Policy, Scope, idempotent};
use serde_json::{Value, json};

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

/// Creates a refund; the layer around its router makes it idempotent.
async fn create_refund(Json(refund): Json<Value>) -> (StatusCode, Json<Value>) {
    let id = RUNS.fetch_add(1, Ordering::Relaxed) + 1;
    (
        StatusCode::CREATED,
        Json(json!({ "id": id, "refund": refund })),
    )
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    // One runtime, one store, shared by both forms.
    let idem = Idempotency::new(MemoryStore::default());

    let refunds =
        Router::new()
            .route("/refunds", post(create_refund))
            .layer(IdempotencyLayer::new(
                idem.clone(),
                Policy::new().scope(Scope::Global),
            ));
    let app = Router::new()
        .route("/orders", post(create_order))
        .merge(refunds)
        // `#[idempotent]` handlers find the runtime as a request extension.
        .layer(Extension(idem.clone()));

    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    println!("listening on http://{}", listener.local_addr()?);
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    // A handler whose client left keeps running; let it store its result before exiting.
    idem.shutdown().await;
    Ok(())
}
