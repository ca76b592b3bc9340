//! Idempotency keys for axum services.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod fingerprint;
pub mod key;
