//! The runtime's calls to its store: the one way the rest of the crate reaches the store.
//!
//! Each call runs under the runtime's store timeout, so no store can hang a request; a call
//! that the store can answer at once ([`Store::claim_now`], [`Store::complete_now`]) skips the
//! future and the timer. Each is timed, with the feature `metrics`, as
//! `idem_store_call_seconds{op}` (the time the runtime waited, a timeout included).

use std::{future::Future, time::Duration};

use super::Idempotency;
use crate::{
    observe::{CallTimer, StoreOp},
    replay::StoredResponse,
    scope::StoreKey,
    store::{
        Claim, ClaimOutcome, Held, LeaseToken, RecordState, StoreError, StoreTransaction,
        operation::{DueOperation, RecordedStep},
    },
};

impl Idempotency {
    /// Claims a key ([`Store::claim`](crate::store::Store::claim)).
    pub(crate) async fn claim(&self, claim: Claim<'_>) -> Result<ClaimOutcome, StoreError> {
        let timer = CallTimer::start();
        match self.store().claim_now(claim) {
            Some(answer) => {
                timer.stop(StoreOp::Claim);
                answer
            }
            None => {
                self.within_timeout(StoreOp::Claim, self.store().claim(claim))
                    .await
            }
        }
    }

    /// Completes a key on its own ([`Store::complete`](crate::store::Store::complete)).
    pub(crate) async fn complete(
        &self,
        key: &StoreKey,
        token: LeaseToken,
        response: &StoredResponse,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let timer = CallTimer::start();
        match self.store().complete_now(key, token, response, ttl) {
            Some(answer) => {
                timer.stop(StoreOp::Complete);
                answer
            }
            None => {
                let call = self.store().complete(key, token, response, ttl);
                self.within_timeout(StoreOp::Complete, call).await
            }
        }
    }

    /// Completes a key on its own if the store can answer without waiting
    /// ([`Store::complete_now`](crate::store::Store::complete_now)); `None` when the call has
    /// to be awaited, through [`complete`](Self::complete).
    pub(crate) fn complete_now(
        &self,
        key: &StoreKey,
        token: LeaseToken,
        response: &StoredResponse,
        ttl: Duration,
    ) -> Option<Result<(), StoreError>> {
        let timer = CallTimer::start();
        let answer = self.store().complete_now(key, token, response, ttl);
        if answer.is_some() {
            timer.stop(StoreOp::Complete);
        }
        answer
    }

    /// Extends a lease ([`Store::renew`](crate::store::Store::renew)).
    pub(crate) async fn renew(
        &self,
        key: &StoreKey,
        token: LeaseToken,
        lease: Duration,
    ) -> Result<(), StoreError> {
        self.within_timeout(StoreOp::Renew, self.store().renew(key, token, lease))
            .await
    }

    /// Releases a key ([`Store::release`](crate::store::Store::release)).
    pub(crate) async fn release(
        &self,
        key: &StoreKey,
        token: LeaseToken,
    ) -> Result<(), StoreError> {
        self.within_timeout(StoreOp::Release, self.store().release(key, token))
            .await
    }

    /// Records a step's output ([`Store::record_step`](crate::store::Store::record_step)).
    pub(crate) async fn record_step(
        &self,
        key: &StoreKey,
        token: LeaseToken,
        index: usize,
        step: &RecordedStep,
    ) -> Result<(), StoreError> {
        self.within_timeout(
            StoreOp::RecordStep,
            self.store().record_step(key, token, index, step),
        )
        .await
    }

    /// Records a step's output inside its transaction, and commits both
    /// ([`StoreTransaction::record_step`]).
    pub(crate) async fn record_step_in(
        &self,
        transaction: Box<dyn StoreTransaction>,
        key: &StoreKey,
        token: LeaseToken,
        index: usize,
        step: &RecordedStep,
    ) -> Result<(), StoreError> {
        self.within_timeout(
            StoreOp::RecordStepInTransaction,
            transaction.record_step(key, token, index, step),
        )
        .await
    }

    /// Suspends an operation ([`Store::suspend`](crate::store::Store::suspend)).
    pub(crate) async fn suspend(
        &self,
        key: &StoreKey,
        token: LeaseToken,
        resume_in: Option<Duration>,
    ) -> Result<(), StoreError> {
        self.within_timeout(
            StoreOp::Suspend,
            self.store().suspend(key, token, resume_in),
        )
        .await
    }

    /// The operations due for resumption ([`Store::due`](crate::store::Store::due)).
    pub(crate) async fn due(
        &self,
        limit: usize,
        hold: Duration,
    ) -> Result<Vec<DueOperation>, StoreError> {
        self.within_timeout(StoreOp::Due, self.store().due(limit, hold))
            .await
    }

    /// What is held for a key ([`Store::look_up`](crate::store::Store::look_up)).
    pub(crate) async fn look_up_in_store(
        &self,
        key: &StoreKey,
    ) -> Result<Option<Held>, StoreError> {
        self.within_timeout(StoreOp::LookUp, self.store().look_up(key))
            .await
    }

    /// Removes a key's record ([`Store::remove`](crate::store::Store::remove)).
    pub(crate) async fn remove_from_store(
        &self,
        key: &StoreKey,
    ) -> Result<Option<RecordState>, StoreError> {
        self.within_timeout(StoreOp::Remove, self.store().remove(key))
            .await
    }

    /// Opens a transaction for a handler's writes ([`Store::begin`](crate::store::Store::begin)).
    pub(crate) async fn begin(&self) -> Result<Box<dyn StoreTransaction>, StoreError> {
        self.within_timeout(StoreOp::Begin, self.store().begin())
            .await
    }

    /// Completes a key inside the handler's transaction, and commits both
    /// ([`StoreTransaction::complete`]).
    pub(crate) async fn complete_in(
        &self,
        transaction: Box<dyn StoreTransaction>,
        key: &StoreKey,
        token: LeaseToken,
        response: &StoredResponse,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.within_timeout(
            StoreOp::CompleteInTransaction,
            transaction.complete(key, token, response, ttl),
        )
        .await
    }

    /// Commits a handler's transaction without a record ([`StoreTransaction::commit`]).
    pub(crate) async fn commit(
        &self,
        transaction: Box<dyn StoreTransaction>,
    ) -> Result<(), StoreError> {
        self.within_timeout(StoreOp::Commit, transaction.commit())
            .await
    }

    /// Rolls a handler's transaction back ([`StoreTransaction::rollback`]).
    pub(crate) async fn rollback(
        &self,
        transaction: Box<dyn StoreTransaction>,
    ) -> Result<(), StoreError> {
        self.within_timeout(StoreOp::Rollback, transaction.rollback())
            .await
    }

    /// Runs one store call under the runtime's timeout, timed as `op`.
    async fn within_timeout<T>(
        &self,
        op: StoreOp,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let timeout = self.store_timeout();
        let timer = CallTimer::start();
        let answer = tokio::time::timeout(timeout, call)
            .await
            .unwrap_or(Err(StoreError::Timeout(timeout)));
        timer.stop(op);
        answer
    }
}
