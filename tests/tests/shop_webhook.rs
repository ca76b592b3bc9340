//! What a replay of the bank's webhook checks, over real HTTP: a redelivery gets the stored
//! transfer only with the bank's signature of its body. The signature is checked in the
//! webhook's body extractor, which `#[idempotent]` runs before every idempotency decision.

use hmac::{Hmac, KeyInit, Mac};
use idem_tests::{
    Answer,
    shop_fixture::{Api, TestShop, key, settings, transfer, user},
};
use reqwest::StatusCode;
use sha2::Sha256;
use shop::Settings;

/// The bank's signature of `body`, computed here independently of the shop.
fn sign(body: &str) -> String {
    let mut mac =
        <Hmac<Sha256> as KeyInit>::new_from_slice(Settings::DEFAULT_WEBHOOK_SECRET.as_bytes())
            .unwrap();
    mac.update(body.as_bytes());
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// Delivers `body` with `key`, signed with `signature` (none: no `Bank-Signature`).
async fn deliver(api: &Api, key: &str, body: &str, signature: Option<&str>) -> Answer {
    let mut request = api
        .http
        .post(api.url("/webhooks/bank"))
        .header("content-type", "application/json")
        .header("idempotency-key", key)
        .body(body.to_owned());
    if let Some(signature) = signature {
        request = request.header("bank-signature", signature);
    }
    Answer::of(request).await
}

/// A settled transfer's event, delivered once with the bank's signature: the shop, the
/// event's body and key, and the first answer.
async fn settled() -> (TestShop, String, String, Answer) {
    let test = TestShop::memory(settings()).await;
    let sent = test
        .api
        .transfer(&user(), &key(), &transfer(12_000))
        .await
        .created();
    let id = sent["id"].as_str().unwrap();
    let event = format!(r#"{{"type":"transfer.settled","transfer":"{id}"}}"#);
    let event_key = format!("\"evt_{}\"", &key()[..13]);
    let first = deliver(&test.api, &event_key, &event, Some(&sign(&event))).await;
    assert_eq!(first.status, 200, "{first:?}");
    assert!(!first.replayed());
    assert_eq!(first.json()["status"], "settled");
    (test, event, event_key, first)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsigned_redelivery_is_401_and_not_a_replay() {
    let (test, event, event_key, _) = settled().await;
    let unsigned = deliver(&test.api, &event_key, &event, None).await;
    unsigned.problem(StatusCode::UNAUTHORIZED, "invalid-signature");
    assert!(!unsigned.replayed());
    assert!(
        !String::from_utf8_lossy(&unsigned.body).contains("settled"),
        "the transfer is not in the answer: {unsigned:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redelivery_with_a_wrong_signature_is_401_and_not_a_replay() {
    let (test, event, event_key, _) = settled().await;
    let other_body = sign(r#"{"type":"transfer.settled","transfer":"tr_other"}"#);
    for wrong in ["sha256=00", "sha256=", "", other_body.as_str()] {
        let forged = deliver(&test.api, &event_key, &event, Some(wrong)).await;
        forged.problem(StatusCode::UNAUTHORIZED, "invalid-signature");
        assert!(!forged.replayed(), "signature {wrong:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_redelivery_is_the_replay_of_the_first() {
    let (test, event, event_key, first) = settled().await;
    let redelivered = deliver(&test.api, &event_key, &event, Some(&sign(&event))).await;
    assert_eq!(redelivered.status, 200);
    assert!(redelivered.replayed());
    assert_eq!(redelivered.body, first.body);
    // A refused delivery in between does not disturb the stored result.
    deliver(&test.api, &event_key, &event, None)
        .await
        .problem(StatusCode::UNAUTHORIZED, "invalid-signature");
    let again = deliver(&test.api, &event_key, &event, Some(&sign(&event))).await;
    assert!(again.replayed());
    assert_eq!(again.body, first.body);
}
