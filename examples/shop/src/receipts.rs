//! Receipts: the receipt of each payment, written by a message handler, listed at
//! `GET /receipts`; and `POST /payments/{id}/receipt`, which e-mails a receipt again.
//!
//! With `SHOP_NATS_URL`, every payment is published as a `shop.payments.created` event
//! ([`events`](crate::events)), and [`write_receipt`] consumes them: one receipt per payment,
//! keyed on the payment's id inside the event, so that the same event delivered again, or
//! published twice under two message ids, still makes one receipt. With the PostgreSQL store
//! the receipt row and the key's completion commit in one transaction.
//!
//! Sending a receipt e-mail twice is harmless, so `POST /payments/{id}/receipt` takes a key
//! but does not insist on one, and keeps working when the idempotency store does not.

use std::sync::{Arc, Mutex};

use axum::{Json, extract::State, http::StatusCode};
use idem::{
    Idempotency,
    extract::Tx,
    idempotent,
    message::{MessageError, Runner, RunnerError, nats::JetStream},
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::{
    Shop,
    auth::User,
    events::{Events, PaymentCreated},
    model::{PaymentReceipt, ReceiptList, new_id, now},
    payments::{PaymentId, payment_not_found},
    problem::{ProblemBody, ShopError},
};

/// A receipt e-mail, as the mailer accepted it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Receipt {
    /// `rcpt_` and 24 letters and digits.
    #[schema(example = "rcpt_9f7Cq2rVnVJm3Q0xE4bA1sKd")]
    pub id: String,
    /// The payment it is for.
    #[schema(example = "pay_4eC39HqLyjWDarjtT1zdp7dc")]
    pub payment: String,
    /// Where it goes.
    #[schema(example = "alice@users.shop.example")]
    pub to: String,
    /// When it was queued, in seconds since the Unix epoch.
    #[schema(example = 1_764_460_900)]
    pub created: i64,
}

/// The outgoing mail, kept in memory: this demo sends nothing, it logs and counts.
#[derive(Clone, Debug, Default)]
pub struct Mailer {
    sent: Arc<Mutex<Vec<Receipt>>>,
}

impl Mailer {
    /// Queues `receipt` for sending.
    pub fn send(&self, receipt: &Receipt) {
        tracing::info!(to = %receipt.to, payment = %receipt.payment, "receipt e-mailed");
        self.sent
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(receipt.clone());
    }

    /// Every receipt sent so far.
    pub fn sent(&self) -> Vec<Receipt> {
        self.sent
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

/// E-mails the receipt of one of the caller's payments again.
///
/// A key is optional: without one every request sends an e-mail; with one, a retry answers
/// the first request's receipt and sends nothing. If the idempotency store is unavailable the
/// e-mail is sent anyway (a second copy is better than none).
#[utoipa::path(
    post,
    path = "/payments/{id}/receipt",
    tag = "payments",
    params(("id" = String, Path, description = "The payment's id")),
    security(("bearer" = [])),
    responses(
        (status = 202, description = "The receipt is on its way", body = Receipt),
        (status = 401, description = "No `Authorization: Bearer <user-id>`", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "The caller has no payment with this id", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
// `required = false`: running twice sends a second e-mail, which is harmless, so a client that
// sends no key is served. `on_store_error = "run"`: for the same reason, a store outage
// should not stop receipts; the runtime logs that it ran without a record.
#[idempotent(required = false, on_store_error = "run")]
pub async fn send_receipt(
    State(shop): State<Shop>,
    user: User,
    PaymentId(payment_id): PaymentId,
) -> Result<(StatusCode, Json<Receipt>), ShopError> {
    let payment = shop
        .ledger()
        .payment(user.id(), &payment_id)
        .await?
        .ok_or_else(|| payment_not_found(&payment_id))?;
    let receipt = Receipt {
        id: new_id("rcpt"),
        payment: payment.id,
        to: format!("{}@users.shop.example", user.id()),
        created: now(),
    };
    shop.mailer().send(&receipt);
    Ok((StatusCode::ACCEPTED, Json(receipt)))
}

/// Writes the receipt of a payment, once per payment: the `shop.payments.created` consumer.
///
/// Keyed on the payment's id inside the event (`/paymentId`), not on the message id: two
/// publications of one payment are one key. `lease = "10s"` fits the consumer's 30 s
/// `AckWait`; `ttl = "24h"` is as long as the stream keeps an event.
#[idempotent(key = json("/paymentId"), lease = "10s", ttl = "24h")]
pub async fn write_receipt(
    State(shop): State<Shop>,
    mut tx: Tx,
    Json(event): Json<PaymentCreated>,
) -> Result<(), MessageError> {
    let receipt = PaymentReceipt {
        id: new_id("rcpt"),
        payment_id: event.payment_id,
        amount: event.amount,
        currency: event.currency,
        created: now(),
    };
    shop.ledger()
        .insert_receipt(&mut tx, &event.owner, &receipt)
        .await
        .map_err(|error| {
            MessageError::retry(format!("the receipt could not be written: {error:?}"))
        })?;
    tracing::info!(payment = %receipt.payment_id, receipt = %receipt.id, "receipt written");
    Ok(())
}

/// Runs the receipts consumer until `shutdown` completes: 8 messages at a time.
pub async fn run_receipts(
    events: Events,
    shop: Shop,
    idem: Idempotency,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), RunnerError> {
    let consumer = events
        .receipts_consumer()
        .await
        .map_err(RunnerError::Broker)?;
    let source = JetStream::new(events.context().clone(), consumer).batch(8);
    Runner::new(idem, write_receipt.with_state(shop))
        .concurrency(8)
        .run(source, shutdown)
        .await
}

/// Lists the caller's payment receipts, oldest first.
///
/// A receipt is written by the receipts consumer shortly after its payment (with
/// `SHOP_NATS_URL`); without a broker the list stays empty.
#[utoipa::path(
    get,
    path = "/receipts",
    tag = "payments",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The caller's receipts", body = ReceiptList),
        (status = 401, description = "No `Authorization: Bearer <user-id>`", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn list_receipts(
    State(shop): State<Shop>,
    user: User,
) -> Result<Json<ReceiptList>, ShopError> {
    let items = shop.ledger().receipts(user.id()).await?;
    Ok(Json(ReceiptList { items }))
}
