//! The load benchmark's server (see `bench/run.sh`): the same payments-like handler served
//! plain at `/baseline` and with `#[idempotent]` at `/idempotent`, on the memory store.
//!
//! `idem-bench [ADDR]` listens on ADDR (default 127.0.0.1:3100); `BENCH_WORKERS` sets the
//! number of tokio worker threads (default 1, so the load generator has the other core).

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
};

use axum::{
    Extension, Json, Router,
    extract::State,
    http::{StatusCode, header},
    response::{IntoResponse, Response},
    routing::post,
};
use idem_core::{Idempotency, MemoryStore, idempotent};
use serde::{Deserialize, Serialize};

#[derive(Deserialize)]
struct NewPayment {
    amount: u64,
    currency: String,
}

#[derive(Clone, Serialize)]
struct Payment {
    id: String,
    amount: u64,
    currency: String,
    status: &'static str,
}

/// The payments the server has taken, as a real service would keep them somewhere. Only the
/// latest few are kept: a map that grew with every request would make the baseline pay for
/// rehashing ever larger tables, which no real handler does.
#[derive(Clone, Default)]
struct Ledger {
    next: Arc<AtomicU64>,
    recent: Arc<Mutex<HashMap<u64, Payment>>>,
}

const RECENT: u64 = 1024;

/// Validates, records and answers 201 with the payment and its Location.
fn take_payment(ledger: &Ledger, new: NewPayment) -> Response {
    if new.amount == 0 || new.currency.len() != 3 {
        return StatusCode::BAD_REQUEST.into_response();
    }
    let number = ledger.next.fetch_add(1, Ordering::Relaxed);
    let id = format!("pay_{number:016x}");
    let payment = Payment {
        id: id.clone(),
        amount: new.amount,
        currency: new.currency,
        status: "succeeded",
    };
    ledger
        .recent
        .lock()
        .expect("ledger lock")
        .insert(number % RECENT, payment.clone());
    let location = [(header::LOCATION, format!("/payments/{id}"))];
    (StatusCode::CREATED, location, Json(payment)).into_response()
}

async fn baseline(State(ledger): State<Ledger>, Json(new): Json<NewPayment>) -> Response {
    take_payment(&ledger, new)
}

#[idempotent(scope = "global")]
async fn idempotent_payment(State(ledger): State<Ledger>, Json(new): Json<NewPayment>) -> Response {
    take_payment(&ledger, new)
}

fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:3100".to_owned());
    let workers = std::env::var("BENCH_WORKERS")
        .ok()
        .and_then(|w| w.parse().ok())
        .unwrap_or(1);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        // Room for every fresh key of a run, so eviction does not enter the measurement.
        let store = MemoryStore::builder()
            .max_entries(20_000_000)
            .max_bytes(4 << 30)
            .build();
        let app = Router::new()
            .route("/baseline", post(baseline))
            .route("/idempotent", post(idempotent_payment))
            .layer(Extension(Idempotency::new(store)))
            .with_state(Ledger::default());
        let listener = tokio::net::TcpListener::bind(&addr).await?;
        println!("idem-bench listening on {addr}");
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await
    })
}
