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
    net::SocketAddr,
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

/// Where the example listens unless `--addr` says otherwise: not 3000, where the shop does.
const DEFAULT_ADDR: &str = "127.0.0.1:3010";

const USAGE: &str = "usage: minimal [--addr HOST:PORT] (default 127.0.0.1:3010)";

#[tokio::main]
async fn main() -> ExitCode {
    let addr = match address(std::env::args().skip(1)) {
        Ok(Some(addr)) => addr,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            eprintln!("minimal: {error}; {USAGE}");
            return ExitCode::from(2);
        }
    };
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
        // Where the `type` of idem's Problem Details leads: what each refusal means.
        .route(problem::CATALOGUE_PATH, get(problem::catalogue))
        // `#[idempotent]` handlers find the runtime as a request extension.
        .layer(Extension(idem.clone()));

    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!(
                "minimal: cannot listen on {addr}: {error}; choose another address with --addr HOST:PORT"
            );
            return ExitCode::FAILURE;
        }
    };
    match listener.local_addr() {
        Ok(bound) => println!("listening on http://{bound}"),
        Err(error) => eprintln!("minimal: {error}"),
    }
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await;
    // A handler whose client left keeps running; let it store its result before exiting.
    idem.shutdown().await;
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("minimal: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The address the arguments name (`--addr HOST:PORT` or `--addr=HOST:PORT`), the default
/// without one, or `None` for `--help`.
fn address(mut args: impl Iterator<Item = String>) -> Result<Option<SocketAddr>, String> {
    let mut value = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--help" | "-h" => return Ok(None),
            "--addr" => value = Some(args.next().ok_or("--addr needs a value")?),
            other => match other.strip_prefix("--addr=") {
                Some(addr) => value = Some(addr.to_owned()),
                None => return Err(format!("unknown argument `{other}`")),
            },
        }
    }
    let value = value.unwrap_or_else(|| DEFAULT_ADDR.to_owned());
    value
        .parse()
        .map(Some)
        .map_err(|_| format!("{value:?} is not an address; use HOST:PORT, as in 127.0.0.1:3011"))
}
