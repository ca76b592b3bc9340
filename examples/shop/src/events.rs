//! Payment events on NATS JetStream, with `SHOP_NATS_URL`: every payment the shop makes is
//! published as `shop.payments.created` on the stream `SHOP` (created when missing), and a
//! receipts consumer inside the shop writes one receipt per payment
//! ([`receipts::write_receipt`](crate::receipts::write_receipt)).
//!
//! The event is published once the payment's response is final: after its record (and, on
//! PostgreSQL, its row) committed, never for a replay. Each publication has a message id of
//! its own, so the stream's duplicate window does not merge two publications of one payment;
//! the consumer keys on the payment's id inside the event instead, and two publications still
//! make one receipt. (A process that dies between the commit and the publication loses the
//! event: an outbox table would close that window, and is beyond this demo.)

use std::time::Duration;

use async_nats::jetstream::{
    self,
    consumer::{PullConsumer, pull},
    stream,
};
use axum::body::Bytes;
use axum::{
    body::Body,
    extract::{Request, State},
    http::StatusCode,
    middleware::Next,
    response::Response,
};
use http_body_util::BodyExt;
use serde::{Deserialize, Serialize};

use crate::{
    Shop,
    auth::User,
    model::{Payment, new_id},
};

/// The names the shop's events live under.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventNames {
    /// The stream: `SHOP`.
    pub stream: String,
    /// The subject payments are published on: `shop.payments.created`.
    pub subject: String,
    /// The receipts consumer's durable name: `receipts`.
    pub consumer: String,
}

impl Default for EventNames {
    fn default() -> Self {
        Self {
            stream: "SHOP".to_owned(),
            subject: "shop.payments.created".to_owned(),
            consumer: "receipts".to_owned(),
        }
    }
}

/// The event of a payment made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PaymentCreated {
    /// The payment's id: what the receipts consumer keys on.
    pub payment_id: String,
    /// The user who paid.
    pub owner: String,
    /// The amount paid.
    pub amount: i64,
    /// ISO 4217 code.
    pub currency: String,
}

/// The shop's connection to JetStream.
#[derive(Clone, Debug)]
pub struct Events {
    context: jetstream::Context,
    names: EventNames,
}

/// How long a completed receipt key is remembered, and how long the stream keeps an event:
/// equal, so that no event can be delivered again after its key was forgotten.
pub const RETENTION: Duration = Duration::from_secs(24 * 60 * 60);

/// How long the receipts consumer waits for an ack before it delivers a message again; at
/// least the receipts handler's lease.
pub const ACK_WAIT: Duration = Duration::from_secs(30);

impl Events {
    /// Connects to the server at `url` and creates the stream if it is missing.
    pub async fn connect(
        url: &str,
        names: EventNames,
    ) -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let client = async_nats::connect(url)
            .await
            .map_err(|error| format!("NATS at {url}: {error}"))?;
        let context = jetstream::new(client);
        context
            .get_or_create_stream(stream::Config {
                name: names.stream.clone(),
                subjects: vec![names.subject.clone()],
                max_age: RETENTION,
                ..Default::default()
            })
            .await
            .map_err(|error| format!("the stream {}: {error}", names.stream))?;
        Ok(Self { context, names })
    }

    /// The JetStream context.
    pub fn context(&self) -> &jetstream::Context {
        &self.context
    }

    /// The names the events live under.
    pub fn names(&self) -> &EventNames {
        &self.names
    }

    /// Publishes `event` under a fresh message id, and waits for the stream to take it.
    pub async fn publish(
        &self,
        event: &PaymentCreated,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", new_id("evt").as_str());
        let payload = Bytes::from(serde_json::to_vec(event)?);
        self.context
            .publish_with_headers(self.names.subject.clone(), headers, payload)
            .await?
            .await?;
        Ok(())
    }

    /// The receipts consumer, created when missing: a durable pull consumer with explicit
    /// acks and an `AckWait` of [`ACK_WAIT`].
    pub async fn receipts_consumer(
        &self,
    ) -> Result<PullConsumer, Box<dyn std::error::Error + Send + Sync>> {
        let stream = self.context.get_stream(&self.names.stream).await?;
        let consumer = stream
            .get_or_create_consumer(
                &self.names.consumer,
                pull::Config {
                    durable_name: Some(self.names.consumer.clone()),
                    ack_wait: ACK_WAIT,
                    ..Default::default()
                },
            )
            .await?;
        Ok(consumer)
    }
}

/// The middleware of `POST /payments`: once a payment was made (a 201 that is not a replay),
/// publishes its event.
pub async fn publish_payment(
    State(shop): State<Shop>,
    user: User,
    request: Request,
    next: Next,
) -> Response {
    let response = next.run(request).await;
    let Some(events) = shop.events() else {
        return response;
    };
    if response.status() != StatusCode::CREATED
        || response.headers().contains_key("idempotent-replayed")
    {
        return response;
    }
    let (parts, body) = response.into_parts();
    let Ok(body) = body.collect().await.map(|body| body.to_bytes()) else {
        return Response::from_parts(parts, Body::empty());
    };
    if let Ok(payment) = serde_json::from_slice::<Payment>(&body) {
        let event = PaymentCreated {
            payment_id: payment.id,
            owner: user.id().to_owned(),
            amount: payment.amount,
            currency: payment.currency,
        };
        if let Err(error) = events.publish(&event).await {
            tracing::error!(payment = %event.payment_id, error, "the payment's event could not be published; it has no receipt");
        }
    }
    Response::from_parts(parts, Body::from(body))
}
