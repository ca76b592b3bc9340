//! The shop's gRPC API, served for its end-to-end tests: a tonic server on a loopback port
//! (HTTP/2 over TCP), a tonic client of it, and raw HTTP/2 calls for what no generated client
//! sends (a malformed message, a huge one).

use std::{net::SocketAddr, time::Duration};

use bytes::Bytes;
use http_body_util::BodyExt;
use idem::Idempotency;
use shop::{
    Backend, Settings, Shop,
    grpc::proto::{
        CreatePaymentRequest, ListPaymentsRequest, Payment, payments_client::PaymentsClient,
    },
};
use tokio::{net::TcpListener, sync::oneshot, task::JoinHandle};
use tonic::{Code, Request, Status, metadata::MetadataValue, transport::Channel};
use tonic_types::StatusExt;

/// The shop's gRPC API on a fresh loopback port, stopped when dropped.
#[derive(Debug)]
pub struct GrpcShop {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The shop behind it.
    pub shop: Shop,
    /// Its runtime.
    pub idem: Idempotency,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl GrpcShop {
    /// The API on a shop with everything in memory.
    pub async fn memory(settings: Settings) -> Self {
        Self::on(Backend::memory(), settings).await
    }

    /// The API on a shop on `backend`.
    pub async fn on(backend: Backend, settings: Settings) -> Self {
        let shop = Shop::new(backend.ledger.clone(), settings);
        let idem = backend.idem.clone();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn({
            let (shop, idem) = (shop.clone(), idem.clone());
            async move {
                shop::grpc::serve_grpc(listener, shop, idem, async {
                    let _ = stopped.await;
                })
                .await
                .expect("the gRPC server runs");
            }
        });
        Self {
            addr,
            shop,
            idem,
            stop: Some(stop),
            task,
        }
    }

    /// A connected client.
    pub async fn client(&self) -> PaymentsClient<Channel> {
        PaymentsClient::new(self.channel().await)
    }

    /// A connected HTTP/2 channel.
    pub async fn channel(&self) -> Channel {
        Channel::from_shared(format!("http://{}", self.addr))
            .unwrap()
            .connect()
            .await
            .expect("the gRPC server accepts")
    }
}

impl Drop for GrpcShop {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.task.abort();
    }
}

/// A `CreatePayment` call: as `user`, with `key` as `idempotency-key` metadata, and the
/// message's own `request_id`.
pub fn create(
    user: &str,
    key: Option<&str>,
    amount: i64,
    request_id: &str,
) -> Request<CreatePaymentRequest> {
    let mut request = Request::new(CreatePaymentRequest {
        amount,
        currency: "JPY".to_owned(),
        request_id: request_id.to_owned(),
    });
    authorize(&mut request, user);
    if let Some(key) = key {
        request
            .metadata_mut()
            .insert("idempotency-key", MetadataValue::try_from(key).unwrap());
    }
    request.set_timeout(crate::REQUEST_TIMEOUT);
    request
}

/// `authorization: Bearer <user>` metadata.
pub fn authorize<T>(request: &mut Request<T>, user: &str) {
    let value = MetadataValue::try_from(format!("Bearer {user}")).unwrap();
    request.metadata_mut().insert("authorization", value);
}

/// What a call answered: the payment and whether it was replayed.
#[derive(Clone, Debug, PartialEq)]
pub struct Paid {
    /// The payment.
    pub payment: Payment,
    /// `idempotent-replayed: true` metadata.
    pub replayed: bool,
}

/// Sends a `CreatePayment` call.
pub async fn pay(
    client: &mut PaymentsClient<Channel>,
    request: Request<CreatePaymentRequest>,
) -> Result<Paid, Status> {
    let response = client.create_payment(request).await?;
    let replayed = replayed(response.metadata());
    Ok(Paid {
        payment: response.into_inner(),
        replayed,
    })
}

/// Whether metadata says `idempotent-replayed: true`; it never says anything else.
#[track_caller]
pub fn replayed(metadata: &tonic::metadata::MetadataMap) -> bool {
    match metadata.get("idempotent-replayed") {
        None => false,
        Some(value) if value == "true" => true,
        Some(other) => panic!("idempotent-replayed: {other:?}"),
    }
}

/// The caller's payments, through `ListPayments`.
pub async fn payments(client: &mut PaymentsClient<Channel>, user: &str) -> Vec<Payment> {
    let mut request = Request::new(ListPaymentsRequest {});
    authorize(&mut request, user);
    client
        .list_payments(request)
        .await
        .unwrap()
        .into_inner()
        .payments
}

/// Asserts that `status` is a refusal of `code` whose `ErrorInfo` reason is `reason`, with
/// the problem's `type` URI; answers its `RetryInfo` delay.
#[track_caller]
pub fn refusal(status: &Status, code: Code, reason: &str) -> Option<Duration> {
    assert_eq!(status.code(), code, "{status:?}");
    let details = status.get_error_details();
    let info = details
        .error_info()
        .unwrap_or_else(|| panic!("no ErrorInfo in {status:?}"));
    assert_eq!(info.reason, reason);
    assert_eq!(info.domain, idem::problem::GRPC_ERROR_DOMAIN);
    let slug = reason.to_lowercase().replace('_', "-");
    assert!(
        info.metadata["type"].ends_with(&format!("#{slug}")),
        "{info:?}"
    );
    assert!(!replayed(status.metadata()), "a refusal is never a replay");
    details.retry_info().and_then(|retry| retry.retry_delay)
}

/// A raw unary call over HTTP/2: `body` as the request body, as it is.
pub async fn raw_call(channel: Channel, user: &str, key: &str, body: Bytes) -> (Code, String) {
    raw_call_to(channel, "/shop.v1.Payments/CreatePayment", user, key, body).await
}

/// [`raw_call`] to the method at `path`.
pub async fn raw_call_to(
    channel: Channel,
    path: &str,
    user: &str,
    key: &str,
    body: Bytes,
) -> (Code, String) {
    use tower::ServiceExt;
    let request = http::Request::post(path)
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("authorization", format!("Bearer {user}"))
        .header("idempotency-key", key)
        .body(tonic::body::Body::new(http_body_util::Full::new(body)))
        .unwrap();
    let response = channel.oneshot(request).await.expect("an answer");
    let (parts, body) = response.into_parts();
    let collected = body.collect().await.expect("the body is read");
    let trailers = collected.trailers().cloned().unwrap_or_default();
    let status = Status::from_header_map(&trailers)
        .or_else(|| Status::from_header_map(&parts.headers))
        .expect("a grpc-status");
    (status.code(), status.message().to_owned())
}
