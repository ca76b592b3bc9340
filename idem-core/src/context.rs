//! [`IdempotencyContext`]: what a running handler can ask of the runtime.
//!
//! The runtime puts a context into the request's extensions before the handler runs: behind
//! `IdempotencyLayer`, once the claim lets the handler run (a replay makes none); for
//! `#[idempotent]`, before its extractors run, since any of them may read it. A
//! transactional store's extractor uses it to open the transaction in which the handler's
//! writes and the record's completion commit together (see docs/contract.md, *Stores*).

use std::{
    sync::{Arc, MutexGuard, PoisonError},
    time::Duration,
};

use tokio::sync::{Mutex, OwnedMutexGuard};

use crate::{
    runtime::Idempotency,
    steps::journal::Journal,
    store::{StoreError, StoreTransaction},
};

/// The idempotency context of one request, found in its extensions.
#[derive(Clone, Debug)]
pub struct IdempotencyContext {
    idem: Idempotency,
    /// The route's `Retry-After`, for answers given on the runtime's behalf (a `Tx` error).
    retry_after: Duration,
    transaction: Arc<Mutex<Option<Box<dyn StoreTransaction>>>>,
    /// What the handler's [`Steps`](crate::steps::Steps) did. A handler without steps leaves
    /// it empty, and the runtime locks it once or twice per request.
    journal: Arc<std::sync::Mutex<Journal>>,
}

/// The open transaction of a request, held by the handler while it writes.
pub type TransactionGuard = OwnedMutexGuard<Option<Box<dyn StoreTransaction>>>;

impl IdempotencyContext {
    pub(crate) fn new(idem: &Idempotency, retry_after: Duration) -> Self {
        Self {
            idem: idem.clone(),
            retry_after,
            transaction: Arc::default(),
            journal: Arc::default(),
        }
    }

    /// The journal of the run's steps. Never held across an `await`.
    pub(crate) fn journal(&self) -> MutexGuard<'_, Journal> {
        // Every change of the journal is one assignment or push: a panic cannot leave it
        // half-written.
        self.journal.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The `Retry-After` of the route's policy, for an answer given on the runtime's behalf
    /// (the extractor of a transactional store that cannot begin its transaction, say).
    pub fn retry_after(&self) -> Duration {
        self.retry_after
    }

    /// The runtime serving this request.
    pub fn runtime(&self) -> &Idempotency {
        &self.idem
    }

    /// The request's store transaction, begun on first use. Hold the guard while writing; the
    /// runtime ends the transaction after the handler returns, when it stores the response.
    /// The guard holds `Some` unless the store failed to begin it.
    pub async fn transaction(&self) -> Result<TransactionGuard, StoreError> {
        let mut guard = Arc::clone(&self.transaction).lock_owned().await;
        if guard.is_none() {
            *guard = Some(self.idem.begin().await?);
        }
        Ok(guard)
    }

    /// Whether the handler has begun the request's transaction (or holds its guard now).
    pub(crate) fn transaction_begun(&self) -> bool {
        self.transaction
            .try_lock()
            .map_or(true, |transaction| transaction.is_some())
    }

    /// Takes the transaction the handler opened, if it opened one. Waits for the handler's
    /// guard, should the handler have passed it to a task that is still running.
    pub(crate) async fn take_transaction(&self) -> Option<Box<dyn StoreTransaction>> {
        self.transaction.lock().await.take()
    }
}
