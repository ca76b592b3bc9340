//! [`IdempotencyContext`]: what a running handler can ask of the runtime.
//!
//! The runtime puts a context into the request's extensions before the handler runs: behind
//! `IdempotencyLayer`, once the claim lets the handler run (a replay makes none); for
//! `#[idempotent]`, before its extractors run, since any of them may read it. A
//! transactional store's extractor uses it to open the transaction in which the handler's
//! writes and the record's completion commit together (see [docs/contract.md](https://github.com/idem-rs/idem/blob/main/docs/contract.md), *Stores*), and
//! the handler's [`Steps`](crate::steps::Steps) write what they did into it.

use std::{
    fmt,
    ops::{Deref, DerefMut},
    pin::pin,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    time::Duration,
};

use tokio::sync::Notify;

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
    /// What the handler shares with the runtime, in one allocation per request.
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    /// The request's transaction, when no guard has it.
    transaction: Mutex<Slot>,
    /// Woken when a guard gives the transaction back.
    returned: Notify,
    /// What the handler's steps did. A handler without steps leaves it empty, and the runtime
    /// locks it twice per request.
    journal: Mutex<Journal>,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared").finish_non_exhaustive()
    }
}

/// Where the request's transaction is.
#[derive(Default)]
enum Slot {
    /// None was begun (or the runtime has taken it to end it).
    #[default]
    Empty,
    /// Begun, and free.
    Idle(Box<dyn StoreTransaction>),
    /// A [`TransactionGuard`] has it (or is beginning it).
    Lent,
}

/// The open transaction of a request, held by the handler while it writes: it derefs to the
/// transaction (`Some` unless the store failed to begin it), and gives it back when dropped.
pub struct TransactionGuard {
    shared: Arc<Shared>,
    transaction: Option<Box<dyn StoreTransaction>>,
}

impl Deref for TransactionGuard {
    type Target = Option<Box<dyn StoreTransaction>>;

    fn deref(&self) -> &Self::Target {
        &self.transaction
    }
}

impl DerefMut for TransactionGuard {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.transaction
    }
}

impl Drop for TransactionGuard {
    fn drop(&mut self) {
        *self.shared.slot() = match self.transaction.take() {
            Some(transaction) => Slot::Idle(transaction),
            None => Slot::Empty,
        };
        self.shared.returned.notify_waiters();
    }
}

impl fmt::Debug for TransactionGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TransactionGuard")
            .field("begun", &self.transaction.is_some())
            .finish()
    }
}

impl Shared {
    fn slot(&self) -> MutexGuard<'_, Slot> {
        // Every change of the slot is one assignment: a panic cannot leave it half-written.
        self.transaction
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes what `take` takes out of the slot, waiting while a guard has the transaction.
    async fn when_returned<T>(&self, mut take: impl FnMut(&mut Slot) -> Option<T>) -> T {
        loop {
            // Registered before the slot is looked at, so that a guard dropped in between
            // still wakes this.
            let mut returned = pin!(self.returned.notified());
            returned.as_mut().enable();
            if let Some(taken) = take(&mut self.slot()) {
                return taken;
            }
            returned.await;
        }
    }
}

impl IdempotencyContext {
    pub(crate) fn new(idem: &Idempotency, retry_after: Duration) -> Self {
        Self {
            idem: idem.clone(),
            retry_after,
            shared: Arc::default(),
        }
    }

    /// The journal of the run's steps. Never held across an `await`.
    pub(crate) fn journal(&self) -> MutexGuard<'_, Journal> {
        // Every change of the journal is one assignment or push: a panic cannot leave it
        // half-written.
        self.shared
            .journal
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
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
    /// The guard holds `Some` unless the store failed to begin it. While a guard is held,
    /// another call waits for it to be dropped.
    pub async fn transaction(&self) -> Result<TransactionGuard, StoreError> {
        let taken = self
            .shared
            .when_returned(|slot| match std::mem::replace(slot, Slot::Lent) {
                Slot::Idle(transaction) => Some(Some(transaction)),
                Slot::Empty => Some(None),
                Slot::Lent => None,
            })
            .await;
        // The guard is made before the transaction begins: if beginning fails, or this future
        // is dropped meanwhile, its drop gives the slot back empty.
        let mut guard = TransactionGuard {
            shared: Arc::clone(&self.shared),
            transaction: taken,
        };
        if guard.transaction.is_none() {
            guard.transaction = Some(self.idem.begin().await?);
        }
        Ok(guard)
    }

    /// Whether the handler has begun the request's transaction (or holds its guard now).
    pub(crate) fn transaction_begun(&self) -> bool {
        !matches!(*self.shared.slot(), Slot::Empty)
    }

    /// Takes the transaction the handler opened, if it opened one. Waits for the handler's
    /// guard, should the handler have passed it to a task that is still running.
    pub(crate) async fn take_transaction(&self) -> Option<Box<dyn StoreTransaction>> {
        self.shared
            .when_returned(|slot| match std::mem::take(slot) {
                Slot::Idle(transaction) => Some(Some(transaction)),
                Slot::Empty => Some(None),
                Slot::Lent => {
                    *slot = Slot::Lent;
                    None
                }
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use std::any::Any;

    use async_trait::async_trait;

    use super::*;
    use crate::{
        MemoryStore,
        replay::StoredResponse,
        scope::StoreKey,
        store::{LeaseToken, Store},
    };

    /// A store whose transactions are markers: what the context does with them is the test.
    #[derive(Debug, Default)]
    struct Transactional(MemoryStore);

    struct Marker;

    #[async_trait]
    impl StoreTransaction for Marker {
        async fn complete(
            self: Box<Self>,
            _: &StoreKey,
            _: LeaseToken,
            _: &StoredResponse,
            _: Duration,
        ) -> Result<(), StoreError> {
            Ok(())
        }

        async fn commit(self: Box<Self>) -> Result<(), StoreError> {
            Ok(())
        }

        async fn rollback(self: Box<Self>) -> Result<(), StoreError> {
            Ok(())
        }

        fn connection(&mut self) -> &mut (dyn Any + Send) {
            self
        }
    }

    #[async_trait]
    impl Store for Transactional {
        async fn claim(
            &self,
            claim: crate::store::Claim<'_>,
        ) -> Result<crate::store::ClaimOutcome, StoreError> {
            self.0.claim(claim).await
        }

        async fn complete(
            &self,
            key: &StoreKey,
            token: LeaseToken,
            response: &StoredResponse,
            ttl: Duration,
        ) -> Result<(), StoreError> {
            self.0.complete(key, token, response, ttl).await
        }

        async fn release(&self, key: &StoreKey, token: LeaseToken) -> Result<(), StoreError> {
            self.0.release(key, token).await
        }

        async fn renew(
            &self,
            key: &StoreKey,
            token: LeaseToken,
            lease: Duration,
        ) -> Result<(), StoreError> {
            self.0.renew(key, token, lease).await
        }

        async fn look_up(&self, key: &StoreKey) -> Result<Option<crate::store::Held>, StoreError> {
            self.0.look_up(key).await
        }

        async fn remove(
            &self,
            key: &StoreKey,
        ) -> Result<Option<crate::store::RecordState>, StoreError> {
            self.0.remove(key).await
        }

        async fn begin(&self) -> Result<Box<dyn StoreTransaction>, StoreError> {
            Ok(Box::new(Marker))
        }
    }

    fn context() -> IdempotencyContext {
        let idem = Idempotency::new(Transactional::default());
        IdempotencyContext::new(&idem, Duration::from_secs(1))
    }

    #[tokio::test]
    async fn a_transaction_begins_once_and_is_taken_by_the_runtime() {
        let context = context();
        assert!(!context.transaction_begun());
        assert!(context.take_transaction().await.is_none(), "none was begun");
        let guard = context.transaction().await.unwrap();
        assert!(guard.is_some());
        assert!(context.transaction_begun(), "while its guard is held");
        drop(guard);
        assert!(context.transaction_begun(), "and after");
        assert!(context.take_transaction().await.is_some());
        assert!(!context.transaction_begun(), "taken");
    }

    #[tokio::test]
    async fn the_runtime_waits_for_a_guard_still_held_by_a_task() {
        let context = context();
        let guard = context.transaction().await.unwrap();
        let (handed, held) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let _guard = guard;
            let _ = held.await;
        });
        let taking = tokio::spawn({
            let context = context.clone();
            async move { context.take_transaction().await.is_some() }
        });
        tokio::task::yield_now().await;
        assert!(!taking.is_finished(), "taken while a task holds the guard");
        handed.send(()).unwrap();
        task.await.unwrap();
        assert!(
            taking.await.unwrap(),
            "the transaction, once the task gave it back"
        );
    }

    #[tokio::test]
    async fn a_second_guard_waits_for_the_first() {
        let context = context();
        let first = context.transaction().await.unwrap();
        let second = tokio::spawn({
            let context = context.clone();
            async move { context.transaction().await.unwrap().is_some() }
        });
        tokio::task::yield_now().await;
        assert!(!second.is_finished());
        drop(first);
        assert!(second.await.unwrap(), "the same transaction, handed on");
    }
}
