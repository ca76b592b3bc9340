//! The answers the flow gives instead of the handler's response: one constructor per
//! situation, so that each is worded once and says what actually happened. Each is a Problem
//! of the runtime's ([`Idempotency::problem`]), whose `type` URI follows its configuration.

use axum::response::{IntoResponse, Response};
use idem_protocol::key::KeyError;

use crate::{
    fingerprint::FingerprintAlgorithm,
    misconfigured,
    observe::{self, Outcome},
    policy::Policy,
    problem::ProblemKind,
    runtime::Idempotency,
    scope::{Route, Scope, StoreKey},
    steps::journal::changed_detail,
};

/// A refusal before the store is asked: logged and counted as such.
fn refuse(idem: &Idempotency, route: &Route, kind: ProblemKind, detail: String) -> Response {
    observe::record(Outcome::Refused, route.as_str(), None, &kind.slug());
    idem.problem(kind, detail).into_response()
}

/// 400: the operation requires a key.
pub(crate) fn key_missing(idem: &Idempotency, route: &Route) -> Response {
    let detail = "this operation requires an Idempotency-Key header: send a new unique value for \
                  each operation, and the same value when you retry it";
    refuse(idem, route, ProblemKind::KeyMissing, detail.to_owned())
}

/// 400: the key header is not a key.
pub(crate) fn key_malformed(idem: &Idempotency, route: &Route, error: &KeyError) -> Response {
    refuse(idem, route, ProblemKind::KeyMalformed, error.to_string())
}

/// 413: the body is over axum's `DefaultBodyLimit`, which is `limit` if it is known.
pub(crate) fn body_too_large(idem: &Idempotency, route: &Route, limit: Option<usize>) -> Response {
    let detail = match limit {
        Some(limit) => {
            format!("the request body is larger than this endpoint accepts: at most {limit} bytes")
        }
        None => "the request body is larger than this endpoint accepts".to_owned(),
    };
    refuse(idem, route, ProblemKind::BodyTooLarge, detail)
}

/// 400: the body could not be read to its end.
pub(crate) fn body_unreadable(idem: &Idempotency, route: &Route, error: &axum::Error) -> Response {
    let detail = format!("the request body could not be read: {error}");
    refuse(idem, route, ProblemKind::BodyUnreadable, detail)
}

/// 500: the key is scoped to a principal and the service's authentication named none. A
/// service refuses an unauthenticated client itself, before idempotency runs; a request that
/// reaches it without a principal on such a route shows the service's wiring at fault (its
/// authentication runs after the layer, inserts no `Principal`, or lets the request through),
/// so the client is not told to authenticate, and the log says what to fix, once per route.
pub(crate) fn principal_missing(idem: &Idempotency, scope: &Scope, route: &Route) -> Response {
    if misconfigured::first_on_route("principal-missing", route.as_str()) {
        tracing::error!(
            route = route.as_str(),
            scope = scope.name(),
            "idempotency: a request reached a route whose keys are per principal, and the \
             service named none, so it was answered 500. For scope `user`, the service's \
             authentication must insert `idem::Principal` into the request's extensions before \
             idempotency runs: as a middleware added with `Router::layer` after (outside) the \
             IdempotencyLayer, or, with `#[idempotent]`, in an extractor argument of the \
             handler (`parts.extensions.insert(Principal::new(user_id))`). Custom scopes need a \
             `ResolvePrincipal` on the runtime. (Logged once per route.)"
        );
    }
    let detail = format!(
        "this route keeps its Idempotency-Keys per principal ({}), and the service did not \
         identify the caller of this request; the request was not run, and the fault is the \
         service's, not the request's",
        scope.name()
    );
    refuse(idem, route, ProblemKind::PrincipalMissing, detail)
}

/// 409: the first request with the key is still running.
pub(crate) fn in_flight(idem: &Idempotency, policy: &Policy) -> Response {
    idem.problem(
        ProblemKind::RequestInFlight,
        "the first request with this Idempotency-Key is still being processed; retry after the \
         time in Retry-After to get its result",
    )
    .with_retry_after(policy.retry_after)
    .into_response()
}

/// 409: another request took the key over while this one ran, and this one's result was
/// dropped (its transaction rolled back).
pub(crate) fn taken_over(idem: &Idempotency, policy: &Policy) -> Response {
    idem.problem(
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
    idem: &Idempotency,
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
    idem.problem(ProblemKind::KeyReused, detail).into_response()
}

/// 503: the store did not answer the claim, so the handler did not run.
pub(crate) fn claim_failed(idem: &Idempotency, policy: &Policy) -> Response {
    idem.problem(
        ProblemKind::StoreUnavailable,
        "the idempotency store could not be reached, so the request was not run; retry with the \
         same Idempotency-Key after the time in Retry-After",
    )
    .with_retry_after(policy.retry_after)
    .into_response()
}

/// 503: the store took the claim but could not make it durable (its replicas did not
/// acknowledge it in time), and released it, so the handler did not run.
pub(crate) fn claim_not_durable(idem: &Idempotency, policy: &Policy) -> Response {
    store_unavailable(
        idem,
        policy,
        "the idempotency store could not confirm this request's claim on its replicas, so the \
         request was not run; retry with the same Idempotency-Key after the time in Retry-After",
    )
}

/// 503 with a detail of the caller's.
pub(crate) fn store_unavailable(
    idem: &Idempotency,
    policy: &Policy,
    detail: impl Into<std::borrow::Cow<'static, str>>,
) -> Response {
    idem.problem(ProblemKind::StoreUnavailable, detail)
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
    /// The operation began a step: it was suspended, with its steps, for a retry to resume.
    Suspended,
    /// The operation began a step, and the store did not answer its suspension: its lease
    /// lapses on its own, and a retry after that resumes it.
    SuspendedLater,
}

impl Released {
    /// What became of the key, in the client's words.
    fn explained(self) -> &'static str {
        match self {
            Self::Now => "the Idempotency-Key was released, so retrying it runs the request again",
            Self::Later => {
                "the idempotency store did not answer, so the Idempotency-Key is still held; it \
                 will be released as soon as the store answers again, and a retry after that \
                 runs the request again"
            }
            Self::TakenOver => {
                "another request with this Idempotency-Key took it over meanwhile; retrying it \
                 gets that request's result"
            }
            Self::Blocked => {
                "the idempotency store refused to release the Idempotency-Key, so it stays \
                 blocked until its lease lapses"
            }
            Self::Suspended => {
                "the operation keeps the steps that ended, so retrying the Idempotency-Key \
                 resumes it after them"
            }
            Self::SuspendedLater => {
                "the operation keeps the steps that ended; the idempotency store did not \
                 answer, so the Idempotency-Key is held until its lease lapses, and a retry \
                 after that resumes it"
            }
        }
    }

    /// Whether a retry must wait: the key is still held.
    fn retry_later(self) -> bool {
        matches!(self, Self::Later | Self::Blocked | Self::SuspendedLater)
    }
}

/// 500: the handler failed (`why`), and what became of its key.
pub(crate) fn handler_failed(
    idem: &Idempotency,
    policy: &Policy,
    why: &str,
    released: Released,
) -> Response {
    let problem = idem.problem(
        ProblemKind::HandlerFailed,
        format!(
            "the request failed unexpectedly ({why}); {}",
            released.explained()
        ),
    );
    if released.retry_later() {
        problem.with_retry_after(policy.retry_after)
    } else {
        problem
    }
    .into_response()
}

/// 503: the handler's transaction could not commit and rolled back, and what became of its
/// key.
pub(crate) fn rolled_back(idem: &Idempotency, policy: &Policy, released: Released) -> Response {
    let detail = format!(
        "the request's transaction could not commit and was rolled back: nothing was stored; {}",
        released.explained()
    );
    store_unavailable(idem, policy, detail)
}

/// 500: a run of the resumer maps to another record than its operation's: the route's scope,
/// template or key handling changed since the operation was kept. Nothing runs.
pub(crate) fn resumed_elsewhere(idem: &Idempotency, route: &Route, kept: &StoreKey) -> Response {
    observe::record(
        Outcome::StepsChanged,
        route.as_str(),
        Some(kept),
        &"a resumption maps to another record than its operation's (the route's scope, template \
          or key changed since); it was not run",
    );
    idem.problem(
        ProblemKind::StepsChanged,
        "this resumption of an operation maps to another record than the operation's own; it \
         was not run",
    )
    .into_response()
}

/// 500: a run of an operation does not match the steps its first run recorded.
pub(crate) fn steps_changed(idem: &Idempotency, why: &str) -> Response {
    idem.problem(ProblemKind::StepsChanged, changed_detail(why))
        .into_response()
}
