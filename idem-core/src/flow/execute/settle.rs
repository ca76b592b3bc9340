//! Settling a run: storing its result (on its own, or in the handler's transaction), or
//! releasing the key. A completion or a release that the store does not take is handed to the
//! runtime, which retries it in the background and meanwhile answers this process's retries of
//! the key from its own copy.

use axum::response::Response;

use super::{Execution, RunEnd};
use crate::{
    flow::problems::{self, Released},
    observe::{self, Outcome},
    replay::{EncodeError, StoredResponse, capture::Captured},
    runtime::resumer,
    steps::journal::Stop,
    store::{StoreError, StoreTransaction},
};

impl Execution {
    /// Stores the handler's result or releases the key, and answers.
    ///
    /// The usual end, a storable result without a transaction, is completed here: at once by
    /// a store that answers without waiting (the memory store), through one boxed future
    /// otherwise. Every other end is a boxed future too: laid out inline, its states (a commit,
    /// a rollback, a release) would add about 3 KB to the request's future, which is allocated
    /// and moved on every request, replays included.
    pub(super) async fn settle(self, finished: RunEnd) -> Response {
        match finished {
            RunEnd::Result(Captured {
                record: Ok(record),
                response,
            }) if !self.context.transaction_begun() => {
                let (key, token, ttl) = (&self.key, self.lease.token, self.policy.ttl);
                match self.idem.complete_now(key, token, &record, ttl) {
                    Some(completion) => self.completed(completion, record),
                    None => Box::pin(self.complete_on_its_own(record)).await,
                }
                response
            }
            finished => Box::pin(self.settle_waiting(finished)).await,
        }
    }

    /// [`settle`](Self::settle), for the ends that wait for the store or a transaction.
    async fn settle_waiting(self, finished: RunEnd) -> Response {
        match finished {
            RunEnd::Result(captured) => self.complete(captured).await,
            RunEnd::Unfinished(unfinished) => self.stream(unfinished),
            RunEnd::NotAResult(response) => {
                let changed = match self.context.journal().ending() {
                    Some(Stop::Changed(why)) => Some(why),
                    _ => None,
                };
                if let Some(why) = changed {
                    // The handler's answer was made without the steps it should have
                    // reached: it is not sent.
                    self.record(Outcome::StepsChanged, &why);
                    self.release("stopped: its steps changed").await;
                    return problems::steps_changed(&self.idem, &why);
                }
                let why = if response.status().is_server_error() {
                    "a server error is not stored"
                } else {
                    "the response is not the operation's result (NoStore, or a rejected body)"
                };
                self.release(why).await;
                response
            }
            RunEnd::Panicked => self.fail(Outcome::Panicked, "it panicked").await,
            RunEnd::BodyFailed => {
                self.fail(Outcome::Released, "its response body failed")
                    .await
            }
        }
    }

    /// Releases the key after the handler failed, and answers 500 Problem Details.
    async fn fail(&self, outcome: Outcome, why: &str) -> Response {
        self.record(outcome, &format_args!("the handler failed: {why}"));
        let released = self.release("released after a failure").await;
        problems::handler_failed(&self.idem, &self.policy, why, released)
    }

    /// Stores the result, then answers the caller with it.
    async fn complete(self, captured: Captured) -> Response {
        let Captured { record, response } = captured;
        let Some(record) = self.storable(record).await else {
            return response;
        };
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
    /// so that a retry runs the operation again. Answers the record to store, if there is one.
    pub(super) async fn storable(
        &self,
        record: Result<StoredResponse, EncodeError>,
    ) -> Option<StoredResponse> {
        let error = match record {
            Ok(record) => return Some(record),
            Err(error) => error,
        };
        self.record_error(
            Outcome::Released,
            "the response cannot be stored; it is answered as it is and the key released",
            &error,
        );
        self.release("released: its response cannot be stored")
            .await;
        None
    }

    /// Completes the record on its own. If the store does not take it, the result stays
    /// pending in this process and the completion goes on in the background: the operation
    /// ran, and its caller gets the result now.
    pub(super) async fn complete_on_its_own(&self, record: StoredResponse) {
        let completion = self
            .idem
            .complete(&self.key, self.lease.token, &record, self.policy.ttl)
            .await;
        self.completed(completion, record);
    }

    /// What the store's answer to a completion on its own leaves to do.
    fn completed(&self, completion: Result<(), StoreError>, record: StoredResponse) {
        match completion {
            Ok(()) => self.record(Outcome::Completed, &record.status()),
            Err(StoreError::LeaseLost) => self.record(
                Outcome::Fenced,
                &"another request took the key over (or an operator removed it) before this result \
                  could be stored; the result was not stored",
            ),
            Err(error) if error.outcome_unknown() => {
                self.record_error(
                    Outcome::StoreError,
                    "the result could not be stored yet; this process keeps it and stores it \
                     as soon as the store answers",
                    &error,
                );
                self.idem.complete_later(
                    self.key,
                    self.lease.token,
                    self.fingerprint,
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
        let (key, token, ttl) = (&self.key, self.lease.token, self.policy.ttl);
        match self
            .idem
            .complete_in(transaction, key, token, record, ttl)
            .await
        {
            Ok(()) => {
                self.record(Outcome::Completed, &"stored with the handler's transaction");
                response
            }
            Err(StoreError::LeaseLost) => {
                // The handler's writes rolled back with the record: the request that took
                // the key over is the one running the operation now.
                self.record(
                    Outcome::Fenced,
                    &"another request took the key over (or an operator removed it); the handler's \
                     transaction was rolled back",
                );
                problems::taken_over(&self.idem, &self.policy)
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
                problems::rolled_back(&self.idem, &self.policy, released)
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
                if self.context.journal().stepped() {
                    // Its steps stay whatever the commit did: a suspension that finds the
                    // record completed changes nothing, and one that fails lets the lease
                    // lapse on its own.
                    self.suspend("suspended: its transaction's outcome is unknown")
                        .await;
                } else {
                    self.release_later();
                }
                problems::store_unavailable(
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
    /// release the store does not answer goes on in the background. An operation that has
    /// begun a step is suspended instead: its steps stay for the run that resumes it.
    pub(super) async fn release(&self, why: &str) -> Released {
        if let Some(transaction) = self.context.take_transaction().await
            && let Err(error) = self.idem.rollback(transaction).await
        {
            // A transaction that cannot be rolled back explicitly rolls back with its
            // connection: nothing of it commits.
            self.record_error(
                Outcome::StoreError,
                "the handler's transaction could not be rolled back",
                &error,
            );
        }
        if self.context.journal().stepped() {
            return self.suspend(why).await;
        }
        match self.idem.release(&self.key, self.lease.token).await {
            Ok(()) => {
                self.record(Outcome::Released, &why);
                Released::Now
            }
            Err(StoreError::LeaseLost) => {
                self.record(
                    Outcome::Fenced,
                    &"another request took the key over (or an operator removed it) before it was \
                     released",
                );
                Released::TakenOver
            }
            Err(error) if error.outcome_unknown() => {
                self.record_error(
                    Outcome::StoreError,
                    "the key could not be released yet; the release goes on in the background",
                    &error,
                );
                self.release_later();
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

    /// Hands the release to the runtime, which retries it in the background until the store
    /// answers or the in-flight record has expired.
    fn release_later(&self) {
        self.idem.release_later(
            self.key,
            self.lease.token,
            self.lease.lifetime,
            self.route.clone(),
        );
    }

    /// Suspends an operation that stopped part-way: the lease ends, the steps stay, and the
    /// next run that takes the key over resumes it. A route the service resumes is due again
    /// after its backoff, unless its steps changed (then only a person settles it).
    ///
    /// A suspension the store does not take is not retried: the lease lapses on its own
    /// within a lease, and the operation is resumable all the same.
    async fn suspend(&self, why: &str) -> Released {
        let (stop, suspensions) = {
            let mut journal = self.context.journal();
            (journal.ending(), journal.suspensions())
        };
        // An operation whose steps changed waits for a person; one another run took over is
        // that run's.
        let stopped_for_good = matches!(stop, Some(Stop::Changed(_) | Stop::Fenced));
        let resume_in = (!stopped_for_good)
            .then_some(self.policy.resume_after)
            .flatten()
            .map(|after| resumer::backoff(after, suspensions));
        let answer = self
            .idem
            .suspend(&self.key, self.lease.token, resume_in)
            .await;
        // A suspension that did not land lets the lease lapse on its own: the operation is
        // resumable all the same, and is scheduled as if it had.
        let suspended = match &answer {
            Ok(()) => true,
            Err(error) => error.outcome_unknown(),
        };
        if let (true, Some(resume_in), Some(kept)) = (suspended, resume_in, &self.kept) {
            self.idem
                .schedule(self.key, (**kept).clone(), resume_in, suspensions + 1);
        }
        match answer {
            Ok(()) => {
                let then = match resume_in {
                    Some(after) => format!("the service resumes it in {after:?}"),
                    None if stopped_for_good => "it is not resumed on its own".to_owned(),
                    None => "a retry with its key resumes it".to_owned(),
                };
                self.record(
                    Outcome::Suspended,
                    &format_args!("{why}; it keeps its steps, and {then}"),
                );
                Released::Suspended
            }
            Err(StoreError::LeaseLost) => {
                self.record(
                    Outcome::Fenced,
                    &"another request took the operation over before it was suspended",
                );
                Released::TakenOver
            }
            Err(error) => {
                self.record_error(
                    Outcome::StoreError,
                    "the operation could not be suspended; its lease lapses on its own, and it \
                     resumes after that",
                    &error,
                );
                Released::SuspendedLater
            }
        }
    }
}
