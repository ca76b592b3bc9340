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
//!
//! # The contract
//!
//! What a user and a client can rely on (the key, its scope, the fingerprint, the flow, what
//! is stored and replayed, the status codes, the stores, the seven test cases) is written down
//! in `docs/contract.md`, section by section, each with a link to where `docs/design.md` or
//! this crate explains how it is done.
//!
//! # Logs
//!
//! The runtime logs through `tracing`. Every decision about a request is one event with the
//! message `idempotency: <what happened>` and the fields `outcome`, `route` (the matched route
//! template, or the request's path where no route matched) and, once the request has a store
//! key, `key`: the first 16 hex digits of the [`StoreKey`], by which an operator finds the
//! record in Redis or PostgreSQL. The client's `Idempotency-Key` value is never logged (in a
//! global scope it is the client's secret); a refusal logs the slug of its problem type, not
//! the header. A store error is logged with its whole `source()` chain. The `outcome`, and
//! the level it is logged at:
//!
//! | outcome | level | when |
//! | --- | --- | --- |
//! | `claimed` | DEBUG | the key was claimed and the handler runs |
//! | `completed` | DEBUG | the handler's response was stored |
//! | `replayed` | DEBUG | a stored response was answered |
//! | `unrecorded` | DEBUG | the request ran without a record (no key and none required, or the store failed under `on_store_error = "run"`) |
//! | `conflict` | INFO | the first request with the key is still in flight: 409 |
//! | `mismatch` | INFO | the key was used for another request: 422 |
//! | `released` | INFO | the key was released (5xx, `NoStore`, a rejection, a panic), so a retry runs again |
//! | `refused` | INFO | refused before the store was asked: no key, a malformed key, no principal, a body over the limit or unreadable |
//! | `store_error` | WARN | a store call failed or timed out |
//! | `fenced` | WARN | a result came after another request had taken its key over, and was not stored |
//! | `panicked` | ERROR | the handler panicked: 500 |
//! | `lost` | ERROR | a handler ran and its result could not be stored: a retry may run it again |
//!
//! Besides these: a WARN, once per runtime, the first time a request has no principal for its
//! key's scope (with `route` and `scope`, and how to give requests one); an ERROR from an
//! `#[idempotent]` handler called without the runtime installed (`route`), from a request
//! dropped outside a tokio runtime, and from a background store write (a completion or a
//! release being retried) that has no tokio runtime left to run on (`route`); with `postgres`, an ERROR or a WARN when the `Tx`
//! extractor is misconfigured or cannot begin its transaction, a WARN when a sweep of expired
//! records fails, and a DEBUG with the number a sweep deleted (`deleted`); with `client`, an
//! INFO for each retry (`method`, `path`, `attempts`, `met`, `wait`), a WARN when it gives up,
//! and a DEBUG for the final answer. A message [`Runner`](message::Runner) logs each message
//! it settles ([`message`], *Logs*). With `grpc`, an ERROR from an `#[idempotent]` gRPC
//! method called without `GrpcIdempotencyLayer`, and from a stored gRPC response that does not
//! decode as its method's response.
//!
//! # Metrics
//!
//! With the feature `metrics`, through the `metrics` facade (install any recorder):
//!
//! | counter | labels | counts |
//! | --- | --- | --- |
//! | `idem_requests_total` | `outcome` (the values above), `route` (as logged) | every decision about a request, as logged |
//! | `idem_postgres_swept_records_total` | none | expired records a `PostgresStore` sweep deleted (with `postgres`) |
//! | `idem_redis_durability_shortfalls_total` | `call` (`claim`, `complete`) | claims and completions a `RedisStore` wrote that did not reach their durability target in time (with `redis`) |
//!
//! One request counts several outcomes on its way: a first request `claimed` then
//! `completed`, a retry `replayed`. The `route` label is the route template, so its values
//! are as many as the routes; a layer that wraps a whole router from outside, where no route
//! has matched yet, labels with the request's path instead, one value per path.
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
pub mod policy;
mod presented;
pub mod problem;
pub mod replay;
mod runtime;
pub mod scope;
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
    runtime::{Idempotency, IdempotencyBuilder},
    scope::{Principal, ResolvePrincipal, Scope, StoreKey},
    store::{MemoryStore, Store},
};

#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub use crate::store::PostgresStore;
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use crate::store::RedisStore;
