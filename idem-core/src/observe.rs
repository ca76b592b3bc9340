//! What the runtime tells operators ([docs/observability.md](https://github.com/idem-rs/idem/blob/main/docs/observability.md) lists all of it): a `tracing` event
//! for each decision about a request, the span each request runs in, the operator's removals,
//! and metrics through the `metrics` facade (feature `metrics`).
//!
//! An event carries the outcome, the route (the matched template, or the path where no route
//! matched) and, once the request has one, the first 16 hex digits of its [`StoreKey`] (`key`),
//! which is how an operator finds the record in Redis or PostgreSQL. The client's own key value
//! is never passed here: a refusal records the slug of its problem type, never the header or
//! the parser's message about it, since in a global scope the key is the client's secret. An
//! error is logged with its whole `source()` chain. With the `metrics` feature every outcome
//! increments `idem_requests_total{outcome, route}`. [docs/observability.md](https://github.com/idem-rs/idem/blob/main/docs/observability.md) lists the outcomes
//! with their levels, the span's fields and the store calls, and the tests below keep those
//! tables and this module the same.

use std::{cell::Cell, error::Error, fmt, future::Future};

use axum::response::Response;
use tracing::{Instrument, Level, Span, field::Empty};

use crate::{
    scope::StoreKey,
    store::{RecordState, StoreError},
};

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
    /// A handler ran and its result could not be stored: a retry may run it again.
    Lost,
    /// The key was taken over from an operation that stopped part-way: it resumes after its
    /// recorded steps.
    Resumed,
    /// An operation of several steps stopped part-way: it keeps its steps, and resumes.
    Suspended,
    /// A run did not match the steps recorded for its operation: it stopped, and the operation
    /// is not resumed on its own.
    StepsChanged,
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
            Self::Lost => "lost",
            Self::Resumed => "resumed",
            Self::Suspended => "suspended",
            Self::StepsChanged => "steps_changed",
        }
    }

    const fn level(self) -> Level {
        match self {
            Self::Claimed | Self::Completed | Self::Replayed | Self::Unrecorded => Level::DEBUG,
            Self::Conflict | Self::Mismatch | Self::Released | Self::Refused => Level::INFO,
            Self::Resumed | Self::Suspended => Level::INFO,
            Self::StoreError | Self::Fenced => Level::WARN,
            Self::Panicked | Self::Lost | Self::StepsChanged => Level::ERROR,
        }
    }
}

tokio::task_local! {
    /// The last outcome recorded for the request whose flow is being polled: what its span's
    /// `outcome` says once the flow has answered.
    static LAST_OUTCOME: Cell<Option<Outcome>>;
}

/// The span of one request through the flow: `idempotency`, at `info`, with the fields
/// [`SPAN_FIELDS`] lists. `route` is known at once, `key` once the request has a store key,
/// `outcome` and `replayed` once the flow has answered; each is recorded once, so that a
/// pipeline that turns fields into attributes (OpenTelemetry's) gets one value each.
pub(crate) fn request_span(route: &str) -> Span {
    tracing::info_span!(
        "idempotency",
        route,
        key = Empty,
        outcome = Empty,
        replayed = Empty
    )
}

/// The fields of a request's span, in the order of [docs/observability.md](https://github.com/idem-rs/idem/blob/main/docs/observability.md).
#[cfg(test)]
pub(crate) const SPAN_FIELDS: [&str; 4] = ["route", "key", "outcome", "replayed"];

/// Runs a request's flow in `span`, and records its last outcome there once it has answered.
pub(crate) fn in_span(
    span: Span,
    flow: impl Future<Output = Response> + Send,
) -> impl Future<Output = Response> + Send {
    let recorded = span.clone();
    LAST_OUTCOME
        .scope(Cell::new(None), async move {
            let response = flow.await;
            if let Ok(Some(outcome)) = LAST_OUTCOME.try_with(Cell::get) {
                recorded.record("outcome", outcome.as_str());
                recorded.record("replayed", outcome == Outcome::Replayed);
            }
            response
        })
        .instrument(span)
}

/// Records the store key's prefix on the current request's span.
pub(crate) fn span_key(key: &StoreKey) {
    Span::current().record("key", tracing::field::display(KeyPrefix(key)));
}

/// Logs and counts one outcome. `detail` is a short reason, free of client data.
pub(crate) fn record(
    outcome: Outcome,
    route: &str,
    key: Option<&StoreKey>,
    detail: &dyn fmt::Display,
) {
    let name = outcome.as_str();
    let _ = LAST_OUTCOME.try_with(|last| last.set(Some(outcome)));
    let key = key.map(|key| tracing::field::display(KeyPrefix(key)));
    match outcome.level() {
        Level::ERROR => tracing::error!(outcome = name, route, key, "idempotency: {detail}"),
        Level::WARN => tracing::warn!(outcome = name, route, key, "idempotency: {detail}"),
        Level::INFO => tracing::info!(outcome = name, route, key, "idempotency: {detail}"),
        _ => tracing::debug!(outcome = name, route, key, "idempotency: {detail}"),
    }
    #[cfg(feature = "metrics")]
    metrics::counter!("idem_requests_total", "outcome" => name, "route" => route.to_owned())
        .increment(1);
}

/// [`record`] for a failure: `what` happened, because of `error` (logged with its causes).
pub(crate) fn record_error(
    outcome: Outcome,
    route: &str,
    key: Option<&StoreKey>,
    what: &str,
    error: &(dyn Error + 'static),
) {
    record(
        outcome,
        route,
        key,
        &format_args!("{what}: {}", Chain(error)),
    );
}

/// The store calls the runtime makes, as `idem_store_call_seconds` labels them (`op`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StoreOp {
    Claim,
    Complete,
    Release,
    Renew,
    RecordStep,
    Suspend,
    Due,
    LookUp,
    Remove,
    Begin,
    CompleteInTransaction,
    RecordStepInTransaction,
    Commit,
    Rollback,
}

impl StoreOp {
    /// Every call, in the order of [docs/observability.md](https://github.com/idem-rs/idem/blob/main/docs/observability.md).
    #[cfg(test)]
    pub(crate) const ALL: [Self; 14] = [
        Self::Claim,
        Self::Complete,
        Self::Release,
        Self::Renew,
        Self::RecordStep,
        Self::Suspend,
        Self::Due,
        Self::LookUp,
        Self::Remove,
        Self::Begin,
        Self::CompleteInTransaction,
        Self::RecordStepInTransaction,
        Self::Commit,
        Self::Rollback,
    ];

    // Read by the metrics, and by the tests of the docs.
    #[cfg_attr(not(any(feature = "metrics", test)), allow(dead_code))]
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Self::Claim => "claim",
            Self::Complete => "complete",
            Self::Release => "release",
            Self::Renew => "renew",
            Self::RecordStep => "record_step",
            Self::Suspend => "suspend",
            Self::Due => "due",
            Self::LookUp => "look_up",
            Self::Remove => "remove",
            Self::Begin => "begin",
            Self::CompleteInTransaction => "complete_in_transaction",
            Self::RecordStepInTransaction => "record_step_in_transaction",
            Self::Commit => "commit",
            Self::Rollback => "rollback",
        }
    }
}

/// Times one store call (feature `metrics`; nothing without it).
#[derive(Clone, Copy)]
pub(crate) struct CallTimer {
    #[cfg(feature = "metrics")]
    started: std::time::Instant,
}

impl CallTimer {
    pub(crate) fn start() -> Self {
        Self {
            #[cfg(feature = "metrics")]
            started: std::time::Instant::now(),
        }
    }

    /// Records the time since [`start`](Self::start) as a call of `op`.
    pub(crate) fn stop(self, op: StoreOp) {
        #[cfg(feature = "metrics")]
        metrics::histogram!("idem_store_call_seconds", "op" => op.as_str())
            .record(self.started.elapsed().as_secs_f64());
        #[cfg(not(feature = "metrics"))]
        let _ = op;
    }
}

/// Logs and counts an operator's removal of a record: who asked, and what was removed.
pub(crate) fn removed(
    route: &str,
    key: &StoreKey,
    by: &str,
    removed: &Result<Option<RecordState>, StoreError>,
) {
    let key = tracing::field::display(KeyPrefix(key));
    let state = match removed {
        Ok(Some(state)) => state.as_str(),
        Ok(None) => "none",
        Err(_) => "error",
    };
    match removed {
        Ok(Some(RecordState::InFlight)) => tracing::warn!(
            outcome = "removed",
            route,
            key,
            by,
            state,
            "idempotency: a record in flight was removed: its request's result will not be \
             stored, and the next request with its key runs again"
        ),
        Ok(Some(_)) => tracing::info!(
            outcome = "removed",
            route,
            key,
            by,
            state,
            "idempotency: a record was removed: the next request with its key runs again"
        ),
        Ok(None) => tracing::info!(
            outcome = "removed",
            route,
            key,
            by,
            state,
            "idempotency: a removal found no record"
        ),
        Err(error) => tracing::warn!(
            outcome = "removed",
            route,
            key,
            by,
            state,
            "idempotency: a removal failed: {}",
            Chain(error)
        ),
    }
    #[cfg(feature = "metrics")]
    metrics::counter!("idem_records_removed_total", "state" => state).increment(1);
}

/// The first eight bytes of a store key, in hex.
pub(crate) struct KeyPrefix<'a>(pub(crate) &'a StoreKey);

impl fmt::Display for KeyPrefix<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.as_bytes()[..8]
            .iter()
            .try_for_each(|byte| write!(f, "{byte:02x}"))
    }
}

/// An error and its `source()` chain, joined by `: `.
pub(crate) struct Chain<'a>(pub(crate) &'a (dyn Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(error) = source {
            write!(f, ": {error}")?;
            source = error.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_names_every_cause() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
        let error = crate::store::StoreError::backend(io);
        assert_eq!(
            Chain(&error).to_string(),
            "the store failed: connection refused"
        );
    }

    /// Every outcome, in the order of the crate docs' table.
    fn every_outcome() -> [Outcome; 15] {
        // Fails to compile when an outcome is added, until it is listed below and documented.
        let _listed = |outcome: Outcome| match outcome {
            Outcome::Claimed
            | Outcome::Completed
            | Outcome::Replayed
            | Outcome::Unrecorded
            | Outcome::Conflict
            | Outcome::Mismatch
            | Outcome::Released
            | Outcome::Refused
            | Outcome::Resumed
            | Outcome::Suspended
            | Outcome::StoreError
            | Outcome::Fenced
            | Outcome::Panicked
            | Outcome::Lost
            | Outcome::StepsChanged => (),
        };
        [
            Outcome::Claimed,
            Outcome::Completed,
            Outcome::Replayed,
            Outcome::Unrecorded,
            Outcome::Conflict,
            Outcome::Mismatch,
            Outcome::Released,
            Outcome::Refused,
            Outcome::Resumed,
            Outcome::Suspended,
            Outcome::StoreError,
            Outcome::Fenced,
            Outcome::Panicked,
            Outcome::Lost,
            Outcome::StepsChanged,
        ]
    }

    /// The rows of the table under `## heading` in [docs/observability.md](https://github.com/idem-rs/idem/blob/main/docs/observability.md), as their cells.
    fn documented(heading: &str) -> Vec<Vec<String>> {
        include_str!("../../docs/observability.md")
            .lines()
            .skip_while(|line| *line != format!("## {heading}"))
            .skip(1)
            .take_while(|line| !line.starts_with("## "))
            .filter(|line| line.starts_with("| `"))
            .map(|row| {
                row.trim_matches('|')
                    .split(" | ")
                    .map(|cell| cell.trim().to_owned())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn the_docs_list_every_outcome_with_its_level() {
        let documented: Vec<(String, String)> = documented("Outcomes")
            .into_iter()
            .map(|cells| (cells[0].trim_matches('`').to_owned(), cells[1].clone()))
            .collect();
        let actual: Vec<(String, String)> = every_outcome()
            .iter()
            .map(|outcome| (outcome.as_str().to_owned(), outcome.level().to_string()))
            .collect();
        assert_eq!(documented, actual);
    }

    #[test]
    fn the_docs_list_every_span_field_and_store_call() {
        let fields: Vec<String> = documented("Spans")
            .into_iter()
            .map(|cells| cells[0].trim_matches('`').to_owned())
            .collect();
        assert_eq!(fields, SPAN_FIELDS);
        let metrics = documented("Metrics");
        let calls = metrics
            .iter()
            .find(|cells| cells[0] == "`idem_store_call_seconds`")
            .map(|cells| cells[2].clone())
            .expect("the store calls' histogram is documented");
        let ops: Vec<&str> = StoreOp::ALL.iter().map(|op| op.as_str()).collect();
        let listed = format!(
            "`op`: {}",
            ops.iter()
                .map(|op| format!("`{op}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        assert_eq!(calls, listed);
    }

    #[test]
    fn a_key_prefix_is_sixteen_hex_digits() {
        let key = StoreKey::from_bytes([0xab; 32]);
        assert_eq!(KeyPrefix(&key).to_string(), "abababababababab");
    }
}
