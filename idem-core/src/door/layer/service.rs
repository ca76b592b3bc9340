//! The service [`IdempotencyLayer`] wraps each route in.

use std::{
    convert::Infallible,
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

use axum::{
    body::Body,
    extract::{MatchedPath, OriginalUri, Request},
    response::{IntoResponse, Response},
};
use tower_service::Service;

use bytes::Bytes;
use http::{StatusCode, request::Parts};

use super::IdempotencyLayer;
use crate::{
    context::IdempotencyContext,
    flow::{self, Door, RequestFuture},
    replay::NoStore,
};

/// The future of an [`IdempotencyService`]: a request the layer takes through idempotency
/// runs to its end even if its caller stops waiting (its client disconnected), so that its
/// result is stored for the retry; a request it lets through is cancelled with its caller, as
/// without the layer.
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct ResponseFuture(RequestFuture);

impl Future for ResponseFuture {
    type Output = Result<Response, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx).map(Ok)
    }
}

/// Makes an inner service idempotent; built by [`IdempotencyLayer`].
#[derive(Clone, Debug)]
pub struct IdempotencyService<S> {
    inner: S,
    layer: IdempotencyLayer,
}

impl<S> IdempotencyService<S> {
    pub(super) fn new(inner: S, layer: IdempotencyLayer) -> Self {
        Self { inner, layer }
    }
}

impl<S, R> Service<Request> for IdempotencyService<S>
where
    S: Service<Request, Response = R, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
    R: IntoResponse + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        // The clone that was polled ready serves this request; the fresh clone waits for the
        // next `poll_ready` (tower's documented pattern).
        let fresh = self.inner.clone();
        let wrapped = LayerDoor(std::mem::replace(&mut self.inner, fresh));
        if !self.layer.methods.contains(request.method()) || unrouted(&request) {
            return ResponseFuture(RequestFuture::cancellable(wrapped.call(request)));
        }
        let (idem, policy) = (self.layer.idem.clone(), self.layer.policy);
        // A probe asks for the policy, which it gets without a claim or a call of the route.
        #[cfg(feature = "openapi")]
        if let Some(answer) = crate::openapi::probe::answer(&request, Some(&idem), policy) {
            return ResponseFuture(RequestFuture::cancellable(std::future::ready(answer)));
        }
        ResponseFuture(flow::start(idem, policy, request, wrapped))
    }
}

/// Whether an axum router routed the request and found no route for it: its fallback (404)
/// is the service's own answer, not an operation, and is never claimed or stored. A router
/// marks every request it routes (`OriginalUri`) and each one it matched (`MatchedPath`);
/// a request with neither reached the layer outside a router, where the path is its route.
fn unrouted(request: &Request) -> bool {
    let extensions = request.extensions();
    extensions.get::<MatchedPath>().is_none() && extensions.get::<OriginalUri>().is_some()
}

/// The wrapped service, ready: the layer's [`Door`]. Its extractors and middleware run
/// only when the handler does, so the layer has no checks of its own before the claim; the
/// application's authentication goes outside the layer (see the [module docs](super)).
struct LayerDoor<S>(S);

impl<S, R> LayerDoor<S>
where
    S: Service<Request, Response = R, Error = Infallible>,
    S::Future: Send + 'static,
    R: IntoResponse + 'static,
{
    /// Calls the inner service, which `poll_ready` has made ready.
    fn call(mut self, request: Request) -> impl Future<Output = Response> + Send + 'static {
        let response = self.0.call(request);
        async move {
            match response.await {
                Ok(response) => response.into_response(),
                Err(never) => match never {},
            }
        }
    }
}

impl<S, R> Door for LayerDoor<S>
where
    S: Service<Request, Response = R, Error = Infallible> + Send + 'static,
    S::Future: Send + 'static,
    R: IntoResponse + 'static,
{
    type Head = ();
    type Prepared = Request;

    const CHECKS_READ_CONTEXT: bool = false;

    fn attach(request: &mut Request, context: IdempotencyContext) {
        request.extensions_mut().insert(context);
    }

    fn head(&self, _: &mut Parts) -> impl Future<Output = Result<(), Response>> + Send {
        std::future::ready(Ok(()))
    }

    fn prepare(
        &self,
        (): (),
        parts: Parts,
        body: Bytes,
    ) -> impl Future<Output = Result<Request, Response>> + Send {
        std::future::ready(Ok(Request::from_parts(parts, Body::from(body))))
    }

    fn call(self, request: Request) -> impl Future<Output = Response> + Send + 'static {
        let response = LayerDoor::call(self, request);
        async move {
            let mut response = response.await;
            // 405 is the router's answer for a method the route does not serve (a layer added
            // with `Router::layer` wraps it too): not the operation's result, so not stored.
            if response.status() == StatusCode::METHOD_NOT_ALLOWED {
                response.extensions_mut().insert(NoStore);
            }
            response
        }
    }

    fn call_without_key(self, request: Request) -> impl Future<Output = Response> + Send + 'static {
        LayerDoor::call(self, request)
    }
}
