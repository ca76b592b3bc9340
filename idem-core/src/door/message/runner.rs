//! [`Runner`]: drives a broker's consumer through a message handler, N messages at a time,
//! and stops gracefully.

use std::{fmt, future::Future, pin::pin, sync::Arc, time::Duration};

use crate::tasks::Tasks;
use tokio::sync::Semaphore;

use http::Uri;

use super::{
    handler::MessageService,
    key::MessageKeyError,
    process::{Processor, Redelivery},
    source::{BrokerError, CheckError, MessageSource, Requirements},
    stats::RunnerStats,
};
use crate::{policy::Policy, runtime::Idempotency};

/// Why a runner could not start, or stopped.
#[derive(Debug)]
#[non_exhaustive]
pub enum RunnerError {
    /// The handler's policy and the broker's settings cannot work together; the message
    /// names the setting to change.
    Refused(String),
    /// The handler's key source is not one.
    Key(MessageKeyError),
    /// The broker could not be asked (its consumer or stream is missing, say).
    Broker(BrokerError),
}

impl fmt::Display for RunnerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Refused(why) => write!(f, "refused to start: {why}"),
            Self::Key(error) => write!(f, "the message key source is invalid: {error}"),
            Self::Broker(error) => write!(f, "the broker: {error}"),
        }
    }
}

impl std::error::Error for RunnerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Refused(_) => None,
            Self::Key(error) => Some(error),
            Self::Broker(error) => Some(&**error),
        }
    }
}

impl From<MessageKeyError> for RunnerError {
    fn from(error: MessageKeyError) -> Self {
        Self::Key(error)
    }
}

impl From<CheckError> for RunnerError {
    fn from(error: CheckError) -> Self {
        match error {
            CheckError::Refused(why) => Self::Refused(why),
            CheckError::Broker(error) => Self::Broker(error),
        }
    }
}

/// Runs a [`MessageService`] over a broker's consumer: each message goes through the same
/// flow as an HTTP request (claim, handler, completion, or a replay), and is then acknowledged,
/// delivered again later, or ended, as the [module docs](super#what-happens-to-a-message)
/// tell.
///
/// ```no_run
/// # #[cfg(feature = "nats")]
/// # async fn run(
/// #     context: async_nats::jetstream::Context,
/// #     consumer: async_nats::jetstream::consumer::PullConsumer,
/// # ) -> Result<(), idem::message::RunnerError> {
/// use idem::{Idempotency, MemoryStore, idempotent};
/// use idem::message::{MessageError, Runner, nats::JetStream};
///
/// #[idempotent(key = header("Nats-Msg-Id"))]
/// async fn on_order_paid(axum::Json(event): axum::Json<serde_json::Value>) -> Result<(), MessageError> {
///     println!("paid: {event}");
///     Ok(())
/// }
///
/// let idem = Idempotency::new(MemoryStore::default());
/// Runner::new(idem.clone(), on_order_paid.stateless())
///     .concurrency(16)
///     .run(JetStream::new(context, consumer), async { let _ = tokio::signal::ctrl_c().await; })
///     .await?;
/// idem.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use]
pub struct Runner {
    idem: Idempotency,
    service: MessageService,
    concurrency: usize,
    redelivery: Redelivery,
    stats: RunnerStats,
}

impl Runner {
    /// The default number of messages handled at once.
    pub const DEFAULT_CONCURRENCY: usize = 16;
    /// The default number of deliveries after which a message whose handler keeps failing is
    /// ended.
    pub const DEFAULT_MAX_ATTEMPTS: u64 = 5;

    /// A runner of `service` on the runtime `idem`.
    pub fn new(idem: Idempotency, service: MessageService) -> Self {
        Self {
            idem,
            service,
            concurrency: Self::DEFAULT_CONCURRENCY,
            redelivery: Redelivery {
                max_attempts: Self::DEFAULT_MAX_ATTEMPTS,
                first_backoff: Duration::from_secs(1),
                longest_backoff: Duration::from_secs(60),
            },
            stats: RunnerStats::default(),
        }
    }

    /// How many messages are handled at once (16 by default, at least 1). The runner takes
    /// the next message from the broker only when one of them is done.
    pub fn concurrency(mut self, messages: usize) -> Self {
        self.concurrency = messages.max(1);
        self
    }

    /// After how many deliveries a message whose handler keeps failing (a retryable
    /// `MessageError`, a 5xx, a panic) is ended instead of delivered again (5 by default, at
    /// least 1). Deliveries that found the key in flight elsewhere, or the store down, count
    /// as deliveries where the broker counts them (JetStream does).
    pub fn max_attempts(mut self, deliveries: u64) -> Self {
        self.redelivery.max_attempts = deliveries.max(1);
        self
    }

    /// The delay before a failed message is delivered again: `first` after the first
    /// delivery, doubling with each delivery, at most `longest` (1 s and 60 s by default).
    pub fn backoff(mut self, first: Duration, longest: Duration) -> Self {
        self.redelivery.first_backoff = first;
        self.redelivery.longest_backoff = longest.max(first);
        self
    }

    /// Counters of what the runner did with its messages, shared with the running runner.
    pub fn stats(&self) -> RunnerStats {
        self.stats.clone()
    }

    /// Checks the broker's settings, then handles messages until `shutdown` completes or the
    /// consumer ends: at most [`concurrency`](Self::concurrency) at a time. At shutdown it
    /// stops taking messages, lets the running ones finish, and settles each (their results
    /// are stored before they are acknowledged). Call
    /// [`Idempotency::shutdown`](crate::Idempotency::shutdown) after it, before the process
    /// exits, for the store writes still being retried.
    pub async fn run<S: MessageSource>(
        self,
        mut source: S,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), RunnerError> {
        self.service.key().check()?;
        let needs = requirements(&self.service.policy());
        source.check(needs).await?;
        let route = source.route();
        let uri = Uri::try_from(&route).map_err(|error| {
            RunnerError::Refused(format!("the route {route:?} is not a URI path: {error}"))
        })?;
        let processor = Processor::new(
            self.idem,
            self.service,
            &route,
            uri,
            needs,
            self.redelivery,
            self.stats,
        );
        consume(source, Arc::new(processor), self.concurrency, shutdown).await;
        Ok(())
    }
}

/// What a handler under `policy` needs of the broker.
fn requirements(policy: &Policy) -> Requirements {
    Requirements {
        lease: policy.lease,
        renew_every: (policy.lease / 3).max(Duration::from_millis(1)),
        ttl: policy.ttl,
    }
}

/// Takes deliveries from `source` through `processor`, `concurrency` at a time, until
/// `shutdown` completes or the consumer ends; then waits for the running ones, which the
/// processor lets finish and settle (a result waiting for the store is handed back instead).
async fn consume<S: MessageSource>(
    mut source: S,
    processor: Arc<Processor>,
    concurrency: usize,
    shutdown: impl Future<Output = ()> + Send,
) {
    let permits = Arc::new(Semaphore::new(concurrency));
    let running = Tasks::new();
    let mut shutdown = pin!(shutdown);
    loop {
        let permit = tokio::select! {
            biased;
            () = &mut shutdown => break,
            permit = Arc::clone(&permits).acquire_owned() => permit.expect("never closed"),
        };
        let next = tokio::select! {
            biased;
            () = &mut shutdown => break,
            next = source.next() => next,
        };
        match next {
            None => break,
            Some(Ok(delivery)) => {
                let processor = Arc::clone(&processor);
                running.spawn(async move {
                    processor.process(delivery).await;
                    drop(permit);
                });
            }
            Some(Err(error)) => processor.broker_failed(error).await,
        }
    }
    processor.stopping();
    running.close();
    running.wait().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_up_to_its_cap() {
        let settings = Redelivery {
            max_attempts: 5,
            first_backoff: Duration::from_secs(1),
            longest_backoff: Duration::from_secs(60),
        };
        let delays: Vec<u64> = (1..=8)
            .map(|attempt| settings.backoff(attempt).as_secs())
            .collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(settings.backoff(u64::MAX), Duration::from_secs(60));
    }

    #[test]
    fn the_lease_is_renewed_every_third() {
        let needs = requirements(&Policy::new().lease(Duration::from_secs(9)));
        assert_eq!(needs.renew_every, Duration::from_secs(3));
        assert_eq!(needs.ttl, Policy::DEFAULT_TTL);
    }
}
