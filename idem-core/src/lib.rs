//! The runtime of idem, idempotency keys for axum services: the flow every keyed request goes
//! through, the [`Store`] trait and the rules a store keeps, the memory store, and the doors
//! (the tower layer, the runtime behind `#[idempotent]`, message handlers, gRPC).
//!
//! **A service depends on [`idem`](https://docs.rs/idem), the crate that re-exports this one
//! with the attribute, the stores and a prelude.** This crate is for the authors of what
//! extends idem: a store of their own implements [`Store`] (and proves it with the crate
//! `idem-conformance`), exactly as the Redis and PostgreSQL stores (`idem-redis`,
//! `idem-postgres`) do, with nothing but this crate's public API.
//!
//! ```
//! use axum::{Json, Router, http::StatusCode, routing::post};
//! use idem::{Idempotency, IdempotencyLayer, MemoryStore, Policy, Scope};
//!
//! async fn create_payment(Json(payment): Json<serde_json::Value>) -> (StatusCode, Json<serde_json::Value>) {
//!     (StatusCode::CREATED, Json(payment))
//! }
//!
//! let idem = Idempotency::new(MemoryStore::default());
//! let app: Router = Router::new()
//!     .route("/payments", post(create_payment))
//!     .route_layer(IdempotencyLayer::new(idem, Policy::new().scope(Scope::Global)));
//! # drop(app);
//! ```
//!
//! # What a replay checks
//!
//! A stored response is answered only to a request that passed every check that guarded the
//! first execution. Under `#[idempotent]` every extractor that reads the request's parts
//! (authentication first of all) runs before every replay, and so does the body extractor
//! unless its type is a [`PureBody`], an extractor that only parses the body (`Json`, `Form`,
//! `Bytes`...), which a replay skips. So a signed webhook whose body extractor checks the
//! signature refuses a redelivery without it, with no annotation. A check written inside the
//! handler's body cannot be run again, since a replay does not run the handler: put it in an
//! extractor. [`extract`] has the details and the webhook as an example.
//!
//! # Where things are
//!
//! - [`key`]: the `Idempotency-Key` header, in its IETF (sf-string) and Stripe (bare) forms.
//! - [`scope`]: whose key it is ([`Principal`], [`ResolvePrincipal`]) and the [`StoreKey`].
//! - [`fingerprint`]: SHA-256 over the request, with RFC 8785 canonical JSON.
//! - [`policy`]: TTL, lease, scope, conflicts, store failures, 5xx, body cap.
//! - [`store`]: the [`Store`] trait and the rules a store keeps; [`MemoryStore`].
//! - [`replay`]: what is stored and replayed; [`NoStore`] to opt a response out.
//! - [`extract`]: what a replay checks; [`PureBody`] for a body extractor a replay may skip;
//!   [`Tx`](extract::Tx), the request's database transaction.
//! - [`steps`]: operations of several steps, each step run once per operation.
//! - [`problem`]: the Problem Details answers and their `type` URIs.
//! - [`layer`]: the tower layer, [`IdempotencyLayer`].
//! - `grpc` (feature `grpc`): idempotent unary RPCs on tonic, a layer and `#[idempotent]`
//!   on a service's method.
//! - [`message`]: message handlers (`#[idempotent(key = ...)]`) and their [`Runner`](message::Runner),
//!   on JetStream and RabbitMQ.
//! - `openapi` (feature `openapi`): each idempotent operation of a utoipa OpenAPI document
//!   described from the policy its route runs ([docs/openapi.md](https://github.com/idem-rs/idem/blob/main/docs/openapi.md)`).
//! - [`Idempotency`]: the runtime, with graceful shutdown ([`Idempotency::shutdown`]).
//!
//! # Features
//!
//! | feature | what it adds |
//! | --- | --- |
//! | `metrics` | counters through the `metrics` facade |
//! | `nats` | `message::nats`: message handlers on NATS JetStream pull consumers (async-nats) |
//! | `amqp` | `message::amqp`: message handlers on RabbitMQ queues (lapin) |
//! | `grpc` | `grpc`: idempotent unary RPCs on tonic, with `google.rpc` error details |
//! | `openapi` | `openapi`: the idempotency of each route in its utoipa OpenAPI document, read from the running router |
//!
//! # The contract
//!
//! What a user and a client can rely on (the key, its scope, the fingerprint, the flow, what
//! is stored and replayed, the status codes, the stores, the seven test cases) is written down
//! in [docs/contract.md](https://github.com/idem-rs/idem/blob/main/docs/contract.md), section
//! by section, each with a link to where
//! [docs/design.md](https://github.com/idem-rs/idem/blob/main/docs/design.md) or this crate
//! explains how it is done.
//!
//! # Logs, metrics and spans
//!
//! The runtime logs through `tracing`: every decision about a request is one event with the
//! message `idempotency: <what happened>` and the fields `outcome`, `route` and `key` (the
//! first 16 hex digits of the [`StoreKey`], never the client's `Idempotency-Key`). Each keyed
//! request runs in a span, `idempotency`, with the fields `route`, `key`, `outcome` and
//! `replayed`. With the feature `metrics`, through the `metrics` facade (install any
//! recorder): `idem_requests_total{outcome, route}`, `idem_store_call_seconds{op}`, the
//! memory store's early evictions and gauges, and a few counters of the stores.
//! [docs/observability.md](https://github.com/idem-rs/idem/blob/main/docs/observability.md)
//! lists every event with its level and fields, every metric with its labels and every span
//! field, and tests keep it true. An operator looks a key up and removes it through
//! [`Idempotency::look_up`] and [`Idempotency::remove`].
#![cfg_attr(docsrs, feature(doc_cfg))]

#[doc(hidden)]
pub mod __private;
mod context;
mod door;
pub mod extract;
pub mod fingerprint;
mod flow;
mod misconfigured;
mod observe;
#[cfg(feature = "openapi")]
#[cfg_attr(docsrs, doc(cfg(feature = "openapi")))]
pub mod openapi;
pub mod policy;
pub mod problem;
mod random;
pub mod replay;
mod runtime;
pub mod scope;
pub mod steps;
pub mod store;
mod tasks;

/// The `Idempotency-Key` header: the key, its two spellings and how they are parsed (from the
/// crate `idem-protocol`, which the client shares).
#[doc(inline)]
pub use idem_protocol::key;

#[cfg(feature = "grpc")]
#[cfg_attr(docsrs, doc(cfg(feature = "grpc")))]
pub use crate::door::grpc;
pub use crate::door::{layer, message};

pub use crate::{
    context::{IdempotencyContext, TransactionGuard},
    extract::PureBody,
    key::{IdempotencyKey, KeySyntax},
    layer::IdempotencyLayer,
    policy::{OnConflict, OnStoreError, Policy},
    problem::{Problem, ProblemKind},
    replay::NoStore,
    runtime::{AddressError, Idempotency, IdempotencyBuilder, RecordAddress, ResumeError, Resumer},
    scope::{Principal, ResolvePrincipal, Scope, StoreKey},
    store::{MemoryStore, Store},
};
