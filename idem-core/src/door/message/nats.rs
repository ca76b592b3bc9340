//! NATS JetStream pull consumers as a [`MessageSource`] (feature `nats`, on `async-nats`).
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use async_nats::jetstream::{self, consumer::pull};
//! use idem::message::nats::JetStream;
//!
//! let client = async_nats::connect("nats://127.0.0.1:4222").await?;
//! let context = jetstream::new(client);
//! let stream = context.get_stream("ORDERS").await?;
//! let consumer = stream
//!     .get_or_create_consumer("receipts", pull::Config {
//!         durable_name: Some("receipts".into()),
//!         ..Default::default()
//!     })
//!     .await?;
//! let source = JetStream::new(context, consumer);
//! # drop(source); Ok(()) }
//! ```
//!
//! - **Ack**: a double ack (`+ACK`, which the server confirms), so an ack that was lost is
//!   known as such. Lost or not, the result is stored first: a redelivery is a duplicate.
//! - **Later**: `-NAK` with a delay.
//! - **End**: `+TERM`; the reason is logged.
//! - **In progress**: `+WPI`, which restarts the consumer's `AckWait`.
//! - **Attempt**: the delivery count of the message's metadata.
//!
//! At start-up [`check`](MessageSource::check) refuses a consumer that cannot work with the
//! handler: one that does not take explicit acks; a lease longer than `AckWait` (or than the
//! shortest step of its `backoff`), after which the server would give a message still held by
//! a live handler to another consumer; and a bounded redelivery horizon longer than the TTL
//! (the stream's `max_age`, or `max_deliver` deliveries of `AckWait` each), within which a
//! message could come back after its key was forgotten. An unbounded horizon (no `max_age`, no
//! `max_deliver`, the defaults) is logged as a warning: a message unacknowledged for longer
//! than the TTL (a consumer down that long) would run again.

use std::time::Duration;

use async_nats::jetstream::{
    self, AckKind,
    consumer::{AckPolicy, PullConsumer, pull},
};
use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderMap, HeaderName, HeaderValue};

use super::{
    route::path_segment,
    source::{BrokerError, CheckError, Delivery, MessageSource, Requirements},
};

/// A JetStream pull consumer, as a source of messages.
pub struct JetStream {
    context: jetstream::Context,
    consumer: PullConsumer,
    batch: usize,
    messages: Option<pull::Stream>,
}

impl JetStream {
    /// The default number of messages asked of the server at a time.
    pub const DEFAULT_BATCH: usize = 16;

    /// Messages of `consumer`, a pull consumer of a stream in `context`.
    pub fn new(context: jetstream::Context, consumer: PullConsumer) -> Self {
        Self {
            context,
            consumer,
            batch: Self::DEFAULT_BATCH,
            messages: None,
        }
    }

    /// How many messages are asked of the server at a time (16 by default). A message waits
    /// in the client from its delivery until the runner takes it, and its `AckWait` runs
    /// meanwhile: keep this near the runner's concurrency.
    #[must_use]
    pub fn batch(mut self, messages: usize) -> Self {
        self.batch = messages.max(1);
        self
    }

    /// The longest a message may stay unacknowledged and still be delivered again, if the
    /// stream or the consumer bounds it.
    fn horizon(max_age: Duration, ack_waits: &[Duration], max_deliver: i64) -> Option<Duration> {
        let by_age = (!max_age.is_zero()).then_some(max_age);
        let by_deliveries = u32::try_from(max_deliver).ok().filter(|n| *n > 0).map(|n| {
            (0..n as usize)
                .map(|delivery| ack_waits[delivery.min(ack_waits.len() - 1)])
                .sum::<Duration>()
        });
        match (by_age, by_deliveries) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

impl std::fmt::Debug for JetStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let info = self.consumer.cached_info();
        f.debug_struct("JetStream")
            .field("stream", &info.stream_name)
            .field("consumer", &info.name)
            .field("batch", &self.batch)
            .finish_non_exhaustive()
    }
}

impl MessageSource for JetStream {
    type Delivery = JetStreamDelivery;

    fn route(&self) -> String {
        let info = self.consumer.cached_info();
        format!(
            "/jetstream/{}/{}",
            path_segment(&info.stream_name),
            path_segment(&info.name)
        )
    }

    async fn check(&mut self, needs: Requirements) -> Result<(), CheckError> {
        let info = self
            .consumer
            .info()
            .await
            .map_err(|error| CheckError::Broker(error.into()))?
            .clone();
        let config = &info.config;
        let name = format!("the consumer {}/{}", info.stream_name, info.name);
        if config.ack_policy != AckPolicy::Explicit {
            return Err(CheckError::Refused(format!(
                "{name} does not take explicit acks (ack_policy {:?}): a message is acknowledged \
                 only once its result is stored; use AckPolicy::Explicit",
                config.ack_policy
            )));
        }
        let ack_waits = if config.backoff.is_empty() {
            vec![config.ack_wait]
        } else {
            config.backoff.clone()
        };
        let shortest = ack_waits.iter().copied().min().unwrap_or(config.ack_wait);
        if needs.lease > shortest {
            return Err(CheckError::Refused(format!(
                "the lease ({:?}) is longer than the AckWait of {name} ({shortest:?}): the \
                 server could deliver a message again to another consumer while its key is \
                 still leased to a handler that died, and that delivery would wait a whole \
                 lease; make the lease at most {shortest:?}, or the AckWait at least the lease",
                needs.lease
            )));
        }
        let stream = self
            .context
            .get_stream(&info.stream_name)
            .await
            .map_err(|error| CheckError::Broker(error.into()))?;
        let max_age = stream.cached_info().config.max_age;
        match Self::horizon(max_age, &ack_waits, config.max_deliver) {
            Some(horizon) if horizon > needs.ttl => Err(CheckError::Refused(format!(
                "{name} may deliver a message again up to {horizon:?} after it was first \
                 delivered (the stream's max_age, or max_deliver deliveries of AckWait each), \
                 longer than the TTL ({:?}) for which its key is remembered: a late redelivery \
                 would run again; make the TTL at least {horizon:?}",
                needs.ttl
            ))),
            Some(_) => Ok(()),
            None => {
                tracing::warn!(
                    consumer = name,
                    ttl = ?needs.ttl,
                    "message: the stream keeps messages without a max_age and the consumer \
                     delivers them without a max_deliver: a message left unacknowledged for \
                     longer than the TTL (a consumer down that long) would run again"
                );
                Ok(())
            }
        }
    }

    async fn next(&mut self) -> Option<Result<JetStreamDelivery, BrokerError>> {
        if self.messages.is_none() {
            let messages = self
                .consumer
                .stream()
                .max_messages_per_batch(self.batch)
                .messages()
                .await;
            match messages {
                Ok(messages) => self.messages = Some(messages),
                Err(error) => return Some(Err(error.into())),
            }
        }
        let messages = self.messages.as_mut()?;
        let next = messages.next().await?;
        Some(next.map(JetStreamDelivery).map_err(Into::into))
    }
}

/// One delivery of a JetStream message.
#[derive(Debug)]
pub struct JetStreamDelivery(jetstream::Message);

impl JetStreamDelivery {
    /// The message as async-nats gives it.
    pub fn message(&self) -> &jetstream::Message {
        &self.0
    }
}

impl Delivery for JetStreamDelivery {
    fn headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        let Some(nats) = &self.0.headers else {
            return headers;
        };
        for (name, values) in nats.iter() {
            let Ok(name) = HeaderName::from_bytes(AsRef::<str>::as_ref(name).as_bytes()) else {
                continue;
            };
            for value in values {
                if let Ok(value) = HeaderValue::from_bytes(value.as_ref()) {
                    headers.append(name.clone(), value);
                }
            }
        }
        headers
    }

    fn payload(&self) -> Bytes {
        self.0.payload.clone()
    }

    fn attempt(&self) -> u64 {
        self.0
            .info()
            .ok()
            .and_then(|info| u64::try_from(info.delivered).ok())
            .unwrap_or(1)
            .max(1)
    }

    async fn ack(self) -> Result<(), BrokerError> {
        self.0.double_ack().await
    }

    async fn redeliver(self, delay: Duration) -> Result<(), BrokerError> {
        self.0.ack_with(AckKind::Nak(Some(delay))).await
    }

    async fn end(self, _reason: &str) -> Result<(), BrokerError> {
        self.0.ack_with(AckKind::Term).await
    }

    async fn in_progress(&self) -> Result<(), BrokerError> {
        self.0.ack_with(AckKind::Progress).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_horizon_is_the_nearer_bound() {
        let second = Duration::from_secs(1);
        assert_eq!(JetStream::horizon(Duration::ZERO, &[second], -1), None);
        assert_eq!(
            JetStream::horizon(Duration::ZERO, &[second], 5),
            Some(5 * second)
        );
        assert_eq!(
            JetStream::horizon(Duration::ZERO, &[second, 10 * second], 3),
            Some(21 * second)
        );
        assert_eq!(
            JetStream::horizon(2 * second, &[second], 5),
            Some(2 * second)
        );
    }
}
