//! The doors: the ways a request enters the flow, each in a room of its own. Each supplies the
//! flow a [`Door`](crate::flow::Door) (which checks run before the claim, and how the handler
//! is called) and nothing else.
//!
//! - [`layer`]: `IdempotencyLayer`, a tower layer over a router's routes;
//! - [`attribute`]: `#[idempotent]` on an axum handler (an annotated handler is an axum
//!   `Handler`);
//! - [`message`]: `#[idempotent(key = ...)]` message handlers and their `Runner` over a
//!   broker's consumer;
//! - `grpc` (feature `grpc`): `GrpcIdempotencyLayer` over a tonic server, and
//!   `#[idempotent]` on a method of a service's trait impl.
//!
//! What two doors share is a leaf below them: [`annotated`] (what `#[idempotent]` makes of a
//! function, for the attribute and message handlers) and [`presented`] (a message or a gRPC
//! call presented to the flow as a request).

pub(crate) mod annotated;
pub(crate) mod attribute;
#[cfg(feature = "grpc")]
#[cfg_attr(docsrs, doc(cfg(feature = "grpc")))]
pub mod grpc;
pub mod layer;
pub mod message;
pub(crate) mod presented;
