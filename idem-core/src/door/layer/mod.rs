//! [`IdempotencyLayer`]: idempotency for every POST and PATCH route of a router, without the
//! macro.
//!
//! ```
//! use axum::{Router, routing::post, Json};
//! use idem::{Idempotency, IdempotencyLayer, MemoryStore, Policy, Scope};
//!
//! async fn create_payment(Json(body): Json<serde_json::Value>) -> Json<serde_json::Value> {
//!     Json(body)
//! }
//!
//! let idem = Idempotency::new(MemoryStore::default());
//! let app: Router = Router::new()
//!     .route("/payments", post(create_payment))
//!     .route_layer(IdempotencyLayer::new(idem, Policy::new().scope(Scope::Global)));
//! # drop(app);
//! ```
//!
//! Where the layer goes decides what it sees besides the routes' handlers:
//!
//! - on a route's method router, `post(create_payment).route_layer(layer)`: the handler alone.
//!   A request to no route (404) or with a method the route does not serve (405) gets the
//!   router's own answer, key or no key;
//! - with [`Router::route_layer`](axum::Router::route_layer): every route's handlers, and each
//!   route's answer to a method it does not serve (405), but not the router's fallback (404);
//! - with [`Router::layer`](axum::Router::layer): the fallback too.
//!
//! Wherever it goes, a request that matched no route passes through untouched (never claimed,
//! never stored), and a 405 is never stored; but wrapping a route's 405, the layer asks a
//! request without a key for one (400) before the router can say 405. The route's template
//! (`/payments/{id}`) is what the store key uses; outside a router, the request path.
//! Safe methods (GET, HEAD, OPTIONS, TRACE) always pass through untouched.
//!
//! The request body limit is axum's [`DefaultBodyLimit`](axum::extract::DefaultBodyLimit)
//! (2 MiB unless set): put that layer outside this one to change it.
//!
//! Unlike `#[idempotent]`, the layer cannot tell a handler's extractor rejection (bad JSON)
//! from the handler's own answer: both are stored. Mark responses that must not be stored
//! with [`NoStore`](crate::replay::NoStore).
//!
//! # What a replay checks: authentication goes outside the layer
//!
//! A replay is answered by the layer without calling what is inside it: the route's
//! extractors, the handler, and any middleware added with `route_layer` or a `layer` call made
//! before this one. So every check that guards the operation (authentication,
//! authorization, a webhook's signature over its body) must be a middleware outside this
//! layer, which in axum means a `.layer(..)` call after this one (or a `.route_layer(..)`
//! after it): it then runs for a first
//! request and for every replay alike, and a request it refuses never reaches the store.
//! With `scope = user` it is also what inserts the [`Principal`](crate::scope::Principal) the layer
//! scopes keys by; without one, every keyed request is answered 500 `principal-missing` (the
//! service's fault, not the client's), and the log says so once per route.
//!
//! ```
//! use axum::{Router, extract::Request, http::StatusCode, middleware::{self, Next},
//!     response::{IntoResponse, Response}, routing::post};
//! use idem::{Idempotency, IdempotencyLayer, Policy, Principal};
//!
//! async fn authenticate(mut request: Request, next: Next) -> Response {
//!     let user = request.headers().get("authorization")
//!         .and_then(|value| value.to_str().ok())
//!         .and_then(|value| value.strip_prefix("Bearer "))
//!         .map(str::to_owned);
//!     let Some(user) = user else {
//!         return StatusCode::UNAUTHORIZED.into_response();
//!     };
//!     request.extensions_mut().insert(Principal::new(user));
//!     next.run(request).await
//! }
//!
//! # async fn create_payment() -> StatusCode { StatusCode::CREATED }
//! let app: Router = Router::new()
//!     .route("/payments", post(create_payment))
//!     .route_layer(IdempotencyLayer::new(Idempotency::default(), Policy::new()))
//!     // Added after, so it runs before: for first requests and replays alike.
//!     .layer(middleware::from_fn(authenticate));
//! # drop(app);
//! ```
//!
//! A check over the body (an HMAC of a webhook) reads the body in that outer middleware and
//! puts it back for the layer (`axum::body::to_bytes`, then `Request::from_parts` with
//! `Body::from(bytes)`); `tests/tests/layer_guards.rs` in the repository does exactly that.
//! With `#[idempotent]` the same check is simply the handler's body extractor, which the
//! attribute runs before every replay.

mod service;

use std::sync::Arc;

use http::Method;
use tower_layer::Layer;

pub use self::service::{IdempotencyService, ResponseFuture};
use crate::{
    policy::{Policy, PolicyError},
    runtime::Idempotency,
};

/// A tower layer that makes the routes below it idempotent under one [`Policy`].
#[derive(Clone, Debug)]
#[must_use]
pub struct IdempotencyLayer {
    idem: Idempotency,
    policy: Policy,
    methods: Arc<[Method]>,
}

impl IdempotencyLayer {
    /// The layer for `policy` on the runtime `idem`, intercepting POST and PATCH.
    ///
    /// # Panics
    ///
    /// If the policy cannot work ([`Policy::validate`]); [`try_new`](Self::try_new) returns
    /// the error instead.
    pub fn new(idem: Idempotency, policy: Policy) -> Self {
        match Self::try_new(idem, policy) {
            Ok(layer) => layer,
            Err(error) => panic!("invalid idempotency policy: {error}"),
        }
    }

    /// The layer for `policy`, or the reason the policy cannot work.
    pub fn try_new(idem: Idempotency, policy: Policy) -> Result<Self, PolicyError> {
        policy.validate()?;
        Ok(Self {
            idem,
            policy,
            methods: Arc::new([Method::POST, Method::PATCH]),
        })
    }

    /// The methods the layer intercepts (POST and PATCH by default). Safe methods are never
    /// intercepted, even when listed.
    pub fn methods(mut self, methods: impl IntoIterator<Item = Method>) -> Self {
        self.methods = methods
            .into_iter()
            .filter(|method| !is_safe(method))
            .collect();
        self
    }
}

/// RFC 9110 §9.2.1: methods that change nothing need no idempotency key.
fn is_safe(method: &Method) -> bool {
    [Method::GET, Method::HEAD, Method::OPTIONS, Method::TRACE].contains(method)
}

impl<S> Layer<S> for IdempotencyLayer {
    type Service = IdempotencyService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        IdempotencyService::new(inner, self.clone())
    }
}
