//! Why a document cannot be made from a router: each case names the endpoint and the fix.

use std::{fmt, time::Duration};

use http::StatusCode;

use super::Endpoint;

/// Why [`Documenter::document`](super::Documenter::document) (or a check) cannot state what a
/// route does: rather than a document that says something else than the router does, an
/// error that names the endpoint.
///
/// ```
/// use axum::{Router, http::StatusCode, routing::post};
/// use idem::openapi::{DocumentError, Documenter};
/// use utoipa::openapi::{HttpMethod, OpenApi, PathItem, PathsBuilder, path::Operation};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let document = OpenApi::builder()
///     .paths(PathsBuilder::new().path("/refunds", PathItem::new(HttpMethod::Post, Operation::new())))
///     .build();
/// let router: Router = Router::new().route("/payments", post(|| async { StatusCode::CREATED }));
/// let Err(error) = Documenter::new().document(&router, document).await else {
///     panic!("no route serves POST /refunds");
/// };
/// assert!(matches!(error, DocumentError::NotRouted { .. }));
/// assert!(error.to_string().starts_with("POST /refunds is in the document, but no route"));
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DocumentError {
    /// The document has an operation that no route of the router serves.
    NotRouted {
        /// The operation of the document.
        endpoint: Endpoint,
    },
    /// Something in front of the route's handler (authentication, usually) refused the probe,
    /// so whether idem guards the route is unknown.
    ProbeRefused {
        /// The operation of the document.
        endpoint: Endpoint,
        /// What the probe was answered.
        status: StatusCode,
    },
    /// The route did not answer its probe in time.
    TimedOut {
        /// The operation of the document.
        endpoint: Endpoint,
        /// How long the probe waited.
        after: Duration,
    },
    /// An `#[idempotent]` handler whose requests find no runtime: every request would be
    /// answered 500.
    RuntimeMissing {
        /// The operation of the document.
        endpoint: Endpoint,
    },
    /// The probe of an operation reached a route of another template than the operation's.
    OtherRoute {
        /// The operation of the document.
        endpoint: Endpoint,
        /// The template of the route that answered.
        route: String,
    },
    /// Two operations of the document are one route of the router: the route is mounted (or
    /// documented) twice.
    SameRoute {
        /// One operation.
        first: Endpoint,
        /// The other.
        second: Endpoint,
        /// The route's template.
        route: String,
    },
    /// The operation documents the `Idempotency-Key` header itself, which the route's policy
    /// states: two places to keep in step, which may already disagree.
    KeyDocumented {
        /// The operation of the document.
        endpoint: Endpoint,
    },
    /// A response or parameter of the operation is a reference that the document does not
    /// hold, so what idem adds to it cannot be added.
    DanglingReference {
        /// The operation of the document.
        endpoint: Endpoint,
        /// The reference.
        reference: String,
    },
    /// The document has a schema of the name idem's Problem Details schema takes, and it is
    /// another schema.
    SchemaTaken {
        /// The schema's name.
        name: &'static str,
    },
}

impl fmt::Display for DocumentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotRouted { endpoint } => write!(
                f,
                "{endpoint} is in the document, but no route of the router serves it (its \
                 probe reached the router's fallback): route it, or take it out of the document"
            ),
            Self::ProbeRefused { endpoint, status } => write!(
                f,
                "the probe of {endpoint} was refused with {status} before it reached idem or \
                 the handler, so its policy is unknown: give probes the credentials that layer \
                 wants (`Documenter::header`), or let it pass requests that hold \
                 `openapi::Probe`"
            ),
            Self::TimedOut { endpoint, after } => write!(
                f,
                "the probe of {endpoint} had no answer after {after:?}: its route has no idem \
                 in front of a handler that waits, or something in front of it waits \
                 (`Documenter::timeout`)"
            ),
            Self::RuntimeMissing { endpoint } => write!(
                f,
                "{endpoint} is `#[idempotent]`, but its requests find no idempotency runtime: \
                 add `.layer(axum::Extension(idempotency))` to the router"
            ),
            Self::OtherRoute { endpoint, route } => write!(
                f,
                "the probe of {endpoint} reached the route `{route}`, whose template is not \
                 the operation's path: the document and the router name different routes"
            ),
            Self::SameRoute {
                first,
                second,
                route,
            } => write!(
                f,
                "{first} and {second} are one route of the router (`{route}`): document it once"
            ),
            Self::KeyDocumented { endpoint } => write!(
                f,
                "{endpoint} documents an `Idempotency-Key` parameter of its own: remove it \
                 (from `#[utoipa::path(params(...))]`, say); the document takes it from the \
                 route's policy"
            ),
            Self::DanglingReference {
                endpoint,
                reference,
            } => write!(
                f,
                "{endpoint} refers to `{reference}`, which the document does not hold"
            ),
            Self::SchemaTaken { name } => write!(
                f,
                "the document has a schema named `{name}` that is not idem's Problem Details \
                 schema: rename it"
            ),
        }
    }
}

impl std::error::Error for DocumentError {}
