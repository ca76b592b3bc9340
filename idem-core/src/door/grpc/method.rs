//! `#[idempotent]` on a method of a tonic service's trait impl: the call the expansion makes,
//! [`unary`], and the method's door.
//!
//! The method's message is already decoded by tonic; the door presents it to the flow as the
//! layer presents a call (its metadata as headers, its extensions, the message encoded again
//! as its body), so the store key, the fingerprint and the record are the layer's. The
//! method body runs in the flow's own future, owned: the expansion hands it an owned clone of
//! the service (`Self: Clone`, or the `Arc<Self>` receiver of tonic's `use_arc_self`), so that
//! it finishes and stores its result when its client has gone.

use std::{
    future::Future,
    sync::{Arc, Mutex, PoisonError},
};

use axum::{extract::Request, response::Response};
use bytes::Bytes;
use http::request::Parts;
use tonic::{Status, metadata::MetadataMap};

use super::{answer::Answer, frame, layer::for_grpc, record, request, service::MethodPath};
use crate::{
    context::IdempotencyContext,
    door::presented,
    flow::{self, Door},
    policy::Policy,
    runtime::Idempotency,
};

/// What `#[idempotent]` makes of a gRPC method: its policy, checked where the constant is
/// defined.
#[derive(Clone, Copy, Debug)]
pub struct Method {
    policy: Policy,
}

impl Method {
    /// The method's idempotency under `policy`. An invalid policy is a compile error where
    /// the constant is defined, as for an HTTP handler.
    pub const fn new(policy: Policy) -> Self {
        if let Err(error) = policy.validate() {
            panic!("{}", error.summary());
        }
        Self {
            policy: for_grpc(policy),
        }
    }

    /// The policy its keys are kept under.
    pub const fn policy(&self) -> Policy {
        self.policy
    }
}

/// A method's result.
type MethodResult<R> = Result<tonic::Response<R>, Status>;

/// Takes one call of an `#[idempotent]` method through the flow: `body` is the method's
/// original body, called with the request once its key is claimed. `key` reads the request's
/// own id (AIP-155), which keys the call when its metadata has no `idempotency-key`.
pub async fn unary<M, R, F, Fut>(
    method: &Method,
    key: Option<fn(&M) -> &str>,
    request: tonic::Request<M>,
    body: F,
) -> MethodResult<R>
where
    M: prost::Message + Send + 'static,
    R: prost::Message + Default + Send + 'static,
    F: FnOnce(tonic::Request<M>) -> Fut + Send + 'static,
    Fut: Future<Output = MethodResult<R>> + Send + 'static,
{
    let Some(idem) = request.extensions().get::<Idempotency>().cloned() else {
        return Err(request::misconfigured(
            "an #[idempotent] gRPC method was called without the idempotency runtime: add \
             `GrpcIdempotencyLayer::new(idem, policy)` to the server's layers",
        ));
    };
    let Some(MethodPath(path)) = request.extensions().get::<MethodPath>().cloned() else {
        return Err(request::misconfigured(
            "an #[idempotent] gRPC method was called without GrpcIdempotencyLayer",
        ));
    };
    let (metadata, extensions, message) = request.into_parts();
    let headers = metadata.into_headers();
    let from_message = key.map(|read| read(&message).to_owned());
    let key = request::key(&idem, &headers, from_message)?;
    let encoded = frame::encode(&message.encode_to_vec());
    let mut presented = presented::request(path, headers, encoded, key);
    *presented.extensions_mut() = extensions;
    let presented = request::for_the_flow(presented);
    let ran = Arc::new(Mutex::new(None));
    let door = MethodDoor {
        message: Mutex::new(Some(message)),
        body,
        ran: Arc::clone(&ran),
    };
    let answer = flow::start(idem, method.policy, presented, door).await;
    // The handler's own result, not a copy decoded from its record, when it ran for this call.
    let first = ran.lock().unwrap_or_else(PoisonError::into_inner).take();
    match Answer::of(answer).await {
        Answer::Refused(status) => Err(status),
        Answer::Record(record) => first.unwrap_or_else(|| record.into_result()),
        Answer::Other(response) => first.unwrap_or_else(|| other(response)),
    }
}

/// An answer that is neither a refusal nor a record: only the door's own output can be one.
fn other<R>(response: Response) -> MethodResult<R> {
    Err(Status::internal(format!(
        "the idempotency runtime answered {} where a gRPC response was expected",
        response.status()
    )))
}

/// The method's door. The message is taken by `prepare` (which has `&self`), once.
struct MethodDoor<M, R, F> {
    message: Mutex<Option<M>>,
    body: F,
    /// The result of the body, when it ran.
    ran: Arc<Mutex<Option<MethodResult<R>>>>,
}

impl<M, R, F> MethodDoor<M, R, F> {
    fn request(&self, parts: Parts) -> tonic::Request<M> {
        let message = self
            .message
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .expect("a call is prepared once");
        tonic::Request::from_parts(
            MetadataMap::from_headers(parts.headers),
            parts.extensions,
            message,
        )
    }
}

impl<M, R, F, Fut> MethodDoor<M, R, F>
where
    M: Send + 'static,
    R: prost::Message + Send + 'static,
    F: FnOnce(tonic::Request<M>) -> Fut + Send + 'static,
    Fut: Future<Output = MethodResult<R>> + Send + 'static,
{
    fn run(self, request: tonic::Request<M>) -> impl Future<Output = Response> + Send + 'static {
        let Self { body, ran, .. } = self;
        async move {
            let outcome = body(request).await;
            let response = record::of_result(&outcome);
            *ran.lock().unwrap_or_else(PoisonError::into_inner) = Some(outcome);
            response
        }
    }
}

impl<M, R, F, Fut> Door for MethodDoor<M, R, F>
where
    M: Send + 'static,
    R: prost::Message + Send + 'static,
    F: FnOnce(tonic::Request<M>) -> Fut + Send + 'static,
    Fut: Future<Output = MethodResult<R>> + Send + 'static,
{
    type Head = ();
    type Prepared = tonic::Request<M>;

    const CHECKS_READ_CONTEXT: bool = false;

    fn attach(request: &mut tonic::Request<M>, context: IdempotencyContext) {
        request.extensions_mut().insert(context);
    }

    fn head(&self, _: &mut Parts) -> impl Future<Output = Result<(), Response>> + Send {
        std::future::ready(Ok(()))
    }

    fn prepare(
        &self,
        (): (),
        parts: Parts,
        _: Bytes,
    ) -> impl Future<Output = Result<tonic::Request<M>, Response>> + Send {
        std::future::ready(Ok(self.request(parts)))
    }

    fn call(self, request: tonic::Request<M>) -> impl Future<Output = Response> + Send + 'static {
        self.run(request)
    }

    fn call_without_key(self, request: Request) -> impl Future<Output = Response> + Send + 'static {
        let (parts, _) = request.into_parts();
        let request = self.request(parts);
        self.run(request)
    }
}
