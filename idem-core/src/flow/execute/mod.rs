//! Step 6, running a claimed request's handler to the end (see [docs/contract.md](https://github.com/idem-rs/idem/blob/main/docs/contract.md), *The flow*,
//! steps 4 to 6).
//!
//! The run renews the lease while the handler runs, catches a panic, captures the response
//! and stores it (or releases the key), and only then answers. It is part of the request's
//! [`RequestFuture`](super::RequestFuture): if the client disconnects and hyper drops the
//! request, the run carries on in a task of its own, so the client's retry finds the result.
//!
//! - [`settle`]: storing the result, or releasing the key; a completion or a release that the
//!   store does not take goes on in the runtime's background, and a result waiting for the
//!   store answers this process's retries of its key meanwhile.
//! - [`stream`]: a response whose body is still coming, answered while it is captured.
//! - [`unrecorded`]: a handler that runs without a record.

mod settle;
mod stream;
mod unrecorded;

use std::{panic::AssertUnwindSafe, time::Duration};

use axum::response::Response;
use futures_util::FutureExt;

pub(super) use self::unrecorded::without_record;
use super::{counts_as_result, decide::Lease};
use crate::{
    context::IdempotencyContext,
    fingerprint::Fingerprint,
    observe::{self, Outcome},
    policy::Policy,
    replay::capture::{Capture, Captured, Unfinished, capture, finish},
    runtime::Idempotency,
    scope::{Route, StoreKey},
    steps::{
        journal::{Holder, Stop},
        lease::LeaseClock,
    },
    store::{StoreError, operation::KeptRequest},
};

/// A claimed key and what the runtime needs to finish its request.
pub(super) struct Execution {
    pub(super) idem: Idempotency,
    pub(super) policy: Policy,
    pub(super) key: StoreKey,
    pub(super) fingerprint: Fingerprint,
    pub(super) lease: Lease,
    pub(super) route: Route,
    pub(super) context: IdempotencyContext,
    /// The request of a resumable route, for the runtime to run it again should the
    /// operation stop part-way (stores that keep it themselves have it already). Boxed: the
    /// request's future, which holds it, is moved on every request.
    pub(super) kept: Option<Box<KeptRequest>>,
}

/// How the handler's work ended.
enum RunEnd {
    /// Its response is the operation's result: store it.
    Result(Captured),
    /// Its response is the operation's result, and its body is still coming.
    Unfinished(Unfinished),
    /// Its response is not to be stored (5xx, `NoStore`): release the key.
    NotAResult(Response),
    /// It panicked: release the key.
    Panicked,
    /// Its response body failed before it was read whole: release the key.
    BodyFailed,
}

impl Execution {
    /// Runs the handler that `call` starts to the end, stores its result (or releases the
    /// key) and answers.
    pub(super) async fn execute<F>(mut self, call: impl FnOnce() -> F + Send) -> Response
    where
        F: Future<Output = Response> + Send,
    {
        self.hold_journal();
        let finished = match self.run(call).await {
            // A transaction commits before its caller sees anything: wait for the whole body.
            RunEnd::Unfinished(unfinished) if self.context.transaction_begun() => {
                self.read_to_end(unfinished).await
            }
            finished => finished,
        };
        self.settle(finished).await
    }

    /// Runs the handler and captures its response, renewing the lease meanwhile.
    ///
    /// The handler's future is made where it is awaited, not passed in: a future passed
    /// through the panic guard and the `select!` is laid out once in each of them, and the
    /// whole request's future, several kilobytes more, is copied on every request.
    async fn run<F>(&self, call: impl FnOnce() -> F + Send) -> RunEnd
    where
        F: Future<Output = Response> + Send,
    {
        let policy = self.policy;
        let context = &self.context;
        let work = AssertUnwindSafe(async move {
            let response = call().await;
            // A step that ended the operation makes its answer the result, whatever its
            // status; one that stopped it otherwise leaves it unfinished.
            let result = match context.journal().ending() {
                None => counts_as_result(&policy, &response),
                Some(stop) => stop == Stop::Terminal,
            };
            if !result {
                return RunEnd::NotAResult(response);
            }
            match capture(response, &policy) {
                Ok(Capture::Done(captured)) => RunEnd::Result(captured),
                Ok(Capture::Unfinished(unfinished)) => RunEnd::Unfinished(unfinished),
                Err(_) => RunEnd::BodyFailed,
            }
        })
        .catch_unwind();
        tokio::select! {
            // The handler first: one that finishes on its first poll never starts the
            // heartbeat's timer.
            biased;
            finished = work => finished.unwrap_or(RunEnd::Panicked),
            never = self.heartbeat() => match never {},
        }
    }

    /// Tells the run's steps which record they write to, and what the claim found of them.
    fn hold_journal(&mut self) {
        let held = Holder {
            key: self.key,
            token: self.lease.token,
            max_output: self.policy.max_stored_body,
        };
        let lease = LeaseClock::new(
            self.lease.token,
            self.lease.confirmed_until,
            self.idem.lease_margin(self.policy.lease),
        );
        let (recorded, suspensions) = match self.lease.progress.take() {
            Some(progress) => (progress.steps, progress.suspensions),
            None => (Vec::new(), 0),
        };
        self.context
            .journal()
            .hold(held, lease, recorded, suspensions);
    }

    /// Reads the rest of a response body, renewing the lease meanwhile.
    async fn read_to_end(&self, unfinished: Unfinished) -> RunEnd {
        let rest = AssertUnwindSafe(finish(unfinished, &self.policy)).catch_unwind();
        let finished = tokio::select! {
            biased;
            finished = rest => finished,
            never = self.heartbeat() => match never {},
        };
        match finished {
            Ok(Ok(captured)) => RunEnd::Result(captured),
            Ok(Err(_)) => RunEnd::BodyFailed,
            Err(_) => RunEnd::Panicked,
        }
    }

    /// Renews the lease every third of it, for as long as it is polled. Never returns.
    async fn heartbeat(&self) -> std::convert::Infallible {
        let every = (self.policy.lease / 3).max(Duration::from_millis(1));
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            // The store's answer confirms the lease from when it was asked, not answered.
            let sent = tokio::time::Instant::now();
            // Boxed: a renewal (its store call and its timeout's timer) is rare, and laid out
            // inline it would add 300 bytes to every request's future.
            let renewal = Box::pin(
                self.idem
                    .renew(&self.key, self.lease.token, self.policy.lease),
            );
            match renewal.await {
                Ok(()) => self
                    .context
                    .journal()
                    .lease_confirmed(sent, self.policy.lease),
                Err(StoreError::LeaseLost) => {
                    // No step of this run starts from now on.
                    self.context.journal().lease_lost();
                    // Another request took the key over. The handler cannot be stopped safely
                    // half-way; its completion will be fenced, and its next step does not
                    // start. Stop renewing.
                    self.record(
                        Outcome::Fenced,
                        &"another request took the key over (or an operator removed it) while the \
                         handler ran",
                    );
                    return std::future::pending().await;
                }
                // A passing store fault: the lease still has two thirds left; try again. A
                // step that would start with less than the margin left does not.
                Err(error) => self.record_error(
                    Outcome::StoreError,
                    "the lease could not be renewed",
                    &error,
                ),
            }
        }
    }

    fn record(&self, outcome: Outcome, detail: &dyn std::fmt::Display) {
        observe::record(outcome, self.route.as_str(), Some(&self.key), detail);
    }

    fn record_error(
        &self,
        outcome: Outcome,
        what: &str,
        error: &(dyn std::error::Error + 'static),
    ) {
        observe::record_error(outcome, self.route.as_str(), Some(&self.key), what, error);
    }
}
