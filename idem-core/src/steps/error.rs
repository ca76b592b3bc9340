//! [`StepError`]: why a step did not give its output, and what the client is answered.

use std::{
    fmt,
    sync::{Mutex, PoisonError},
};

use axum::response::{IntoResponse, Response};

/// Why a step did not give its output. It answers the response it carries: the handler
/// returns it (or its own error made from it) with `?`.
///
/// A step's own failure is one of two kinds, and the step says which:
///
/// - [`retryable`](Self::retryable): it may pass later (the other API is down, it timed out).
///   The operation stays open: the client's retry, or the service's own resumption, runs it
///   again from this step.
/// - [`terminal`](Self::terminal): it never will (the bank refused the transfer). The
///   operation completes with the answer, whatever its status, and every retry replays it.
///
/// The runtime makes the others: the run does not match the recorded steps (500
/// `steps-changed`), another run took the key over, or the store could not record the step.
///
/// ```
/// use axum::http::StatusCode;
/// use idem::steps::{StepError, StepErrorKind};
///
/// let refused = StepError::terminal((StatusCode::BAD_GATEWAY, "the bank refused the transfer"));
/// assert_eq!(refused.kind(), StepErrorKind::Terminal);
/// let down = StepError::retryable(StatusCode::SERVICE_UNAVAILABLE);
/// assert_eq!(down.kind(), StepErrorKind::Retryable);
/// ```
pub struct StepError(Box<Failure>);

/// Boxed: a step's result is returned through every layer of a handler, and an error the
/// size of a response would make each of them as large.
struct Failure {
    kind: StepErrorKind,
    status: http::StatusCode,
    /// Behind a mutex only so that the error is `Sync`, as `?` into a boxed error (a message
    /// handler's `MessageError`) asks; nothing shares it.
    response: Mutex<Response>,
}

/// What kind of [`StepError`] it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StepErrorKind {
    /// The step failed and may pass later; the operation resumes from it.
    Retryable,
    /// The step failed for good; the operation completes with this answer.
    Terminal,
    /// The run does not match the steps recorded for the operation, or a step's output cannot
    /// be recorded or read back: the operation stops, and is not resumed on its own.
    Changed,
    /// Another run took the operation over while this one ran.
    TakenOver,
    /// The store did not record the step; the operation resumes from it.
    Store,
    /// The step did not start: the run's lease was in doubt (the store had not confirmed it
    /// for long enough, see [`Steps::lease`](super::Steps::lease)). The operation resumes
    /// from it, in whichever run holds it next.
    LeaseInDoubt,
    /// A step called at most once was started by an earlier run that did not record its
    /// end: it is not called again, and the operation completes with this answer, 502
    /// `step-outcome-unknown`.
    OutcomeUnknown,
    /// The route cannot keep steps (its store keeps none, or `transaction` on a store that
    /// is not PostgreSQL).
    Misconfigured,
}

impl StepError {
    /// A failure that may pass later: the operation stays open, and resumes from this step.
    /// `answer` is what this request is answered (a 502 or 503 Problem Details, say); it is not
    /// stored, whatever its status.
    pub fn retryable(answer: impl IntoResponse) -> Self {
        Self::new(StepErrorKind::Retryable, answer.into_response())
    }

    /// A failure for good: the operation completes with `answer`, whatever its status, and
    /// every retry of its key replays it.
    pub fn terminal(answer: impl IntoResponse) -> Self {
        Self::new(StepErrorKind::Terminal, answer.into_response())
    }

    pub(crate) fn new(kind: StepErrorKind, response: Response) -> Self {
        Self(Box::new(Failure {
            kind,
            status: response.status(),
            response: Mutex::new(response),
        }))
    }

    /// What kind of failure it is.
    pub fn kind(&self) -> StepErrorKind {
        self.0.kind
    }

    /// The status of the answer it carries.
    pub fn status(&self) -> http::StatusCode {
        self.0.status
    }
}

impl IntoResponse for StepError {
    fn into_response(self) -> Response {
        self.0
            .response
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for StepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StepError")
            .field("kind", &self.0.kind)
            .field("status", &self.0.status)
            .finish()
    }
}

impl fmt::Display for StepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.0.kind {
            StepErrorKind::Retryable => "a step failed and may pass later",
            StepErrorKind::Terminal => "a step failed for good",
            StepErrorKind::Changed => "the run does not match the recorded steps",
            StepErrorKind::TakenOver => "another run took the operation over",
            StepErrorKind::Store => "the store did not record a step",
            StepErrorKind::LeaseInDoubt => "a step did not start on a lease in doubt",
            StepErrorKind::OutcomeUnknown => "the outcome of a step called at most once is unknown",
            StepErrorKind::Misconfigured => "the route cannot keep steps",
        };
        write!(f, "{what} ({})", self.0.status)
    }
}

impl std::error::Error for StepError {}
