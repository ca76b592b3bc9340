//! Idempotency keys for axum services: a retried POST runs once, and every retry gets the
//! first result.
//!
//! A client that times out cannot know whether its request was processed. With an
//! `Idempotency-Key` header it can simply send the request again: idem runs the handler for the
//! first request with a key, stores its response, and answers every retry with that response
//! (marked `Idempotent-Replayed: true`); a retry while the first is still running gets 409, a
//! key reused with another body 422, and every error is RFC 9457 Problem Details.
//!
//! One attribute makes a handler idempotent; the runtime, installed once, holds the store:
//!
//! ```
//! use axum::{Extension, Json, Router, http::StatusCode, routing::post};
//! use idem_core::{Idempotency, MemoryStore, idempotent};
//!
//! #[idempotent(ttl = "24h", scope = "global")]
//! async fn create_payment(Json(payment): Json<serde_json::Value>) -> (StatusCode, Json<serde_json::Value>) {
//!     (StatusCode::CREATED, Json(payment))
//! }
//!
//! let idem = Idempotency::new(MemoryStore::default());
//! let app: Router = Router::new()
//!     .route("/payments", post(create_payment))
//!     .layer(Extension(idem));
//! # drop(app);
//! ```
//!
//! Or a layer makes every POST and PATCH route of a router idempotent under one [`Policy`]:
//! see [`IdempotencyLayer`].
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
//! - [`store`]: the [`Store`] trait and the rules a store keeps; [`MemoryStore`], and behind
//!   features `RedisStore` and `PostgresStore`.
//! - [`replay`]: what is stored and replayed; [`NoStore`] to opt a response out.
//! - [`extract`]: what a replay checks; [`PureBody`] for a body extractor a replay may skip.
//! - [`problem`]: the Problem Details answers and their `type` URIs.
//! - [`layer`]: the tower layer, [`IdempotencyLayer`].
//! - `grpc` (feature `grpc`): idempotent unary RPCs on tonic, a layer and `#[idempotent]`
//!   on a service's method.
//! - [`message`]: message handlers (`#[idempotent(key = ...)]`) and their [`Runner`](message::Runner),
//!   on JetStream and RabbitMQ.
//! - `openapi` (feature `openapi`): each idempotent operation of a utoipa OpenAPI document
//!   described from the policy its route runs (`docs/openapi.md`).
//! - [`Idempotency`]: the runtime, with graceful shutdown ([`Idempotency::shutdown`]).
//!
//! # Features
//!
//! | feature | default | what it adds |
//! | --- | --- | --- |
//! | `macros` | yes | `#[idempotent]` |
//! | `redis` | | `RedisStore`, for several instances sharing one Redis |
//! | `postgres` | | `PostgresStore`: durable records, completed in the handler's transaction |
//! | `metrics` | | counters through the `metrics` facade |
//! | `conformance` | | the store conformance suite, for authors of a `Store` |
//! | `client` | | `idem_core::client`: the crate `idem-client`, a reqwest call that retries with one key per operation |
//! | `nats` | | `message::nats`: message handlers on NATS JetStream pull consumers (async-nats) |
//! | `amqp` | | `message::amqp`: message handlers on RabbitMQ queues (lapin) |
//! | `grpc` | | `grpc`: idempotent unary RPCs on tonic, with `google.rpc` error details |
//! | `openapi` | | `openapi`: the idempotency of each route in its utoipa OpenAPI document, read from the running router |
//!
//! # The contract
//!
//! What a user and a client can rely on (the key, its scope, the fingerprint, the flow, what
//! is stored and replayed, the status codes, the stores, the seven test cases) is written down
//! in `docs/contract.md`, section by section, each with a link to where `docs/design.md` or
//! this crate explains how it is done.
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
//! `docs/observability.md` lists every event with its level and fields, every metric with its
//! labels and every span field, and tests keep it true. An operator looks a key up and removes
//! it through [`Idempotency::look_up`] and [`Idempotency::remove`].
#![cfg_attr(docsrs, feature(doc_cfg))]

#[doc(hidden)]
pub mod __private;
mod annotated;
mod attribute;
mod context;
pub mod extract;
pub mod fingerprint;
mod flow;
#[cfg(feature = "grpc")]
#[cfg_attr(docsrs, doc(cfg(feature = "grpc")))]
pub mod grpc;
pub mod layer;
pub mod message;
mod observe;
#[cfg(feature = "openapi")]
#[cfg_attr(docsrs, doc(cfg(feature = "openapi")))]
pub mod openapi;
pub mod policy;
mod presented;
pub mod problem;
pub mod replay;
mod runtime;
pub mod scope;
pub mod steps;
pub mod store;

/// The client side, for a service that also calls an idempotent API: the crate `idem-client`
/// (feature `client`). A program that is only a client depends on `idem-client` alone.
#[cfg(feature = "client")]
#[cfg_attr(docsrs, doc(cfg(feature = "client")))]
#[doc(inline)]
pub use idem_client as client;
#[cfg(feature = "macros")]
#[cfg_attr(docsrs, doc(cfg(feature = "macros")))]
pub use idem_macros::idempotent;
/// The `Idempotency-Key` header: the key, its two spellings and how they are parsed (from the
/// crate `idem-protocol`, which the client shares).
#[doc(inline)]
pub use idem_protocol::key;

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

#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub use crate::store::PostgresStore;
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use crate::store::RedisStore;
