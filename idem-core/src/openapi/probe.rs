//! The probe: a request marked with [`Probe`] that asks a route which policy it runs.
//!
//! idem's doors (the `#[idempotent]` handler and [`IdempotencyLayer`](crate::IdempotencyLayer))
//! answer a probe before anything else: they write what they would do into the probe and
//! answer `204 No Content`, without reading the body, resolving a principal, claiming a key or
//! calling the handler. A route without idem has no one to write into the probe: its answer is
//! the handler's own, which is why a probe carries a body that cannot be read (see
//! [`Documenter`](super::Documenter) for what that means for a route without idem).

use std::sync::{Arc, Mutex, PoisonError};

use axum::{
    extract::{MatchedPath, Request},
    middleware::Next,
    response::{IntoResponse, Response},
};
use http::StatusCode;

use crate::{flow::body_limit, policy::Policy, problem::ProblemKind, runtime::Idempotency};

/// The mark of a probe request: idem asking a route of a router which idempotency policy it
/// runs, to describe it in an OpenAPI document ([`Documenter`](super::Documenter)).
///
/// Only code in the process can put it into a request's extensions, so an authentication
/// middleware in front of idem may let a request that holds one through without
/// credentials: idem's doors answer it without running the handler. A route without idem
/// runs its handler for it as for any request, so such a middleware should let a probe
/// through only where idem stands behind it, or not at all (give the probe credentials with
/// [`Documenter::header`](super::Documenter::header) instead).
///
/// ```
/// use axum::{extract::Request, http::StatusCode, middleware::Next, response::{IntoResponse, Response}};
/// use idem::openapi::Probe;
///
/// async fn authenticate(request: Request, next: Next) -> Response {
///     let probe = request.extensions().get::<Probe>().is_some();
///     if !probe && !request.headers().contains_key("authorization") {
///         return StatusCode::UNAUTHORIZED.into_response();
///     }
///     next.run(request).await
/// }
/// # let _ = authenticate;
/// ```
#[derive(Clone, Debug)]
pub struct Probe {
    seen: Arc<Mutex<Seen>>,
}

/// What a probe met on its way: the route the router matched, and what idem said.
#[derive(Clone, Debug, Default)]
pub(crate) struct Seen {
    /// The matched route's template, written by [`mark_matched`] when the router matched one.
    pub(crate) matched: Option<String>,
    /// What the door of idem on the route said: the outermost one, which answers the probe.
    pub(crate) sighting: Option<Sighting>,
}

/// What a door of idem said to a probe: the policy it runs, as the runtime applies it.
#[derive(Clone, Debug)]
pub(crate) struct Sighting {
    /// The policy the runtime applies ([`Idempotency::applied`]), or the route's own when
    /// there is no runtime.
    pub(crate) policy: Policy,
    /// What the runtime adds to the policy; `None` when the route found no runtime.
    pub(crate) runtime: Option<RuntimeFacts>,
}

/// What the answers of a route depend on beyond its policy.
#[derive(Clone, Debug)]
pub(crate) struct RuntimeFacts {
    /// The `type` URI of each problem kind, with the runtime's base.
    pub(crate) type_uris: Vec<(ProblemKind, String)>,
    /// The body limit the route holds a request to (axum's `DefaultBodyLimit`), if any.
    pub(crate) body_limit: Option<usize>,
}

impl RuntimeFacts {
    /// The `type` URI of `kind`.
    pub(crate) fn type_uri(&self, kind: ProblemKind) -> String {
        self.type_uris
            .iter()
            .find(|(known, _)| *known == kind)
            .map_or_else(|| kind.type_uri(), |(_, uri)| uri.clone())
    }
}

impl Probe {
    /// A new probe, which has seen nothing yet.
    pub(crate) fn new() -> Self {
        Self {
            seen: Arc::default(),
        }
    }

    /// What it has seen so far.
    pub(crate) fn seen(&self) -> Seen {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Seen> {
        // A panic elsewhere while the lock was held leaves a value that is still whole.
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The answer of a door to `request` if it is a probe: the door runs `policy`, on the
/// runtime `idem` if it found one.
pub(crate) fn answer(
    request: &Request,
    idem: Option<&Idempotency>,
    policy: Policy,
) -> Option<Response> {
    let probe = request.extensions().get::<Probe>()?;
    let sighting = match idem {
        Some(idem) => Sighting {
            policy: idem.applied(policy),
            runtime: Some(RuntimeFacts {
                type_uris: ProblemKind::ALL
                    .iter()
                    .map(|kind| (*kind, idem.problem(*kind, "").type_uri()))
                    .collect(),
                body_limit: body_limit::of(request.extensions()),
            }),
        },
        None => Sighting {
            policy,
            runtime: None,
        },
    };
    probe.lock().sighting = Some(sighting);
    Some(StatusCode::NO_CONTENT.into_response())
}

/// Notes, for a probe, the route the router matched: a middleware that the documenter adds
/// to the probed router with `route_layer`, so that it runs only on a matched route, before
/// the route's own middleware.
pub(crate) async fn mark_matched(request: Request, next: Next) -> Response {
    if let (Some(probe), Some(matched)) = (
        request.extensions().get::<Probe>(),
        request.extensions().get::<MatchedPath>(),
    ) {
        probe.lock().matched = Some(matched.as_str().to_owned());
    }
    next.run(request).await
}
