//! The shop from the client side, with `idem_client`: case 5 of docs/contract.md as the
//! client library plays it, and the shop's own outbound call to its bank, which a derived key
//! keeps to one transfer even when the shop forgets it made one.

use std::time::Duration;

use idem_client::{IdempotencyKey, RetryPolicy};
use idem_tests::shop_fixture::{Api, TestShop, settings, transfer, user};
use serde_json::Value;
use shop::{Backend, Settings, bank_service::BankServer};

/// Case 5 from the client side: the first attempt times out while the bank works, the
/// client retries with the same key through 409 (honouring `Retry-After`), and the call ends
/// with the first request's result, replayed. One transfer at the shop, one at the bank.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_transfer_is_collected_by_the_client_and_made_once() {
    let bank = BankServer::start(Duration::from_millis(2000))
        .await
        .unwrap();
    let test = TestShop::memory(Settings {
        bank_url: Some(bank.url().to_owned()),
        ..settings()
    })
    .await;
    let alice = user();
    let http = reqwest::Client::new();
    let answer = RetryPolicy::new()
        .attempt_timeout(Duration::from_millis(500))
        .send(
            http.post(test.api.url("/transfers"))
                .bearer_auth(&alice)
                .json(&transfer(50_000)),
        )
        .await
        .unwrap();

    assert_eq!(answer.status(), 201);
    assert!(answer.is_replayed(), "the first request's result");
    // A timeout, then (unless the machine stalled for a second) 409s, then the result.
    assert!(answer.attempts() >= 2, "{}", answer.attempts());
    assert!(answer.elapsed() >= Duration::from_millis(2000));
    let created: Value = answer.json().unwrap();
    assert_eq!(test.api.transfers(&alice).await, [created], "one transfer");
    let moved = bank.books().transfers();
    assert_eq!(moved.len(), 1, "the bank moved the money once: {moved:?}");
    assert_eq!(moved[0].amount, 50_000);
}

/// The shop loses its record of a transfer (here: a new shop process, memory and all), and
/// the client sends the transfer again with the same key. The new shop runs the handler again,
/// but its bank step asks the bank under the same derived key (of the operation and the step),
/// and the bank answers the transfer it already made: the money moved once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transfer_run_again_after_the_shop_lost_its_record_moves_money_once() {
    let bank = BankServer::start(Duration::from_millis(50)).await.unwrap();
    let settings = Settings {
        bank_url: Some(bank.url().to_owned()),
        ..settings()
    };
    let (alice, key) = (user(), IdempotencyKey::random());
    let policy = RetryPolicy::new();
    let pay_through = |api: &Api| {
        let request = reqwest::Client::new()
            .post(api.url("/transfers"))
            .bearer_auth(&alice)
            .json(&transfer(50_000));
        policy.send_with_key(&key, request)
    };

    let before = TestShop::memory(settings.clone()).await;
    let first = pay_through(&before.api).await.unwrap();
    assert!(!first.is_replayed());
    drop(before);

    let after = TestShop::on(Backend::memory(), settings).await;
    let again = pay_through(&after.api).await.unwrap();
    assert_eq!(again.status(), 201);
    assert!(
        !again.is_replayed(),
        "this shop has no record: it ran again"
    );

    let moved = bank.books().transfers();
    assert_eq!(
        moved.len(),
        1,
        "but the bank moved the money once: {moved:?}"
    );
    assert!(
        moved[0].key.starts_with("idem-step:") && moved[0].key.ends_with(":bank-order"),
        "under the key of the operation's bank step: {}",
        moved[0].key
    );
}

/// A transfer the bank refuses (the account 9999999 is closed) ends its operation: 502
/// `bank-refused`, stored, replayed to every retry, and the shop's resumer leaves it alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transfer_the_bank_refuses_is_answered_once_and_replayed() {
    let bank = BankServer::start(Duration::from_millis(20)).await.unwrap();
    let backend = Backend::memory().with_runtime(None, Some(Duration::from_millis(20)));
    let test = TestShop::on(
        backend,
        Settings {
            bank_url: Some(bank.url().to_owned()),
            ..settings()
        },
    )
    .await;
    let router = shop::app(test.shop.clone(), test.idem.clone());
    test.idem
        .resumer(router)
        .poll(Duration::from_millis(10))
        .start()
        .unwrap();
    let (alice, key) = (user(), IdempotencyKey::random());
    let closed = serde_json::json!({ "amount": 700, "currency": "JPY", "toAccount": "9999999" });
    let send = || {
        reqwest::Client::new()
            .post(test.api.url("/transfers"))
            .bearer_auth(&alice)
            .header("idempotency-key", key.as_str())
            .json(&closed)
            .send()
    };
    let first = send().await.unwrap();
    assert_eq!(first.status(), 502);
    assert!(first.headers().get("idempotent-replayed").is_none());
    let first: Value = first.json().await.unwrap();
    assert!(
        first["type"].as_str().unwrap().ends_with("#bank-refused"),
        "{first}"
    );
    // Time for a resumer that would wrongly pick the operation up again.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for _ in 0..2 {
        let again = send().await.unwrap();
        assert_eq!(again.status(), 502);
        assert_eq!(again.headers()["idempotent-replayed"], "true");
        assert_eq!(again.json::<Value>().await.unwrap(), first);
    }
    assert!(bank.books().transfers().is_empty(), "nothing moved");
    assert!(test.api.transfers(&alice).await.is_empty(), "no ledger row");
    assert_eq!(
        test.idem.scheduled_resumptions(),
        0,
        "nothing left to resume"
    );
}
