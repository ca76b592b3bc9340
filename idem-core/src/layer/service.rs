//! The service [`IdempotencyLayer`] wraps each route in.

use std::{
    convert::Infallible,
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

use axum::{
    body::Body,
    extract::Request,
    response::{IntoResponse, Response},
};
use tower_service::Service;

use super::IdempotencyLayer;
use crate::{
    context::IdempotencyContext,
    flow::{self, Admission},
    scope::Route,
};

/// The future of an [`IdempotencyService`].
pub type ResponseFuture = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

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

    fn call(&mut self, mut request: Request) -> Self::Future {
        if !self.layer.methods.contains(request.method()) {
            let response = self.inner.call(request);
            return Box::pin(async move { Ok(response.await?.into_response()) });
        }
        // The clone that was polled ready serves this request; the fresh clone waits for the
        // next `poll_ready` (tower's documented pattern).
        let fresh = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, fresh);
        let IdempotencyLayer { idem, policy, .. } = self.layer.clone();
        Box::pin(async move {
            let context = IdempotencyContext::new(&idem);
            request.extensions_mut().insert(context.clone());
            let keyed = match flow::admit(&policy, request).await {
                Ok(Admission::Keyed(keyed)) => keyed,
                Ok(Admission::Unkeyed(request)) => {
                    let route = Route::of(request.extensions(), request.uri());
                    let handler = call(inner, request);
                    return Ok(
                        flow::run_unrecorded(&policy, route.as_str(), context, handler).await,
                    );
                }
                Err(refusal) => return Ok(refusal),
            };
            let store_key = match flow::store_key(&idem, &policy, &keyed.parts, &keyed.key) {
                Ok(store_key) => store_key,
                Err(refusal) => return Ok(refusal),
            };
            let route = Route::of(&keyed.parts.extensions, &keyed.parts.uri);
            let request = Request::from_parts(keyed.parts, Body::from(keyed.body));
            let handler = move || call(inner, request);
            Ok(flow::run(
                &idem,
                &policy,
                store_key,
                &keyed.fingerprint,
                route,
                context,
                handler,
            )
            .await)
        })
    }
}

/// Calls the inner service, which `poll_ready` has made ready.
fn call<S, R>(mut inner: S, request: Request) -> impl Future<Output = Response> + Send + 'static
where
    S: Service<Request, Response = R, Error = Infallible>,
    S::Future: Send + 'static,
    R: IntoResponse + 'static,
{
    let response = inner.call(request);
    async move {
        match response.await {
            Ok(response) => response.into_response(),
            Err(never) => match never {},
        }
    }
}
