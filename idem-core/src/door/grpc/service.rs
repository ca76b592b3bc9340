//! The service [`GrpcIdempotencyLayer`](super::GrpcIdempotencyLayer) wraps a gRPC server
//! in: a covered unary call goes through the flow; every other call passes through.

use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use axum::{body::Body, extract::Request, response::Response};
use bytes::Bytes;
use http::{Uri, request::Parts};
use http_body_util::BodyExt;
use tonic::Status;
use tower_service::Service;

use super::{
    answer,
    config::{Config, Covered},
    record, request,
};
use crate::{
    context::IdempotencyContext,
    door::presented,
    flow::{self, Door},
};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The path of the gRPC method a call is for, which the layer puts into every call's
/// extensions: `#[idempotent]` methods scope their keys by it.
#[derive(Clone, Debug)]
pub(crate) struct MethodPath(pub(crate) Uri);

/// The future of a [`GrpcIdempotencyService`]. A covered call that reached the flow runs to
/// its end even if its caller stops waiting, so that its result is stored for the retry.
pub type ResponseFuture<E> = Pin<Box<dyn Future<Output = Result<Response, E>> + Send>>;

/// Makes the covered unary methods of an inner gRPC service idempotent; built by
/// [`GrpcIdempotencyLayer`](super::GrpcIdempotencyLayer).
#[derive(Clone)]
pub struct GrpcIdempotencyService<S> {
    inner: S,
    config: Arc<Config>,
}

impl<S> GrpcIdempotencyService<S> {
    pub(super) fn new(inner: S, config: Arc<Config>) -> Self {
        Self { inner, config }
    }
}

impl<S> std::fmt::Debug for GrpcIdempotencyService<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrpcIdempotencyService")
            .finish_non_exhaustive()
    }
}

impl<S, B, R> Service<http::Request<B>> for GrpcIdempotencyService<S>
where
    S: Service<Request, Response = http::Response<R>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError> + Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
    R: http_body::Body<Data = Bytes> + Send + 'static,
    R::Error: Into<BoxError>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = ResponseFuture<S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        // The clone that was polled ready serves this call (tower's documented pattern).
        let fresh = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, fresh);
        let mut request = request.map(Body::new);
        let path = MethodPath(request.uri().clone());
        let extensions = request.extensions_mut();
        extensions.insert(self.config.idem.clone());
        extensions.insert(path);
        let covered = request::is_grpc(request.headers())
            .then(|| self.config.methods.get(request.uri().path()).cloned())
            .flatten();
        let Some(covered) = covered else {
            return Box::pin(async move {
                let response = inner.call(request).await?;
                Ok(response.map(Body::new))
            });
        };
        let config = Arc::clone(&self.config);
        Box::pin(async move { Ok(idempotent(&config, covered, inner, request).await) })
    }
}

/// A covered call: checked and keyed before the flow, taken through it, answered in gRPC.
async fn idempotent<S, R>(config: &Config, covered: Covered, inner: S, request: Request) -> Response
where
    S: Service<Request, Response = http::Response<R>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    R: http_body::Body<Data = Bytes> + Send + 'static,
    R::Error: Into<BoxError>,
{
    match presented(config, &covered, request).await {
        Ok(presented) => {
            let answer = flow::start(
                config.idem.clone(),
                config.policy,
                presented,
                ServiceDoor(inner),
            )
            .await;
            answer::layer(answer).await
        }
        Err(status) => status.into_http(),
    }
}

/// The call as the flow's request, or the status that refuses it before the flow.
async fn presented(
    config: &Config,
    covered: &Covered,
    request: Request,
) -> Result<Request, Status> {
    let idem = &config.idem;
    let (parts, body) = request.into_parts();
    request::compression(&parts.headers)?;
    let body = request::whole_body(idem, body, config.max_message).await?;
    let message = request::message(idem, &body, config.max_message)?;
    let from_message = match &covered.key {
        Some(read) => read(message).map_err(|_| request::undecodable())?,
        None if request::well_formed(message) => None,
        None => return Err(request::undecodable()),
    };
    let key = request::key(idem, &parts.headers, from_message)?;
    let Parts {
        uri,
        version,
        headers,
        extensions,
        ..
    } = parts;
    let mut presented = presented::request(uri, headers, body, key);
    *presented.version_mut() = version;
    *presented.extensions_mut() = extensions;
    Ok(request::for_the_flow(presented))
}

/// The layer's door: the inner service, ready. Its response is read whole and flattened, so
/// that the flow stores the message, the metadata and the status together.
struct ServiceDoor<S>(S);

impl<S, R> Door for ServiceDoor<S>
where
    S: Service<Request, Response = http::Response<R>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    R: http_body::Body<Data = Bytes> + Send + 'static,
    R::Error: Into<BoxError>,
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

    fn call(mut self, request: Request) -> impl Future<Output = Response> + Send + 'static {
        let response = self.0.call(request);
        async move {
            let (head, body) = match response.await {
                Ok(response) => response.into_parts(),
                Err(error) => return Status::from_error(error.into()).into_http(),
            };
            match body.collect().await {
                Ok(collected) => {
                    let trailers = collected.trailers().cloned();
                    record::flatten(head, collected.to_bytes(), trailers)
                }
                Err(error) => {
                    let status = Status::internal(format!(
                        "the response failed: {}",
                        crate::observe::Chain(&*error.into())
                    ));
                    let (head, ()) = status.into_http::<()>().into_parts();
                    record::flatten(head, Bytes::new(), None)
                }
            }
        }
    }

    fn call_without_key(
        mut self,
        request: Request,
    ) -> impl Future<Output = Response> + Send + 'static {
        let response = self.0.call(request);
        async move {
            match response.await {
                Ok(response) => response.map(Body::new),
                Err(error) => Status::from_error(error.into()).into_http(),
            }
        }
    }
}
