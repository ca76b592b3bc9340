//! A gRPC door (feature `grpc`): unary methods of a tonic service become idempotent, with the
//! keys, scopes, fingerprints, claims, leases and records of the HTTP flow.
//!
//! For a whole service, a tower layer over the server covers the methods it names, or every
//! unary one its descriptor lists; for one method, `#[idempotent(...)]` on the method of the
//! service's trait impl (the layer is still what gives it its runtime):
//!
//! ```
//! use idem::{Idempotency, MemoryStore, Policy, grpc::GrpcIdempotencyLayer};
//!
//! let idem = Idempotency::new(MemoryStore::default());
//! let layer = GrpcIdempotencyLayer::new(idem, Policy::new())
//!     // keyed by `idempotency-key` metadata
//!     .method("/shop.v1.Payments/CreatePayment");
//! // Server::builder().layer(layer).add_service(PaymentsServer::new(shop)).serve(addr)
//! # drop(layer);
//! ```
//!
//! ```ignore
//! #[tonic::async_trait]
//! impl Payments for Shop {
//!     /// The key is the `idempotency-key` metadata, or `request_id` when it has none.
//!     #[idempotent(ttl = "24h", key = field(request_id))]
//!     async fn create_payment(&self, request: Request<CreatePaymentRequest>)
//!         -> Result<Response<Payment>, Status> { ... }
//! }
//! ```
//!
//! - **The key** is the `idempotency-key` metadata entry (an sf-string or bare, as over
//!   HTTP), or, when the call has none, a field of the request message (AIP-155's
//!   `request_id`): [`RequestId`], [`GrpcIdempotencyLayer::request_id_with`], or
//!   `key = field(name)` on the attribute.
//! - **The scope** is the policy's, as over HTTP: the principal comes from the call's
//!   extensions ([`Principal`](crate::Principal), which an interceptor or a layer inserts) or
//!   the runtime's [`ResolvePrincipal`](crate::ResolvePrincipal), which reads the metadata as
//!   headers. The method's path (`/shop.v1.Payments/CreatePayment`) is the route.
//! - **The fingerprint** is over the request message's encoded bytes: as the client sent them
//!   under the layer, as the server's type encodes them under the attribute.
//! - **What is stored** is the whole response: the message, the initial and trailing
//!   metadata and the status, replayed with `idempotent-replayed: true` metadata. A status
//!   whose HTTP counterpart is a 5xx (`INTERNAL`, `UNAVAILABLE`...) releases the key, unless
//!   the policy stores server errors; `ABORTED`, `RESOURCE_EXHAUSTED` and `CANCELLED` always
//!   release it.
//! - **Refusals** are gRPC statuses with `google.rpc` details: an `ErrorInfo` whose reason is
//!   the HTTP problem's slug in upper snake case (`KEY_REUSED`), with the problem's `type`
//!   URI in its metadata, and a `RetryInfo` where the client should come back.
//! - **Streaming methods** pass through untouched, and so does everything the door does not
//!   cover (reflection, health).
//!
//! [docs/grpc.md](https://github.com/idem-rs/idem/blob/main/docs/grpc.md) in the repository has the table of codes beside the HTTP statuses, what is
//! and is not canonical in protobuf's encoding, and the tests.

mod answer;
mod config;
mod descriptor;
mod frame;
mod layer;
mod method;
mod record;
mod request;
mod service;
mod status;

pub use self::{
    descriptor::DescriptorError,
    layer::{GrpcIdempotencyLayer, RequestId},
    method::{Method, unary},
    service::{GrpcIdempotencyService, ResponseFuture},
};

impl From<crate::extract::TxError> for tonic::Status {
    /// `UNAVAILABLE` with a `RetryInfo` when the database cannot be reached (the key is then
    /// released, so the retry runs), `INTERNAL` when the service is set up wrong.
    fn from(error: crate::extract::TxError) -> Self {
        let problem = error.into_problem();
        status::from_problem(&problem, problem.retry_after())
    }
}
