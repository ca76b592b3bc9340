//! [`Documenter::check`]: whether a document says of each route what the route runs, for a
//! test, or for a document kept in a repository.

use std::{collections::HashSet, fmt};

use axum::Router;
use http::{Method, StatusCode};
use serde_json::Value;
use utoipa::openapi::{OpenApi, path::Operation};

use super::{
    DocumentError, Documenter, Endpoint,
    ask::Outcome,
    document::{documented, marked},
    endpoint, extension, parameter,
};

/// One way in which a document and a router disagree ([`Documenter::check`]).
///
/// ```
/// use axum::{Router, http::{Method, StatusCode}, routing::post};
/// use idem::{Idempotency, IdempotencyLayer, Policy, Scope};
/// use idem::openapi::{Documenter, Endpoint, Finding};
/// use utoipa::openapi::OpenApi;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let router: Router = Router::new()
///     .route("/orders", post(|| async { StatusCode::CREATED }))
///     .route_layer(IdempotencyLayer::new(Idempotency::default(), Policy::new().scope(Scope::Global)));
/// // A document that forgot the route.
/// let document = OpenApi::default();
/// let orders = Endpoint::new(Method::POST, "/orders");
/// let error = Documenter::new()
///     .check(&router, &document, [orders.clone()])
///     .await
///     .unwrap_err();
/// assert_eq!(error.findings, [Finding::Undocumented { endpoint: orders }]);
/// # }
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Finding {
    /// idem guards the route, and the document does not say so: the operation is missing, or
    /// has no `x-idempotency`.
    Undocumented {
        /// The route.
        endpoint: Endpoint,
    },
    /// The document says the operation takes an `Idempotency-Key` (a parameter, or
    /// `x-idempotency`), and no idem guards its route.
    NotGuarded {
        /// The operation.
        endpoint: Endpoint,
        /// What the route answered the probe.
        status: StatusCode,
    },
    /// The document's `x-idempotency` is not the policy the route runs.
    Stale {
        /// The operation.
        endpoint: Endpoint,
        /// The document's `x-idempotency`.
        documented: Value,
        /// What the route runs, as `x-idempotency`.
        running: Value,
    },
    /// The route's probe could not tell.
    Unanswered(DocumentError),
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Undocumented { endpoint } => write!(
                f,
                "idem guards {endpoint}, and the document does not say so (no such operation, \
                 or no `x-idempotency` on it)"
            ),
            Self::NotGuarded { endpoint, status } => write!(
                f,
                "the document says {endpoint} takes an `Idempotency-Key`, and no idem guards \
                 its route (its probe was answered {status})"
            ),
            Self::Stale {
                endpoint,
                documented,
                running,
            } => write!(
                f,
                "the `x-idempotency` of {endpoint} is not what its route runs: the document \
                 says {documented}, the route runs {running}"
            ),
            Self::Unanswered(error) => error.fmt(f),
        }
    }
}

/// A document that does not say what the router does: every [`Finding`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct CheckError {
    /// What disagrees, in the document's order, then the routes'.
    pub findings: Vec<Finding>,
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the OpenAPI document and the router disagree:")?;
        for finding in &self.findings {
            write!(f, "\n- {finding}")?;
        }
        Ok(())
    }
}

impl std::error::Error for CheckError {}

/// What an operation of the document says of its key.
enum Claim<'a> {
    /// Nothing: it takes no key.
    None,
    /// An `Idempotency-Key` parameter without `x-idempotency`.
    KeyOnly,
    /// `x-idempotency`, with this value.
    Policy(&'a Value),
}

impl Documenter {
    /// Checks that `openapi` says of every route what it runs: each operation of the document
    /// that idem may guard (POST, PUT, PATCH, DELETE), and each of `routes` that the document
    /// does not have, is probed through `router`.
    ///
    /// The check sees the document's operations and the routes it is given: axum does not
    /// list a router's routes, so a route that neither names is not seen. `utoipa-axum`'s
    /// `OpenApiRouter` documents every route added with `routes!`; name the others here.
    ///
    /// # Errors
    ///
    /// Every way in which they disagree, in one [`CheckError`].
    pub async fn check(
        &self,
        router: &Router,
        openapi: &OpenApi,
        routes: impl IntoIterator<Item = Endpoint>,
    ) -> Result<(), CheckError> {
        let router = marked(router);
        let mut findings = Vec::new();
        let mut seen: HashSet<(Method, String)> = HashSet::new();
        for endpoint in documented(openapi) {
            seen.insert((endpoint.method(), endpoint.shape()));
            let claim = claim_of(openapi, &endpoint);
            if let Some(finding) = self.compare(&router, endpoint, claim).await {
                findings.push(finding);
            }
        }
        for endpoint in routes {
            if seen.insert((endpoint.method(), endpoint.shape())) {
                let finding = self.compare(&router, endpoint, Claim::None).await;
                findings.extend(finding);
            }
        }
        if findings.is_empty() {
            Ok(())
        } else {
            Err(CheckError { findings })
        }
    }

    /// What disagrees between `claim` and what the route of `endpoint` runs, if anything.
    async fn compare(
        &self,
        router: &Router,
        endpoint: Endpoint,
        claim: Claim<'_>,
    ) -> Option<Finding> {
        let found = match self.ask(router, &endpoint).await {
            Ok(found) => found,
            Err(error) => return Some(Finding::Unanswered(error)),
        };
        match (found.outcome, claim) {
            (Outcome::Guarded(sighting), Claim::Policy(documented)) => {
                let running = extension::value(&sighting);
                (*documented != running).then(|| Finding::Stale {
                    endpoint,
                    documented: documented.clone(),
                    running,
                })
            }
            (Outcome::Guarded(_), Claim::None | Claim::KeyOnly) => {
                Some(Finding::Undocumented { endpoint })
            }
            (Outcome::Unguarded(status), Claim::Policy(_) | Claim::KeyOnly) => {
                Some(Finding::NotGuarded { endpoint, status })
            }
            (Outcome::Unguarded(_), Claim::None) => None,
        }
    }
}

/// What the operation of `endpoint` in `openapi` says of its key.
fn claim_of<'a>(openapi: &'a OpenApi, endpoint: &Endpoint) -> Claim<'a> {
    let operation: Option<&Operation> = openapi
        .paths
        .paths
        .get(endpoint.path())
        .and_then(|item| endpoint::operation(item, &endpoint.method()));
    let Some(operation) = operation else {
        return Claim::None;
    };
    let policy = operation
        .extensions
        .as_ref()
        .and_then(|extensions| extensions.get(extension::NAME));
    match policy {
        Some(policy) => Claim::Policy(policy),
        None if operation
            .parameters
            .iter()
            .flatten()
            .any(parameter::is_key_parameter) =>
        {
            Claim::KeyOnly
        }
        None => Claim::None,
    }
}
