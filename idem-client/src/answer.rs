//! What a call hands back: the final answer, and how it was reached.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use serde::de::DeserializeOwned;

use crate::{IdempotencyKey, ProblemDetails};

/// The header an idem server (and Stripe) puts on a stored answer sent again.
const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";

/// Whether an answer says it is a replay: `Idempotent-Replayed: true`, in any letter case.
/// Any other value, or an unreadable one, is not.
pub(crate) fn is_replayed(headers: &HeaderMap) -> bool {
    headers
        .get(IDEMPOTENT_REPLAYED)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.trim().eq_ignore_ascii_case("true"))
}

/// A successful answer (status below 400), read whole, with how it was reached.
#[derive(Clone, Debug)]
pub struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
    pub(crate) key: IdempotencyKey,
    pub(crate) attempts: u32,
    pub(crate) elapsed: Duration,
}

impl Answer {
    /// The status code.
    #[must_use]
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The response headers.
    #[must_use]
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The response body.
    #[must_use]
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// The body, parsed as JSON.
    ///
    /// # Errors
    ///
    /// When the body is not JSON of type `T`.
    pub fn json<T: DeserializeOwned>(&self) -> serde_json::Result<T> {
        serde_json::from_slice(&self.body)
    }

    /// Whether the server answered with the stored result of an earlier attempt
    /// (`Idempotent-Replayed: true`): the operation ran once, before this answer's attempt.
    #[must_use]
    pub fn is_replayed(&self) -> bool {
        is_replayed(&self.headers)
    }

    /// The key every attempt carried.
    #[must_use]
    pub fn key(&self) -> &IdempotencyKey {
        &self.key
    }

    /// How many requests were sent, this answer's included.
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

/// An error answer (status 400 or above) that ended a call, with as much of its body as the
/// policy reads ([`RetryPolicy::max_error_body`](crate::RetryPolicy::max_error_body)).
#[derive(Clone, Debug)]
pub struct ErrorAnswer {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
    pub(crate) truncated: bool,
    pub(crate) problem: Option<ProblemDetails>,
}

impl ErrorAnswer {
    /// The status code.
    #[must_use]
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The response headers.
    #[must_use]
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The body, or its first bytes when [`is_truncated`](Self::is_truncated).
    #[must_use]
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// Whether the body was longer than the policy reads of an error.
    #[must_use]
    pub fn is_truncated(&self) -> bool {
        self.truncated
    }

    /// The RFC 9457 Problem Details of the answer, when it is `application/problem+json`.
    #[must_use]
    pub fn problem(&self) -> Option<&ProblemDetails> {
        self.problem.as_ref()
    }

    /// Whether this is a stored answer sent again (`Idempotent-Replayed: true`).
    #[must_use]
    pub fn is_replayed(&self) -> bool {
        is_replayed(&self.headers)
    }
}
