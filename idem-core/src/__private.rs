//! Not public API: what `#[idempotent]` expands to. It may change in any release.
//!
//! The expansion names only what is listed here; the annotated handler's machinery is in the
//! crate's `annotated` module (its HTTP door in `attribute`, its message door in `message`),
//! the policy types are the public ones.

pub use core::time::Duration;

pub use http::HeaderName;

pub use idem_protocol::key::KeySyntax;

pub use crate::{
    door::annotated::{
        Idempotent,
        arguments::{Arguments, FromLastArg, FromRequestArgs, ViaParts, ViaRequest},
        handler::{HandlerFn, HandlerFuture, boxed, boxed_response},
        last_argument::{Guard, LastArgument},
    },
    door::attribute::Marker,
    fingerprint::FingerprintMode,
    flow::RequestFuture,
    message::{MessageHandler, MessageKey},
    policy::{OnConflict, OnStoreError, Policy},
    scope::Scope,
};

/// What the expansion of `#[idempotent]` on a gRPC method names.
#[cfg(feature = "grpc")]
pub mod grpc {
    pub use crate::door::grpc::{Method, unary};
}
