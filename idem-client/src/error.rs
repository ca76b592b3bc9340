//! Why a call failed, and how far it got.

use std::{fmt, time::Duration};

use http::StatusCode;

use crate::{ErrorAnswer, IdempotencyKey, ProblemDetails};

/// A call that ended without a successful answer.
///
/// [`kind`](Self::kind) says what the last attempt met; [`gave_up`](Self::gave_up) says whether
/// that was worth retrying and the policy's budget ran out. The key is kept, so that the
/// operation can be retried later with it: the server may have run it.
#[derive(Debug)]
pub struct ClientError {
    pub(crate) kind: ErrorKind,
    pub(crate) key: IdempotencyKey,
    pub(crate) attempts: u32,
    pub(crate) elapsed: Duration,
    pub(crate) gave_up: Option<GaveUp>,
}

/// What ended a call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// 422: the key was already used for a request with another body. This is a bug in the
    /// caller, which sent two operations under one key; it is never retried.
    #[error(
        "the server answered 422: this Idempotency-Key was already used for a different request; \
         a new operation needs a new key"
    )]
    KeyReused(ErrorAnswer),
    /// An error answer: a 4xx the caller must fix, a 501, a stored answer replayed, or a
    /// retryable answer (409, 429, 5xx) when the budget ran out.
    #[error("the server answered {}", describe(.0))]
    Status(ErrorAnswer),
    /// The last attempt failed without an answer: the connection was refused or broke, or the
    /// answer could not be read.
    #[error("no answer: {0}")]
    Transport(#[source] reqwest::Error),
    /// The last attempt got no answer within its timeout.
    #[error("no answer within {}", humanize(*.0))]
    TimedOut(Duration),
    /// A successful answer whose body is longer than the policy reads; not retried, since a
    /// retry would get the same answer.
    #[error("the server answered {status} with a body longer than {limit} bytes")]
    ResponseTooLarge {
        /// The answer's status.
        status: StatusCode,
        /// [`RetryPolicy::max_response_body`](crate::RetryPolicy::max_response_body).
        limit: usize,
    },
    /// The request could not be built (an invalid URL, say). Nothing was sent.
    #[error("the request is invalid: {0}")]
    InvalidRequest(#[source] reqwest::Error),
    /// The request's body is a stream, which cannot be sent again byte for byte. Nothing was
    /// sent: buffer the body.
    #[error("the request body is a stream, and a retry must send the same bytes: buffer it")]
    BodyNotReplayable,
    /// The request already has an `Idempotency-Key` header. Nothing was sent: pass the key to
    /// [`RetryPolicy::send_with_key`](crate::RetryPolicy::send_with_key) instead, so
    /// that there is one key per call.
    #[error(
        "the request already has an Idempotency-Key header; pass the key to send_with_key instead"
    )]
    KeyAlreadySet,
}

/// Which part of the budget ran out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GaveUp {
    /// [`RetryPolicy::max_attempts`](crate::RetryPolicy::max_attempts) requests were
    /// sent.
    Attempts,
    /// The next attempt could not start before
    /// [`RetryPolicy::deadline`](crate::RetryPolicy::deadline) (the server's
    /// `Retry-After` asked for longer, say), or the deadline cut the last attempt short.
    Deadline,
}

impl ClientError {
    /// What the last attempt met.
    #[must_use]
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// The final error answer, if the server answered.
    #[must_use]
    pub fn answer(&self) -> Option<&ErrorAnswer> {
        match &self.kind {
            ErrorKind::KeyReused(answer) | ErrorKind::Status(answer) => Some(answer),
            _ => None,
        }
    }

    /// The final answer's status, if the server answered.
    #[must_use]
    pub fn status(&self) -> Option<StatusCode> {
        match &self.kind {
            ErrorKind::ResponseTooLarge { status, .. } => Some(*status),
            _ => self.answer().map(ErrorAnswer::status),
        }
    }

    /// The final answer's RFC 9457 Problem Details, if it had them.
    #[must_use]
    pub fn problem(&self) -> Option<&ProblemDetails> {
        self.answer().and_then(ErrorAnswer::problem)
    }

    /// Whether the server said the key was already used for another request (422).
    #[must_use]
    pub fn is_key_reused(&self) -> bool {
        matches!(self.kind, ErrorKind::KeyReused(_))
    }

    /// Which part of the budget ran out, when the last outcome was worth retrying.
    #[must_use]
    pub fn gave_up(&self) -> Option<GaveUp> {
        self.gave_up
    }

    /// The key every attempt carried: retry the operation later with it.
    #[must_use]
    pub fn key(&self) -> &IdempotencyKey {
        &self.key
    }

    /// How many requests were sent (0 when the request was refused before sending).
    #[must_use]
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// How long the call took, waits included.
    #[must_use]
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.kind)?;
        let attempts = match self.attempts {
            1 => "1 attempt".to_owned(),
            n => format!("{n} attempts"),
        };
        match (self.attempts, self.gave_up) {
            (0, _) => Ok(()),
            (_, None) => write!(f, " (after {attempts})"),
            (_, Some(GaveUp::Attempts)) => write!(f, " (gave up after {attempts}: the maximum)"),
            (_, Some(GaveUp::Deadline)) => write!(
                f,
                " (gave up after {attempts} in {}: the deadline)",
                humanize(self.elapsed)
            ),
        }
    }
}

impl std::error::Error for ClientError {
    // The kind's message is part of this one's, so the chain goes on with what caused it.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.kind)
    }
}

/// `409 Conflict: A request is outstanding...`: the status and what the problem says.
fn describe(answer: &ErrorAnswer) -> String {
    let mut text = answer.status.to_string();
    if let Some(problem) = &answer.problem {
        for said in [problem.title(), problem.detail()].into_iter().flatten() {
            text.push_str(": ");
            text.push_str(said);
        }
    }
    text
}

/// A duration as people read it: `850 ms`, `3.0 s`.
pub(crate) fn humanize(duration: Duration) -> String {
    if duration < Duration::from_secs(1) {
        format!("{} ms", duration.as_millis())
    } else {
        format!("{:.1} s", duration.as_secs_f64())
    }
}
