//! What the runtime tells operators: one `tracing` event per decision, and counters through
//! the `metrics` facade (feature `metrics`).
//!
//! Events carry the outcome and the route template, never the client's key value (only at
//! `trace` level, for debugging). With the `metrics` feature every outcome increments
//! `idem_requests_total{outcome, route}`.

use tracing::Level;

/// What became of one request, as counted and logged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The key was claimed and the handler runs.
    Claimed,
    /// The handler's response was stored.
    Completed,
    /// A stored response was replayed.
    Replayed,
    /// The first request is still in flight: 409.
    Conflict,
    /// The key was used with another fingerprint: 422.
    Mismatch,
    /// The key was released (5xx, opt-out, panic, failed body): a retry runs again.
    Released,
    /// The handler panicked.
    Panicked,
    /// The store failed or timed out.
    StoreError,
    /// The request ran without a record (no key, or the store failed and the policy says run).
    Unrecorded,
    /// The request was refused before the store was asked (bad key, no principal, body).
    Refused,
    /// The handler finished after another request had taken its key over.
    Fenced,
}

impl Outcome {
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Self::Claimed => "claimed",
            Self::Completed => "completed",
            Self::Replayed => "replayed",
            Self::Conflict => "conflict",
            Self::Mismatch => "mismatch",
            Self::Released => "released",
            Self::Panicked => "panicked",
            Self::StoreError => "store_error",
            Self::Unrecorded => "unrecorded",
            Self::Refused => "refused",
            Self::Fenced => "fenced",
        }
    }

    const fn level(self) -> Level {
        match self {
            Self::Claimed | Self::Completed | Self::Replayed | Self::Unrecorded => Level::DEBUG,
            Self::Conflict | Self::Mismatch | Self::Released | Self::Refused => Level::INFO,
            Self::StoreError | Self::Fenced => Level::WARN,
            Self::Panicked => Level::ERROR,
        }
    }
}

/// Logs and counts one outcome. `detail` is a short reason, free of client data.
pub(crate) fn record(outcome: Outcome, route: &str, detail: &dyn std::fmt::Display) {
    let name = outcome.as_str();
    match outcome.level() {
        Level::ERROR => tracing::error!(outcome = name, route, "idempotency: {detail}"),
        Level::WARN => tracing::warn!(outcome = name, route, "idempotency: {detail}"),
        Level::INFO => tracing::info!(outcome = name, route, "idempotency: {detail}"),
        _ => tracing::debug!(outcome = name, route, "idempotency: {detail}"),
    }
    #[cfg(feature = "metrics")]
    metrics::counter!("idem_requests_total", "outcome" => name, "route" => route.to_owned())
        .increment(1);
}
