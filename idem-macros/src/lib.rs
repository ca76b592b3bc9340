//! The `#[idempotent]` attribute for axum handlers.
//!
//! Use it through `idem-core`, which re-exports it as `idem_core::idempotent`.
