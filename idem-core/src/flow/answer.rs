//! The answers the flow gives instead of the handler's response: one constructor per
//! situation, so that each is worded once and says what actually happened.

use axum::response::{IntoResponse, Response};

use crate::{
    fingerprint::FingerprintAlgorithm,
    policy::Policy,
    problem::{Problem, ProblemKind},
};

/// 409: the first request with the key is still running.
pub(crate) fn in_flight(policy: &Policy) -> Response {
    Problem::new(
        ProblemKind::RequestInFlight,
        "the first request with this Idempotency-Key is still being processed; retry after the \
         time in Retry-After to get its result",
    )
    .with_retry_after(policy.retry_after)
    .into_response()
}

/// 409: another request took the key over while this one ran, and this one's result was
/// dropped (its transaction rolled back).
pub(crate) fn taken_over(policy: &Policy) -> Response {
    Problem::new(
        ProblemKind::RequestInFlight,
        "another request with this Idempotency-Key took it over while this one ran, and this \
         one's changes were rolled back; retry after the time in Retry-After to get the other \
         request's result",
    )
    .with_retry_after(policy.retry_after)
    .into_response()
}

/// 422: the key was first used for another request.
pub(crate) fn key_reused(
    ours: FingerprintAlgorithm,
    stored: Option<FingerprintAlgorithm>,
) -> Response {
    let detail = match stored {
        Some(stored) if stored == ours => {
            "this Idempotency-Key was already used for a request with a different body; use a \
             new key for a new operation"
                .to_owned()
        }
        // The body is as different as can be: one was canonical JSON and the other not (it
        // does not parse, or its Content-Type says it is not JSON), or the route hashes bodies
        // as bytes now.
        Some(stored) => format!(
            "this Idempotency-Key was already used for a different request: the first request's \
             body was fingerprinted as {stored} and this one's as {ours}, so its Content-Type or \
             its body is not what it was (valid JSON, or not); use a new key for a new operation"
        ),
        None => "this Idempotency-Key was already used for a request that this server \
                 fingerprinted in a way it no longer knows, so it cannot be matched; use a new key"
            .to_owned(),
    };
    Problem::new(ProblemKind::KeyReused, detail).into_response()
}

/// 503: the store did not answer the claim, so the handler did not run.
pub(crate) fn claim_failed(policy: &Policy) -> Response {
    Problem::new(
        ProblemKind::StoreUnavailable,
        "the idempotency store could not be reached, so the request was not run; retry with the \
         same Idempotency-Key after the time in Retry-After",
    )
    .with_retry_after(policy.retry_after)
    .into_response()
}

/// 503 with a detail of the caller's.
pub(crate) fn store_unavailable(policy: &Policy, detail: &'static str) -> Response {
    Problem::new(ProblemKind::StoreUnavailable, detail)
        .with_retry_after(policy.retry_after)
        .into_response()
}

/// What became of the key after a failed run, as the client is told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Released {
    /// The store released it: a retry runs the operation again.
    Now,
    /// The store did not answer; the release is retried in the background.
    Later,
    /// It was not held under this request's token any more: another request took it over.
    TakenOver,
    /// The store refused to release it (a record it cannot read): it stays blocked until
    /// its lease lapses.
    Blocked,
}

/// 500: the handler failed (`why`), and what became of its key.
pub(crate) fn handler_failed(policy: &Policy, why: &str, released: Released) -> Response {
    let (key, retry_after) = match released {
        Released::Now => (
            "the Idempotency-Key was released, so retrying it runs the request again",
            false,
        ),
        Released::Later => (
            "the idempotency store did not answer, so the Idempotency-Key is still held; it will \
             be released as soon as the store answers again, and a retry after that runs the \
             request again",
            true,
        ),
        Released::TakenOver => (
            "another request with this Idempotency-Key took it over meanwhile; retrying it gets \
             that request's result",
            false,
        ),
        Released::Blocked => (
            "the idempotency store refused to release the Idempotency-Key, so it stays blocked \
             until its lease lapses",
            true,
        ),
    };
    let problem = Problem::new(
        ProblemKind::HandlerFailed,
        format!("the request failed unexpectedly ({why}); {key}"),
    );
    if retry_after {
        problem.with_retry_after(policy.retry_after)
    } else {
        problem
    }
    .into_response()
}
