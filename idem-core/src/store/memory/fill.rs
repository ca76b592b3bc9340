//! How full a [`MemoryStore`](super::MemoryStore) is, and what it forgot early: the records it
//! holds, their bytes, the claims in flight, and the completed records evicted before their
//! TTL because the store was at its bound.
//!
//! An early eviction is a forgotten result: a retry of its key runs the operation again. The
//! store counts each one (a record its bound evicted while its TTL ran), and says so in the log at `warn`, at once for the first and then at most once a
//! minute, with the completion rate it saw, the TTL of what it evicted, and the bound that
//! would hold it: records completed per second × TTL. With the feature `metrics` the counter
//! is `idem_memory_evicted_early_total`, and the gauges `idem_memory_records`,
//! `idem_memory_bytes` and `idem_memory_in_flight` are set from the store's calls at most once
//! a second, and whenever [`MemoryStore::fill`](super::MemoryStore::fill) is called (before a
//! scrape, for exact figures).

use std::{
    sync::{
        Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use tokio::time::Instant;

/// The longest time between two warnings about early evictions.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// How often the store's calls set the gauges, at most.
#[cfg(feature = "metrics")]
const GAUGES_EVERY: Duration = Duration::from_secs(1);

/// How full a memory store is, as [`MemoryStore::fill`](super::MemoryStore::fill) reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Fill {
    /// Completed records held.
    pub records: u64,
    /// What they occupy, in bytes: each record's
    /// [`StoredResponse::weight`](crate::replay::StoredResponse::weight) and its entry in the
    /// store, the heap the bound `max_bytes` keeps them under.
    pub bytes: u64,
    /// Claims in flight (never evicted, and not bounded: as many as requests running).
    pub in_flight: u64,
    /// Completed records evicted before their TTL since the store was built.
    pub evicted_early: u64,
    /// The store's bound on records.
    pub max_entries: u64,
    /// The store's bound on bytes.
    pub max_bytes: u64,
}

/// What the store counts of itself, shared by its clones and its shards.
pub(super) struct Counts {
    pub(super) max_entries: u64,
    pub(super) max_bytes: u64,
    /// Completed records inserted since the store was built.
    completions: AtomicU64,
    /// The completed records held, and what they weigh: added when one is stored, taken off
    /// when it leaves (evicted, expired, removed or replaced). The bounds hold these.
    records: AtomicU64,
    bytes: AtomicU64,
    /// Records evicted before their TTL, and what they weighed, since the store was built.
    evicted_early: AtomicU64,
    evicted_bytes: AtomicU64,
    /// The longest TTL of a record evicted early since the last warning, in ms.
    evicted_ttl_ms: AtomicU64,
    /// The count of early evictions the last warning covered: a completion compares the
    /// count with it, one atomic load, and looks at the clock only when they differ.
    warned_up_to: AtomicU64,
    warned: Mutex<Warned>,
    /// When the gauges were last set, in ms from `started`.
    #[cfg(feature = "metrics")]
    gauges_at_ms: AtomicU64,
    #[cfg(feature = "metrics")]
    started: Instant,
}

/// The figures of the last warning, or of the store's start before the first.
struct Warned {
    at: Instant,
    completions: u64,
    evicted: u64,
    evicted_bytes: u64,
    /// Whether a warning was given yet: the first comes at once.
    given: bool,
}

impl Counts {
    pub(super) fn new(max_entries: u64, max_bytes: u64) -> Self {
        let started = Instant::now();
        Self {
            max_entries,
            max_bytes,
            completions: AtomicU64::new(0),
            records: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            evicted_early: AtomicU64::new(0),
            evicted_bytes: AtomicU64::new(0),
            evicted_ttl_ms: AtomicU64::new(0),
            warned_up_to: AtomicU64::new(0),
            warned: Mutex::new(Warned {
                at: started,
                completions: 0,
                evicted: 0,
                evicted_bytes: 0,
                given: false,
            }),
            #[cfg(feature = "metrics")]
            gauges_at_ms: AtomicU64::new(0),
            #[cfg(feature = "metrics")]
            started,
        }
    }

    /// A completed record weighing `weight` left the store, for whatever reason.
    pub(super) fn left(&self, weight: u64) {
        self.records.fetch_sub(1, Ordering::Relaxed);
        self.bytes.fetch_sub(weight, Ordering::Relaxed);
    }

    /// The completed records held.
    pub(super) fn records(&self) -> u64 {
        self.records.load(Ordering::Relaxed)
    }

    /// What the records held weigh.
    pub(super) fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Whether the records held are past either bound, and one must be evicted.
    pub(super) fn over_bound(&self) -> bool {
        self.records() > self.max_entries || self.bytes() > self.max_bytes
    }

    /// A completed record was evicted because the store was full while its TTL ran (and has
    /// left: [`Counts::left`] was called for it too).
    pub(super) fn evicted(&self, ttl: Duration, weight: u64) {
        self.evicted_early.fetch_add(1, Ordering::Relaxed);
        self.evicted_bytes.fetch_add(weight, Ordering::Relaxed);
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        self.evicted_ttl_ms.fetch_max(ttl_ms, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        metrics::counter!("idem_memory_evicted_early_total").increment(1);
    }

    /// A completed record weighing `weight` was stored. Warns if records were evicted early
    /// since the last warning and the last one is a minute old (or there was none).
    pub(super) fn completed(&self, weight: u64) {
        self.completions.fetch_add(1, Ordering::Relaxed);
        self.records.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(weight, Ordering::Relaxed);
        let evicted = self.evicted_early.load(Ordering::Relaxed);
        if evicted != self.warned_up_to.load(Ordering::Relaxed) {
            self.maybe_warn(evicted);
        }
    }

    pub(super) fn evicted_early(&self) -> u64 {
        self.evicted_early.load(Ordering::Relaxed)
    }

    /// Whether the gauges are due to be set again (at most once a second); claims it if so.
    #[cfg(feature = "metrics")]
    pub(super) fn gauges_due(&self) -> bool {
        let now = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let last = self.gauges_at_ms.load(Ordering::Relaxed);
        let every = GAUGES_EVERY.as_millis() as u64;
        (last == 0 || now >= last + every)
            && self
                .gauges_at_ms
                .compare_exchange(last, now.max(1), Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    fn maybe_warn(&self, evicted: u64) {
        // A warning in progress elsewhere covers this one.
        let Ok(mut warned) = self.warned.try_lock() else {
            return;
        };
        let now = Instant::now();
        if warned.given && now < warned.at + WARN_EVERY {
            return;
        }
        let completions = self.completions.load(Ordering::Relaxed);
        let evicted_bytes = self.evicted_bytes.load(Ordering::Relaxed);
        let ttl = Duration::from_millis(self.evicted_ttl_ms.swap(0, Ordering::Relaxed));
        let advice = Advice {
            evicted: evicted - warned.evicted,
            evicted_bytes: evicted_bytes - warned.evicted_bytes,
            completions: completions - warned.completions,
            over: now.saturating_duration_since(warned.at),
            ttl,
        };
        advice.warn(self);
        *warned = Warned {
            at: now,
            completions,
            evicted,
            evicted_bytes,
            given: true,
        };
        self.warned_up_to.store(evicted, Ordering::Relaxed);
    }

    /// The last warning's figures, for tests.
    #[cfg(test)]
    fn warnings_given(&self) -> bool {
        self.warned.lock().unwrap().given
    }
}

/// What a warning says: what was evicted early over a span of time, and the bound that would
/// have kept it.
struct Advice {
    evicted: u64,
    evicted_bytes: u64,
    completions: u64,
    over: Duration,
    ttl: Duration,
}

impl Advice {
    /// Records per second × TTL: the records completed within one TTL, which the store must
    /// hold to forget none before its time.
    fn needed_entries(&self) -> u64 {
        let per_second = self.completions as f64 / self.over.as_secs_f64().max(1.0);
        (per_second * self.ttl.as_secs_f64()).ceil() as u64
    }

    /// The bytes those records weigh, at the weight of the records evicted.
    fn needed_bytes(&self) -> u64 {
        let weight = self.evicted_bytes / self.evicted.max(1);
        self.needed_entries().saturating_mul(weight)
    }

    fn warn(&self, counts: &Counts) {
        let per_second = self.completions as f64 / self.over.as_secs_f64().max(1.0);
        // A tenth of a record a second says enough.
        let per_second = (per_second * 10.0).round() / 10.0;
        tracing::warn!(
            evicted = self.evicted,
            over_secs = self.over.as_secs(),
            completed_per_sec = per_second,
            ttl_secs = self.ttl.as_secs(),
            max_entries = counts.max_entries,
            max_bytes = counts.max_bytes,
            needed_entries = self.needed_entries(),
            needed_bytes = self.needed_bytes(),
            "idempotency: the memory store evicted {} completed records before their TTL, so \
             retries of their keys will run again: it is full (bounds: {} records, {} bytes). \
             It completes about {per_second:.1} records a second and keeps them {}s: to hold \
             them, size it for records per second × TTL, about {} records \
             (MemoryStoreBuilder::max_entries) and {} bytes (max_bytes); or shorten the TTL, or \
             use a shared store",
            self.evicted,
            counts.max_entries,
            counts.max_bytes,
            self.ttl.as_secs(),
            self.needed_entries(),
            self.needed_bytes(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_advice_is_records_per_second_times_the_ttl() {
        let advice = Advice {
            evicted: 10,
            evicted_bytes: 10 * 1_500,
            completions: 600,
            over: Duration::from_secs(60),
            ttl: Duration::from_secs(24 * 3600),
        };
        assert_eq!(advice.needed_entries(), 864_000);
        assert_eq!(advice.needed_bytes(), 864_000 * 1_500);
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_early_eviction_warns_at_once_and_then_once_a_minute() {
        let counts = Counts::new(50, 1 << 20);
        counts.completed(1_000);
        assert!(!counts.warnings_given(), "nothing was evicted");
        counts.evicted(Duration::from_secs(3600), 1_000);
        counts.completed(1_000);
        assert!(counts.warnings_given());
        let first = counts.warned.lock().unwrap().at;
        counts.evicted(Duration::from_secs(3600), 1_000);
        counts.completed(1_000);
        assert_eq!(counts.warned.lock().unwrap().at, first, "within the minute");
        tokio::time::advance(WARN_EVERY).await;
        counts.completed(1_000);
        assert!(counts.warned.lock().unwrap().at > first, "a minute later");
        assert_eq!(counts.evicted_early(), 2);
    }
}
