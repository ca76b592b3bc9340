//! [`RunnerStats`]: what a runner did with its messages, counted where each message is
//! settled and read by whoever holds a clone.

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

/// What a runner did with its messages so far. Cheap to clone; clones share the counters.
#[derive(Clone, Debug, Default)]
pub struct RunnerStats {
    counters: Arc<Counters>,
}

#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) completed: AtomicU64,
    pub(super) duplicates: AtomicU64,
    pub(super) deferred: AtomicU64,
    pub(super) retried: AtomicU64,
    pub(super) ended: AtomicU64,
    pub(super) unsettled: AtomicU64,
}

impl RunnerStats {
    /// Messages whose handler ran and whose result was stored, then acknowledged.
    pub fn completed(&self) -> u64 {
        self.counters.completed.load(Ordering::SeqCst)
    }

    /// Messages whose key was completed before: acknowledged without running the handler.
    pub fn duplicates(&self) -> u64 {
        self.counters.duplicates.load(Ordering::SeqCst)
    }

    /// Deliveries whose key was in flight elsewhere: handed back to be delivered later.
    pub fn deferred(&self) -> u64 {
        self.counters.deferred.load(Ordering::SeqCst)
    }

    /// Deliveries handed back after a failure that may pass (the handler's, or the store's).
    pub fn retried(&self) -> u64 {
        self.counters.retried.load(Ordering::SeqCst)
    }

    /// Messages ended without being handled: a poison message, a terminal failure, a failure
    /// on the last attempt, a message without a key.
    pub fn ended(&self) -> u64 {
        self.counters.ended.load(Ordering::SeqCst)
    }

    /// Settlements (ack, redelivery, end) the broker did not confirm.
    pub fn unsettled(&self) -> u64 {
        self.counters.unsettled.load(Ordering::SeqCst)
    }

    pub(super) fn count(&self, counter: impl Fn(&Counters) -> &AtomicU64) {
        counter(&self.counters).fetch_add(1, Ordering::SeqCst);
    }
}
