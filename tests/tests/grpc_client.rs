//! `RetryPolicy::call_grpc` against the shop's gRPC API over HTTP/2 on loopback: one key
//! per operation, retried through its own timeouts and `ABORTED` until the first call's
//! payment; never retried when the key was used for another request.

use std::time::Duration;

use idem_client::{IdempotencyKey, RetryPolicy};
use idem_tests::{
    grpc_fixture::{GrpcShop, authorize, payments},
    shop_fixture::{settings, user},
};
use shop::{Settings, grpc::proto::CreatePaymentRequest};

fn payment(amount: i64) -> CreatePaymentRequest {
    CreatePaymentRequest {
        amount,
        currency: "JPY".to_owned(),
        request_id: String::new(),
    }
}

/// Attempts that time out (the payment takes longer than an attempt may) are retried with
/// the same key until the first attempt's payment comes back, replayed: one payment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_and_aborted_are_retried_until_the_first_answer() {
    let test = GrpcShop::memory(Settings {
        payment_delay: Duration::from_millis(1200),
        ..settings()
    })
    .await;
    let client = test.client().await;
    let alice = user();
    let policy = RetryPolicy::new()
        .attempt_timeout(Duration::from_millis(300))
        .initial_backoff(Duration::from_millis(50))
        .deadline(Duration::from_secs(30));
    let key = IdempotencyKey::random();
    let answer = policy
        .call_grpc(&key, payment(9800), |mut request| {
            let mut client = client.clone();
            authorize(&mut request, &alice);
            async move { client.create_payment(request).await }
        })
        .await
        .unwrap();
    assert!(answer.attempts() >= 2, "the first attempt timed out");
    assert!(answer.is_replayed());
    let mut client = test.client().await;
    assert_eq!(
        payments(&mut client, &alice).await,
        [answer.into_response().into_inner()]
    );
}

/// The same key for another payment ends the call at once, as a caller's bug.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reused_key_is_not_retried() {
    let test = GrpcShop::memory(settings()).await;
    let client = test.client().await;
    let alice = user();
    let key = IdempotencyKey::random();
    let call = |amount| {
        let (client, alice) = (client.clone(), alice.clone());
        let key = key.clone();
        async move {
            RetryPolicy::new()
                .call_grpc(&key, payment(amount), |mut request| {
                    let mut client = client.clone();
                    authorize(&mut request, &alice);
                    async move { client.create_payment(request).await }
                })
                .await
        }
    };
    call(9800).await.unwrap();
    let error = call(1200).await.unwrap_err();
    assert!(error.is_key_reused(), "{error}");
    assert_eq!(error.attempts(), 1);
}
