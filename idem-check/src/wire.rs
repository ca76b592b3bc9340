//! Sending exactly one request and keeping what came back: no retry, no redirect, no reused
//! connection, within the check's bounds of count and time.
//!
//! A case must control every byte it sends (a request with no key, a malformed key, a
//! request it abandons on purpose) and see every answer, so it does not go through idem's
//! retrying client: [`Wire::send`] sends one request, once. reqwest's own retry of protocol
//! NACKs is off, and every request has a connection of its own, so that hyper never resends a
//! request on a pooled connection the server had closed.

use std::{
    sync::atomic::{AtomicUsize, Ordering},
    time::Duration,
};

use bytes::BytesMut;
use tokio::time::Instant;

use crate::{
    duration,
    exchange::{Answer, Exchange, Probe, Received},
};

/// The most of a body that is read; the rest is dropped. Enough for any answer a case compares.
const MAX_BODY: usize = 1024 * 1024;

/// What stops a check: it cannot go on and must not pretend it did.
#[derive(Debug, thiserror::Error)]
pub enum Abort {
    /// A connection could not be made.
    #[error("cannot reach {url}: {reason}")]
    Unreachable {
        /// Where.
        url: String,
        /// Why, as the network said.
        reason: String,
    },
    /// The check ran out of its time.
    #[error("the check took longer than its bound of {}; raise --max-time", duration::show(*.0))]
    OutOfTime(Duration),
    /// The check would send more requests than it announced.
    #[error("the check would send more than the {0} requests it announced")]
    OutOfBudget(usize),
    /// The target cannot be checked as it is (the preflight's findings, a count URL that
    /// stopped counting).
    #[error("{0}")]
    Unusable(String),
    /// One of the above, in the middle of a case.
    #[error("during case {case}: {cause}")]
    During {
        /// The case's name.
        case: &'static str,
        /// What stopped it.
        cause: Box<Abort>,
    },
}

impl Abort {
    /// This abort, as met during `case`.
    pub(crate) fn during(self, case: &'static str) -> Self {
        Self::During {
            case,
            cause: Box::new(self),
        }
    }
}

/// The client, the count of requests sent, and the bounds.
#[derive(Debug)]
pub(crate) struct Wire {
    http: reqwest::Client,
    request_timeout: Duration,
    started: Instant,
    max_time: Duration,
    /// The most requests the whole check sends, as announced.
    announced: usize,
    /// The most requests sent by the end of the current stage (the preflight, or a case):
    /// each stage gets the budget it declared, so that one that sends more than it said is
    /// stopped where it does, not later.
    limit: AtomicUsize,
    sent: AtomicUsize,
}

impl Wire {
    /// A wire that sends at most `announced` requests within `max_time`, each within
    /// `request_timeout`; none until a stage is allowed some ([`Wire::allow`]).
    pub(crate) fn new(announced: usize, max_time: Duration, request_timeout: Duration) -> Self {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .retry(reqwest::retry::never())
            .pool_max_idle_per_host(0)
            .user_agent(concat!("idem-check/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("a client without TLS settings always builds");
        Self {
            http,
            request_timeout,
            started: Instant::now(),
            max_time,
            announced,
            limit: AtomicUsize::new(0),
            sent: AtomicUsize::new(0),
        }
    }

    /// Starts a stage that may send `requests` more, within the announced total.
    pub(crate) fn allow(&self, requests: usize) {
        let limit = (self.sent() + requests).min(self.announced);
        self.limit.store(limit, Ordering::Relaxed);
    }

    /// How many requests were sent.
    pub(crate) fn sent(&self) -> usize {
        self.sent.load(Ordering::Relaxed)
    }

    /// How long the check may still take.
    pub(crate) fn time_left(&self) -> Result<Duration, Abort> {
        self.max_time
            .checked_sub(self.started.elapsed())
            .filter(|left| !left.is_zero())
            .ok_or(Abort::OutOfTime(self.max_time))
    }

    /// Sleeps `duration`, unless that would end after the check's bound.
    pub(crate) async fn sleep(&self, duration: Duration) -> Result<(), Abort> {
        if duration >= self.time_left()? {
            return Err(Abort::OutOfTime(self.max_time));
        }
        tokio::time::sleep(duration).await;
        Ok(())
    }

    /// Sends `probe` once and reads what comes back.
    pub(crate) async fn send(&self, probe: Probe) -> Result<Exchange, Abort> {
        let time_left = self.time_left()?;
        if self.sent.fetch_add(1, Ordering::Relaxed) >= self.limit.load(Ordering::Relaxed) {
            return Err(Abort::OutOfBudget(self.announced));
        }
        let bound = self.request_timeout.min(time_left);
        let limit = probe.give_up_after.map_or(bound, |after| after.min(bound));
        let started = Instant::now();
        let waited = tokio::time::timeout(limit, self.exchange(&probe)).await;
        let elapsed = started.elapsed();
        let received = match waited {
            Ok(Ok(answer)) => Received::Answered(answer),
            Ok(Err(error)) if error.is_connect() => {
                return Err(Abort::Unreachable {
                    url: probe.url.to_string(),
                    reason: root_cause(&error),
                });
            }
            Ok(Err(error)) => Received::NoAnswer(root_cause(&error)),
            Err(_) if probe.give_up_after.is_some_and(|after| after <= bound) => {
                Received::GaveUp(limit)
            }
            Err(_) if bound < self.request_timeout => return Err(Abort::OutOfTime(self.max_time)),
            Err(_) => Received::NoAnswer(format!("no answer within {}", duration::show(limit))),
        };
        Ok(Exchange {
            probe,
            received,
            started,
            elapsed,
        })
    }

    async fn exchange(&self, probe: &Probe) -> Result<Answer, reqwest::Error> {
        let mut request = self
            .http
            .request(probe.method.clone(), probe.url.clone())
            .headers(probe.headers.clone());
        if let Some(key) = &probe.key {
            request = request.header(idem_client::IDEMPOTENCY_KEY, key.clone());
        }
        if let Some(body) = &probe.body {
            request = request.body(body.clone());
        }
        let mut response = request.send().await?;
        let status = response.status();
        let headers = response.headers().clone();
        let mut body = BytesMut::new();
        while let Some(chunk) = response.chunk().await? {
            let room = MAX_BODY - body.len();
            body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            if body.len() == MAX_BODY {
                break;
            }
        }
        Ok(Answer {
            status,
            headers,
            body: body.freeze(),
        })
    }
}

/// The innermost cause of a transport error, which says what happened ("connection refused",
/// "connection closed before message completed") where the outer ones only say where.
fn root_cause(error: &reqwest::Error) -> String {
    let mut cause: &dyn std::error::Error = error;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    cause.to_string()
}
