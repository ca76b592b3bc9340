//! The shop's gRPC API (with `SHOP_GRPC_ADDR`): `shop.v1.Payments` of
//! `proto/payments.proto`, on the same ledger as the HTTP API, with server reflection so
//! that `grpcurl` works without the file.
//!
//! `CreatePayment` is `#[idempotent]`, scoped to the caller as `POST /payments` is: the key is
//! the `idempotency-key` metadata, or the request's `request_id` (AIP-155) when the metadata
//! has none. A retry gets the first call's `Payment`, with `idempotent-replayed: true`
//! metadata; the same key with another payment is `FAILED_PRECONDITION`, a call while the
//! first is running `ABORTED` with a `RetryInfo`. The caller is `authorization: Bearer
//! <user>` metadata, read by an interceptor that runs before every call, replays included.

use std::future::Future;

use idem::{Idempotency, Policy, Principal, extract::Tx, grpc::GrpcIdempotencyLayer, idempotent};
use tokio::net::TcpListener;
use tonic::{Request, Response, Status, transport::server::TcpIncoming};

use crate::{
    Shop,
    auth::User,
    ledger::LedgerError,
    model::{self, new_id, now, rules},
};

/// The code generated from `proto/payments.proto`.
#[allow(missing_docs, unreachable_pub, clippy::all)]
pub mod proto {
    tonic::include_proto!("shop.v1");

    /// The encoded `FileDescriptorSet` of the API, which reflection serves.
    pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("shop_descriptor");
}

use proto::{
    CreatePaymentRequest, ListPaymentsRequest, ListPaymentsResponse, Payment,
    payments_server::{Payments, PaymentsServer},
};

/// The gRPC service: a handle on the shop (cheap to clone, as `#[idempotent]` needs: the
/// call runs to its end in a task of its own when its client leaves).
#[derive(Clone, Debug)]
pub struct PaymentsService {
    shop: Shop,
}

impl PaymentsService {
    /// The service of `shop`.
    pub fn new(shop: Shop) -> Self {
        Self { shop }
    }
}

#[tonic::async_trait]
impl Payments for PaymentsService {
    // As `POST /payments`: scoped to the caller, kept a day, a 10 s lease renewed while the
    // card network takes its time.
    #[idempotent(ttl = "24h", scope = "user", lease = "10s", key = field(request_id))]
    async fn create_payment(
        &self,
        request: Request<CreatePaymentRequest>,
    ) -> Result<Response<Payment>, Status> {
        let user = caller(&request)?;
        let mut tx = Tx::from_extensions(request.extensions())?;
        let new = request.into_inner();
        validate(&new)?;
        tokio::time::sleep(self.shop.settings().payment_delay).await;
        let payment = model::Payment {
            id: new_id("pay"),
            amount: new.amount,
            currency: new.currency,
            status: "succeeded".to_owned(),
            amount_refunded: 0,
            created: now(),
        };
        self.shop
            .ledger()
            .insert_payment(&mut tx, user.id(), &payment)
            .await
            .map_err(ledger_status)?;
        tracing::info!(user = user.id(), payment = %payment.id, amount = payment.amount, "payment made (gRPC)");
        Ok(Response::new(message(payment)))
    }

    async fn list_payments(
        &self,
        request: Request<ListPaymentsRequest>,
    ) -> Result<Response<ListPaymentsResponse>, Status> {
        let user = caller(&request)?;
        let payments = self
            .shop
            .ledger()
            .payments(user.id())
            .await
            .map_err(ledger_status)?;
        Ok(Response::new(ListPaymentsResponse {
            payments: payments.into_iter().map(message).collect(),
        }))
    }
}

fn message(payment: model::Payment) -> Payment {
    Payment {
        id: payment.id,
        amount: payment.amount,
        currency: payment.currency,
        status: payment.status,
    }
}

/// The caller the interceptor found.
fn caller<T>(request: &Request<T>) -> Result<User, Status> {
    request
        .extensions()
        .get::<User>()
        .cloned()
        .ok_or_else(|| Status::unauthenticated("send `authorization: Bearer <user-id>` metadata"))
}

/// The HTTP API's rules for a payment, as `INVALID_ARGUMENT`.
fn validate(new: &CreatePaymentRequest) -> Result<(), Status> {
    let mut errors = Vec::new();
    rules::amount(&mut errors, "amount", new.amount);
    rules::currency(&mut errors, "currency", &new.currency);
    rules::verdict(errors).map_err(|errors| {
        let details: Vec<_> = errors
            .iter()
            .map(|error| {
                format!(
                    "{}: {}",
                    error.pointer.trim_start_matches("#/"),
                    error.detail
                )
            })
            .collect();
        Status::invalid_argument(details.join("; "))
    })
}

fn ledger_status(error: LedgerError) -> Status {
    match error {
        LedgerError::Tx(error) => error.into(),
        LedgerError::Database(error) => {
            tracing::error!(%error, "a ledger statement failed");
            Status::internal(
                "the shop's database failed; nothing was changed, retry with the same key",
            )
        }
    }
}

/// The interceptor that authenticates every call, as the HTTP API's `User` extractor does:
/// `authorization: Bearer <user>` metadata, or `UNAUTHENTICATED`. It names the principal
/// the keys are scoped to.
#[allow(clippy::result_large_err)]
pub fn authenticate(mut request: Request<()>) -> Result<Request<()>, Status> {
    let headers = request.metadata().clone().into_headers();
    let user = User::from_headers(&headers)
        .map_err(|problem| Status::unauthenticated(problem.detail().to_owned()))?;
    request.extensions_mut().insert(Principal::new(user.id()));
    request.extensions_mut().insert(user);
    Ok(request)
}

/// Serves the gRPC API on `listener` until `shutdown` completes: `shop.v1.Payments` behind
/// its interceptor, and server reflection, with `idem` as the idempotency runtime.
pub async fn serve_grpc(
    listener: TcpListener,
    shop: Shop,
    idem: Idempotency,
    shutdown: impl Future<Output = ()>,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let payments = PaymentsServer::with_interceptor(PaymentsService::new(shop), authenticate);
    tonic::transport::Server::builder()
        // Gives `#[idempotent]` methods their runtime; it covers no method by itself.
        .layer(GrpcIdempotencyLayer::new(idem, Policy::new()))
        .add_service(payments)
        .add_service(reflection)
        .serve_with_incoming_shutdown(TcpIncoming::from(listener), shutdown)
        .await?;
    Ok(())
}
