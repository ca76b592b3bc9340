//! Message handlers: one effect per message on a broker that delivers at least once
//! (JetStream, RabbitMQ), with the keys, fingerprints, claims, leases and completions of the
//! HTTP flow.
//!
//! ```no_run
//! # #[cfg(feature = "nats")]
//! # async fn run(context: async_nats::jetstream::Context) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! use axum::Json;
//! use idem::{Idempotency, MemoryStore, idempotent};
//! use idem::message::{MessageError, Runner, nats::JetStream};
//!
//! /// One effect per order, however often its event arrives.
//! #[idempotent(key = json("/order_id"), lease = "10s")]
//! async fn on_order_paid(Json(event): Json<serde_json::Value>) -> Result<(), MessageError> {
//!     println!("paid: {}", event["order_id"]);
//!     Ok(())
//! }
//!
//! let consumer = context.get_stream("ORDERS").await?.get_consumer("paid").await?;
//! let idem = Idempotency::new(MemoryStore::default());
//! Runner::new(idem.clone(), on_order_paid.stateless())
//!     .concurrency(16)
//!     .run(JetStream::new(context, consumer), async {
//!         let _ = tokio::signal::ctrl_c().await;
//!     })
//!     .await?;
//! idem.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! - `#[idempotent(key = header("Nats-Msg-Id"))]` or `key = json("/pointer")` makes a
//!   [`MessageHandler`]: its arguments are axum extractors (`Json`, `Tx`, `State`, headers),
//!   the payload's last; [`MessageHandler::with_state`] makes the [`MessageService`] a
//!   [`Runner`] drives.
//! - A message's key belongs to its consumer: the route `/jetstream/<stream>/<consumer>` or
//!   `/amqp/<queue>` scopes it. Its payload is fingerprinted as an HTTP body is: the same key
//!   with another payload is a poison message, never a replay.
//! - The [`Runner`] presents each message to the flow as a `POST` to its route, its key as
//!   `Idempotency-Key`, and settles it from the flow's answer (below); it tells the broker
//!   every third of the lease that a message is in progress; it bounds the messages in flight
//!   and stops gracefully.
//! - A broker is a [`MessageSource`] and its [`Delivery`]: [`nats::JetStream`] (feature
//!   `nats`) and [`amqp::RabbitMq`] (feature `amqp`); another broker is one implementation.
//!
//! # What happens to a message
//!
//! | the flow's answer | the runner |
//! | --- | --- |
//! | the handler ran and its result is stored (in its transaction with `Tx`) | ack (JetStream's double ack) |
//! | a replay: the key was completed before | ack, counted as a duplicate; the handler does not run |
//! | the result waits in this process for the store | no ack until the store has it |
//! | in flight elsewhere | redeliver after the lease (JetStream `-NAK` with delay; RabbitMQ: held, then `nack` with requeue) |
//! | the store is down | redeliver after a backoff |
//! | a retryable [`MessageError`], a 5xx, a panic | key released; redeliver after a backoff; end it on the last of [`Runner::max_attempts`] |
//! | a terminal [`MessageError`], another payload under a known key, a payload the extractors refuse, no key | end it (JetStream `+TERM`; RabbitMQ reject, to the dead-letter exchange) and log why |
//!
//! At start-up the runner refuses broker settings that cannot work (a lease longer than
//! JetStream's `AckWait`, a redelivery horizon longer than the TTL): see [`nats`]. The whole
//! model, the table with its reasons, and what each store guarantees are in
//! [docs/messages.md](https://github.com/idem-rs/idem/blob/main/docs/messages.md).
//!
//! # Logs
//!
//! Besides the flow's events (`idempotency: ...`), the runner logs each settlement with
//! `route` and `attempt`: a DEBUG when a message is acknowledged (handled, or a duplicate), an
//! INFO when it is handed back for a later delivery (with `delay_ms` and why), a WARN when it
//! is ended (with why), when the broker does not confirm a settlement, or when it fails to
//! deliver.

// One direction, from the top down: `runner` (the public driver) uses `process` (one
// delivery through the flow and settled), which uses `handler` (the handler and its state),
// `settlement` (the flow's answer read), `stats` and `source` (the broker's trait); the leaves
// `error`, `key` and `route` use nothing here. What the message door shares with the gRPC
// door (the presented request, the key as a header, a Problem's kind) is `crate::door::presented`.
mod error;
mod handler;
mod key;
mod process;
mod route;
mod runner;
mod settlement;
mod source;
mod stats;

#[cfg(feature = "nats")]
#[cfg_attr(docsrs, doc(cfg(feature = "nats")))]
pub mod nats;

#[cfg(feature = "amqp")]
#[cfg_attr(docsrs, doc(cfg(feature = "amqp")))]
pub mod amqp;

pub use self::{
    error::MessageError,
    handler::{MessageHandler, MessageService},
    key::{MessageKey, MessageKeyError},
    route::path_segment,
    runner::{Runner, RunnerError},
    source::{BrokerError, CheckError, Delivery, MessageSource, Requirements},
    stats::RunnerStats,
};
