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
//! use idem::prelude::*;
//! use serde_json::Value;
//!
//! // Per-user keys (the default scope) need the service's authentication to name the user
//! // (a `Principal`); this route's keys are shared by every caller instead.
//! #[idempotent(ttl = "24h", scope = "global")]
//! async fn create_payment(Json(payment): Json<Value>) -> (StatusCode, Json<Value>) {
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
//! # Per-user keys
//!
//! The example above shares its keys among all callers (`scope = "global"`), which suits a
//! machine-to-machine API. The default scope, `user`, keeps each user's keys apart: the
//! service's authentication names the user by inserting a [`Principal`] into the request,
//! for instance in its authentication extractor:
//!
//! ```
//! use axum::{extract::FromRequestParts, http::{StatusCode, request::Parts}};
//! use idem::prelude::*;
//!
//! struct User(String);
//!
//! impl<S: Send + Sync> FromRequestParts<S> for User {
//!     type Rejection = StatusCode;
//!
//!     async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, StatusCode> {
//!         let user = parts.headers.get("authorization")
//!             .and_then(|value| value.to_str().ok()?.strip_prefix("Bearer "))
//!             .ok_or(StatusCode::UNAUTHORIZED)?
//!             .to_owned();
//!         // Whose key this is.
//!         parts.extensions.insert(Principal::new(user.clone()));
//!         Ok(Self(user))
//!     }
//! }
//!
//! #[idempotent(ttl = "24h")] // scope = "user", the default
//! async fn create_payment(User(user): User, body: String) -> String {
//!     format!("{user} paid {body}")
//! }
//! ```
//!
//! The whole service is the example
//! [`per_user`](https://github.com/idem-rs/idem/blob/main/idem/examples/per_user.rs)
//! (`cargo run -p idem --example per_user`). A per-user route that reaches idem without a
//! principal answers 500 `principal-missing`, the service's fault, and logs the fix once.
//!
//! # The crates
//!
//! This crate is the one a service adds; it re-exports the others, each by feature:
//!
//! | feature | default | what it adds | from |
//! | --- | --- | --- | --- |
//! | `macros` | yes | `#[idempotent]` on a handler | `idem-macros` |
//! | `redis` | | [`redis`]: `RedisStore`, records shared by several instances (one server, Cluster, Sentinel) | `idem-redis` |
//! | `postgres` | | [`postgres`]: `PostgresStore`, records committed with the handler's own writes | `idem-postgres` |
//! | `mysql` | | [`mysql`]: `MySqlStore`, the same on MySQL 8 or MariaDB 10.6 and later | `idem-mysql` |
//! | `sqlite` | | [`sqlite`]: `SqliteStore`, the same in a SQLite file, for a service of one machine and no database server | `idem-sqlite` |
//! | `metrics` | | counters, gauges and a histogram through the `metrics` facade | |
//! | `client` | | [`client`]: retries with one key per operation, for a service that also calls idempotent APIs | `idem-client` |
//! | `nats` | | `message::nats`: message handlers on NATS JetStream | |
//! | `amqp` | | `message::amqp`: message handlers on RabbitMQ | |
//! | `grpc` | | `grpc`: idempotent unary RPCs on tonic | |
//! | `openapi` | | `openapi`: each idempotent operation of a utoipa OpenAPI document described from the policy its route runs | |
//! | `sha2` | | SHA-256 by the `sha2` crate, on the CPU's SHA extensions: the same digests, several times faster on large request bodies, seven more crates in the build | `sha2` |
//!
//! Everything else (the runtime, the flow, the [`Store`] trait, the memory store, the layer,
//! message handlers, steps) is the crate `idem-core`, re-exported here whole. The authors of a
//! store of their own depend on `idem-core` and prove their store with `idem-conformance`.
//!
//! # Guides
//!
//! The guides live beside the code, in the repository's `docs/`:
//! [the contract](https://github.com/idem-rs/idem/blob/main/docs/contract.md) (what every
//! request can rely on), [the attribute](https://github.com/idem-rs/idem/blob/main/docs/macro.md),
//! [Redis](https://github.com/idem-rs/idem/blob/main/docs/redis.md),
//! [PostgreSQL](https://github.com/idem-rs/idem/blob/main/docs/postgres.md),
//! [MySQL](https://github.com/idem-rs/idem/blob/main/docs/mysql.md),
//! [SQLite](https://github.com/idem-rs/idem/blob/main/docs/sqlite.md),
//! [operations of several steps](https://github.com/idem-rs/idem/blob/main/docs/steps.md),
//! [message handlers](https://github.com/idem-rs/idem/blob/main/docs/messages.md),
//! [gRPC](https://github.com/idem-rs/idem/blob/main/docs/grpc.md),
//! [OpenAPI](https://github.com/idem-rs/idem/blob/main/docs/openapi.md),
//! [Problem Details](https://github.com/idem-rs/idem/blob/main/docs/problems.md),
//! [logs, metrics and spans](https://github.com/idem-rs/idem/blob/main/docs/observability.md),
//! [the client](https://github.com/idem-rs/idem/blob/main/docs/client.md) and
//! [the design and its decisions](https://github.com/idem-rs/idem/blob/main/docs/design.md).
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod prelude;

#[doc(inline)]
pub use idem_core::*;

#[cfg(feature = "macros")]
#[cfg_attr(docsrs, doc(cfg(feature = "macros")))]
pub use idem_macros::idempotent;

/// The Redis store (feature `redis`): the crate `idem-redis`.
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
#[doc(inline)]
pub use idem_redis as redis;

/// The PostgreSQL store (feature `postgres`): the crate `idem-postgres`.
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
#[doc(inline)]
pub use idem_postgres as postgres;

/// The MySQL and MariaDB store (feature `mysql`): the crate `idem-mysql`.
#[cfg(feature = "mysql")]
#[cfg_attr(docsrs, doc(cfg(feature = "mysql")))]
#[doc(inline)]
pub use idem_mysql as mysql;

/// The SQLite store (feature `sqlite`): the crate `idem-sqlite`.
#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
#[doc(inline)]
pub use idem_sqlite as sqlite;

/// The client side, for a service that also calls an idempotent API (feature `client`): the
/// crate `idem-client`. A program that is only a client depends on `idem-client` alone, which
/// builds without the server.
#[cfg(feature = "client")]
#[cfg_attr(docsrs, doc(cfg(feature = "client")))]
#[doc(inline)]
pub use idem_client as client;
