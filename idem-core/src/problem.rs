//! RFC 9457 Problem Details: every error the library answers.
//!
//! Each kind of error has a stable `type` URI, a fixed `title`, and a status code; the `detail`
//! says what was wrong with this request. The URIs end with `#<slug>` and point at the
//! catalogue below, which `docs/problems.md` in the repository repeats, unless the runtime sets
//! a base of its own ([`IdempotencyBuilder::problem_type_base`](crate::IdempotencyBuilder::problem_type_base)).
//!
//! ```
//! use axum::response::IntoResponse;
//! use idem_core::problem::{Problem, ProblemKind};
//!
//! let problem = Problem::new(ProblemKind::KeyMissing, "this operation requires an Idempotency-Key header");
//! let response = problem.into_response();
//! assert_eq!(response.status(), 400);
//! assert_eq!(response.headers()["content-type"], "application/problem+json");
//! ```
//!
//! # The problem types
//!
//! ### key-missing
//! **400 Bad Request.** The operation requires an `Idempotency-Key` header and the request had none. Send one:
//! a new unique value (a UUID, say) per operation, the same value on every retry of it.
//!
//! ### key-malformed
//! **400 Bad Request.** The `Idempotency-Key` header is not a valid key: empty, longer than 255 characters,
//! characters other than visible ASCII, several values, or (in strict mode) not an sf-string.
//! The `detail` names the fault.
//!
//! ### principal-missing
//! **401 Unauthorized.** The key is scoped to a principal (a user, a tenant) and the request carried none, so
//! the key cannot be looked up safely. Authenticate the request.
//!
//! ### request-in-flight
//! **409 Conflict.** The first request with this key is still being processed. Retry after the number of
//! seconds in `Retry-After`; the retry gets the first request's result.
//!
//! ### response-not-replayable
//! **410 Gone.** The first request with this key was processed, but its response was larger than the
//! server keeps for replay. The operation is not run again; look its result up another way.
//! The member `originalStatus` carries the status code of the first response.
//!
//! ### body-too-large
//! **413 Content Too Large.** The request body is larger than the server accepts.
//!
//! ### body-unreadable
//! **400 Bad Request.** The request body could not be read to the end (the connection broke, or its framing
//! was invalid), so the request could not be fingerprinted. Nothing was run or stored.
//!
//! ### key-reused
//! **422 Unprocessable Content.** The key was already used for a request with a different body (or method, or route).
//! Use a new key for a new operation.
//!
//! ### handler-failed
//! **500 Internal Server Error.** The operation failed unexpectedly (it panicked). The `detail` says what became of the
//! key: released (a retry with the same key runs the operation again), still held because the store did not answer
//! (it is released once the store answers; `Retry-After` says when to try), or blocked until its lease lapses.
//!
//! ### misconfigured
//! **500 Internal Server Error.** The server's idempotency support is not set up for this route. This is a bug in the
//! service, not in the request.
//!
//! ### store-unavailable
//! **503 Service Unavailable.** The store that keeps idempotency records could not be reached, so the server refused
//! to run the operation rather than risk running it twice. Retry after `Retry-After` seconds.

use std::{borrow::Cow, sync::Arc, time::Duration};

use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderValue, StatusCode, header};
use serde::Serialize;

/// The media type of a Problem Details body.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// Where the `type` URIs point unless the runtime says otherwise: the section of the problem
/// catalogue (`docs/problems.md`) for each kind.
pub const DEFAULT_TYPE_BASE: &str = "https://github.com/idem-rs/idem/blob/main/docs/problems.md#";

/// The kinds of error the library answers, each with its own status, title and `type` URI.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProblemKind {
    /// 400: the operation requires a key and the request had none.
    KeyMissing,
    /// 400: the key header is not a valid key.
    KeyMalformed,
    /// 401: the key is scoped to a principal and the request has none.
    PrincipalMissing,
    /// 409: the first request with this key is still in flight.
    RequestInFlight,
    /// 410: the first response was too large to keep, so it cannot be replayed.
    ResponseNotReplayable,
    /// 413: the request body is over the limit.
    BodyTooLarge,
    /// 400: the request body could not be read.
    BodyUnreadable,
    /// 422: the key was used before with a different request.
    KeyReused,
    /// 500: the handler panicked; the detail says whether its key was released.
    HandlerFailed,
    /// 500: the service's idempotency support is not set up for this route.
    Misconfigured,
    /// 503: the idempotency store is unavailable.
    StoreUnavailable,
}

impl ProblemKind {
    /// The HTTP status code of this kind.
    pub const fn status(self) -> StatusCode {
        match self {
            Self::KeyMissing | Self::KeyMalformed | Self::BodyUnreadable => StatusCode::BAD_REQUEST,
            Self::PrincipalMissing => StatusCode::UNAUTHORIZED,
            Self::RequestInFlight => StatusCode::CONFLICT,
            Self::ResponseNotReplayable => StatusCode::GONE,
            Self::BodyTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::KeyReused => StatusCode::UNPROCESSABLE_ENTITY,
            Self::HandlerFailed | Self::Misconfigured => StatusCode::INTERNAL_SERVER_ERROR,
            Self::StoreUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The short, fixed title of this kind. The 400, 409 and 422 titles are the IETF draft's.
    pub const fn title(self) -> &'static str {
        match self {
            Self::KeyMissing => "Idempotency-Key is missing",
            Self::KeyMalformed => "Idempotency-Key is malformed",
            Self::PrincipalMissing => "No principal for this Idempotency-Key",
            Self::RequestInFlight => "A request is outstanding for this Idempotency-Key",
            Self::ResponseNotReplayable => "The original response cannot be replayed",
            Self::BodyTooLarge => "Request body is too large",
            Self::BodyUnreadable => "Request body could not be read",
            Self::KeyReused => "Idempotency-Key is already used",
            Self::HandlerFailed => "The request failed",
            Self::Misconfigured => "Idempotency is not configured for this route",
            Self::StoreUnavailable => "The idempotency store is unavailable",
        }
    }

    /// The stable slug that ends this kind's `type` URI.
    pub const fn slug(self) -> &'static str {
        match self {
            Self::KeyMissing => "key-missing",
            Self::KeyMalformed => "key-malformed",
            Self::PrincipalMissing => "principal-missing",
            Self::RequestInFlight => "request-in-flight",
            Self::ResponseNotReplayable => "response-not-replayable",
            Self::BodyTooLarge => "body-too-large",
            Self::BodyUnreadable => "body-unreadable",
            Self::KeyReused => "key-reused",
            Self::HandlerFailed => "handler-failed",
            Self::Misconfigured => "misconfigured",
            Self::StoreUnavailable => "store-unavailable",
        }
    }

    /// The default `type` URI of this kind: [`DEFAULT_TYPE_BASE`] and the slug. Stable, and
    /// it leads to this kind's documentation.
    pub fn type_uri(self) -> String {
        format!("{DEFAULT_TYPE_BASE}{}", self.slug())
    }
}

/// An RFC 9457 Problem Details answer.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub struct Problem {
    kind: ProblemKind,
    type_base: Option<Arc<str>>,
    detail: Cow<'static, str>,
    instance: Option<String>,
    retry_after: Option<Duration>,
    original_status: Option<StatusCode>,
}

impl Problem {
    /// A problem of `kind` whose `detail` explains this occurrence.
    pub fn new(kind: ProblemKind, detail: impl Into<Cow<'static, str>>) -> Self {
        Self {
            kind,
            type_base: None,
            detail: detail.into(),
            instance: None,
            retry_after: None,
            original_status: None,
        }
    }

    /// Makes the `type` URI `base` followed by the kind's slug, instead of
    /// [`ProblemKind::type_uri`]'s default.
    ///
    /// ```
    /// use idem_core::problem::{Problem, ProblemKind};
    ///
    /// let problem = Problem::new(ProblemKind::KeyReused, "a different body")
    ///     .with_type_base("https://api.example.com/problems#");
    /// assert_eq!(problem.type_uri(), "https://api.example.com/problems#key-reused");
    /// ```
    pub fn with_type_base(mut self, base: impl Into<Arc<str>>) -> Self {
        self.type_base = Some(base.into());
        self
    }

    /// The `type` URI of this problem.
    pub fn type_uri(&self) -> String {
        match &self.type_base {
            Some(base) => format!("{base}{}", self.kind.slug()),
            None => self.kind.type_uri(),
        }
    }

    /// Sets the `instance` member: a URI reference for this occurrence (the request path, say).
    pub fn with_instance(mut self, instance: impl Into<String>) -> Self {
        self.instance = Some(instance.into());
        self
    }

    /// Adds a `Retry-After` header, in whole seconds rounded up (at least 1).
    pub fn with_retry_after(mut self, after: Duration) -> Self {
        self.retry_after = Some(after);
        self
    }

    /// Adds the `originalStatus` member (used by [`ProblemKind::ResponseNotReplayable`]).
    pub fn with_original_status(mut self, status: StatusCode) -> Self {
        self.original_status = Some(status);
        self
    }

    /// The kind of this problem.
    pub fn kind(&self) -> ProblemKind {
        self.kind
    }

    /// The status code this problem answers with.
    pub fn status(&self) -> StatusCode {
        self.kind.status()
    }

    /// The `detail` member.
    pub fn detail(&self) -> &str {
        &self.detail
    }

    /// The JSON body of this problem.
    pub fn to_json(&self) -> String {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Body<'a> {
            r#type: String,
            title: &'static str,
            status: u16,
            detail: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            instance: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            original_status: Option<u16>,
        }
        let body = Body {
            r#type: self.type_uri(),
            title: self.kind.title(),
            status: self.kind.status().as_u16(),
            detail: &self.detail,
            instance: self.instance.as_deref(),
            original_status: self.original_status.map(|status| status.as_u16()),
        };
        serde_json::to_string(&body).expect("a problem body is plain strings and numbers")
    }
}

/// `Retry-After` in whole seconds: rounded up, and never 0, which would invite a hot loop.
fn retry_after_seconds(after: Duration) -> u64 {
    let seconds = after.as_secs() + u64::from(after.subsec_nanos() > 0);
    seconds.max(1)
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let mut response = (self.status(), Bytes::from(self.to_json())).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        if let Some(after) = self.retry_after {
            headers.insert(header::RETRY_AFTER, retry_after_seconds(after).into());
        }
        response
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            self.kind.title(),
            self.status(),
            self.detail
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [ProblemKind; 11] = [
        ProblemKind::KeyMissing,
        ProblemKind::KeyMalformed,
        ProblemKind::PrincipalMissing,
        ProblemKind::RequestInFlight,
        ProblemKind::ResponseNotReplayable,
        ProblemKind::BodyTooLarge,
        ProblemKind::BodyUnreadable,
        ProblemKind::KeyReused,
        ProblemKind::HandlerFailed,
        ProblemKind::Misconfigured,
        ProblemKind::StoreUnavailable,
    ];

    #[test]
    fn body_is_valid_problem_json_with_every_member() {
        let problem = Problem::new(ProblemKind::KeyReused, "the body \"differs\"\n")
            .with_instance("/payments");
        let json: serde_json::Value = serde_json::from_str(&problem.to_json()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "type": "https://github.com/idem-rs/idem/blob/main/docs/problems.md#key-reused",
                "title": "Idempotency-Key is already used",
                "status": 422,
                "detail": "the body \"differs\"\n",
                "instance": "/payments",
            })
        );
    }

    #[test]
    fn response_carries_status_media_type_and_retry_after() {
        let response = Problem::new(ProblemKind::RequestInFlight, "wait")
            .with_retry_after(Duration::from_millis(1500))
            .into_response();
        assert_eq!(response.status(), StatusCode::CONFLICT);
        assert_eq!(response.headers()[header::CONTENT_TYPE], PROBLEM_JSON);
        assert_eq!(response.headers()[header::RETRY_AFTER], "2");
    }

    #[test]
    fn retry_after_is_never_zero() {
        assert_eq!(retry_after_seconds(Duration::ZERO), 1);
        assert_eq!(retry_after_seconds(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_seconds(Duration::from_secs(3)), 3);
    }

    #[test]
    fn the_repository_catalogue_repeats_this_module_s() {
        let module: String = include_str!("problem.rs")
            .lines()
            .skip_while(|line| !line.starts_with("//! ### "))
            .take_while(|line| line.starts_with("//!"))
            .map(|line| line.strip_prefix("//! ").unwrap_or("").to_owned() + "\n")
            .collect();
        let page = include_str!("../../docs/problems.md");
        assert!(
            page.ends_with(&module),
            "docs/problems.md must end with the catalogue of idem_core::problem, as written there"
        );
    }

    #[test]
    fn every_kind_has_a_distinct_slug_documented_in_this_module() {
        let docs = include_str!("problem.rs");
        let mut slugs: Vec<_> = ALL.iter().map(|kind| kind.slug()).collect();
        for slug in &slugs {
            assert!(
                docs.contains(&format!("//! ### {slug}\n")),
                "{slug} is not documented"
            );
        }
        slugs.sort_unstable();
        slugs.dedup();
        assert_eq!(slugs.len(), ALL.len());
    }

    #[test]
    fn original_status_member_is_camel_case() {
        let json = Problem::new(ProblemKind::ResponseNotReplayable, "too large")
            .with_original_status(StatusCode::CREATED)
            .to_json();
        let json: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(json["originalStatus"], 201);
        assert_eq!(json["status"], 410);
    }
}
