//! Idempotency keys for axum services.
#![cfg_attr(docsrs, feature(doc_cfg))]

#[doc(hidden)]
pub mod __private;
mod context;
pub mod fingerprint;
mod flow;
pub mod key;
pub mod layer;
mod observe;
pub mod policy;
pub mod problem;
pub mod replay;
mod runtime;
pub mod scope;
pub mod store;

#[cfg(feature = "macros")]
#[cfg_attr(docsrs, doc(cfg(feature = "macros")))]
pub use idem_macros::idempotent;

pub use crate::{
    context::{IdempotencyContext, TransactionGuard},
    key::{IdempotencyKey, KeySyntax},
    layer::IdempotencyLayer,
    policy::{OnConflict, OnStoreError, Policy},
    problem::{Problem, ProblemKind},
    replay::NoStore,
    runtime::{Idempotency, IdempotencyBuilder},
    scope::{Principal, ResolvePrincipal, Scope, StoreKey},
    store::{MemoryStore, Store},
};

#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use crate::store::RedisStore;
