//! The Problem Details vocabulary of idem (RFC 9457): the kinds of error an idem server
//! answers, each with a stable `type` URI, a fixed `title` and a status code. A server builds
//! its answers from these (`idem::problem::Problem`); a client recognises them
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
//! A `type` URI is a base and the kind's slug: by default the relative reference
//! `/problems/idempotency#<slug>` ([`DEFAULT_TYPE_BASE`]), which a reader resolves against the
//! URL of the request that was refused, to the page a service serves at [`CATALOGUE_PATH`]
//! (`idem::problem::catalogue`): the catalogue below, one section per slug. A service
//! whose API documentation lives elsewhere sets a base of its own instead, an absolute URI
//! ending in `#` or `/` (`IdempotencyBuilder::problem_type_base` in `idem-core`).
//!
//! # The problem types
//!
#![doc = include_str!("problems.md")]

use http::StatusCode;

/// The media type of a Problem Details body.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// The catalogue of the problem types in Markdown: for each kind, a `### <slug>` heading and a
/// paragraph that says what went wrong and what the client can do. It is this module's
/// documentation, the page [`CATALOGUE_PATH`] serves, and the end of the repository's
/// [docs/problems.md](https://github.com/idem-rs/idem/blob/main/docs/problems.md).
pub const CATALOGUE: &str = include_str!("problems.md");

/// Where a service serves [`CATALOGUE`] as a web page, so that the default `type` URIs lead to
/// it: the path of [`DEFAULT_TYPE_BASE`].
pub const CATALOGUE_PATH: &str = "/problems/idempotency";

/// Where the `type` URIs point unless the runtime says otherwise: the section of the catalogue
/// page for each kind, as a reference relative to the refused request's URL. RFC 9457 allows
/// a relative `type` and asks that it then hold the full path, as this one does; a service that
/// knows its public URL can make it absolute with its own base.
pub const DEFAULT_TYPE_BASE: &str = "/problems/idempotency#";

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
    /// 500: the key is scoped to a principal and the service's authentication named none for
    /// the request: a fault of the service (its wiring), not of the request.
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
    /// 500: a run of an interrupted operation does not match the steps its first run
    /// recorded.
    StepsChanged,
    /// 502: a step that is called at most once was started by an earlier run of the
    /// operation, which did not record its end: whether it took effect is unknown.
    StepOutcomeUnknown,
}

impl ProblemKind {
    /// The HTTP status code of this kind.
    pub const fn status(self) -> StatusCode {
        match self {
            Self::KeyMissing | Self::KeyMalformed | Self::BodyUnreadable => StatusCode::BAD_REQUEST,
            Self::RequestInFlight => StatusCode::CONFLICT,
            Self::ResponseNotReplayable => StatusCode::GONE,
            Self::BodyTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::KeyReused => StatusCode::UNPROCESSABLE_ENTITY,
            Self::PrincipalMissing
            | Self::HandlerFailed
            | Self::Misconfigured
            | Self::StepsChanged => StatusCode::INTERNAL_SERVER_ERROR,
            Self::StoreUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            Self::StepOutcomeUnknown => StatusCode::BAD_GATEWAY,
        }
    }

    /// The short, fixed title of this kind. The 400, 409 and 422 titles are the IETF draft's.
    pub const fn title(self) -> &'static str {
        match self {
            Self::KeyMissing => "Idempotency-Key is missing",
            Self::KeyMalformed => "Idempotency-Key is malformed",
            Self::PrincipalMissing => "The service did not identify the caller",
            Self::RequestInFlight => "A request is outstanding for this Idempotency-Key",
            Self::ResponseNotReplayable => "The original response cannot be replayed",
            Self::BodyTooLarge => "Request body is too large",
            Self::BodyUnreadable => "Request body could not be read",
            Self::KeyReused => "Idempotency-Key is already used",
            Self::HandlerFailed => "The request failed",
            Self::Misconfigured => "Idempotency is not configured for this route",
            Self::StoreUnavailable => "The idempotency store is unavailable",
            Self::StepsChanged => "The operation's steps changed while it was in flight",
            Self::StepOutcomeUnknown => "The outcome of a step of the operation is unknown",
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
            Self::StepsChanged => "steps-changed",
            Self::StepOutcomeUnknown => "step-outcome-unknown",
        }
    }

    /// The default `type` URI of this kind: [`DEFAULT_TYPE_BASE`] and the slug. Stable, and,
    /// resolved against the request's URL, it leads to this kind's section of the catalogue
    /// page when the service serves it at [`CATALOGUE_PATH`].
    pub fn type_uri(self) -> String {
        format!("{DEFAULT_TYPE_BASE}{}", self.slug())
    }

    /// The gRPC status code a gRPC door answers this kind with, as its number
    /// (`google.rpc.Code`): the table of [docs/grpc.md](https://github.com/idem-rs/idem/blob/main/docs/grpc.md), beside the HTTP statuses.
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
            // INTERNAL: the service's own fault, steps changed under an operation and a
            // principal its authentication did not name included.
            Self::PrincipalMissing
            | Self::HandlerFailed
            | Self::Misconfigured
            | Self::StepsChanged => 13,
            // UNAVAILABLE: come back after the `RetryInfo`.
            Self::StoreUnavailable => 14,
            // UNKNOWN: what the call did is not known, and no retry will learn it.
            Self::StepOutcomeUnknown => 2,
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
            Self::StepsChanged => "STEPS_CHANGED",
            Self::StepOutcomeUnknown => "STEP_OUTCOME_UNKNOWN",
        }
    }

    /// The kind whose [`reason`](Self::reason) is `reason`.
    pub fn from_reason(reason: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.reason() == reason)
    }

    /// Every kind.
    pub const ALL: [Self; 13] = [
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
        Self::StepsChanged,
        Self::StepOutcomeUnknown,
    ];
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [ProblemKind; 13] = ProblemKind::ALL;

    #[test]
    fn the_repository_catalogue_ends_with_this_one() {
        let page = include_str!("../../docs/problems.md");
        assert!(
            page.ends_with(CATALOGUE),
            "docs/problems.md must end with idem-protocol/src/problems.md, as written there"
        );
    }

    #[test]
    fn every_kind_has_a_distinct_slug_documented_in_the_catalogue() {
        let mut slugs: Vec<_> = ALL.iter().map(|kind| kind.slug()).collect();
        for slug in &slugs {
            assert!(
                CATALOGUE.contains(&format!("### {slug}\n")),
                "{slug} is not documented"
            );
        }
        let sections = CATALOGUE
            .lines()
            .filter(|line| line.starts_with("### "))
            .count();
        assert_eq!(sections, ALL.len(), "a section without a kind");
        slugs.sort_unstable();
        slugs.dedup();
        assert_eq!(slugs.len(), ALL.len());
    }

    #[test]
    fn the_default_types_lead_to_the_catalogue_page() {
        assert_eq!(DEFAULT_TYPE_BASE, format!("{CATALOGUE_PATH}#"));
        assert_eq!(
            ProblemKind::KeyReused.type_uri(),
            "/problems/idempotency#key-reused"
        );
    }

    #[test]
    fn each_section_opens_with_its_kind_s_status() {
        for kind in ALL {
            let heading = format!("### {}\n", kind.slug());
            let at = CATALOGUE.find(&heading).unwrap() + heading.len();
            // RFC 9110's reason phrases, which are not all `http`'s (413 Content Too Large).
            let opening = format!("**{} ", kind.status().as_u16());
            assert!(
                CATALOGUE[at..].starts_with(&opening),
                "the section of {} must open with {opening:?}",
                kind.slug()
            );
        }
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
