//! Running a claimed request's handler to the end (SPEC §5 steps 4 to 6).
//!
//! The run renews the lease while the handler runs, catches a panic, captures the response
//! and stores it (or releases the key), and only then answers. It is [`Detachable`]: if the
//! client disconnects and hyper drops the request, the run carries on in a task of its own,
//! so the client's retry finds the result.

use std::{panic::AssertUnwindSafe, time::Duration};

use super::{counts_as_result, detach::Detachable, store_unavailable};
use crate::{
    Idempotency,
    context::IdempotencyContext,
    observe::{self, Outcome},
    policy::Policy,
    problem::{Problem, ProblemKind},
    replay::capture::{Captured, capture},
    scope::{Route, StoreKey},
    store::{LeaseToken, StoreError},
};
use axum::response::{IntoResponse, Response};
use futures_util::FutureExt;

/// A claimed key and what the runtime needs to finish its request.
pub(super) struct Run {
    pub(super) idem: Idempotency,
    pub(super) policy: Policy,
    pub(super) key: StoreKey,
    pub(super) token: LeaseToken,
    pub(super) route: Route,
    pub(super) context: IdempotencyContext,
}

/// How the handler's work ended.
enum Finished {
    /// Its response is the operation's result: store it.
    Result(Captured),
    /// Its response is not to be stored (5xx, `NoStore`): release the key.
    NotAResult(Response),
    /// It panicked: release the key.
    Panicked,
    /// Its response body failed before it was read whole: release the key.
    BodyFailed,
}

/// How many times completion is tried before the runtime gives up on storing a result.
const COMPLETE_ATTEMPTS: u32 = 3;

impl Run {
    /// Runs `handler` to the end and answers with its response. If this future is dropped
    /// (the client went away), the run carries on and stores the result.
    pub(super) fn run(
        self,
        handler: impl Future<Output = Response> + Send + 'static,
    ) -> impl Future<Output = Response> + Send + 'static {
        let tasks = self.idem.tasks().clone();
        Detachable::new(self.drive(handler), &tasks)
    }

    async fn drive(self, handler: impl Future<Output = Response> + Send + 'static) -> Response {
        let policy = self.policy;
        let work = AssertUnwindSafe(async move {
            let response = handler.await;
            if !counts_as_result(&policy, &response) {
                return Finished::NotAResult(response);
            }
            match capture(response, &policy).await {
                Ok(captured) => Finished::Result(captured),
                Err(_) => Finished::BodyFailed,
            }
        })
        .catch_unwind();
        let finished = tokio::select! {
            // The handler first: one that finishes on its first poll never starts the
            // heartbeat's timer.
            biased;
            finished = work => finished.unwrap_or(Finished::Panicked),
            never = self.heartbeat() => match never {},
        };
        match finished {
            Finished::Result(captured) => self.complete(captured).await,
            Finished::NotAResult(response) => {
                let why = if response.status().is_server_error() {
                    "a server error is not stored"
                } else {
                    "the response is not the operation's result (NoStore, or a rejected body)"
                };
                self.release(why).await;
                response
            }
            Finished::Panicked => self.fail(Outcome::Panicked, "it panicked").await,
            Finished::BodyFailed => {
                self.fail(Outcome::Released, "its response body failed")
                    .await
            }
        }
    }

    /// Releases the key after the handler failed, and answers 500 Problem Details.
    async fn fail(&self, outcome: Outcome, why: &str) -> Response {
        observe::record(
            outcome,
            self.route.as_str(),
            &format_args!("the handler failed: {why}"),
        );
        self.release("released after a failure").await;
        let detail = format!(
            "the request failed unexpectedly ({why}); the Idempotency-Key was released, so \
             retrying it runs the request again"
        );
        Problem::new(ProblemKind::HandlerFailed, detail).into_response()
    }

    /// Renews the lease every third of it, for as long as it is polled. Never returns.
    async fn heartbeat(&self) -> std::convert::Infallible {
        let every = (self.policy.lease / 3).max(Duration::from_millis(1));
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let renewal = self
                .idem
                .store()
                .renew(&self.key, self.token, self.policy.lease);
            match self.idem.call_store(renewal).await {
                Ok(()) => {}
                Err(StoreError::LeaseLost) => {
                    // Another request took the key over. The handler cannot be stopped safely
                    // half-way; its completion will be fenced. Stop renewing.
                    observe::record(
                        Outcome::Fenced,
                        self.route.as_str(),
                        &"the lease was taken over while the handler ran",
                    );
                    return std::future::pending().await;
                }
                // A passing store fault: the lease still has two thirds left; try again.
                Err(error) => observe::record(Outcome::StoreError, self.route.as_str(), &error),
            }
        }
    }

    async fn complete(self, captured: Captured) -> Response {
        let Captured { record, response } = captured;
        if let Some(transaction) = self.context.take_transaction().await {
            let completion = transaction.complete(&self.key, self.token, &record, self.policy.ttl);
            return match self.idem.call_store(completion).await {
                Ok(()) => {
                    observe::record(
                        Outcome::Completed,
                        self.route.as_str(),
                        &"stored with the handler's transaction",
                    );
                    response
                }
                Err(StoreError::LeaseLost) => {
                    // The handler's writes rolled back with the record: the request that took
                    // the key over is the one running the operation now.
                    observe::record(
                        Outcome::Fenced,
                        self.route.as_str(),
                        &"the transaction was rolled back",
                    );
                    Problem::new(
                        ProblemKind::RequestInFlight,
                        "another request with this Idempotency-Key took over while this one ran; \
                         retry to get its result",
                    )
                    .with_retry_after(self.policy.retry_after)
                    .into_response()
                }
                Err(StoreError::RolledBack(why)) => {
                    // Nothing committed, the record is still in flight under our token:
                    // release it so the retry runs the operation again.
                    observe::record(
                        Outcome::StoreError,
                        self.route.as_str(),
                        &format_args!("rolled back: {why}"),
                    );
                    self.release("released after its transaction rolled back")
                        .await;
                    store_unavailable(
                        &self.policy,
                        "the request's transaction could not commit and was rolled back; nothing \
                         was stored and the Idempotency-Key was released: retry",
                    )
                }
                Err(error) => {
                    // The commit's outcome is unknown: leave the record to its lease, so a
                    // retry replays if it committed and runs again if it did not.
                    observe::record(Outcome::StoreError, self.route.as_str(), &error);
                    store_unavailable(
                        &self.policy,
                        "the result of this request could not be committed",
                    )
                }
            };
        }
        for attempt in 1..=COMPLETE_ATTEMPTS {
            let completion =
                self.idem
                    .store()
                    .complete(&self.key, self.token, &record, self.policy.ttl);
            match self.idem.call_store(completion).await {
                Ok(()) => {
                    observe::record(Outcome::Completed, self.route.as_str(), &record.status());
                    break;
                }
                Err(StoreError::LeaseLost) => {
                    observe::record(
                        Outcome::Fenced,
                        self.route.as_str(),
                        &"the handler finished after its lease was taken over; its result was not stored",
                    );
                    break;
                }
                Err(error) if attempt == COMPLETE_ATTEMPTS => {
                    // The operation ran; its caller gets the result. The key stays in flight
                    // until its lease lapses, then a retry runs again.
                    observe::record(
                        Outcome::StoreError,
                        self.route.as_str(),
                        &format_args!("the result could not be stored: {error}"),
                    );
                }
                Err(error) => {
                    observe::record(Outcome::StoreError, self.route.as_str(), &error);
                    tokio::time::sleep(Duration::from_millis(20) * attempt).await;
                }
            }
        }
        response
    }

    async fn release(&self, why: &str) {
        if let Some(transaction) = self.context.take_transaction().await
            && let Err(error) = self.idem.call_store(transaction.rollback()).await
        {
            observe::record(Outcome::StoreError, self.route.as_str(), &error);
        }
        match self
            .idem
            .call_store(self.idem.store().release(&self.key, self.token))
            .await
        {
            Ok(()) => observe::record(Outcome::Released, self.route.as_str(), &why),
            Err(StoreError::LeaseLost) => {
                observe::record(
                    Outcome::Fenced,
                    self.route.as_str(),
                    &"the key was taken over before its release",
                );
            }
            // The key stays blocked until its lease lapses.
            Err(error) => observe::record(Outcome::StoreError, self.route.as_str(), &error),
        }
    }
}
