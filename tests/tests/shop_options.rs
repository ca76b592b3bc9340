//! The `#[idempotent]` options as the shop uses them, over real HTTP: refunds wait for a
//! duplicate and keep the bank's failure; the bank's webhook is global, strict and
//! byte-compared; receipts need no key and survive a store outage.

use std::time::Duration;

use idem::{Idempotency, postgres::PostgresStore};
use idem_tests::{
    Answer, key,
    shop_fixture::{Api, Server, TestShop, bank_signature, payment, settings, transfer, user},
};
use reqwest::StatusCode;
use serde_json::{Value, json};
use shop::{Settings, Shop, ledger::Ledger};

/// `on_conflict = "wait(5s)"`: two refunds with one key at once both get the refund (the
/// second waits for the first rather than getting 409), and it is made once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_refund_waits_for_the_first_and_gets_its_answer() {
    let test = TestShop::memory(Settings {
        refund_delay: Duration::from_millis(600),
        ..settings()
    })
    .await;
    let alice = user();
    let paid = test.api.pay(&alice, &key(), &payment(9800)).await.created();
    let path = format!("/payments/{}/refunds", paid["id"].as_str().unwrap());
    let refund_key = key();
    let refund = |api: Api| {
        let (path, alice, refund_key) = (path.clone(), alice.clone(), refund_key.clone());
        async move {
            Answer::of(
                api.post(&path, Some(&alice), Some(&refund_key))
                    .json(&json!({ "amount": 1200 })),
            )
            .await
        }
    };
    let first = tokio::spawn(refund(test.api.clone()));
    tokio::time::sleep(Duration::from_millis(150)).await;
    let second = refund(test.api.clone()).await;
    let first = first.await.unwrap();

    let mut answers = [first, second];
    answers.sort_by_key(|answer| answer.replayed());
    let [ran, waited] = answers;
    assert!(!ran.replayed());
    let created = ran.created();
    assert_eq!(created["amount"], 1200);
    assert!(created["id"].as_str().unwrap().starts_with("re_"));
    assert_eq!(waited.status, 201, "the duplicate waited: {waited:?}");
    assert!(waited.replayed());
    assert_eq!(waited.body, ran.body);

    let now = Answer::of(test.api.get(
        &format!("/payments/{}", paid["id"].as_str().unwrap()),
        &alice,
    ))
    .await
    .json();
    assert_eq!(now["amountRefunded"], 1200, "refunded once");
}

/// A refund larger than what is left is the handler's answer (400), stored like any other:
/// the same key gets it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_over_the_payment_is_refused_and_that_answer_is_kept() {
    let test = TestShop::memory(settings()).await;
    let alice = user();
    let paid = test.api.pay(&alice, &key(), &payment(9800)).await.created();
    let path = format!("/payments/{}/refunds", paid["id"].as_str().unwrap());
    let refund = |key: &str, amount: i64| {
        Answer::of(
            test.api
                .post(&path, Some(&alice), Some(key))
                .json(&json!({ "amount": amount })),
        )
    };
    refund(&key(), 9000).await.created();
    let over = key();
    let refused = refund(&over, 1000).await;
    let problem = refused.problem(StatusCode::BAD_REQUEST, "refund-exceeds-payment");
    assert_eq!(problem["errors"][0]["pointer"], "#/amount");
    assert!(
        problem["detail"].as_str().unwrap().contains("800"),
        "{problem}"
    );
    let again = refund(&over, 1000).await;
    assert!(again.replayed());
    assert_eq!(again.body, refused.body);
    refund(&key(), 800).await.created();
}

/// `store_server_errors = true`: a refund the bank failed answers 502, and that answer is
/// kept for its key even once the bank is back, so the refund is never re-run on a guess. A
/// new key makes a new refund.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_the_bank_failed_is_replayed_not_retried() {
    let test = TestShop::memory(settings()).await;
    let alice = user();
    let paid = test.api.pay(&alice, &key(), &payment(9800)).await.created();
    let id = paid["id"].as_str().unwrap();
    let path = format!("/payments/{id}/refunds");
    let refund = |key: String| {
        Answer::of(
            test.api
                .post(&path, Some(&alice), Some(&key))
                .json(&json!({ "amount": 500 })),
        )
    };

    test.shop.bank().set_down(true);
    let failing = key();
    let failed = refund(failing.clone()).await;
    failed.problem(StatusCode::BAD_GATEWAY, "bank-unavailable");
    test.shop.bank().set_down(false);
    let again = refund(failing).await;
    assert!(again.replayed(), "the 502 was stored: {again:?}");
    assert_eq!(again.body, failed.body);
    let payment = Answer::of(test.api.get(&format!("/payments/{id}"), &alice))
        .await
        .json();
    assert_eq!(payment["amountRefunded"], 0);

    refund(key()).await.created();
    let payment = Answer::of(test.api.get(&format!("/payments/{id}"), &alice))
        .await
        .json();
    assert_eq!(payment["amountRefunded"], 500);
}

/// The webhook: `scope = "global"` (no user; the bank's event id is the key),
/// `key_syntax = "strict"` (quoted keys only), `fingerprint = "raw"` (the signed bytes, not
/// the JSON they mean). A forged delivery stores nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bank_webhook_is_global_strict_and_byte_compared() {
    let test = TestShop::memory(settings()).await;
    let alice = user();
    let sent = test
        .api
        .transfer(&alice, &key(), &transfer(50_000))
        .await
        .created();
    assert_eq!(sent["status"], "pending");
    let id = sent["id"].as_str().unwrap();
    let event = format!(r#"{{"type":"transfer.settled","transfer":"{id}"}}"#);
    let event_key = format!("\"evt_{}\"", &key()[..8]);

    let forged = test
        .api
        .deliver(&event_key, &event, Some("sha256=00"))
        .await;
    forged.problem(StatusCode::UNAUTHORIZED, "invalid-signature");

    let delivered = test
        .api
        .deliver(&event_key, &event, Some(&bank_signature(&event)))
        .await;
    assert_eq!(delivered.status, 200, "{delivered:?}");
    assert!(!delivered.replayed(), "the forged delivery stored nothing");
    assert_eq!(delivered.json()["status"], "settled");
    assert_eq!(test.api.transfers(&alice).await[0]["status"], "settled");

    let redelivered = test
        .api
        .deliver(&event_key, &event, Some(&bank_signature(&event)))
        .await;
    assert!(redelivered.replayed());
    assert_eq!(redelivered.body, delivered.body);

    let bare = event_key.trim_matches('"');
    test.api
        .deliver(bare, &event, Some(&bank_signature(&event)))
        .await
        .problem(StatusCode::BAD_REQUEST, "key-malformed");

    let reordered = format!(r#"{{"transfer":"{id}","type":"transfer.settled"}}"#);
    test.api
        .deliver(&event_key, &reordered, Some(&bank_signature(&reordered)))
        .await
        .problem(StatusCode::UNPROCESSABLE_ENTITY, "key-reused");

    let unknown = r#"{"type":"transfer.settled","transfer":"tr_unknown"}"#;
    let unknown_key = format!("\"evt_{}\"", &key()[..8]);
    let missing = test
        .api
        .deliver(&unknown_key, unknown, Some(&bank_signature(unknown)))
        .await;
    missing.problem(StatusCode::NOT_FOUND, "transfer-not-found");
    let again = test
        .api
        .deliver(&unknown_key, unknown, Some(&bank_signature(unknown)))
        .await;
    assert!(again.replayed(), "the 404 is the event's answer");
}

/// `required = false`: without a key every request sends a receipt; with one, a retry is
/// answered with the first receipt and sends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receipt_needs_no_key_and_a_key_makes_it_once() {
    let test = TestShop::memory(settings()).await;
    let alice = user();
    let paid = test.api.pay(&alice, &key(), &payment(9800)).await.created();
    let path = format!("/payments/{}/receipt", paid["id"].as_str().unwrap());
    let receipt =
        |key: Option<String>| Answer::of(test.api.post(&path, Some(&alice), key.as_deref()));

    for _ in 0..2 {
        let sent = receipt(None).await;
        assert_eq!(sent.status, 202, "{sent:?}");
        assert!(!sent.replayed());
    }
    assert_eq!(test.shop.mailer().sent().len(), 2);

    let once = key();
    let first = receipt(Some(once.clone())).await;
    assert_eq!(first.status, 202);
    let json: Value = first.json();
    assert_eq!(json["to"], format!("{alice}@users.shop.example"));
    let again = receipt(Some(once)).await;
    assert!(again.replayed());
    assert_eq!(again.body, first.body);
    assert_eq!(test.shop.mailer().sent().len(), 3);
}

/// `on_store_error = "run"`: with the idempotency store unreachable (a PostgresStore whose
/// database refuses connections), a payment is refused with 503 and `Retry-After`, fail
/// closed, while a receipt is sent anyway, without a record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receipts_are_sent_while_the_store_is_down_and_payments_are_not_made() {
    let ledger = Ledger::memory();
    let shop = Shop::new(ledger, settings());

    let healthy_idem = Idempotency::default();
    let up = Server::start(shop::app(shop.clone(), healthy_idem.clone()), healthy_idem).await;
    let alice = user();
    let paid = Api::new(&up)
        .pay(&alice, &key(), &payment(9800))
        .await
        .created();

    let unreachable = sqlx::postgres::PgPoolOptions::new()
        .acquire_timeout(Duration::from_millis(500))
        .connect_lazy("postgres://postgres@127.0.0.1:1/nowhere")
        .unwrap();
    let down_idem = Idempotency::new(PostgresStore::new(unreachable));
    let down = Server::start(shop::app(shop.clone(), down_idem.clone()), down_idem).await;
    let api = Api::new(&down);

    let refused = api.pay(&alice, &key(), &payment(100)).await;
    refused.problem(StatusCode::SERVICE_UNAVAILABLE, "store-unavailable");
    assert!(refused.header("retry-after").is_some());

    let path = format!("/payments/{}/receipt", paid["id"].as_str().unwrap());
    let once = key();
    for _ in 0..2 {
        let sent = Answer::of(api.post(&path, Some(&alice), Some(&once))).await;
        assert_eq!(sent.status, 202, "{sent:?}");
        assert!(!sent.replayed(), "no record: each request runs");
    }
    assert_eq!(shop.mailer().sent().len(), 2);
    assert_eq!(Api::new(&up).payments(&alice).await.len(), 1);
}
