//! RFC 9457 Problem Details: every error the library answers.
//!
//! Each kind of error has a stable `type` URI, a fixed `title`, and a status code; the `detail`
//! says what was wrong with this request. The URIs end with `#<slug>`. By default they are
//! relative, `/problems/idempotency#<slug>`, and lead to the catalogue of the kinds that
//! [`catalogue`] serves as a web page when the service routes [`CATALOGUE_PATH`] to it; a
//! service whose API documentation lives elsewhere sets a base of its own
//! ([`IdempotencyBuilder::problem_type_base`](crate::runtime::IdempotencyBuilder::problem_type_base)).
//!
//! ```
//! use axum::response::IntoResponse;
//! use idem::problem::{Problem, ProblemKind};
//!
//! let problem = Problem::new(ProblemKind::KeyMissing, "this operation requires an Idempotency-Key header");
//! let response = problem.into_response();
//! assert_eq!(response.status(), 400);
//! assert_eq!(response.headers()["content-type"], "application/problem+json");
//! ```
//!
//! The kinds, their statuses, titles and `type` URIs are the vocabulary that servers and
//! clients share: they live in the crate `idem-protocol`, re-exported here.

use std::{borrow::Cow, sync::Arc, time::Duration};

use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderValue, StatusCode, header};
pub use idem_protocol::problem::{
    CATALOGUE, CATALOGUE_PATH, DEFAULT_TYPE_BASE, GRPC_ERROR_DOMAIN, PROBLEM_JSON, ProblemKind,
};
use serde::{Serialize, Serializer, ser::SerializeMap};

pub use self::catalogue::{catalogue, catalogue_page};

mod catalogue;

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
    /// use idem::problem::{Problem, ProblemKind};
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

    /// When the client should come back, if the problem says (`Retry-After`).
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
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
        serde_json::to_string(&Body(self)).expect("a problem body is plain strings and numbers")
    }
}

/// A problem's JSON body, its members in the order RFC 9457 lists them. Written out rather
/// than derived, so that the runtime builds without serde's derive macro.
struct Body<'a>(&'a Problem);

impl Serialize for Body<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Body(problem) = self;
        let original_status = problem.original_status.map(|status| status.as_u16());
        let members =
            4 + usize::from(problem.instance.is_some()) + usize::from(original_status.is_some());
        let mut body = serializer.serialize_map(Some(members))?;
        body.serialize_entry("type", &problem.type_uri())?;
        body.serialize_entry("title", problem.kind.title())?;
        body.serialize_entry("status", &problem.kind.status().as_u16())?;
        body.serialize_entry("detail", &problem.detail)?;
        if let Some(instance) = &problem.instance {
            body.serialize_entry("instance", instance)?;
        }
        if let Some(original_status) = original_status {
            body.serialize_entry("originalStatus", &original_status)?;
        }
        body.end()
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
        // The doors that answer in another protocol (gRPC, a broker) read the kind here
        // rather than from the body; a stored response never carries it.
        response.extensions_mut().insert(self.kind);
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

    #[test]
    fn body_is_valid_problem_json_with_every_member() {
        let problem = Problem::new(ProblemKind::KeyReused, "the body \"differs\"\n")
            .with_instance("/payments");
        let json: serde_json::Value = serde_json::from_str(&problem.to_json()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "type": "/problems/idempotency#key-reused",
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
    fn original_status_member_is_camel_case() {
        let json = Problem::new(ProblemKind::ResponseNotReplayable, "too large")
            .with_original_status(StatusCode::CREATED)
            .to_json();
        let json: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(json["originalStatus"], 201);
        assert_eq!(json["status"], 410);
    }
}
