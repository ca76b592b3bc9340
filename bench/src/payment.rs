//! The payments-like handler every benchmark server runs, and the request body the benchmarks
//! send it.
//!
//! The peers' servers (`bench/peers`) compile this same file, so every server measured runs
//! the same handler: it must depend on nothing but axum, serde, serde_json and std.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
};

use axum::{
    Json,
    extract::State,
    http::{StatusCode, header},
    response::{IntoResponse, Response},
};
use serde::{Deserialize, Serialize};

/// The route every benchmark server answers.
pub const PATH: &str = "/payments";

/// The request body the benchmarks send: a small payment, 70 bytes of JSON.
pub const BODY: &str = r#"{"amount":9800,"currency":"JPY","description":"order 4711, two items"}"#;

/// The credentials every benchmark request carries: the caller whose keys the `user`
/// configuration scopes them to (the other servers ignore it).
pub const AUTHORIZATION: &str = "Bearer client-0001";

/// A payment as the client asks for it.
#[derive(Debug, Deserialize)]
pub struct NewPayment {
    amount: u64,
    currency: String,
}

#[derive(Clone, Debug, Serialize)]
struct Payment {
    id: String,
    amount: u64,
    currency: String,
    status: &'static str,
}

/// The payments the server has taken, as a real service would keep them somewhere. Only the
/// latest few are kept: a map that grew with every request would make the bare handler pay for
/// rehashing ever larger tables, which no real handler does.
#[derive(Clone, Debug, Default)]
pub struct Ledger {
    next: Arc<AtomicU64>,
    recent: Arc<Mutex<HashMap<u64, Payment>>>,
}

const RECENT: u64 = 1024;

/// Validates, records and answers 201 with the payment and its `Location`.
pub fn take_payment(ledger: &Ledger, new: NewPayment) -> Response {
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

/// The handler without idempotency: the bare request every other figure is compared with.
pub async fn create_payment(State(ledger): State<Ledger>, Json(new): Json<NewPayment>) -> Response {
    take_payment(&ledger, new)
}
