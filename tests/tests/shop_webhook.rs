//! What a replay of the bank's webhook checks, over real HTTP: a redelivery gets the stored
//! transfer only with the bank's signature of its body. The signature is checked in the
//! webhook's body extractor, which `#[idempotent]` runs before every idempotency decision.

use idem_tests::{
    Answer, key,
    shop_fixture::{TestShop, bank_signature, settings, transfer, user},
};
use reqwest::StatusCode;

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
    let first = test
        .api
        .deliver(&event_key, &event, Some(&bank_signature(&event)))
        .await;
    assert_eq!(first.status, 200, "{first:?}");
    assert!(!first.replayed());
    assert_eq!(first.json()["status"], "settled");
    (test, event, event_key, first)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsigned_redelivery_is_401_and_not_a_replay() {
    let (test, event, event_key, _) = settled().await;
    let unsigned = test.api.deliver(&event_key, &event, None).await;
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
    let other_body = bank_signature(r#"{"type":"transfer.settled","transfer":"tr_other"}"#);
    for wrong in ["sha256=00", "sha256=", "", other_body.as_str()] {
        let forged = test.api.deliver(&event_key, &event, Some(wrong)).await;
        forged.problem(StatusCode::UNAUTHORIZED, "invalid-signature");
        assert!(!forged.replayed(), "signature {wrong:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_redelivery_is_the_replay_of_the_first() {
    let (test, event, event_key, first) = settled().await;
    let redelivered = test
        .api
        .deliver(&event_key, &event, Some(&bank_signature(&event)))
        .await;
    assert_eq!(redelivered.status, 200);
    assert!(redelivered.replayed());
    assert_eq!(redelivered.body, first.body);
    // A refused delivery in between does not disturb the stored result.
    test.api
        .deliver(&event_key, &event, None)
        .await
        .problem(StatusCode::UNAUTHORIZED, "invalid-signature");
    let again = test
        .api
        .deliver(&event_key, &event, Some(&bank_signature(&event)))
        .await;
    assert!(again.replayed());
    assert_eq!(again.body, first.body);
}
