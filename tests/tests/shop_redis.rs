//! Two shops on one Redis (`IDEM_STORE=redis://...`), over real HTTP: a key sent to both
//! runs once. Skipped, saying so, when `IDEM_TEST_REDIS_URL` is unset.

use std::{sync::Arc, time::Duration};

use idem_tests::key;
use idem_tests::shop_fixture::{TestShop, honour_retry_after, payment, settings, transfer, user};
use reqwest::StatusCode;
use shop::{Backend, Settings, backend::StoreChoice};
use tokio::{sync::Barrier, task::JoinSet};

/// Two shops as `IDEM_STORE=redis://...` starts them: each its own runtime, connection and
/// port, both on the test Redis.
async fn two_shops(test: &str, settings: Settings) -> Option<(TestShop, TestShop)> {
    let Ok(url) = std::env::var("IDEM_TEST_REDIS_URL") else {
        eprintln!("skipped {test}: IDEM_TEST_REDIS_URL is not set");
        return None;
    };
    let store: StoreChoice = url.parse().expect("a redis:// URL");
    assert!(matches!(store, StoreChoice::Redis(_)), "{store}");
    let one = Backend::open(&store).await.expect("the test Redis answers");
    let two = Backend::open(&store).await.expect("the test Redis answers");
    Some((
        TestShop::on(one, settings.clone()).await,
        TestShop::on(two, settings).await,
    ))
}

/// A key sent to one shop and then the other runs once: the second answers the first's
/// result. While the first runs, the other shop answers 409.
#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_shops_on_one_redis_run_a_key_once() {
    let settings = Settings {
        transfer_delay: Duration::from_millis(800),
        ..settings()
    };
    let Some((one, two)) = two_shops("two_shops_on_one_redis_run_a_key_once", settings).await
    else {
        return;
    };
    assert_ne!(one.server.addr, two.server.addr);
    let (alice, key) = (user(), key());
    let paid = one.api.pay(&alice, &key, &payment(9800)).await;
    paid.created();
    let elsewhere = two.api.pay(&alice, &key, &payment(9800)).await;
    assert!(elsewhere.replayed(), "{elsewhere:?}");
    assert_eq!(elsewhere.body, paid.body);
    two.api
        .pay(&alice, &key, &payment(1200))
        .await
        .problem(StatusCode::UNPROCESSABLE_ENTITY, "key-reused");
    // The payment itself is in the first shop's memory; only the records are shared.
    assert_eq!(one.api.payments(&alice).await.len(), 1);
    assert!(two.api.payments(&alice).await.is_empty());

    let key = idem_tests::key();
    let first = {
        let (api, alice, key) = (one.api.clone(), alice.clone(), key.clone());
        tokio::spawn(async move { api.transfer(&alice, &key, &transfer(50_000)).await })
    };
    tokio::time::sleep(Duration::from_millis(250)).await;
    let during = two.api.transfer(&alice, &key, &transfer(50_000)).await;
    let first = first.await.unwrap();
    let (ran, refused) = if first.status == 201 {
        (first, during)
    } else {
        (during, first)
    };
    ran.created();
    refused.problem(StatusCode::CONFLICT, "request-in-flight");
    honour_retry_after(&refused).await;
    for shop in [&one, &two] {
        let after = shop.api.transfer(&alice, &key, &transfer(50_000)).await;
        assert!(after.replayed());
        assert_eq!(after.body, ran.body);
    }
    let transfers = one.api.transfers(&alice).await.len() + two.api.transfers(&alice).await.len();
    assert_eq!(transfers, 1, "one transfer, in whichever shop ran it");
}

/// 100 requests with one key at once, spread over two shops: exactly one runs.
#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_requests_spread_over_two_shops_run_once() {
    let Some((one, two)) = two_shops(
        "concurrent_requests_spread_over_two_shops_run_once",
        settings(),
    )
    .await
    else {
        return;
    };
    let (alice, key) = (user(), key());
    let start = Arc::new(Barrier::new(100));
    let mut requests = JoinSet::new();
    for n in 0..100 {
        let api = if n % 2 == 0 { &one.api } else { &two.api }.clone();
        let (alice, key, start) = (alice.clone(), key.clone(), start.clone());
        requests.spawn(async move {
            start.wait().await;
            api.pay(&alice, &key, &payment(9800)).await
        });
    }
    let mut ran = Vec::new();
    while let Some(answer) = requests.join_next().await {
        let answer = answer.unwrap();
        match (answer.status.as_u16(), answer.replayed()) {
            (201, false) => ran.push(answer),
            (201, true) => {}
            (409, _) => {
                answer.problem(StatusCode::CONFLICT, "request-in-flight");
            }
            _ => panic!("unexpected answer: {answer:?}"),
        }
    }
    assert_eq!(ran.len(), 1, "one request ran");
    let payments = one.api.payments(&alice).await.len() + two.api.payments(&alice).await.len();
    assert_eq!(payments, 1);
}
