//! The shop's receipts consumer: one receipt per payment, whatever the broker or the
//! publisher repeats. Against the shared JetStream (`IDEM_TEST_NATS_URL`), with a stream of
//! the test's own in place of `SHOP`.

use std::time::Duration;

use idem_tests::{
    eventually,
    nats_fixture::nats_url,
    shop_fixture::{Api, Server, payment, settings, user},
};
use serde_json::{Value, json};
use shop::{
    Backend, Shop,
    events::{EventNames, Events, PaymentCreated},
};

const WITHIN: Duration = Duration::from_secs(30);

/// A shop whose events go to a stream of its own, with its receipts consumer running.
struct ShopWithBroker {
    api: Api,
    events: Events,
    stop: tokio::sync::oneshot::Sender<()>,
    receipts: tokio::task::JoinHandle<Result<(), idem::message::RunnerError>>,
    _server: Server,
}

impl ShopWithBroker {
    async fn start(url: &str) -> Self {
        let id = format!("{:016x}", rand::random::<u64>());
        let names = EventNames {
            stream: format!("SHOP{id}"),
            subject: format!("shop{id}.payments.created"),
            consumer: "receipts".to_owned(),
        };
        let events = Events::connect(url, names).await.unwrap();
        let backend = Backend::memory();
        let shop = Shop::with_events(backend.ledger.clone(), settings(), Some(events.clone()));
        let server = Server::start(
            shop::app(shop.clone(), backend.idem.clone()),
            backend.idem.clone(),
        )
        .await;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let receipts = tokio::spawn(shop::receipts::run_receipts(
            events.clone(),
            shop,
            backend.idem.clone(),
            async {
                let _ = stopped.await;
            },
        ));
        Self {
            api: Api::new(&server),
            events,
            stop,
            receipts,
            _server: server,
        }
    }

    async fn receipts(&self, user: &str) -> Vec<Value> {
        let answer = idem_tests::Answer::of(self.api.get("/receipts", user)).await;
        assert_eq!(answer.status, 200, "{answer:?}");
        answer.json()["items"].as_array().unwrap().clone()
    }

    /// Waits until the consumer has settled every event published so far.
    async fn settled(&self) {
        let stream = self
            .events
            .context()
            .get_stream(&self.events.names().stream)
            .await
            .unwrap();
        let drained = eventually(WITHIN, async || {
            let info = stream
                .get_consumer::<async_nats::jetstream::consumer::pull::Config>("receipts")
                .await
                .unwrap()
                .get_info()
                .await
                .unwrap();
            info.num_pending == 0 && info.num_ack_pending == 0
        })
        .await;
        assert!(drained, "the receipts consumer did not settle its events");
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        self.receipts.await.unwrap().unwrap();
        let _ = self
            .events
            .context()
            .delete_stream(&self.events.names().stream)
            .await;
    }
}

#[tokio::test]
#[cfg_attr(not(idem_test_nats), ignore = "set IDEM_TEST_NATS_URL")]
async fn a_payment_gets_one_receipt_and_its_replay_none() {
    let Some(url) = nats_url("shop_receipts") else {
        return;
    };
    let shop = ShopWithBroker::start(&url).await;
    let alice = user();
    let key = idem_tests::key();
    let made = shop.api.pay(&alice, &key, &payment(9800)).await.created();
    let replayed = shop.api.pay(&alice, &key, &payment(9800)).await;
    assert!(replayed.replayed());
    let listed = eventually(WITHIN, async || !shop.receipts(&alice).await.is_empty()).await;
    assert!(listed, "no receipt");
    shop.settled().await;
    let receipts = shop.receipts(&alice).await;
    assert_eq!(receipts.len(), 1, "{receipts:?}");
    assert_eq!(receipts[0]["paymentId"], made["id"]);
    assert_eq!(receipts[0]["amount"], 9800);
    assert!(
        shop.receipts(&user()).await.is_empty(),
        "another user sees none"
    );
    shop.stop().await;
}

#[tokio::test]
#[cfg_attr(not(idem_test_nats), ignore = "set IDEM_TEST_NATS_URL")]
async fn the_same_event_published_twice_under_two_message_ids_makes_one_receipt() {
    let Some(url) = nats_url("shop_event_twice") else {
        return;
    };
    let shop = ShopWithBroker::start(&url).await;
    let bob = user();
    let event = PaymentCreated {
        payment_id: "pay_published_twice".to_owned(),
        owner: bob.clone(),
        amount: 1200,
        currency: "JPY".to_owned(),
    };
    // `publish` gives each publication a message id of its own.
    shop.events.publish(&event).await.unwrap();
    shop.events.publish(&event).await.unwrap();
    shop.settled().await;
    let receipts = shop.receipts(&bob).await;
    assert_eq!(receipts.len(), 1, "{receipts:?}");
    assert_eq!(receipts[0]["paymentId"], json!("pay_published_twice"));
    shop.stop().await;
}
