//! The shop's own errors, as RFC 9457 Problem Details (`application/problem+json`).
//!
//! The idempotency runtime answers its own errors (a missing key, a conflict, a reused key)
//! with [`idem::Problem`]; everything the shop itself refuses is a [`ShopProblem`], with
//! a `type` URI that leads to its section of the page the shop serves at [`CATALOGUE_PATH`],
//! rendered from the "Problem types" section of the shop's README. Both have
//! the members `type`, `title`, `status` and `detail`; a body that fails validation adds
//! `errors`, one entry per field, each with a JSON Pointer to the field (RFC 9457 §3's own
//! example).

use std::{borrow::Cow, sync::LazyLock};

use axum::{
    http::{HeaderValue, StatusCode, header},
    response::{Html, IntoResponse, Response},
};
use idem::problem::catalogue_page;
use serde::Serialize;
use utoipa::ToSchema;

/// The media type of every error the shop answers.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// The `Retry-After` of an [`Unavailable`](ShopProblemKind::Unavailable) answer, in seconds.
pub const RETRY_AFTER_SECONDS: u64 = 1;

/// Where the shop serves the catalogue of its own problem types ([`catalogue`]).
pub const CATALOGUE_PATH: &str = "/problems/shop";

/// Where the shop's `type` URIs point: [`CATALOGUE_PATH`] and the kind's slug as the
/// fragment. Relative, as idem's own are: RFC 9457 resolves a relative `type` against the
/// URL of the request, so it leads to the page of the shop that answered, wherever it is
/// deployed.
pub const TYPE_BASE: &str = "/problems/shop#";

/// The shop's problem types as a web page, one section per kind: the "Problem types"
/// section of the shop's README, rendered once.
pub async fn catalogue() -> Html<&'static str> {
    static PAGE: LazyLock<String> = LazyLock::new(|| {
        catalogue_page(
            "Shop problem types",
            "Every error the shop answers is RFC 9457 Problem Details \
             (`application/problem+json`). The `type` of the shop's own ends with `#` and one of \
             the names below; those of its idempotency keys lead to `/problems/idempotency`.",
            problem_types(include_str!("../README.md")),
        )
    });
    Html(PAGE.as_str())
}

/// The "Problem types" section of the README: from its heading to the next `## ` heading.
fn problem_types(readme: &str) -> &str {
    let start = readme
        .find("\n## Problem types\n")
        .expect("the shop's README has a Problem types section");
    let rest = &readme[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |at| at + 3);
    &rest[..end]
}

/// The kinds of error the shop answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShopProblemKind {
    /// 401: no `Authorization: Bearer <user>`, or a malformed one.
    Unauthenticated,
    /// 400: the body is not valid JSON, has wrong types, or values out of range.
    InvalidBody,
    /// 415: the body is not `application/json`.
    UnsupportedMediaType,
    /// 404: no route has this path.
    RouteNotFound,
    /// 405: the route exists, the method does not.
    MethodNotAllowed,
    /// 404: no payment with this id belongs to the caller.
    PaymentNotFound,
    /// 404: no transfer with this id.
    TransferNotFound,
    /// 400: the refund is larger than what is left of the payment.
    RefundExceedsPayment,
    /// 502: the bank failed to confirm the operation.
    BankUnavailable,
    /// 502: the bank refused the transfer for good (its account is closed, say); stored and
    /// replayed.
    BankRefused,
    /// 422: the bank's own answer to a transfer to a closed account.
    AccountClosed,
    /// 401: a bank webhook whose signature does not match its body.
    InvalidSignature,
    /// 500: the shop failed (its database, say).
    Internal,
    /// 431: the request has more header lines than the shop takes.
    TooManyHeaders,
    /// 503: the shop cannot take the connection now (every slot is taken, or it is shutting
    /// down). The answer carries `Retry-After`.
    Unavailable,
    /// 401: an admin request without `Authorization: Bearer <SHOP_ADMIN_TOKEN>`, or with
    /// another token.
    AdminUnauthorized,
    /// 400: an admin request's query misses a member or has an invalid one.
    InvalidQuery,
    /// 404: idem holds nothing for the key an admin request names.
    KeyNotHeld,
}

impl ShopProblemKind {
    /// Every kind, for the tests that keep the README and the OpenAPI document complete.
    pub const ALL: [Self; 18] = [
        Self::Unauthenticated,
        Self::InvalidBody,
        Self::UnsupportedMediaType,
        Self::RouteNotFound,
        Self::MethodNotAllowed,
        Self::PaymentNotFound,
        Self::TransferNotFound,
        Self::RefundExceedsPayment,
        Self::BankUnavailable,
        Self::BankRefused,
        Self::AccountClosed,
        Self::InvalidSignature,
        Self::Internal,
        Self::TooManyHeaders,
        Self::Unavailable,
        Self::AdminUnauthorized,
        Self::InvalidQuery,
        Self::KeyNotHeld,
    ];

    /// The status code of this kind.
    pub const fn status(self) -> StatusCode {
        match self {
            Self::Unauthenticated | Self::InvalidSignature | Self::AdminUnauthorized => {
                StatusCode::UNAUTHORIZED
            }
            Self::InvalidBody | Self::RefundExceedsPayment | Self::InvalidQuery => {
                StatusCode::BAD_REQUEST
            }
            Self::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::RouteNotFound
            | Self::PaymentNotFound
            | Self::TransferNotFound
            | Self::KeyNotHeld => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::BankUnavailable | Self::BankRefused => StatusCode::BAD_GATEWAY,
            Self::AccountClosed => StatusCode::UNPROCESSABLE_ENTITY,
            Self::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            Self::TooManyHeaders => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            Self::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The short, fixed title of this kind.
    pub const fn title(self) -> &'static str {
        match self {
            Self::Unauthenticated => "Authentication required",
            Self::InvalidBody => "The request body is invalid",
            Self::UnsupportedMediaType => "The request body must be JSON",
            Self::RouteNotFound => "No such resource",
            Self::MethodNotAllowed => "Method not allowed",
            Self::PaymentNotFound => "No such payment",
            Self::TransferNotFound => "No such transfer",
            Self::RefundExceedsPayment => "The refund exceeds the payment",
            Self::BankUnavailable => "The bank did not confirm the operation",
            Self::BankRefused => "The bank refused the transfer",
            Self::AccountClosed => "The receiving account is closed",
            Self::InvalidSignature => "The webhook signature is invalid",
            Self::Internal => "The shop failed",
            Self::TooManyHeaders => "Too many header lines",
            Self::Unavailable => "The shop cannot take the connection now",
            Self::AdminUnauthorized => "The admin token is missing or wrong",
            Self::InvalidQuery => "The query is invalid",
            Self::KeyNotHeld => "Nothing is held for this key",
        }
    }

    /// The slug that ends this kind's `type` URI, and names its README section.
    pub const fn slug(self) -> &'static str {
        match self {
            Self::Unauthenticated => "unauthenticated",
            Self::InvalidBody => "invalid-body",
            Self::UnsupportedMediaType => "unsupported-media-type",
            Self::RouteNotFound => "route-not-found",
            Self::MethodNotAllowed => "method-not-allowed",
            Self::PaymentNotFound => "payment-not-found",
            Self::TransferNotFound => "transfer-not-found",
            Self::RefundExceedsPayment => "refund-exceeds-payment",
            Self::BankUnavailable => "bank-unavailable",
            Self::BankRefused => "bank-refused",
            Self::AccountClosed => "account-closed",
            Self::InvalidSignature => "invalid-signature",
            Self::Internal => "internal",
            Self::TooManyHeaders => "too-many-headers",
            Self::Unavailable => "unavailable",
            Self::AdminUnauthorized => "admin-unauthorized",
            Self::InvalidQuery => "invalid-query",
            Self::KeyNotHeld => "key-not-held",
        }
    }

    /// The `type` URI of this kind.
    pub fn type_uri(self) -> String {
        format!("{TYPE_BASE}{}", self.slug())
    }
}

/// One field of a request body that failed validation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct FieldError {
    /// A JSON Pointer (RFC 6901) to the field, as a URI fragment: `#/amount`.
    pub pointer: String,
    /// What is wrong with it.
    pub detail: String,
}

impl FieldError {
    /// An error on the field at `path` (`amount`, `items/0/sku`; empty for the whole body).
    pub fn new(path: &str, detail: impl Into<String>) -> Self {
        let pointer = if path.is_empty() {
            "#".to_owned()
        } else {
            format!("#/{path}")
        };
        Self {
            pointer,
            detail: detail.into(),
        }
    }

    /// The field's path (`amount`), or `""` for the whole body.
    pub fn field(&self) -> &str {
        self.pointer
            .strip_prefix("#/")
            .unwrap_or(self.pointer.strip_prefix('#').unwrap_or(&self.pointer))
    }
}

/// An error the shop answers, as Problem Details.
#[derive(Clone, Debug)]
#[must_use]
pub struct ShopProblem {
    kind: ShopProblemKind,
    detail: Cow<'static, str>,
    errors: Vec<FieldError>,
}

impl ShopProblem {
    /// A problem of `kind`; `detail` says what was wrong with this request.
    pub fn new(kind: ShopProblemKind, detail: impl Into<Cow<'static, str>>) -> Self {
        Self {
            kind,
            detail: detail.into(),
            errors: Vec::new(),
        }
    }

    /// A 400 for a body whose fields failed validation; the detail names every field.
    pub fn invalid_fields(errors: Vec<FieldError>) -> Self {
        let detail = errors
            .iter()
            .map(|error| match error.field() {
                "" => error.detail.clone(),
                field => format!("{field}: {}", error.detail),
            })
            .collect::<Vec<_>>()
            .join("; ");
        Self {
            errors,
            ..Self::new(ShopProblemKind::InvalidBody, detail)
        }
    }

    /// The same problem as another kind (a refusal that names fields, say).
    pub fn with_kind(mut self, kind: ShopProblemKind) -> Self {
        self.kind = kind;
        self
    }

    /// The kind of this problem.
    pub fn kind(&self) -> ShopProblemKind {
        self.kind
    }

    /// The `detail` member.
    pub fn detail(&self) -> &str {
        &self.detail
    }

    /// The fields that failed validation.
    pub fn errors(&self) -> &[FieldError] {
        &self.errors
    }
}

/// The JSON body of a Problem Details answer, shop's or runtime's: what the OpenAPI
/// document calls `Problem`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Problem)]
pub struct ProblemBody {
    /// A URI that identifies the kind of problem and leads to its documentation.
    #[serde(rename = "type")]
    #[schema(example = "/problems/shop#invalid-body")]
    pub r#type: String,
    /// A short summary of the kind of problem, the same for every occurrence.
    #[schema(example = "The request body is invalid")]
    pub title: String,
    /// The HTTP status code.
    #[schema(example = 400)]
    pub status: u16,
    /// What was wrong with this request.
    #[schema(example = "amount: must be between 1 and 100000000")]
    pub detail: String,
    /// For an invalid body: one entry per field that failed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<FieldError>,
}

impl IntoResponse for ShopProblem {
    fn into_response(self) -> Response {
        let body = ProblemBody {
            r#type: self.kind.type_uri(),
            title: self.kind.title().to_owned(),
            status: self.kind.status().as_u16(),
            detail: self.detail.into_owned(),
            errors: self.errors,
        };
        let json = serde_json::to_vec(&body).expect("a problem is strings and numbers");
        let mut response = (self.kind.status(), json).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        match self.kind {
            ShopProblemKind::Unauthenticated => {
                headers.insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"shop\""),
                );
            }
            ShopProblemKind::AdminUnauthorized => {
                headers.insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"shop admin\""),
                );
            }
            ShopProblemKind::Unavailable => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
            }
            _ => {}
        }
        response
    }
}

/// What a handler answers when it does not succeed: a problem of its own, or a failure of
/// the ledger.
#[derive(Debug)]
pub enum ShopError {
    /// A refusal the handler decided (404, 400, 502...).
    Problem(ShopProblem),
    /// The ledger failed (503 or 500: the key is released, the request may be retried).
    Ledger(crate::ledger::LedgerError),
    /// A step of an operation of several steps did not give its output (a transfer's).
    Step(idem::steps::StepError),
}

impl From<idem::steps::StepError> for ShopError {
    fn from(error: idem::steps::StepError) -> Self {
        Self::Step(error)
    }
}

impl From<ShopProblem> for ShopError {
    fn from(problem: ShopProblem) -> Self {
        Self::Problem(problem)
    }
}

impl From<crate::ledger::LedgerError> for ShopError {
    fn from(error: crate::ledger::LedgerError) -> Self {
        Self::Ledger(error)
    }
}

impl IntoResponse for ShopError {
    fn into_response(self) -> Response {
        match self {
            Self::Problem(problem) => problem.into_response(),
            Self::Ledger(error) => error.into_response(),
            Self::Step(error) => error.into_response(),
        }
    }
}

impl std::fmt::Display for ShopProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            self.kind.title(),
            self.kind.status(),
            self.detail
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_a_distinct_slug_documented_in_the_readme() {
        let readme = include_str!("../README.md");
        let mut slugs: Vec<_> = ShopProblemKind::ALL
            .iter()
            .map(|kind| kind.slug())
            .collect();
        for slug in &slugs {
            assert!(
                readme.contains(&format!("\n### {slug}\n")),
                "the README has no section `### {slug}`"
            );
        }
        slugs.sort_unstable();
        slugs.dedup();
        assert_eq!(slugs.len(), ShopProblemKind::ALL.len());
    }

    #[test]
    fn the_catalogue_has_a_section_for_each_kind_and_nothing_else() {
        let page = problem_types(include_str!("../README.md"));
        assert!(page.starts_with("## Problem types\n"), "{page}");
        assert!(!page[3..].contains("\n## "), "{page}");
        let sections = page.matches("\n### ").count();
        assert_eq!(sections, ShopProblemKind::ALL.len());
    }

    #[test]
    fn a_validation_problem_names_each_field_in_detail_and_errors() {
        let problem = ShopProblem::invalid_fields(vec![
            FieldError::new("amount", "must be between 1 and 100000000"),
            FieldError::new("currency", "must be 3 capital letters"),
        ]);
        assert_eq!(
            problem.detail(),
            "amount: must be between 1 and 100000000; currency: must be 3 capital letters"
        );
        assert_eq!(problem.errors()[1].pointer, "#/currency");
        assert_eq!(problem.errors()[1].field(), "currency");
    }

    #[test]
    fn an_unauthenticated_answer_asks_for_a_bearer_token() {
        let response =
            ShopProblem::new(ShopProblemKind::Unauthenticated, "no token").into_response();
        assert_eq!(response.status(), 401);
        assert_eq!(response.headers()[header::CONTENT_TYPE], PROBLEM_JSON);
        assert!(
            response.headers()[header::WWW_AUTHENTICATE]
                .to_str()
                .unwrap()
                .starts_with("Bearer")
        );
    }
}
