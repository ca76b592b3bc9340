//! [`Idempotency`]: the runtime one service shares, with its store and its running handlers.
//!
//! The runtime is the one way to the store: every call the crate makes to it goes through
//! [`calls`] (under the store timeout), and what a request leaves behind when the store does
//! not answer (a completion or a release to retry, a result to answer retries from) is the
//! runtime's own state, in [`background`] and [`pending`].
//!
//! ```
//! use axum::{Extension, Router};
//! use idem::{Idempotency, MemoryStore};
//!
//! let idem = Idempotency::new(MemoryStore::default());
//! // `#[idempotent]` handlers find the runtime as a request extension.
//! let app: Router = Router::new().layer(Extension(idem.clone()));
//! # drop(app);
//! ```

use std::{
    borrow::Cow,
    fmt,
    future::Future,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

mod background;
mod calls;
mod pending;
mod records;
pub(crate) mod resumer;

use crate::tasks::{Stop, Tasks};

use self::{pending::Pending, resumer::Schedule};
pub use self::{
    records::{AddressError, RecordAddress},
    resumer::{ResumeError, Resumer},
};
use crate::{
    policy::Policy,
    problem::{Problem, ProblemKind},
    scope::{PrincipalExtension, ResolvePrincipal},
    store::{MemoryStore, Store},
};

/// The idempotency runtime of a service: its store, how principals are found, and the
/// handlers it is running. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct Idempotency {
    state: Arc<RuntimeState>,
}

/// What the clones of one runtime share.
struct RuntimeState {
    store: Arc<dyn Store>,
    resolver: Box<dyn ResolvePrincipal>,
    store_timeout: Duration,
    shutdown_timeout: Duration,
    /// Handlers running, inline in their request or detached from it.
    tasks: Tasks,
    /// Store calls retried after their request was answered (see [`background`]).
    background: Tasks,
    /// Stops the background calls at the end of a shutdown; replaced by a fresh token then,
    /// so that a runtime shared by two servers keeps working.
    background_stop: Mutex<Stop>,
    /// Results whose completion the store has not taken yet.
    pending: Pending,
    /// What the `type` URIs of the runtime's Problem Details start with, if not the default.
    problem_type_base: Option<Arc<str>>,
    /// The longest any route keeps a completed record, if the service caps it.
    max_ttl: Option<Duration>,
    /// The delay after which every resumable route's abandoned operations are resumed, if
    /// the service sets it for all of them.
    resume_after: Option<Duration>,
    /// The least a lease must have left for a step to start, if not a third of the lease.
    lease_margin: Option<Duration>,
    /// Stops the resumer, when one runs.
    resumer: Mutex<Option<Stop>>,
    /// The operations this process suspended and resumes itself (see [`resumer`]).
    schedule: Schedule,
}

impl Idempotency {
    /// The default time a store call may take before the request fails closed: 5 seconds.
    pub const DEFAULT_STORE_TIMEOUT: Duration = Duration::from_secs(5);
    /// The default time [`shutdown`](Self::shutdown) waits for store calls still being
    /// retried, after the handlers have finished: 10 seconds.
    pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);

    /// A runtime on `store`, with the defaults of [`IdempotencyBuilder`].
    pub fn new(store: impl Store) -> Self {
        Self::builder(store).build()
    }

    /// A runtime on a store already shared as `Arc<dyn Store>`.
    pub fn from_arc(store: Arc<dyn Store>) -> Self {
        IdempotencyBuilder::from_arc(store).build()
    }

    /// A builder for a runtime on `store`.
    pub fn builder(store: impl Store) -> IdempotencyBuilder {
        IdempotencyBuilder::from_arc(Arc::new(store))
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.state.store
    }

    /// How the runtime finds the principal of a request.
    pub fn resolver(&self) -> &dyn ResolvePrincipal {
        &*self.state.resolver
    }

    /// The number of requests the runtime is taking through its flow now, those whose client
    /// has gone included: a claim on its way to the store, a handler running, a completion
    /// being written. Requests that the layer lets through untouched (safe methods) are not
    /// counted. [`shutdown`](Self::shutdown) waits for all of them.
    pub fn running(&self) -> usize {
        self.state.tasks.len()
    }

    /// The number of results of handlers that ran whose completion the store has not taken
    /// yet: the store failed when they finished, and the runtime retries in the background.
    /// Meanwhile this process answers retries of their keys from its own copy.
    pub fn pending_completions(&self) -> usize {
        self.state.pending.len()
    }

    /// The number of operations this process suspended and will resume itself, on a store
    /// that does not find due operations on its own (see [`resumer`](Self::resumer)).
    pub fn scheduled_resumptions(&self) -> usize {
        self.state.schedule.len()
    }

    /// Waits until every handler that is running has finished and stored its result. Call
    /// it after the server stopped accepting requests (axum's graceful shutdown), before the
    /// process exits: a handler whose client disconnected is still running, and its result is
    /// what the client's retry will be answered with.
    ///
    /// Then it waits, for at most the [shutdown timeout](IdempotencyBuilder::shutdown_timeout)
    /// (10 s by default), for the store calls that the runtime still retries in the
    /// background: completions and releases that the store did not take when their request
    /// ended (it was down, say). Those still unanswered then are stopped, and each is logged
    /// at `error` (a result that was not stored: a retry of its key may run it again once its
    /// lease lapses) or `warn` (a key that stays blocked until its lease lapses).
    ///
    /// ```
    /// # async fn serve(
    /// #     listener: tokio::net::TcpListener,
    /// #     app: axum::Router,
    /// #     idem: idem::Idempotency,
    /// #     stop_signal: impl std::future::Future<Output = ()> + Send + 'static,
    /// # ) -> std::io::Result<()> {
    /// axum::serve(listener, app).with_graceful_shutdown(stop_signal).await?;
    /// // The server has stopped; let handlers whose clients left store their results.
    /// idem.shutdown().await;
    /// # Ok(()) }
    /// ```
    pub fn shutdown(&self) -> impl Future<Output = ()> + Send + 'static {
        // No operation is resumed from here on; those being resumed finish below.
        self.stop_resuming();
        let state = Arc::clone(&self.state);
        state.tasks.close();
        async move {
            state.tasks.wait().await;
            // The tracker stays usable: a runtime shared by two servers keeps working.
            state.tasks.reopen();
            // Every handler has finished, so no new background call can start from here on.
            state.background.close();
            if tokio::time::timeout(state.shutdown_timeout, state.background.wait())
                .await
                .is_err()
            {
                let stop = std::mem::take(
                    &mut *state
                        .background_stop
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner),
                );
                stop.stop();
                state.background.wait().await;
            }
            state.background.reopen();
        }
    }

    pub(crate) fn tasks(&self) -> &Tasks {
        &self.state.tasks
    }

    fn background(&self) -> &Tasks {
        &self.state.background
    }

    /// The token that stops the background calls started now.
    fn background_stop(&self) -> Stop {
        self.state
            .background_stop
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn pending(&self) -> &Pending {
        &self.state.pending
    }

    /// A Problem of `kind`, whose `type` URI starts with the runtime's base.
    pub(crate) fn problem(
        &self,
        kind: ProblemKind,
        detail: impl Into<Cow<'static, str>>,
    ) -> Problem {
        let problem = Problem::new(kind, detail);
        match &self.state.problem_type_base {
            Some(base) => problem.with_type_base(Arc::clone(base)),
            None => problem,
        }
    }

    /// `policy` as this runtime applies it: its TTL capped by [`IdempotencyBuilder::max_ttl`],
    /// never below its lease.
    pub(crate) fn applied(&self, mut policy: Policy) -> Policy {
        if let Some(max_ttl) = self.state.max_ttl {
            policy.ttl = policy.ttl.min(max_ttl).max(policy.lease);
        }
        if let (Some(_), Some(after)) = (policy.resume_after, self.state.resume_after) {
            policy.resume_after = Some(after);
        }
        policy
    }

    /// The least of a route's `lease` that must be left, by this process's clock, for a step
    /// to start: [`IdempotencyBuilder::lease_margin`], at most half the lease; a third of the
    /// lease by default.
    pub(crate) fn lease_margin(&self, lease: Duration) -> Duration {
        match self.state.lease_margin {
            Some(margin) => margin.min(lease / 2),
            None => lease / 3,
        }
    }

    /// The most time one store call may take.
    pub(crate) fn store_timeout(&self) -> Duration {
        self.state.store_timeout
    }
}

impl Default for Idempotency {
    /// A runtime on a default [`MemoryStore`].
    fn default() -> Self {
        Self::new(MemoryStore::default())
    }
}

impl fmt::Debug for Idempotency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Idempotency")
            .field("store", &self.state.store)
            .field("store_timeout", &self.state.store_timeout)
            .field("running", &self.running())
            .field("pending_completions", &self.pending_completions())
            .finish_non_exhaustive()
    }
}

/// Configures an [`Idempotency`] runtime.
#[must_use]
pub struct IdempotencyBuilder {
    store: Arc<dyn Store>,
    resolver: Box<dyn ResolvePrincipal>,
    store_timeout: Duration,
    shutdown_timeout: Duration,
    problem_type_base: Option<Arc<str>>,
    max_ttl: Option<Duration>,
    resume_after: Option<Duration>,
    lease_margin: Option<Duration>,
}

impl IdempotencyBuilder {
    /// A builder for a runtime on a store already shared as `Arc<dyn Store>`
    /// ([`Idempotency::builder`] takes the store itself).
    pub fn from_arc(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            resolver: Box::new(PrincipalExtension),
            store_timeout: Idempotency::DEFAULT_STORE_TIMEOUT,
            shutdown_timeout: Idempotency::DEFAULT_SHUTDOWN_TIMEOUT,
            problem_type_base: None,
            max_ttl: None,
            resume_after: None,
            lease_margin: None,
        }
    }

    /// How the principal of a request is found (by default, [`PrincipalExtension`]: the
    /// [`Principal`](crate::scope::Principal) extension for user scopes).
    pub fn principal_resolver(mut self, resolver: impl ResolvePrincipal) -> Self {
        self.resolver = Box::new(resolver);
        self
    }

    /// The most time one store call may take; past it the request fails closed with 503 (or
    /// runs without idempotency, as its policy says). 5 seconds by default.
    pub fn store_timeout(mut self, timeout: Duration) -> Self {
        self.store_timeout = timeout;
        self
    }

    /// How long [`Idempotency::shutdown`] waits, once the handlers have finished, for the
    /// store calls that the runtime still retries in the background (10 seconds by default).
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// Where the `type` URIs of the runtime's Problem Details point: `base` followed by each
    /// kind's slug (`https://api.example.com/problems#key-reused` for the base
    /// `https://api.example.com/problems#`). By default they are relative references to the
    /// catalogue page a service serves with [`problem::catalogue`](crate::problem::catalogue)
    /// ([`problem::DEFAULT_TYPE_BASE`](crate::problem::DEFAULT_TYPE_BASE),
    /// `/problems/idempotency#`); a service that knows its public URL makes them absolute, and
    /// one whose clients read its own API documentation points them there.
    ///
    /// ```
    /// use idem::{Idempotency, MemoryStore};
    ///
    /// let idem = Idempotency::builder(MemoryStore::default())
    ///     .problem_type_base("https://api.example.com/problems#")
    ///     .build();
    /// # drop(idem);
    /// ```
    pub fn problem_type_base(mut self, base: impl Into<Arc<str>>) -> Self {
        self.problem_type_base = Some(base.into());
        self
    }

    /// The longest any route keeps a completed record: a route whose policy says longer keeps
    /// its records this long instead (but never less than its lease). Unset by default, so each
    /// route's TTL holds as written.
    ///
    /// Retention is often an operator's decision more than the code's: the storage a store may
    /// use, a rule on how long requests may be kept, or a test environment that wants to see a
    /// key expire (the sixth of the seven cases in [docs/contract.md](https://github.com/idem-rs/idem/blob/main/docs/contract.md)) without waiting a day.
    ///
    /// ```
    /// use std::time::Duration;
    /// use idem::{Idempotency, MemoryStore};
    ///
    /// // Routes declare 24 h; this deployment keeps records for an hour at most.
    /// let idem = Idempotency::builder(MemoryStore::default())
    ///     .max_ttl(Duration::from_secs(3600))
    ///     .build();
    /// # drop(idem);
    /// ```
    pub fn max_ttl(mut self, max_ttl: Duration) -> Self {
        self.max_ttl = Some(max_ttl);
        self
    }

    /// How long an abandoned operation waits for its client before the service resumes it,
    /// on every route that resumes ([`Policy::resume_after`](crate::Policy::resume_after)):
    /// their own delay gives way to this one. Routes that do not resume are left alone.
    /// Unset by default. Like [`max_ttl`](Self::max_ttl), it is a deployment's setting more
    /// than the code's: a test environment resumes at once, a production one leaves clients
    /// the time their retries take.
    pub fn resume_after(mut self, after: Duration) -> Self {
        self.resume_after = Some(after.max(Duration::from_millis(1)));
        self
    }

    /// The least of its lease a run must have left, by its own clock, for a step of an
    /// operation to start ([`Steps`](crate::steps::Steps)): a third of the route's lease by
    /// default, and at most half of it whatever is set here (a margin as long as the lease
    /// would let no step start).
    ///
    /// The store confirms a lease at the claim and at every renewal (every third of the
    /// lease), for the lease's length from when it was asked. A run whose store stops
    /// answering keeps running its handler; once less than the margin is left, its next step
    /// fails retryably instead of starting, and the operation is resumed by whoever holds it
    /// next. The margin is the time a step may take to reach its effect (a call to be sent, a
    /// row to be written) after it starts, and a pause of the process (a collector, a
    /// suspended VM) that the lease should still cover.
    ///
    /// ```
    /// use std::time::Duration;
    /// use idem::{Idempotency, MemoryStore};
    ///
    /// // Steps here send calls that take up to 5 seconds to land.
    /// let idem = Idempotency::builder(MemoryStore::default())
    ///     .lease_margin(Duration::from_secs(5))
    ///     .build();
    /// # drop(idem);
    /// ```
    pub fn lease_margin(mut self, margin: Duration) -> Self {
        self.lease_margin = Some(margin);
        self
    }

    /// Builds the runtime.
    pub fn build(self) -> Idempotency {
        Idempotency {
            state: Arc::new(RuntimeState {
                store: self.store,
                resolver: self.resolver,
                store_timeout: self.store_timeout,
                shutdown_timeout: self.shutdown_timeout,
                tasks: Tasks::new(),
                background: Tasks::new(),
                background_stop: Mutex::default(),
                pending: Pending::default(),
                problem_type_base: self.problem_type_base,
                max_ttl: self.max_ttl,
                resume_after: self.resume_after,
                lease_margin: self.lease_margin,
                resumer: Mutex::default(),
                schedule: Schedule::default(),
            }),
        }
    }
}

impl fmt::Debug for IdempotencyBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdempotencyBuilder")
            .field("store", &self.store)
            .field("store_timeout", &self.store_timeout)
            .field("shutdown_timeout", &self.shutdown_timeout)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lease_margin_is_a_third_of_the_lease_unless_set_and_never_over_half() {
        let lease = Duration::from_secs(60);
        let default = Idempotency::default();
        assert_eq!(default.lease_margin(lease), Duration::from_secs(20));
        let set = |margin| {
            Idempotency::builder(MemoryStore::default())
                .lease_margin(margin)
                .build()
                .lease_margin(lease)
        };
        assert_eq!(set(Duration::from_secs(5)), Duration::from_secs(5));
        assert_eq!(set(Duration::from_secs(90)), Duration::from_secs(30));
    }
}
