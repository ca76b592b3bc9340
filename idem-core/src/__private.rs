//! Not public API: what `#[idempotent]` expands to. It may change in any release.
//!
//! The expansion names only what is listed here; the attribute's machinery is in the crate's
//! `attribute` module, the policy types are the public ones.

pub use core::time::Duration;

pub use idem_protocol::key::KeySyntax;

pub use crate::{
    attribute::{
        Idempotent, Marker,
        arguments::{Arguments, FromLastArg, FromRequestArgs, ViaParts, ViaRequest},
        handler::{HandlerFn, HandlerFuture, boxed, boxed_response},
        last_argument::{Guard, LastArgument},
    },
    fingerprint::FingerprintMode,
    flow::RequestFuture,
    message::{MessageHandler, MessageKey},
    policy::{OnConflict, OnStoreError, Policy},
    scope::Scope,
};
