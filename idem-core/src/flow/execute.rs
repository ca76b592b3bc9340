//! Running a claimed request's handler to the end (SPEC §5 steps 4 to 6).
//!
//! The run renews the lease while the handler runs, catches a panic, captures the response
//! and stores it (or releases the key), and only then answers. It is part of the request's
//! [`RequestFuture`](super::RequestFuture): if the client disconnects and hyper drops the
//! request, the run carries on in a task of its own, so the client's retry finds the result.
//!
//! A completion or a release that the store does not take is not given up on: it goes on in
//! the background ([`background`](super::background)) until the store answers, and a result
//! waiting for the store answers this process's retries of its key meanwhile
//! ([`pending`](super::pending)).

use std::{panic::AssertUnwindSafe, time::Duration};

use super::{
    answer::{self, Released},
    background, counts_as_result,
};
use crate::{
    Idempotency,
    context::IdempotencyContext,
    fingerprint::Fingerprint,
    observe::{self, Outcome},
    policy::Policy,
    replay::{
        StoredResponse,
        capture::{Capture, Captured, Unfinished, capture, finish},
    },
    scope::{Route, StoreKey},
    store::{LeaseToken, StoreError, StoreTransaction},
};
use axum::response::Response;
use futures_util::FutureExt;

/// A claimed key and what the runtime needs to finish its request.
pub(super) struct Execution {
    pub(super) idem: Idempotency,
    pub(super) policy: Policy,
    pub(super) key: StoreKey,
    pub(super) fingerprint: Fingerprint,
    pub(super) token: LeaseToken,
    pub(super) route: Route,
    pub(super) context: IdempotencyContext,
}

/// How the handler's work ended.
enum Finished {
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
    /// Runs `handler` to the end, stores its result (or releases the key) and answers.
    pub(super) async fn execute(self, handler: impl Future<Output = Response> + Send + 'static) -> Response {
        let policy = self.policy;
        let work = AssertUnwindSafe(async move {
            let response = handler.await;
            if !counts_as_result(&policy, &response) {
                return Finished::NotAResult(response);
            }
            match capture(response, &policy) {
                Ok(Capture::Done(captured)) => Finished::Result(captured),
                Ok(Capture::Unfinished(unfinished)) => Finished::Unfinished(unfinished),
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
            // A transaction commits before its caller sees anything: wait for the whole body.
            Finished::Unfinished(unfinished) if self.context.transaction_begun() => {
                let rest = AssertUnwindSafe(finish(unfinished, &policy)).catch_unwind();
                let finished = tokio::select! {
                    biased;
                    finished = rest => finished,
                    never = self.heartbeat() => match never {},
                };
                match finished {
                    Ok(Ok(captured)) => self.complete(captured).await,
                    Ok(Err(_)) => {
                        self.fail(Outcome::Released, "its response body failed")
                            .await
                    }
                    Err(_) => self.fail(Outcome::Panicked, "it panicked").await,
                }
            }
            Finished::Unfinished(unfinished) => self.stream(unfinished),
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
    pub(super) async fn fail(&self, outcome: Outcome, why: &str) -> Response {
        self.record(outcome, &format_args!("the handler failed: {why}"));
        let released = self.release("released after a failure").await;
        answer::handler_failed(&self.idem, &self.policy, why, released)
    }

    /// Renews the lease every third of it, for as long as it is polled. Never returns.
    pub(super) async fn heartbeat(&self) -> std::convert::Infallible {
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
                    self.record(
                        Outcome::Fenced,
                        &"another request took the key over while the handler ran",
                    );
                    return std::future::pending().await;
                }
                // A passing store fault: the lease still has two thirds left; try again.
                Err(error) => self.record_error(
                    Outcome::StoreError,
                    "the lease could not be renewed",
                    &error,
                ),
            }
        }
    }

    /// Stores the result, then answers the caller with it.
    async fn complete(self, captured: Captured) -> Response {
        let Captured { record, response } = captured;
        if self.release_if_unstorable(&record).await {
            return response;
        }
        match self.context.take_transaction().await {
            Some(transaction) => self.complete_in(transaction, &record, response).await,
            None => {
                self.complete_on_its_own(record).await;
                response
            }
        }
    }

    /// A response no store could keep (more header values than a record holds, say) is not
    /// the operation's result to replay: its caller gets it as it is, and the key is released,
    /// so that a retry runs the operation again. Answers whether it was such a response.
    pub(super) async fn release_if_unstorable(&self, record: &StoredResponse) -> bool {
        let Err(error) = record.check_encodable() else {
            return false;
        };
        self.record_error(
            Outcome::Released,
            "the response cannot be stored; it is answered as it is and the key released",
            &error,
        );
        self.release("released: its response cannot be stored")
            .await;
        true
    }

    /// Completes the record on its own. If the store does not take it, the result stays
    /// pending in this process and the completion goes on in the background: the operation
    /// ran, and its caller gets the result now.
    pub(super) async fn complete_on_its_own(&self, record: StoredResponse) {
        let completion = self
            .idem
            .complete(&self.key, self.token, &record, self.policy.ttl);
        match completion.await {
            Ok(()) => self.record(Outcome::Completed, &record.status()),
            Err(StoreError::LeaseLost) => self.record(
                Outcome::Fenced,
                &"another request took the key over before this result could be stored; the \
                  result was not stored",
            ),
            Err(error) if error.outcome_unknown() => {
                self.record_error(
                    Outcome::StoreError,
                    "the result could not be stored yet; this process keeps it and stores it \
                     as soon as the store answers",
                    &error,
                );
                self.idem
                    .pending()
                    .insert(self.key, self.token, self.fingerprint, record.clone());
                background::complete(
                    &self.idem,
                    self.key,
                    self.token,
                    record,
                    self.policy.ttl,
                    self.route.clone(),
                );
            }
            Err(error) => self.record_error(
                Outcome::Lost,
                "the store refused the result of a request that ran; it was not stored",
                &error,
            ),
        }
    }

    /// Completes the record inside the handler's transaction and commits both.
    async fn complete_in(
        self,
        transaction: Box<dyn StoreTransaction>,
        record: &StoredResponse,
        response: Response,
    ) -> Response {
        let completion = transaction.complete(&self.key, self.token, record, self.policy.ttl);
        match self.idem.call_store(completion).await {
            Ok(()) => {
                self.record(Outcome::Completed, &"stored with the handler's transaction");
                response
            }
            Err(StoreError::LeaseLost) => {
                // The handler's writes rolled back with the record: the request that took
                // the key over is the one running the operation now.
                self.record(
                    Outcome::Fenced,
                    &"another request took the key over; the handler's transaction was rolled back",
                );
                answer::taken_over(&self.idem, &self.policy)
            }
            Err(StoreError::RolledBack(why)) => {
                // Nothing committed, the record is still in flight under our token: release
                // it so that a retry runs the operation again.
                self.record(
                    Outcome::StoreError,
                    &format_args!(
                        "the handler's transaction was rolled back: {}",
                        observe::Chain(&*why)
                    ),
                );
                let released = self
                    .release("released after its transaction rolled back")
                    .await;
                answer::store_unavailable(
                    &self.idem,
                    &self.policy,
                    match released {
                        Released::Now => {
                            "the request's transaction could not commit and was rolled back: \
                             nothing was stored, and the Idempotency-Key was released, so \
                             retrying it runs the request again"
                        }
                        Released::Later | Released::Blocked => {
                            "the request's transaction could not commit and was rolled back: \
                             nothing was stored; the Idempotency-Key is released as soon as the \
                             idempotency store answers again, and a retry after that runs the \
                             request again"
                        }
                        Released::TakenOver => {
                            "the request's transaction could not commit and was rolled back; \
                             another request with this Idempotency-Key has taken it over, and a \
                             retry gets that request's result"
                        }
                    },
                )
            }
            Err(error) => {
                // The commit's outcome is unknown. Releasing under our token settles it: if
                // the commit landed the record is completed and the release finds nothing to
                // do; if not, the key is freed and a retry runs the operation again (its
                // writes rolled back with the record).
                self.record_error(
                    Outcome::StoreError,
                    "the outcome of the handler's transaction is unknown",
                    &error,
                );
                background::release(
                    &self.idem,
                    self.key,
                    self.token,
                    self.policy.ttl.max(self.policy.lease),
                    self.route.clone(),
                );
                answer::store_unavailable(
                    &self.idem,
                    &self.policy,
                    "the request ran, but whether its result was committed is unknown: retry \
                     with the same Idempotency-Key after the time in Retry-After; the retry gets \
                     the result if it was committed, and runs the request again if it was not",
                )
            }
        }
    }

    /// Rolls the handler's transaction back, if it opened one, and releases the key. A
    /// release the store does not answer goes on in the background.
    pub(super) async fn release(&self, why: &str) -> Released {
        if let Some(transaction) = self.context.take_transaction().await
            && let Err(error) = self.idem.call_store(transaction.rollback()).await
        {
            // A transaction that cannot be rolled back explicitly rolls back with its
            // connection: nothing of it commits.
            self.record_error(
                Outcome::StoreError,
                "the handler's transaction could not be rolled back",
                &error,
            );
        }
        let release = self.idem.store().release(&self.key, self.token);
        match self.idem.call_store(release).await {
            Ok(()) => {
                self.record(Outcome::Released, &why);
                Released::Now
            }
            Err(StoreError::LeaseLost) => {
                self.record(
                    Outcome::Fenced,
                    &"another request took the key over before it was released",
                );
                Released::TakenOver
            }
            Err(error) if error.outcome_unknown() => {
                self.record_error(
                    Outcome::StoreError,
                    "the key could not be released yet; the release goes on in the background",
                    &error,
                );
                background::release(
                    &self.idem,
                    self.key,
                    self.token,
                    self.policy.ttl.max(self.policy.lease),
                    self.route.clone(),
                );
                Released::Later
            }
            Err(error) => {
                self.record_error(
                    Outcome::StoreError,
                    "the store refused to release the key; it stays blocked until its lease \
                     lapses",
                    &error,
                );
                Released::Blocked
            }
        }
    }

    pub(super) fn record(&self, outcome: Outcome, detail: &dyn std::fmt::Display) {
        observe::record(outcome, self.route.as_str(), Some(&self.key), detail);
    }

    pub(super) fn record_error(
        &self,
        outcome: Outcome,
        what: &str,
        error: &(dyn std::error::Error + 'static),
    ) {
        observe::record_error(outcome, self.route.as_str(), Some(&self.key), what, error);
    }
}

/// Runs a handler without a record: there is no key, or the store failed and the policy says
/// to run anyway. A transaction the handler opened commits when its response would have been
/// stored, and rolls back otherwise, as on the recorded path.
pub(super) async fn without_record(
    policy: &Policy,
    route: &Route,
    context: IdempotencyContext,
    handler: impl Future<Output = Response>,
) -> Response {
    observe::record(
        Outcome::Unrecorded,
        route.as_str(),
        None,
        &"ran without an idempotency record",
    );
    let response = handler.await;
    let Some(transaction) = context.take_transaction().await else {
        return response;
    };
    let idem = context.runtime();
    let ended = if counts_as_result(policy, &response) {
        idem.call_store(transaction.commit()).await
    } else {
        idem.call_store(transaction.rollback()).await
    };
    match ended {
        Ok(()) => response,
        Err(error) => {
            observe::record_error(
                Outcome::StoreError,
                route.as_str(),
                None,
                "the transaction of a request without a record could not be ended",
                &error,
            );
            answer::store_unavailable(
                idem,
                policy,
                "the transaction of this request could not be committed",
            )
        }
    }
}
