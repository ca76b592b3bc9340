//! `GrpcIdempotencyLayer` over a server of the shop's `shop.v1.Payments` trait, implemented
//! here so that a test can hold a call at a gate, fail it, and count its runs; over real
//! HTTP/2 on loopback with a tonic client. Authentication is an interceptor layer outside the
//! idempotency layer, as it must be: a replay never reaches what is inside.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use bytes::Bytes;
use idem::{Idempotency, MemoryStore, Policy, grpc::GrpcIdempotencyLayer};
use idem_tests::{
    gate::Gate,
    grpc_fixture::{authorize, create, pay, raw_call, raw_call_to, refusal, replayed},
    key,
    shop_fixture::user,
};
use prost::Message;
use shop::grpc::{
    authenticate,
    proto::{
        CreatePaymentRequest, FILE_DESCRIPTOR_SET, ListPaymentsRequest, ListPaymentsResponse,
        Payment,
        payments_client::PaymentsClient,
        payments_server::{Payments, PaymentsServer},
    },
};
use tokio::{net::TcpListener, task::JoinSet};
use tonic::{
    Code, Request, Response, Status,
    transport::{Channel, Server, server::TcpIncoming},
};

const CREATE: &str = "/shop.v1.Payments/CreatePayment";

/// A `Payments` service that counts its runs, passes a gate, and fails its first calls when
/// told to.
#[derive(Clone, Default)]
struct Counted {
    runs: Arc<AtomicUsize>,
    gate: Option<Gate>,
    failures: Arc<AtomicUsize>,
}

#[tonic::async_trait]
impl Payments for Counted {
    async fn create_payment(
        &self,
        request: Request<CreatePaymentRequest>,
    ) -> Result<Response<Payment>, Status> {
        if let Some(gate) = &self.gate {
            gate.pass().await;
        }
        let run = self.runs.fetch_add(1, Ordering::SeqCst) + 1;
        if self
            .failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                left.checked_sub(1)
            })
            .is_ok()
        {
            return Err(Status::internal(format!("run {run} failed")));
        }
        let new = request.into_inner();
        let mut response = Response::new(Payment {
            id: format!("pay_{run}"),
            amount: new.amount,
            currency: new.currency,
            status: "succeeded".to_owned(),
        });
        response
            .metadata_mut()
            .insert("x-run", run.to_string().parse().unwrap());
        Ok(response)
    }

    async fn list_payments(
        &self,
        _: Request<ListPaymentsRequest>,
    ) -> Result<Response<ListPaymentsResponse>, Status> {
        Ok(Response::new(ListPaymentsResponse::default()))
    }
}

/// The service behind the layer, with reflection, served on a loopback port.
struct Served {
    addr: std::net::SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Served {
    async fn start(service: Counted, policy: Policy) -> Self {
        let idem = Idempotency::new(MemoryStore::default());
        let layer = GrpcIdempotencyLayer::new(idem, policy)
            .unary_methods(FILE_DESCRIPTOR_SET, "shop.v1.Payments")
            .unwrap()
            .request_id_with::<CreatePaymentRequest>(CREATE, |request| &request.request_id);
        let reflection = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(FILE_DESCRIPTOR_SET)
            .build_v1()
            .unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            Server::builder()
                // Outside the idempotency layer: it runs for every call, replays included.
                .layer(tonic::service::InterceptorLayer::new(authenticate))
                .layer(layer)
                .add_service(PaymentsServer::new(service))
                .add_service(reflection)
                .serve_with_incoming(TcpIncoming::from(listener))
                .await
                .unwrap();
        });
        Self { addr, task }
    }

    async fn channel(&self) -> Channel {
        Channel::from_shared(format!("http://{}", self.addr))
            .unwrap()
            .connect()
            .await
            .unwrap()
    }

    async fn client(&self) -> PaymentsClient<Channel> {
        PaymentsClient::new(self.channel().await)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The response's message and metadata are stored together and replayed as they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_response_and_its_metadata_are_replayed() {
    let service = Counted::default();
    let served = Served::start(service.clone(), Policy::new()).await;
    let mut client = served.client().await;
    let (alice, key) = (user(), key());
    let first = client
        .create_payment(create(&alice, Some(&key), 9800, ""))
        .await
        .unwrap();
    let second = client
        .create_payment(create(&alice, Some(&key), 9800, ""))
        .await
        .unwrap();
    assert!(!replayed(first.metadata()) && replayed(second.metadata()));
    assert_eq!(second.metadata().get("x-run").unwrap(), "1");
    assert_eq!(second.get_ref(), first.get_ref());
    assert_eq!(service.runs.load(Ordering::SeqCst), 1);
}

/// A call in flight, held at a gate: its duplicate is `ABORTED` with a `RetryInfo`; once the
/// first is let through, the duplicate's retry gets its answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_in_flight_is_aborted_then_its_retry_replays() {
    let gate = Gate::closed();
    let service = Counted {
        gate: Some(gate.clone()),
        ..Counted::default()
    };
    let served = Served::start(service.clone(), Policy::new()).await;
    let (alice, key) = (user(), key());
    let first = {
        let (mut client, alice, key) = (served.client().await, alice.clone(), key.clone());
        tokio::spawn(async move { pay(&mut client, create(&alice, Some(&key), 9800, "")).await })
    };
    gate.arrival(Duration::from_secs(10)).await;
    let mut client = served.client().await;
    let refused = pay(&mut client, create(&alice, Some(&key), 9800, ""))
        .await
        .unwrap_err();
    let delay = refusal(&refused, Code::Aborted, "REQUEST_IN_FLIGHT");
    assert!(delay.is_some(), "a RetryInfo");
    gate.lift();
    let first = first.await.unwrap().unwrap();
    let retried = pay(&mut client, create(&alice, Some(&key), 9800, ""))
        .await
        .unwrap();
    assert!(retried.replayed && retried.payment == first.payment);
    assert_eq!(service.runs.load(Ordering::SeqCst), 1);
}

/// Case 7: after `INTERNAL`, the key is released and the same call runs again (the default);
/// with `store_server_errors`, the `INTERNAL` is the answer, replayed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_internal_error_runs_again_unless_server_errors_are_stored() {
    let service = Counted {
        failures: Arc::new(AtomicUsize::new(1)),
        ..Counted::default()
    };
    let served = Served::start(service.clone(), Policy::new()).await;
    let mut client = served.client().await;
    let (alice, key) = (user(), key());
    let failed = pay(&mut client, create(&alice, Some(&key), 9800, ""))
        .await
        .unwrap_err();
    assert_eq!(failed.code(), Code::Internal);
    let again = pay(&mut client, create(&alice, Some(&key), 9800, ""))
        .await
        .unwrap();
    assert!(!again.replayed);
    assert_eq!(service.runs.load(Ordering::SeqCst), 2);

    let stored = Counted {
        failures: Arc::new(AtomicUsize::new(1)),
        ..Counted::default()
    };
    let served = Served::start(stored.clone(), Policy::new().store_server_errors(true)).await;
    let mut client = served.client().await;
    let failed = pay(&mut client, create(&alice, Some(&key), 9800, ""))
        .await
        .unwrap_err();
    let replay = pay(&mut client, create(&alice, Some(&key), 9800, ""))
        .await
        .unwrap_err();
    assert_eq!(
        (failed.code(), replay.code()),
        (Code::Internal, Code::Internal)
    );
    assert_eq!(replay.message(), failed.message());
    assert!(replayed(replay.metadata()));
    assert_eq!(stored.runs.load(Ordering::SeqCst), 1);
}

/// What is not one uncompressed, well-formed message of at most the limit is refused before
/// the claim: the method never runs, and the key then runs a good call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_messages_are_refused_before_the_claim() {
    let service = Counted::default();
    let served = Served::start(service.clone(), Policy::new()).await;
    let channel = served.channel().await;
    let (alice, key) = (user(), key());
    let frame = |flag: u8, message: &[u8]| {
        let mut framed = vec![flag];
        framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
        framed.extend_from_slice(message);
        framed
    };
    let good = CreatePaymentRequest {
        amount: 9800,
        currency: "JPY".into(),
        request_id: String::new(),
    }
    .encode_to_vec();
    let cases = [
        (frame(0, &[0xff, 0xff, 0xff]), Code::Internal),
        (
            [frame(0, &good), frame(0, &good)].concat(),
            Code::Unimplemented,
        ),
        (Vec::new(), Code::Unimplemented),
        (frame(0, &good)[..8].to_vec(), Code::Internal),
        (frame(1, &good), Code::Internal),
        (
            [0, 0, 0x50, 0, 0, 1, 2, 3].to_vec(),
            Code::ResourceExhausted,
        ),
    ];
    for (body, code) in cases {
        let (answered, message) = raw_call(channel.clone(), &alice, &key, Bytes::from(body)).await;
        assert_eq!(answered, code, "{message}");
    }
    assert_eq!(service.runs.load(Ordering::SeqCst), 0);
    let mut client = served.client().await;
    let paid = pay(&mut client, create(&alice, Some(&key), 9800, ""))
        .await
        .unwrap();
    assert!(!paid.replayed);
    assert_eq!(service.runs.load(Ordering::SeqCst), 1);
}

/// A message over the limit carries the refusal's details: `BODY_TOO_LARGE`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_message_is_resource_exhausted() {
    let served = Served::start(Counted::default(), Policy::new()).await;
    let client = served.client().await;
    let huge = "x".repeat(GrpcIdempotencyLayer::DEFAULT_MAX_MESSAGE);
    let mut request = create(&user(), Some(&key()), 9800, "");
    request.get_mut().currency = huge;
    let refused = client
        .max_encoding_message_size(usize::MAX)
        .create_payment(request)
        .await
        .unwrap_err();
    refusal(&refused, Code::ResourceExhausted, "BODY_TOO_LARGE");
}

/// The key in `request_id` (a closure over the message) runs once and replays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_id_keys_a_call_without_metadata() {
    let service = Counted::default();
    let served = Served::start(service.clone(), Policy::new()).await;
    let mut client = served.client().await;
    let (alice, id) = (user(), key());
    let first = pay(&mut client, create(&alice, None, 9800, &id))
        .await
        .unwrap();
    let again = pay(&mut client, create(&alice, None, 9800, &id))
        .await
        .unwrap();
    assert!(again.replayed && again.payment == first.payment);
    let missing = pay(&mut client, create(&alice, None, 9800, ""))
        .await
        .unwrap_err();
    refusal(&missing, Code::InvalidArgument, "KEY_MISSING");
    assert_eq!(service.runs.load(Ordering::SeqCst), 1);
}

/// A call to a method that does not exist passes through untouched: the server's own
/// `UNIMPLEMENTED`, with a key and without, never claimed, so never replayed, and a second
/// call with the key and another message is not a reuse.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_method_is_the_servers_own_unimplemented() {
    let service = Counted::default();
    let served = Served::start(service.clone(), Policy::new()).await;
    let channel = served.channel().await;
    let (alice, key) = (user(), key());
    for path in ["/shop.v1.Payments/NoSuchMethod", "/no.such.v1.Service/Call"] {
        for message in [
            &b"\x00\x00\x00\x00\x00"[..],
            b"\x00\x00\x00\x00\x02\x08\x01",
        ] {
            let body = Bytes::copy_from_slice(message);
            let (code, said) = raw_call_to(channel.clone(), path, &alice, &key, body).await;
            assert_eq!(code, Code::Unimplemented, "{path}: {said}");
        }
    }
    assert_eq!(service.runs.load(Ordering::SeqCst), 0);
}

/// Streaming methods pass through untouched: server reflection (a bidirectional stream)
/// lists the services through the layer, with no key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_methods_pass_through() {
    use tonic_reflection::pb::v1::{
        ServerReflectionRequest, server_reflection_client::ServerReflectionClient,
        server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
    };
    let served = Served::start(Counted::default(), Policy::new()).await;
    let mut reflection = ServerReflectionClient::new(served.channel().await);
    let ask = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut request = Request::new(futures_util::stream::iter([ask]));
    authorize(&mut request, &user());
    let mut answers = reflection
        .server_reflection_info(request)
        .await
        .unwrap()
        .into_inner();
    let answer = answers.message().await.unwrap().unwrap();
    let Some(MessageResponse::ListServicesResponse(list)) = answer.message_response else {
        panic!("{answer:?}");
    };
    let names: Vec<_> = list
        .service
        .iter()
        .map(|service| service.name.as_str())
        .collect();
    assert!(names.contains(&"shop.v1.Payments"), "{names:?}");
}

/// 64 calls at once with one key: the method runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_calls_at_once_run_once() {
    let service = Counted::default();
    let served = Served::start(service.clone(), Policy::new()).await;
    let client = served.client().await;
    let (alice, key) = (user(), key());
    let mut calls = JoinSet::new();
    for _ in 0..64 {
        let (mut client, alice, key) = (client.clone(), alice.clone(), key.clone());
        calls.spawn(async move { pay(&mut client, create(&alice, Some(&key), 9800, "")).await });
    }
    while let Some(answer) = calls.join_next().await {
        if let Err(status) = answer.unwrap() {
            refusal(&status, Code::Aborted, "REQUEST_IN_FLIGHT");
        }
    }
    assert_eq!(service.runs.load(Ordering::SeqCst), 1);
}

/// `#[idempotent]` takes a method whose receiver is `self: Arc<Self>` (tonic-build's
/// `use_arc_self`) as it takes `&self`: the `Arc` is the owned service.
mod arc_receiver {
    use std::sync::Arc;

    use idem::idempotent;
    use shop::grpc::proto::{CreatePaymentRequest, Payment};
    use tonic::{Request, Response, Status};

    #[tonic::async_trait]
    pub(crate) trait Pay: Send + Sync + 'static {
        async fn create(
            self: Arc<Self>,
            request: Request<CreatePaymentRequest>,
        ) -> Result<Response<Payment>, Status>;
    }

    pub(crate) struct Service;

    #[tonic::async_trait]
    impl Pay for Service {
        #[idempotent(scope = "global", key = field(request_id))]
        async fn create(
            self: Arc<Self>,
            request: Request<CreatePaymentRequest>,
        ) -> Result<Response<Payment>, Status> {
            let _service: &Self = &self;
            Ok(Response::new(Payment {
                amount: request.get_ref().amount,
                ..Payment::default()
            }))
        }
    }

    /// Without the layer, the method says so rather than run unrecorded.
    #[tokio::test]
    async fn without_the_layer_the_method_is_misconfigured() {
        let refused = Arc::new(Service)
            .create(Request::new(CreatePaymentRequest::default()))
            .await
            .unwrap_err();
        idem_tests::grpc_fixture::refusal(&refused, tonic::Code::Internal, "MISCONFIGURED");
    }
}

/// Behind a router that matched the whole service (`/shop.v1.Payments/{*rest}`), each method
/// is still its own route: one key on two methods names two records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_method_is_its_own_route_behind_a_router() {
    use shop::grpc::proto::ListPaymentsRequest;
    let service = Counted::default();
    let idem = Idempotency::new(MemoryStore::default());
    let layer = GrpcIdempotencyLayer::new(idem, Policy::new())
        .unary_methods(FILE_DESCRIPTOR_SET, "shop.v1.Payments")
        .unwrap();
    let router = tonic::service::Routes::new(PaymentsServer::new(service.clone()))
        .into_axum_router()
        .layer(layer);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        Server::builder()
            .layer(tonic::service::InterceptorLayer::new(authenticate))
            .add_routes(tonic::service::Routes::from(router))
            .serve_with_incoming(TcpIncoming::from(listener))
            .await
            .unwrap();
    });
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = PaymentsClient::new(channel);
    let (alice, key) = (user(), key());
    pay(&mut client, create(&alice, Some(&key), 9800, ""))
        .await
        .unwrap();
    let mut list = Request::new(ListPaymentsRequest {});
    authorize(&mut list, &alice);
    list.metadata_mut()
        .insert("idempotency-key", key.parse().unwrap());
    let listed = client.list_payments(list).await;
    assert!(listed.is_ok(), "another method's record: {listed:?}");
    server.abort();
}
