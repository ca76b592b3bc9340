//! The resumer: the service finishing operations its clients abandoned (see [docs/steps.md](https://github.com/idem-rs/idem/blob/main/docs/steps.md)).
//!
//! An operation of several steps that stopped part-way on a route with
//! [`Policy::resume_after`](crate::Policy::resume_after) is due for resumption when nobody has
//! taken it over within that delay: after its lease lapsed (its process died), or after its
//! suspension (a step failed and may pass later), with a backoff that doubles at each
//! suspension up to [`LONGEST_RESUME_PAUSE`]. The resumer polls for due operations and runs
//! each one again through the application's own router, as a request built from what the
//! route kept ([`KeptRequest`]) and marked with a [`Resumption`], which the application's
//! authentication accepts as the recorded principal.
//!
//! The run goes through the whole flow, claim included: the claim takes the key over only if
//! nobody holds it, so that of any number of resumers (one per instance) and client retries
//! one runs the operation, and it resumes after the recorded steps.
//!
//! Where the operations come from depends on the store ([`StepSupport`]):
//!
//! - **Durable** (PostgreSQL, Redis): the store keeps the request with the claim and answers
//!   the due operations ([`Store::due`](crate::store::Store::due)), deferring each one it
//!   answers, so any instance resumes any operation, after a crash too.
//! - **Steps** (memory): the runtime keeps the request of each operation it suspends, in this
//!   process, and resumes it from there. An operation whose process died is resumed by its
//!   client's retry only.

use std::{
    collections::HashMap,
    convert::Infallible,
    fmt,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use crate::tasks::Stop;
use axum::{body::Body, extract::Request, response::Response};
use idem_protocol::key::KeyForm;
use tokio::{sync::Semaphore, time::Instant};
use tower_service::Service;

use super::Idempotency;
use crate::{
    observe::Chain,
    scope::StoreKey,
    steps::resumption::Resumption,
    store::{
        StepSupport, StoreError,
        operation::{DueOperation, KeptRequest},
    },
};

/// The longest pause between two resumptions of one operation.
pub(crate) const LONGEST_RESUME_PAUSE: Duration = Duration::from_secs(5 * 60);

/// How long an operation the store answered as due is deferred, so that another instance's
/// resumer does not take it up while this one's run claims it.
const HOLD: Duration = Duration::from_secs(10);

/// The pause before the next resumption of an operation suspended `suspensions` times
/// before: `after`, doubled at each suspension, at most [`LONGEST_RESUME_PAUSE`] (or `after`
/// when that is longer), give or take a tenth so that many operations spread out.
pub(crate) fn backoff(after: Duration, suspensions: u32) -> Duration {
    let doubled = after.saturating_mul(1 << suspensions.min(20));
    let pause = doubled.min(LONGEST_RESUME_PAUSE.max(after));
    pause.mul_f64(0.9 + crate::random::unit() / 5.0)
}

/// The operations this process suspended on a store that does not find due ones itself.
#[derive(Default)]
pub(super) struct Schedule {
    due: Mutex<HashMap<StoreKey, Scheduled>>,
}

struct Scheduled {
    at: Instant,
    request: KeptRequest,
    suspensions: u32,
}

impl Schedule {
    fn insert(&self, key: StoreKey, scheduled: Scheduled) {
        self.entries().insert(key, scheduled);
    }

    /// Takes up to `limit` operations whose time has come.
    fn take_due(&self, limit: usize) -> Vec<DueOperation> {
        let now = Instant::now();
        let mut entries = self.entries();
        let keys: Vec<StoreKey> = entries
            .iter()
            .filter(|(_, scheduled)| scheduled.at <= now)
            .map(|(key, _)| *key)
            .take(limit)
            .collect();
        keys.into_iter()
            .filter_map(|key| {
                let scheduled = entries.remove(&key)?;
                Some(DueOperation {
                    key,
                    request: Ok(scheduled.request),
                    suspensions: scheduled.suspensions,
                })
            })
            .collect()
    }

    /// When the operation at `key` is to be resumed, if it is scheduled.
    pub(super) fn due_at(&self, key: &StoreKey) -> Option<Instant> {
        self.entries().get(key).map(|scheduled| scheduled.at)
    }

    /// Unschedules the operation at `key`: its record was removed.
    pub(super) fn forget(&self, key: &StoreKey) {
        self.entries().remove(key);
    }

    /// The number of operations scheduled.
    pub(super) fn len(&self) -> usize {
        self.entries().len()
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<StoreKey, Scheduled>> {
        self.due.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Why the resumer did not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum ResumeError {
    /// The runtime's store keeps no steps, so no operation can be resumed.
    StoreKeepsNoSteps,
    /// The runtime has a resumer already.
    AlreadyResuming,
}

impl fmt::Display for ResumeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::StoreKeepsNoSteps => {
                "the idempotency store keeps no steps (Store::step_support), so operations \
                 cannot be resumed"
            }
            Self::AlreadyResuming => "this runtime is resuming operations already",
        })
    }
}

impl std::error::Error for ResumeError {}

/// Starts the runtime's resumer; see [`Idempotency::resumer`].
#[must_use]
pub struct Resumer<S> {
    idem: Idempotency,
    service: S,
    poll: Duration,
    concurrency: usize,
}

impl<S> fmt::Debug for Resumer<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resumer")
            .field("poll", &self.poll)
            .field("concurrency", &self.concurrency)
            .finish_non_exhaustive()
    }
}

impl<S> Resumer<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
{
    /// The default pause between two looks for due operations: 1 second.
    pub const DEFAULT_POLL: Duration = Duration::from_secs(1);
    /// The default number of operations resumed at once: 8.
    pub const DEFAULT_CONCURRENCY: usize = 8;

    /// How long the resumer pauses between two looks for due operations.
    pub fn poll(mut self, poll: Duration) -> Self {
        self.poll = poll.max(Duration::from_millis(1));
        self
    }

    /// How many operations it resumes at once, at most.
    pub fn concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency.max(1);
        self
    }

    /// Starts resuming, in a task of the runtime's, until [`Idempotency::shutdown`].
    ///
    /// # Errors
    ///
    /// When the store keeps no steps, or the runtime resumes already.
    pub fn start(self) -> Result<(), ResumeError> {
        if self.idem.store().step_support() == StepSupport::None {
            return Err(ResumeError::StoreKeepsNoSteps);
        }
        let stop = Stop::new();
        {
            let mut slot = self
                .idem
                .state
                .resumer
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if slot.as_ref().is_some_and(|running| !running.is_stopped()) {
                return Err(ResumeError::AlreadyResuming);
            }
            *slot = Some(stop.clone());
        }
        tokio::spawn(self.run(stop));
        Ok(())
    }

    async fn run(self, stop: Stop) {
        let Self {
            idem,
            service,
            poll,
            concurrency,
        } = self;
        let running = Arc::new(Semaphore::new(concurrency));
        loop {
            tokio::select! {
                () = stop.stopped() => return,
                () = tokio::time::sleep(poll) => {}
            }
            let free = running.available_permits();
            if free == 0 {
                continue;
            }
            for operation in due(&idem, free).await {
                let Ok(permit) = Arc::clone(&running).try_acquire_owned() else {
                    break;
                };
                let service = service.clone();
                tokio::spawn(async move {
                    resume(service, operation).await;
                    drop(permit);
                });
            }
        }
    }
}

/// Up to `limit` operations due now.
async fn due(idem: &Idempotency, limit: usize) -> Vec<DueOperation> {
    {
        if idem.store().step_support() != StepSupport::Durable {
            return idem.state.schedule.take_due(limit);
        }
        match idem.due(limit, HOLD).await {
            Ok(due) => due,
            Err(error) => {
                tracing::warn!(
                    error = %Chain(&error),
                    "idempotency: the store could not say which operations are due for \
                     resumption; trying again"
                );
                Vec::new()
            }
        }
    }
}

/// Runs one due operation again through `service`.
async fn resume<S>(mut service: S, operation: DueOperation)
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    let key = crate::observe::KeyPrefix(&operation.key).to_string();
    let kept = match operation.request {
        Ok(kept) => kept,
        Err(error) => {
            let error = StoreError::corrupt(error);
            tracing::error!(
                outcome = "steps_changed",
                key,
                error = %Chain(&error),
                "idempotency: an operation due for resumption kept a request that does not read \
                 back; it is not resumed (a retry by its client still is)"
            );
            return;
        }
    };
    let request = request(kept, operation.key, operation.suspensions);
    let Ok(()) = std::future::poll_fn(|cx| service.poll_ready(cx)).await;
    let Ok(response) = service.call(request).await;
    let replayed = response
        .headers()
        .contains_key(crate::replay::IDEMPOTENT_REPLAYED);
    tracing::info!(
        key,
        status = response.status().as_u16(),
        replayed,
        "idempotency: resumed an operation its client abandoned"
    );
}

/// The request the resumer runs: the kept one, with its key, marked as a resumption of the
/// record at `key` by its principal.
fn request(kept: KeptRequest, key: StoreKey, suspensions: u32) -> Request {
    let mut request = Request::new(Body::from(kept.body().clone()));
    *request.method_mut() = kept.method().clone();
    // The kept target was a valid request target when it came.
    *request.uri_mut() = kept.target().parse().unwrap_or_default();
    *request.headers_mut() = kept.headers().clone();
    request.headers_mut().insert(
        idem_protocol::key::IDEMPOTENCY_KEY,
        KeyForm::Quoted.header_value(kept.key()),
    );
    if let Some(principal) = kept.principal() {
        request.extensions_mut().insert(principal.clone());
    }
    request.extensions_mut().insert(Resumption {
        key,
        principal: kept.principal().cloned(),
        suspensions,
    });
    request
}

impl Idempotency {
    /// A resumer that finishes abandoned operations (see
    /// [`Policy::resume_after`](crate::Policy::resume_after)) by sending them through
    /// `service`, the application's router, as the service's own requests. Start it once the
    /// router is built; [`shutdown`](Self::shutdown) stops it.
    ///
    /// ```
    /// use axum::{Extension, Router};
    /// use idem::{Idempotency, MemoryStore};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), idem::ResumeError> {
    /// let idem = Idempotency::new(MemoryStore::default());
    /// let app: Router = Router::new().layer(Extension(idem.clone()));
    /// idem.resumer(app.clone()).start()?;
    /// // serve `app`; after the server stops:
    /// idem.shutdown().await;
    /// # Ok(()) }
    /// ```
    pub fn resumer<S>(&self, service: S) -> Resumer<S>
    where
        S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
        S::Future: Send,
    {
        Resumer {
            idem: self.clone(),
            service,
            poll: Resumer::<S>::DEFAULT_POLL,
            concurrency: Resumer::<S>::DEFAULT_CONCURRENCY,
        }
    }

    /// Keeps the request of an operation this process suspended, to resume it `resume_in`
    /// from now, on a store that does not find due operations itself.
    pub(crate) fn schedule(
        &self,
        key: StoreKey,
        request: KeptRequest,
        resume_in: Duration,
        suspensions: u32,
    ) {
        if self.store().step_support() != StepSupport::Steps {
            return;
        }
        let at = Instant::now() + resume_in;
        self.state.schedule.insert(
            key,
            Scheduled {
                at,
                request,
                suspensions,
            },
        );
    }

    /// Stops the resumer, if one runs.
    pub(super) fn stop_resuming(&self) {
        if let Some(stop) = self
            .state
            .resumer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            stop.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_up_to_its_longest_pause() {
        let after = Duration::from_secs(2);
        let within = |pause: Duration, expected: Duration| {
            assert!(
                pause >= expected.mul_f64(0.9) && pause <= expected.mul_f64(1.1),
                "{pause:?} is not {expected:?} give or take a tenth"
            );
        };
        within(backoff(after, 0), after);
        within(backoff(after, 1), after * 2);
        within(backoff(after, 3), after * 8);
        within(backoff(after, 30), LONGEST_RESUME_PAUSE);
        let long = Duration::from_secs(600);
        within(backoff(long, 4), long);
    }
}
