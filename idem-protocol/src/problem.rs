//! The Problem Details vocabulary of idem (RFC 9457): the kinds of error an idem server
//! answers, each with a stable `type` URI, a fixed `title` and a status code. A server builds
//! its answers from these (`idem_core::problem::Problem`); a client recognises them
//! (`idem_client::ProblemDetails`).
//!
//! ```
//! use idem_protocol::problem::ProblemKind;
//!
//! let kind = ProblemKind::KeyReused;
//! assert_eq!(kind.status(), 422);
//! assert_eq!(kind.title(), "Idempotency-Key is already used");
//! assert!(kind.type_uri().ends_with("#key-reused"));
//! ```
//!
//! The `type` URIs end with `#<slug>` and point at the catalogue below, which `docs/problems.md`
//! in the repository repeats, unless the server sets a base of its own.
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

use http::StatusCode;

/// The media type of a Problem Details body.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// Where the `type` URIs point unless the runtime says otherwise: the section of the problem
/// catalogue (`docs/problems.md`) for each kind.
pub const DEFAULT_TYPE_BASE: &str = "https://github.com/idem-rs/idem/blob/main/docs/problems.md#";

/// The `domain` of the `google.rpc.ErrorInfo` a gRPC door attaches to each of its refusals:
/// with [`ProblemKind::reason`], it names the kind, as the `type` URI does over HTTP.
pub const GRPC_ERROR_DOMAIN: &str = "idem-rs.github.io";

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

    /// The gRPC status code a gRPC door answers this kind with, as its number
    /// (`google.rpc.Code`): the table of `docs/grpc.md`, beside the HTTP statuses.
    ///
    /// ```
    /// use idem_protocol::problem::ProblemKind;
    ///
    /// assert_eq!(ProblemKind::RequestInFlight.grpc_code(), 10); // ABORTED
    /// assert_eq!(ProblemKind::KeyReused.grpc_code(), 9); // FAILED_PRECONDITION
    /// ```
    pub const fn grpc_code(self) -> i32 {
        match self {
            // INVALID_ARGUMENT: wrong whatever the server's state.
            Self::KeyMissing | Self::KeyMalformed => 3,
            // UNAUTHENTICATED.
            Self::PrincipalMissing => 16,
            // ABORTED: a concurrency conflict; retry, and get the first call's result.
            Self::RequestInFlight => 10,
            // FAILED_PRECONDITION: the key's state refuses the call, and a retry as it is
            // meets the same refusal. Not ALREADY_EXISTS, which a client of a create may take
            // for "my earlier call made it": for another request under the key, it did not.
            Self::KeyReused | Self::ResponseNotReplayable => 9,
            // RESOURCE_EXHAUSTED: gRPC's code for a message over the configured limit.
            Self::BodyTooLarge => 8,
            // CANCELLED: the request stream ended before its message did.
            Self::BodyUnreadable => 1,
            // INTERNAL.
            Self::HandlerFailed | Self::Misconfigured => 13,
            // UNAVAILABLE: come back after the `RetryInfo`.
            Self::StoreUnavailable => 14,
        }
    }

    /// The `reason` of the `google.rpc.ErrorInfo` a gRPC door attaches: the slug in the form
    /// AIP-193 asks of a reason (upper snake case), so that `key-reused` over HTTP is
    /// `KEY_REUSED` over gRPC; the `domain` is [`GRPC_ERROR_DOMAIN`].
    ///
    /// ```
    /// use idem_protocol::problem::ProblemKind;
    ///
    /// assert_eq!(ProblemKind::KeyReused.reason(), "KEY_REUSED");
    /// assert_eq!(ProblemKind::from_reason("KEY_REUSED"), Some(ProblemKind::KeyReused));
    /// ```
    pub const fn reason(self) -> &'static str {
        match self {
            Self::KeyMissing => "KEY_MISSING",
            Self::KeyMalformed => "KEY_MALFORMED",
            Self::PrincipalMissing => "PRINCIPAL_MISSING",
            Self::RequestInFlight => "REQUEST_IN_FLIGHT",
            Self::ResponseNotReplayable => "RESPONSE_NOT_REPLAYABLE",
            Self::BodyTooLarge => "BODY_TOO_LARGE",
            Self::BodyUnreadable => "BODY_UNREADABLE",
            Self::KeyReused => "KEY_REUSED",
            Self::HandlerFailed => "HANDLER_FAILED",
            Self::Misconfigured => "MISCONFIGURED",
            Self::StoreUnavailable => "STORE_UNAVAILABLE",
        }
    }

    /// The kind whose [`reason`](Self::reason) is `reason`.
    pub fn from_reason(reason: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.reason() == reason)
    }

    /// Every kind.
    pub const ALL: [Self; 11] = [
        Self::KeyMissing,
        Self::KeyMalformed,
        Self::PrincipalMissing,
        Self::RequestInFlight,
        Self::ResponseNotReplayable,
        Self::BodyTooLarge,
        Self::BodyUnreadable,
        Self::KeyReused,
        Self::HandlerFailed,
        Self::Misconfigured,
        Self::StoreUnavailable,
    ];
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [ProblemKind; 11] = ProblemKind::ALL;

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
            "docs/problems.md must end with the catalogue of idem_protocol::problem, as written there"
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
    fn every_reason_is_its_slug_in_upper_snake_case() {
        for kind in ALL {
            assert_eq!(kind.reason(), kind.slug().to_uppercase().replace('-', "_"));
            assert_eq!(ProblemKind::from_reason(kind.reason()), Some(kind));
            // AIP-193: `[A-Z][A-Z0-9_]+[A-Z0-9]`, at most 63 characters.
            let reason = kind.reason().as_bytes();
            assert!(reason.len() <= 63 && reason[0].is_ascii_uppercase());
            assert!(
                reason
                    .iter()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || *b == b'_')
            );
        }
    }
}
