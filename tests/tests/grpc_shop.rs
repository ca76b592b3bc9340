//! The shop's gRPC API (`shop.v1.Payments`), over real HTTP/2 on loopback with a tonic
//! client: the seven cases for `CreatePayment`, 64 calls at once, scopes, the key in
//! `request_id`, refusals before the flow, and the memory, Redis and PostgreSQL stores.

use std::time::Duration;

use bytes::Bytes;
use idem_tests::{
    eventually,
    grpc_fixture::{GrpcShop, create, pay, payments, raw_call, refusal},
    key,
    shop_fixture::{settings, user},
};
use shop::{Backend, Settings, backend::StoreChoice};
use tokio::task::JoinSet;
use tonic::Code;

/// Case 1: the same key and request twice: one payment, the same response, the second marked
/// `idempotent-replayed: true`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_1_the_same_call_twice_is_one_payment_replayed() {
    let test = GrpcShop::memory(settings()).await;
    let mut client = test.client().await;
    let (alice, key) = (user(), key());
    let first = pay(&mut client, create(&alice, Some(&key), 9800, ""))
        .await
        .unwrap();
    assert!(!first.replayed);
    assert!(first.payment.id.starts_with("pay_"), "{first:?}");
    assert_eq!(
        (first.payment.amount, first.payment.status.as_str()),
        (9800, "succeeded")
    );
    let second = pay(&mut client, create(&alice, Some(&key), 9800, ""))
        .await
        .unwrap();
    assert!(second.replayed);
    assert_eq!(second.payment, first.payment);
    assert_eq!(payments(&mut client, &alice).await, [first.payment]);
}

/// Case 2: the same key with another request: `FAILED_PRECONDITION`, `KEY_REUSED`, and no
/// second payment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_2_the_same_key_for_another_payment_is_refused_and_pays_nothing() {
    let test = GrpcShop::memory(settings()).await;
    let mut client = test.client().await;
    let (alice, key) = (user(), key());
    let first = pay(&mut client, create(&alice, Some(&key), 9800, ""))
        .await
        .unwrap();
    let reused = pay(&mut client, create(&alice, Some(&key), 1200, ""))
        .await
        .unwrap_err();
    assert_eq!(
        refusal(&reused, Code::FailedPrecondition, "KEY_REUSED"),
        None
    );
    assert_eq!(payments(&mut client, &alice).await, [first.payment]);
}

/// Case 3: a call while the first with its key runs: `ABORTED` with a `RetryInfo`. The
/// payment takes a minute, far longer than the second call takes to be answered; whichever
/// of the two claimed the key first is the one still running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_3_a_call_in_flight_is_aborted_with_retry_info() {
    let test = GrpcShop::memory(Settings {
        payment_delay: Duration::from_secs(60),
        ..settings()
    })
    .await;
    let (alice, key) = (user(), key());
    let mut calls = JoinSet::new();
    for _ in 0..2 {
        let (mut client, alice, key) = (test.client().await, alice.clone(), key.clone());
        calls.spawn(async move { pay(&mut client, create(&alice, Some(&key), 9800, "")).await });
    }
    let refused = calls.join_next().await.unwrap().unwrap().unwrap_err();
    let delay = refusal(&refused, Code::Aborted, "REQUEST_IN_FLIGHT");
    assert!(
        delay.is_some_and(|delay| delay >= Duration::from_secs(1)),
        "{delay:?}"
    );
    calls.abort_all();
}

/// Case 4: no key: `INVALID_ARGUMENT`, `KEY_MISSING`, nothing made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_4_no_key_is_invalid_argument() {
    let test = GrpcShop::memory(settings()).await;
    let mut client = test.client().await;
    let alice = user();
    let missing = pay(&mut client, create(&alice, None, 9800, ""))
        .await
        .unwrap_err();
    refusal(&missing, Code::InvalidArgument, "KEY_MISSING");
    let malformed = pay(&mut client, create(&alice, Some("\"unclosed"), 9800, ""))
        .await
        .unwrap_err();
    refusal(&malformed, Code::InvalidArgument, "KEY_MALFORMED");
    assert!(payments(&mut client, &alice).await.is_empty());
}

/// Case 5: the first call times out on the client (its deadline is shorter than the
/// payment), and the retry, honouring `ABORTED`'s `RetryInfo`, gets the first call's payment:
/// the method went on after its client left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_5_a_timed_out_call_then_its_retry_get_the_first_answer() {
    let test = GrpcShop::memory(Settings {
        payment_delay: Duration::from_millis(1500),
        ..settings()
    })
    .await;
    let mut client = test.client().await;
    let (alice, key) = (user(), key());
    let mut impatient = create(&alice, Some(&key), 9800, "");
    impatient.set_timeout(Duration::from_millis(200));
    let timed_out = pay(&mut client, impatient).await.unwrap_err();
    // tonic's client reports its own deadline as CANCELLED ("Timeout expired").
    assert!(
        matches!(timed_out.code(), Code::DeadlineExceeded | Code::Cancelled),
        "{timed_out:?}"
    );
    let answer = loop {
        match pay(&mut client, create(&alice, Some(&key), 9800, "")).await {
            Err(status) if status.code() == Code::Aborted => {
                let delay = refusal(&status, Code::Aborted, "REQUEST_IN_FLIGHT").unwrap();
                tokio::time::sleep(delay).await;
            }
            answer => break answer.unwrap(),
        }
    };
    assert!(answer.replayed, "the first call's payment: {answer:?}");
    assert_eq!(payments(&mut client, &alice).await, [answer.payment]);
}

/// Case 6: after the TTL (the shop's records capped to the 10 s lease), the same key runs
/// anew: a second payment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_6_after_the_ttl_the_key_runs_anew() {
    let backend = Backend::memory().with_runtime(Some(Duration::from_millis(1)), None);
    let test = GrpcShop::on(backend, settings()).await;
    let mut client = test.client().await;
    let (alice, key) = (user(), key());
    let first = pay(&mut client, create(&alice, Some(&key), 9800, ""))
        .await
        .unwrap();
    let mut again = None;
    let expired = eventually(Duration::from_secs(30), async || {
        let answer = pay(&mut client, create(&alice, Some(&key), 9800, ""))
            .await
            .unwrap();
        let ran = !answer.replayed;
        again = Some(answer);
        ran
    })
    .await;
    assert!(expired, "the record outlived its TTL");
    let again = again.unwrap();
    assert_ne!(again.payment.id, first.payment.id);
    assert_eq!(payments(&mut client, &alice).await.len(), 2);
}

/// 64 calls at once with one key: one payment; every answer that is not `ABORTED` is it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_calls_at_once_with_one_key_pay_once() {
    let test = GrpcShop::memory(settings()).await;
    let (alice, key) = (user(), key());
    let client = test.client().await;
    let mut calls = JoinSet::new();
    for _ in 0..64 {
        let (mut client, alice, key) = (client.clone(), alice.clone(), key.clone());
        calls.spawn(async move { pay(&mut client, create(&alice, Some(&key), 9800, "")).await });
    }
    let mut paid = Vec::new();
    while let Some(answer) = calls.join_next().await {
        match answer.unwrap() {
            Ok(answer) => paid.push(answer.payment),
            Err(status) => {
                refusal(&status, Code::Aborted, "REQUEST_IN_FLIGHT");
            }
        }
    }
    let mut client = test.client().await;
    let made = payments(&mut client, &alice).await;
    assert_eq!(made.len(), 1, "{made:?}");
    assert!(paid.iter().all(|payment| *payment == made[0]), "{paid:?}");
}

/// Another user's call with the same key runs as their own, and never gets the first
/// user's payment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_users_key_is_their_own() {
    let test = GrpcShop::memory(settings()).await;
    let mut client = test.client().await;
    let (alice, bob, key) = (user(), user(), key());
    let alices = pay(&mut client, create(&alice, Some(&key), 9800, ""))
        .await
        .unwrap();
    let bobs = pay(&mut client, create(&bob, Some(&key), 9800, ""))
        .await
        .unwrap();
    assert!(!bobs.replayed);
    assert_ne!(bobs.payment.id, alices.payment.id);
    assert_eq!(payments(&mut client, &bob).await, [bobs.payment]);
}

/// The key in `request_id` behaves as the metadata's: replayed, refused for another request,
/// scoped; and the metadata wins when a call has both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_in_request_id_is_the_metadatas_twin() {
    let test = GrpcShop::memory(settings()).await;
    let mut client = test.client().await;
    let (alice, key) = (user(), key());
    let first = pay(&mut client, create(&alice, None, 9800, &key))
        .await
        .unwrap();
    let again = pay(&mut client, create(&alice, None, 9800, &key))
        .await
        .unwrap();
    assert!(again.replayed && again.payment == first.payment);
    let reused = pay(&mut client, create(&alice, None, 1200, &key))
        .await
        .unwrap_err();
    refusal(&reused, Code::FailedPrecondition, "KEY_REUSED");
    // The same key as metadata names the same record: the message (its request_id empty
    // now) is another request under it.
    let as_metadata = pay(&mut client, create(&alice, Some(&key), 9800, &key))
        .await
        .unwrap();
    assert!(as_metadata.replayed, "{as_metadata:?}");
    assert_eq!(payments(&mut client, &alice).await, [first.payment]);
}

/// A malformed message and a message over the limit: each refused before the method runs (by tonic itself, under `#[idempotent]`: `INTERNAL`, and
/// its `OUT_OF_RANGE` for a message over its 4 MiB), so the same key then runs a
/// well-formed call normally.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_huge_messages_are_refused_and_store_nothing() {
    let test = GrpcShop::memory(settings()).await;
    let channel = test.channel().await;
    let (alice, key) = (user(), key());
    let frame = |message: &[u8]| {
        let mut framed = vec![0];
        framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
        framed.extend_from_slice(message);
        framed
    };
    let (code, _) = raw_call(
        channel.clone(),
        &alice,
        &key,
        Bytes::from(frame(&[0xff, 0xff, 0xff])),
    )
    .await;
    assert_eq!(code, Code::Internal, "a message that does not decode");
    let mut huge = vec![0u8, 0, 0x50, 0, 0]; // a declared 5 MiB, over tonic's 4 MiB
    huge.extend_from_slice(&[0; 1024]);
    let (code, _) = raw_call(channel.clone(), &alice, &key, Bytes::from(huge)).await;
    assert_eq!(
        code,
        Code::OutOfRange,
        "tonic's answer to a message over its limit"
    );
    let mut client = test.client().await;
    let paid = pay(&mut client, create(&alice, Some(&key), 9800, ""))
        .await
        .unwrap();
    assert!(!paid.replayed, "nothing was stored under the key");
    assert_eq!(payments(&mut client, &alice).await, [paid.payment]);
}

/// A call cancelled by its client before its message is whole: nothing runs, nothing is
/// stored, and the key is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cancelled_before_its_message_stores_nothing() {
    use tower::ServiceExt;
    let test = GrpcShop::memory(settings()).await;
    let (alice, key) = (user(), key());
    let (sender, body) = {
        let (sender, receiver) =
            tokio::sync::mpsc::channel::<Result<http_body::Frame<Bytes>, tonic::Status>>(1);
        (
            sender,
            tonic::body::Body::new(http_body_util::StreamBody::new(tokio_stream_of(receiver))),
        )
    };
    // Half a message: the prefix declares 100 bytes, and the call is cancelled after 10.
    let mut partial = vec![0u8, 0, 0, 0, 100];
    partial.extend_from_slice(&[0x08; 10]);
    sender
        .send(Ok(http_body::Frame::data(Bytes::from(partial))))
        .await
        .unwrap();
    let request = http::Request::post("/shop.v1.Payments/CreatePayment")
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("authorization", format!("Bearer {alice}"))
        .header("idempotency-key", &key)
        .body(body)
        .unwrap();
    let call = tokio::spawn(test.channel().await.oneshot(request));
    // The client gives up: its request stream is reset.
    sender
        .send(Err(tonic::Status::cancelled("the client gave up")))
        .await
        .unwrap();
    drop(sender);
    let _ = call.await;
    let mut client = test.client().await;
    let paid = pay(&mut client, create(&alice, Some(&key), 9800, ""))
        .await
        .unwrap();
    assert!(!paid.replayed);
    assert_eq!(payments(&mut client, &alice).await, [paid.payment]);
}

fn tokio_stream_of<T: Send + 'static>(
    mut receiver: tokio::sync::mpsc::Receiver<T>,
) -> impl futures_util::Stream<Item = T> + Send {
    futures_util::stream::poll_fn(move |cx| receiver.poll_recv(cx))
}

/// The seven cases' core on a store: one payment per key, replayed; another request under the
/// key refused; scoped per user; the key in `request_id`.
async fn on_store(backend: Backend) {
    let test = GrpcShop::on(backend, settings()).await;
    let mut client = test.client().await;
    let (alice, bob, key, id) = (user(), user(), key(), idem_tests::key());
    let first = pay(&mut client, create(&alice, Some(&key), 9800, ""))
        .await
        .unwrap();
    let again = pay(&mut client, create(&alice, Some(&key), 9800, ""))
        .await
        .unwrap();
    assert!(again.replayed && again.payment == first.payment);
    let reused = pay(&mut client, create(&alice, Some(&key), 1200, ""))
        .await
        .unwrap_err();
    refusal(&reused, Code::FailedPrecondition, "KEY_REUSED");
    let bobs = pay(&mut client, create(&bob, Some(&key), 9800, ""))
        .await
        .unwrap();
    assert!(!bobs.replayed && bobs.payment.id != first.payment.id);
    let by_id = pay(&mut client, create(&alice, None, 500, &id))
        .await
        .unwrap();
    let by_id_again = pay(&mut client, create(&alice, None, 500, &id))
        .await
        .unwrap();
    assert!(by_id_again.replayed && by_id_again.payment == by_id.payment);
    assert_eq!(
        payments(&mut client, &alice).await,
        [first.payment, by_id.payment]
    );
}

#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redis() {
    let url = std::env::var("IDEM_TEST_REDIS_URL").expect("IDEM_TEST_REDIS_URL");
    let store: StoreChoice = url.parse().unwrap();
    on_store(Backend::open(&store).await.expect("the test Redis answers")).await;
}

/// On PostgreSQL the method writes its payment with `Tx`: the row commits with the record.
#[cfg_attr(not(idem_test_postgres), ignore = "IDEM_TEST_DATABASE_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_in_the_records_transaction() {
    let url = std::env::var("IDEM_TEST_DATABASE_URL").expect("IDEM_TEST_DATABASE_URL");
    let store = StoreChoice::Postgres(url);
    let backend = Backend::open(&store)
        .await
        .expect("the test database answers");
    assert!(matches!(backend.ledger, shop::ledger::Ledger::Postgres(_)));
    on_store(backend).await;
}

/// Server reflection describes the API, so that `grpcurl` needs no `.proto`: it lists
/// `shop.v1.Payments` and serves the file that declares it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflection_describes_the_api() {
    use prost::Message;
    use tonic_reflection::pb::v1::{
        ServerReflectionRequest, server_reflection_client::ServerReflectionClient,
        server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
    };
    let test = GrpcShop::memory(settings()).await;
    let mut reflection = ServerReflectionClient::new(test.channel().await);
    let ask = |request| ServerReflectionRequest {
        host: String::new(),
        message_request: Some(request),
    };
    let questions = [
        ask(MessageRequest::ListServices(String::new())),
        ask(MessageRequest::FileContainingSymbol(
            "shop.v1.Payments".to_owned(),
        )),
    ];
    let mut answers = reflection
        .server_reflection_info(futures_util::stream::iter(questions))
        .await
        .unwrap()
        .into_inner();
    let listed = answers.message().await.unwrap().unwrap().message_response;
    let Some(MessageResponse::ListServicesResponse(list)) = listed else {
        panic!("{listed:?}");
    };
    assert!(
        list.service
            .iter()
            .any(|service| service.name == "shop.v1.Payments")
    );
    let file = answers.message().await.unwrap().unwrap().message_response;
    let Some(MessageResponse::FileDescriptorResponse(files)) = file else {
        panic!("{file:?}");
    };
    let file =
        prost_types::FileDescriptorProto::decode(&files.file_descriptor_proto[0][..]).unwrap();
    assert_eq!(file.package(), "shop.v1");
    let methods: Vec<_> = file.service[0]
        .method
        .iter()
        .map(|method| method.name())
        .collect();
    assert_eq!(methods, ["CreatePayment", "ListPayments"]);
}
