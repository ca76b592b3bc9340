//! What a handler and a `main` need, in one import: `use idem::prelude::*;`.
//!
//! ```
//! use axum::{Extension, Json, Router, http::StatusCode, routing::post};
//! use idem::prelude::*;
//!
//! #[idempotent(scope = "global", resume_after = "5s")]
//! async fn transfer(mut steps: Steps, Json(order): Json<serde_json::Value>)
//!     -> Result<(StatusCode, Json<serde_json::Value>), StepError>
//! {
//!     let moved: String = steps.call("bank", |key| async move { Ok(key.as_str().to_owned()) }).await?;
//!     Ok((StatusCode::CREATED, Json(serde_json::json!({ "bank": moved, "order": order }))))
//! }
//!
//! let idem = Idempotency::new(MemoryStore::default());
//! let app: Router = Router::new()
//!     .route("/transfers", post(transfer))
//!     .layer(Extension(idem));
//! # drop(app);
//! ```
//!
//! The stores beyond memory are named by their module (`idem::redis::RedisStore`,
//! `idem::postgres::PostgresStore`), so that a build with several of them never imports two
//! things of one name.

#[cfg(feature = "macros")]
pub use idem_macros::idempotent;

pub use idem_core::{
    Idempotency, IdempotencyLayer, MemoryStore, NoStore, OnConflict, OnStoreError, Policy,
    Principal, PureBody, ResolvePrincipal, Scope,
    extract::{Tx, TxError},
    steps::{StepError, Steps},
};
