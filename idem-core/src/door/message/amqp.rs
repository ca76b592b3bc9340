//! RabbitMQ (AMQP 0-9-1) queues as a [`MessageSource`] (feature `amqp`, on `lapin`).
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use idem::message::amqp::RabbitMq;
//! use lapin::{Connection, ConnectionProperties};
//!
//! let connection = Connection::connect("amqp://127.0.0.1:5672", ConnectionProperties::default()).await?;
//! let source = RabbitMq::new(connection.create_channel().await?, "receipts");
//! # drop(source); Ok(()) }
//! ```
//!
//! - **Headers**: the `message-id` and `content-type` properties become the headers
//!   `message-id` and `Content-Type`; each header of the message's table whose value is a
//!   string or a number becomes a header of that name.
//! - **Ack**: `basic.ack`. RabbitMQ does not confirm acks: one lost with its channel makes
//!   the broker deliver the message again (`redelivered`), and its stored result answers it.
//! - **Later**: RabbitMQ cannot delay a `nack`, so the delivery is held (not acknowledged) for
//!   the delay, at most [`longest_delay`](RabbitMq::longest_delay), and then `basic.nack` with
//!   requeue. The handler's worker is free meanwhile; the held message keeps one slot of the
//!   channel's prefetch. A delay queue (a queue with a message TTL that dead-letters back)
//!   would free that slot too, but it is topology the application would have to declare, and
//!   a copy republished there is a second message with its own fate; a held delivery stays
//!   the one message, and a crash during the delay returns it to the queue at once.
//! - **End**: `basic.reject` without requeue: to the queue's dead-letter exchange when it has
//!   one, dropped otherwise; the reason is logged.
//! - **In progress**: AMQP has no such signal. A handler that runs longer than the broker's
//!   `consumer_timeout` (30 minutes by default) has its channel closed and its message
//!   delivered again, to a consumer that finds the key in flight and waits for the lease.
//! - **Attempt**: `x-delivery-count` + 1 on a quorum queue; on a classic queue 2 once the
//!   message is `redelivered` (the broker counts no further). A quorum queue's
//!   `x-delivery-limit` dead-letters a message the broker delivered that often.
//!
//! At start-up [`check`](MessageSource::check) asks for the queue (it must exist: the
//! runner declares nothing) and sets the channel's prefetch.

use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderMap, HeaderName, HeaderValue, header};
use lapin::{
    Acker, BasicProperties, Channel, Consumer,
    options::{
        BasicAckOptions, BasicConsumeOptions, BasicNackOptions, BasicQosOptions,
        BasicRejectOptions, QueueDeclareOptions,
    },
    types::{AMQPValue, FieldTable},
};

use super::{
    route::path_segment,
    source::{BrokerError, CheckError, Delivery, MessageSource, Requirements},
};

/// A RabbitMQ queue, as a source of messages.
#[derive(Debug)]
pub struct RabbitMq {
    channel: Channel,
    queue: String,
    prefetch: u16,
    longest_delay: Duration,
    consumer: Option<Consumer>,
}

impl RabbitMq {
    /// The default prefetch: messages the broker sends ahead of their acks.
    pub const DEFAULT_PREFETCH: u16 = 32;
    /// The default longest time a delivery is held before it is handed back.
    pub const DEFAULT_LONGEST_DELAY: Duration = Duration::from_secs(30);

    /// Messages of the queue `queue`, consumed on `channel`.
    pub fn new(channel: Channel, queue: impl Into<String>) -> Self {
        Self {
            channel,
            queue: queue.into(),
            prefetch: Self::DEFAULT_PREFETCH,
            longest_delay: Self::DEFAULT_LONGEST_DELAY,
            consumer: None,
        }
    }

    /// How many unacknowledged messages the broker may send ahead (32 by default): the
    /// runner's concurrency, and room for the deliveries held until their delayed redelivery.
    #[must_use]
    pub fn prefetch(mut self, messages: u16) -> Self {
        self.prefetch = messages.max(1);
        self
    }

    /// The longest a delivery is held before it is handed back for a later delivery (30 s by
    /// default): a longer delay (a lease, a backoff) is cut to this.
    #[must_use]
    pub fn longest_delay(mut self, delay: Duration) -> Self {
        self.longest_delay = delay;
        self
    }
}

impl MessageSource for RabbitMq {
    type Delivery = RabbitMqDelivery;

    fn route(&self) -> String {
        format!("/amqp/{}", path_segment(&self.queue))
    }

    async fn check(&mut self, _needs: Requirements) -> Result<(), CheckError> {
        let passive = QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        };
        self.channel
            .queue_declare(self.queue.as_str().into(), passive, FieldTable::default())
            .await
            .map_err(|error| {
                CheckError::Refused(format!(
                    "the queue {:?} cannot be consumed (it must exist: the runner declares \
                     nothing): {error}",
                    self.queue
                ))
            })?;
        self.channel
            .basic_qos(self.prefetch, BasicQosOptions::default())
            .await
            .map_err(|error| CheckError::Broker(error.into()))
    }

    async fn next(&mut self) -> Option<Result<RabbitMqDelivery, BrokerError>> {
        if self.consumer.is_none() {
            let consumer = self
                .channel
                .basic_consume(
                    self.queue.as_str().into(),
                    "".into(),
                    BasicConsumeOptions::default(),
                    FieldTable::default(),
                )
                .await;
            match consumer {
                Ok(consumer) => self.consumer = Some(consumer),
                Err(error) => return Some(Err(error.into())),
            }
        }
        let delivery = self.consumer.as_mut()?.next().await?;
        let longest_delay = self.longest_delay;
        Some(
            delivery
                .map(|delivery| RabbitMqDelivery {
                    payload: Bytes::from(delivery.data),
                    properties: delivery.properties,
                    redelivered: delivery.redelivered,
                    acker: delivery.acker,
                    longest_delay,
                })
                .map_err(Into::into),
        )
    }
}

/// One delivery of a RabbitMQ message.
#[derive(Debug)]
pub struct RabbitMqDelivery {
    payload: Bytes,
    properties: BasicProperties,
    redelivered: bool,
    acker: Acker,
    longest_delay: Duration,
}

impl RabbitMqDelivery {
    /// Whether the broker delivered the message before.
    pub fn redelivered(&self) -> bool {
        self.redelivered
    }

    /// The message's properties.
    pub fn properties(&self) -> &BasicProperties {
        &self.properties
    }
}

impl Delivery for RabbitMqDelivery {
    fn headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(table) = self.properties.headers() {
            for (name, value) in table {
                let Ok(name) = HeaderName::from_bytes(name.as_str().as_bytes()) else {
                    continue;
                };
                if let Some(value) = header_value(value) {
                    headers.append(name, value);
                }
            }
        }
        let mut property = |name: HeaderName, value: &Option<lapin::types::ShortString>| {
            if let Some(value) = value
                .as_ref()
                .and_then(|v| HeaderValue::from_str(v.as_str()).ok())
            {
                headers.insert(name, value);
            }
        };
        property(
            HeaderName::from_static("message-id"),
            self.properties.message_id(),
        );
        property(header::CONTENT_TYPE, self.properties.content_type());
        headers
    }

    fn payload(&self) -> Bytes {
        self.payload.clone()
    }

    fn attempt(&self) -> u64 {
        let counted = self
            .properties
            .headers()
            .as_ref()
            .and_then(|table| table.inner().get("x-delivery-count"))
            .and_then(|count| match count {
                AMQPValue::LongLongInt(count) => u64::try_from(*count).ok(),
                AMQPValue::LongInt(count) => u64::try_from(*count).ok(),
                AMQPValue::LongUInt(count) => Some(u64::from(*count)),
                _ => None,
            });
        match counted {
            Some(count) => count + 1,
            None if self.redelivered => 2,
            None => 1,
        }
    }

    async fn ack(self) -> Result<(), BrokerError> {
        self.acker.ack(BasicAckOptions::default()).await?;
        Ok(())
    }

    async fn redeliver(self, delay: Duration) -> Result<(), BrokerError> {
        let delay = delay.min(self.longest_delay);
        // Held in a task of its own, so that the runner's worker is free meanwhile.
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let requeue = BasicNackOptions {
                requeue: true,
                ..BasicNackOptions::default()
            };
            if let Err(error) = self.acker.nack(requeue).await {
                tracing::warn!(%error, "message: a held delivery could not be handed back; the broker returns it when its channel closes");
            }
        });
        Ok(())
    }

    async fn end(self, _reason: &str) -> Result<(), BrokerError> {
        self.acker
            .reject(BasicRejectOptions { requeue: false })
            .await?;
        Ok(())
    }
}

/// A header of the table as an HTTP header value: strings as they are, integers as their
/// digits; anything else is left out.
fn header_value(value: &AMQPValue) -> Option<HeaderValue> {
    let text = match value {
        AMQPValue::LongString(text) => String::from_utf8_lossy(text.as_bytes()).into_owned(),
        AMQPValue::ShortString(text) => text.as_str().to_owned(),
        AMQPValue::LongInt(n) => n.to_string(),
        AMQPValue::LongUInt(n) => n.to_string(),
        AMQPValue::LongLongInt(n) => n.to_string(),
        AMQPValue::ShortInt(n) => n.to_string(),
        AMQPValue::ShortUInt(n) => n.to_string(),
        AMQPValue::Boolean(b) => b.to_string(),
        _ => return None,
    };
    HeaderValue::from_str(&text).ok()
}
