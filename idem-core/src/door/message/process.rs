//! [`Processor`]: one message through the flow, and what the broker is told about it.
//!
//! A message is presented to the flow as a `POST` to its route (`/jetstream/SHOP/receipts`),
//! with the message's headers, its payload as the body, and its key as the
//! `Idempotency-Key` header. The flow claims, runs, stores, replays or refuses exactly as it
//! does for a request; the processor reads the settlement from its answer ([`Settlement`]) and settles
//! the delivery. While the flow works on it, the broker is told every renewal period that the
//! message is in progress.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use crate::tasks::Stop;
use axum::extract::Request;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Uri, header};
use idem_protocol::key::IdempotencyKey;

use super::{
    handler::MessageService,
    settlement::{Later, Settlement},
    source::{BrokerError, Delivery, Requirements},
    stats::{Counters, RunnerStats},
};
use crate::{
    door::presented,
    runtime::Idempotency,
    scope::{Scope, StoreKey},
};

/// How often a result waiting in this process for the store is looked at again.
const STORE_POLL: Duration = Duration::from_millis(50);

/// What every message of one runner goes through.
pub(super) struct Processor {
    idem: Idempotency,
    service: MessageService,
    route: Arc<str>,
    uri: Uri,
    needs: Requirements,
    redelivery: Redelivery,
    stats: RunnerStats,
    /// Cancelled at shutdown: a result waiting for the store is then handed back to the
    /// broker rather than waited for.
    stop: Stop,
}

/// A message as the flow sees it.
struct Message {
    headers: HeaderMap,
    body: Bytes,
    /// The key as an `Idempotency-Key` value; `None` when the message has none.
    key: Option<HeaderValue>,
    /// The store key the flow will hash from it, for the runtime's pending results.
    store_key: Option<StoreKey>,
}

/// How the processor treats failures: when a failing message is delivered again, and when
/// it is ended instead. The runner's builder sets them.
#[derive(Clone, Copy, Debug)]
pub(super) struct Redelivery {
    pub(super) max_attempts: u64,
    pub(super) first_backoff: Duration,
    pub(super) longest_backoff: Duration,
}

impl Redelivery {
    /// The delay before the next attempt after `attempt` failed: doubling from the first
    /// backoff, capped.
    pub(super) fn backoff(&self, attempt: u64) -> Duration {
        let doublings = u32::try_from(attempt.saturating_sub(1).min(20)).unwrap_or(20);
        self.first_backoff
            .saturating_mul(1 << doublings)
            .min(self.longest_backoff)
    }
}

impl Processor {
    pub(super) fn new(
        idem: Idempotency,
        service: MessageService,
        route: &str,
        uri: Uri,
        needs: Requirements,
        redelivery: Redelivery,
        stats: RunnerStats,
    ) -> Self {
        Self {
            idem,
            service,
            route: route.into(),
            uri,
            needs,
            redelivery,
            stats,
            stop: Stop::new(),
        }
    }

    /// The runner stops: results waiting for the store are no longer waited for.
    pub(super) fn stopping(&self) {
        self.stop.stop();
    }

    /// Takes one delivery through the flow and settles it.
    pub(super) async fn process<D: Delivery>(&self, delivery: D) {
        let settlement = match self.read(&delivery) {
            Ok(message) => self.decide(&delivery, &message).await,
            Err(why) => Settlement::End { why },
        };
        self.settle(delivery, settlement).await;
    }

    /// The delivery as the flow's request, or why it has no usable key.
    fn read<D: Delivery>(&self, delivery: &D) -> Result<Message, String> {
        let headers = delivery.headers();
        let body = delivery.payload();
        let source = self.service.key();
        let key = source
            .find(&headers, &body)
            .map_err(|error| format!("its key ({}) cannot be read: {error}", source.describe()))?;
        let Some(key) = key else {
            return Ok(Message {
                headers,
                body,
                key: None,
                store_key: None,
            });
        };
        let value = presented::key_header(&key).ok_or_else(|| {
            format!(
                "its key ({}) has characters a key cannot have: keys are 1 to 255 characters of \
                 visible ASCII",
                source.describe()
            )
        })?;
        let store_key = IdempotencyKey::new(key)
            .ok()
            .map(|key| StoreKey::new(&Scope::Global, None, &Method::POST, &self.route, &key));
        Ok(Message {
            headers,
            body,
            key: Some(value),
            store_key,
        })
    }

    /// The settlement the flow's answer to the message calls for. A result that waits in this process for the store
    /// is not acknowledged: the processor waits for the store to take it, and asks again.
    async fn decide<D: Delivery>(&self, delivery: &D, message: &Message) -> Settlement {
        let mut waited = false;
        loop {
            let ran = Arc::new(AtomicBool::new(false));
            let answer = self.service.start(
                self.idem.clone(),
                message.request(&self.uri),
                Arc::clone(&ran),
            );
            let response = self.in_progress(delivery, answer).await;
            let pending = || self.awaits_store(message);
            let settlement = Settlement::of(response, ran.load(Ordering::SeqCst), pending).await;
            match settlement {
                // The result this delivery's handler produced, now in the store.
                Settlement::Ack { duplicate: true } if waited => {
                    return Settlement::Ack { duplicate: false };
                }
                Settlement::AwaitStore => waited = true,
                settlement => return settlement,
            }
            let stored = async {
                while self.awaits_store(message) {
                    tokio::time::sleep(STORE_POLL).await;
                }
            };
            tokio::select! {
                () = self.in_progress(delivery, stored) => {}
                // The runtime keeps the result and its retries; the broker delivers the
                // message again, and its key answers it once the store has it.
                () = self.stop.stopped() => return Settlement::Redeliver {
                    after: Later::StoreDown,
                    why: "the runner stops while the result waits for the store".to_owned(),
                },
            }
        }
    }

    fn awaits_store(&self, message: &Message) -> bool {
        message
            .store_key
            .is_some_and(|key| self.idem.awaits_store(&key))
    }

    /// Runs `work`, telling the broker every renewal period that the message is in progress.
    async fn in_progress<D: Delivery, T>(&self, delivery: &D, work: impl Future<Output = T>) -> T {
        let every = self.needs.renew_every;
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut work = std::pin::pin!(work);
        loop {
            tokio::select! {
                biased;
                output = &mut work => return output,
                _ = ticks.tick() => {
                    if let Err(error) = delivery.in_progress().await {
                        tracing::warn!(route = &*self.route, error, "message: the broker was not told that a message is in progress");
                    }
                }
            }
        }
    }

    /// Tells the broker what became of the delivery.
    async fn settle<D: Delivery>(&self, delivery: D, settlement: Settlement) {
        let route = &*self.route;
        let attempt = delivery.attempt();
        let settled = match settlement {
            Settlement::Ack { duplicate } => {
                if duplicate {
                    self.stats.count(|c: &Counters| &c.duplicates);
                    tracing::debug!(
                        route,
                        attempt,
                        "message: a duplicate, acknowledged without running the handler"
                    );
                } else {
                    self.stats.count(|c: &Counters| &c.completed);
                    tracing::debug!(route, attempt, "message: handled and acknowledged");
                }
                delivery.ack().await
            }
            Settlement::Redeliver { after, why } => match self.redelivery(after, attempt) {
                Some(delay) => {
                    tracing::info!(
                        route,
                        attempt,
                        delay_ms = delay.as_millis() as u64,
                        "message: delivered again later: {why}"
                    );
                    delivery.redeliver(delay).await
                }
                None => {
                    let why = format!(
                        "{why}; that was delivery {attempt} of at most {}",
                        self.redelivery.max_attempts
                    );
                    self.end(delivery, &why).await
                }
            },
            Settlement::End { why } => self.end(delivery, &why).await,
            Settlement::AwaitStore => {
                unreachable!("the processor waits for the store before settling")
            }
        };
        if let Err(error) = settled {
            self.stats.count(|c: &Counters| &c.unsettled);
            tracing::warn!(
                route,
                attempt,
                error,
                "message: the broker did not confirm the settlement; it may deliver the message again, which its key answers"
            );
        }
    }

    /// The delay before the message is delivered again, or `None` when a failing message has
    /// had its last attempt.
    fn redelivery(&self, after: Later, attempt: u64) -> Option<Duration> {
        match after {
            Later::InFlight => {
                self.stats.count(|c: &Counters| &c.deferred);
                Some(self.needs.lease)
            }
            Later::StoreDown => {
                self.stats.count(|c: &Counters| &c.retried);
                Some(self.redelivery.backoff(attempt))
            }
            Later::Failed if attempt >= self.redelivery.max_attempts => None,
            Later::Failed => {
                self.stats.count(|c: &Counters| &c.retried);
                Some(self.redelivery.backoff(attempt))
            }
        }
    }

    async fn end<D: Delivery>(&self, delivery: D, why: &str) -> Result<(), BrokerError> {
        self.stats.count(|c: &Counters| &c.ended);
        tracing::warn!(
            route = &*self.route,
            attempt = delivery.attempt(),
            "message: ended without being handled: {why}"
        );
        delivery.end(why).await
    }

    /// A delivery the broker could not hand out: logged, and the runner pauses a moment.
    pub(super) async fn broker_failed(&self, error: BrokerError) {
        tracing::warn!(
            route = &*self.route,
            error = %crate::observe::Chain(&*error),
            "message: the broker failed to deliver; trying again"
        );
        drop(error);
        tokio::time::sleep(self.redelivery.first_backoff).await;
    }
}

impl Message {
    /// The message as a `POST` to the route, with its key as `Idempotency-Key`. A message
    /// without a content type is taken as JSON.
    fn request(&self, uri: &Uri) -> Request {
        let mut headers = self.headers.clone();
        if !headers.contains_key(header::CONTENT_TYPE) {
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
        }
        presented::request(uri.clone(), headers, self.body.clone(), self.key.clone())
    }
}
