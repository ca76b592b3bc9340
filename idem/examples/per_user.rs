//! Per-user keys, the setup most services need: the default scope, `user`, with the user
//! named by the service's own authentication extractor. Two users who send the same
//! `Idempotency-Key` never see each other's results; a retry by the same user gets the first
//! answer back.
//!
//! ```sh
//! cargo run -p idem --example per_user     # serves 127.0.0.1:3012; Ctrl-C stops it
//! ```
//!
//! In another terminal, Alice pays twice with one key (the second answer is replayed), and Bob
//! uses the same key for a payment of his own:
//!
//! ```sh
//! curl -i 127.0.0.1:3012/payments -H 'Authorization: Bearer alice' -H 'Idempotency-Key: pay-1' -H 'Content-Type: application/json' -d '{"amount":9800}' -w '\n'
//! curl -i 127.0.0.1:3012/payments -H 'Authorization: Bearer alice' -H 'Idempotency-Key: pay-1' -H 'Content-Type: application/json' -d '{"amount":9800}' -w '\n'
//! curl -i 127.0.0.1:3012/payments -H 'Authorization: Bearer bob' -H 'Idempotency-Key: pay-1' -H 'Content-Type: application/json' -d '{"amount":500}' -w '\n'
//! # No credentials: the service's own 401, before idempotency is asked anything.
//! curl -i 127.0.0.1:3012/payments -H 'Idempotency-Key: pay-1' -H 'Content-Type: application/json' -d '{"amount":9800}' -w '\n'
//! ```
//!
//! The one line that matters is in `User::from_request_parts`: the extractor that
//! authenticates the caller inserts `idem::Principal` into the request's extensions. Under
//! `#[idempotent]` every extractor that reads only the request's parts runs before the key is
//! looked up (on replays too), so the principal is there when idem needs it. A service that
//! forgets that line has every keyed request answered 500 `principal-missing` (its own fault,
//! not the client's), and its log says so, once per route.

use std::{
    process::ExitCode,
    sync::atomic::{AtomicU64, Ordering},
};

use axum::{
    Extension, Json, Router,
    extract::FromRequestParts,
    http::{StatusCode, header, request::Parts},
    routing::post,
};
use idem::prelude::*;
use serde_json::{Value, json};

#[path = "support/mod.rs"]
mod support;

/// How many payments exist: a replayed retry makes none.
static PAYMENTS: AtomicU64 = AtomicU64::new(0);

/// The caller, from `Authorization: Bearer <user>`. A real service checks a token here; what
/// idem needs is the `Principal` it inserts.
struct User(String);

impl<S: Send + Sync> FromRequestParts<S> for User {
    type Rejection = (StatusCode, &'static str);

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let user = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .filter(|user| !user.is_empty())
            .ok_or((
                StatusCode::UNAUTHORIZED,
                "send Authorization: Bearer <user>",
            ))?
            .to_owned();
        // Whose key this is: idem scopes the request's `Idempotency-Key` to this principal.
        parts.extensions.insert(Principal::new(user.clone()));
        Ok(Self(user))
    }
}

/// Creates a payment; runs once per user and `Idempotency-Key` (the default scope, `user`).
#[idempotent(ttl = "24h")]
async fn create_payment(User(user): User, Json(payment): Json<Value>) -> (StatusCode, Json<Value>) {
    let id = PAYMENTS.fetch_add(1, Ordering::Relaxed) + 1;
    let created = json!({ "id": id, "owner": user, "amount": payment["amount"] });
    (StatusCode::CREATED, Json(created))
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt::init();
    let idem = Idempotency::new(MemoryStore::default());
    let app = Router::new()
        .route("/payments", post(create_payment))
        .layer(Extension(idem.clone()));
    support::serve("per_user", "127.0.0.1:3012", app, idem).await
}
