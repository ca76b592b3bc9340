//! The one trait between the runner and a broker: [`MessageSource`] and its [`Delivery`].
//! JetStream and RabbitMQ are one implementation each (features `nats` and `amqp`); another
//! broker is one more.

use std::{error::Error, fmt, future::Future, time::Duration};

use bytes::Bytes;
use http::HeaderMap;

/// An error of the broker's, as a source reports it.
pub type BrokerError = Box<dyn Error + Send + Sync>;

/// Why a source cannot start ([`MessageSource::check`]); the runner returns it as a
/// [`RunnerError`](super::RunnerError).
#[derive(Debug)]
#[non_exhaustive]
pub enum CheckError {
    /// The broker's settings and the handler's needs cannot work together; the message names
    /// the setting to change.
    Refused(String),
    /// The broker could not be asked (its consumer or stream is missing, say).
    Broker(BrokerError),
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Refused(why) => write!(f, "refused to start: {why}"),
            Self::Broker(error) => write!(f, "the broker: {error}"),
        }
    }
}

impl Error for CheckError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            Self::Refused(_) => None,
            Self::Broker(error) => Some(&**error),
        }
    }
}

/// What the runner needs of a broker's settings, checked once at start-up
/// ([`MessageSource::check`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Requirements {
    /// The handler's lease: how long an in-flight key blocks its duplicates without a renewal.
    /// The broker must not give a message to another consumer sooner than this after the last
    /// sign of progress, or two deliveries would race for one key.
    pub lease: Duration,
    /// How often a running message's lease is renewed and the broker told that the message is
    /// in progress: a third of the lease.
    pub renew_every: Duration,
    /// How long a completed key is remembered. A broker that may deliver a message again later
    /// than this (its redelivery horizon) could have it run twice.
    pub ttl: Duration,
}

/// A consumer of a broker's, as a [`Runner`](super::Runner) drives it: it checks the broker's
/// settings, hands out deliveries, and names the route their keys are scoped to.
pub trait MessageSource: Send + 'static {
    /// One message as it was delivered, until it is settled.
    type Delivery: Delivery;

    /// The route the keys of this consumer are scoped to, as a path:
    /// `/jetstream/<stream>/<consumer>`, `/amqp/<queue>`. Two consumers that must share their
    /// keys (two processes on one work queue) name the same route.
    fn route(&self) -> String;

    /// Checks, before the first message, that the broker's settings and `needs` can work
    /// together; refuses with [`CheckError::Refused`] and a message that names the setting
    /// to change.
    fn check(&mut self, needs: Requirements)
    -> impl Future<Output = Result<(), CheckError>> + Send;

    /// The next delivery; `None` once the consumer has ended.
    fn next(&mut self) -> impl Future<Output = Option<Result<Self::Delivery, BrokerError>>> + Send;
}

/// One delivery of a message: what the handler reads of it, and how it is settled.
pub trait Delivery: Send + Sync + 'static {
    /// The message's headers, as HTTP headers: they reach the handler's extractors. A
    /// message's content type is `Content-Type` here.
    fn headers(&self) -> HeaderMap;

    /// The payload.
    fn payload(&self) -> Bytes;

    /// Which delivery of the message this is: 1 for the first, as far as the broker tells.
    fn attempt(&self) -> u64;

    /// Acknowledges the message, once its result is stored: it is never delivered again. Where
    /// the broker can confirm an ack (JetStream's double ack), this waits for the confirmation.
    fn ack(self) -> impl Future<Output = Result<(), BrokerError>> + Send;

    /// Has the broker deliver the message again after `delay`, without acknowledging it.
    fn redeliver(self, delay: Duration) -> impl Future<Output = Result<(), BrokerError>> + Send;

    /// Ends the message without acknowledging it as handled: it is never delivered again
    /// (JetStream `Term`; RabbitMQ reject, to the dead-letter exchange if the queue has one).
    fn end(self, reason: &str) -> impl Future<Output = Result<(), BrokerError>> + Send;

    /// Tells the broker that the message is still being worked on, so that it does not give
    /// it to another consumer (JetStream `+WPI`). Does nothing where the broker has no such
    /// signal.
    fn in_progress(&self) -> impl Future<Output = Result<(), BrokerError>> + Send {
        async { Ok(()) }
    }
}
