//! The completed records of one shard, and which of them to evict when the store is full.
//!
//! A map from key to record, and the records ordered by expiry in a min-heap. When the store is
//! past a bound it evicts, across all shards, the record with the least time left: an expired
//! one first (its result is already forgotten, so taking it is not an early eviction), and then
//! the one that would have expired soonest, Redis's `volatile-ttl`; with one TTL for every
//! route, the oldest. The store reads each shard's soonest expiry without its lock
//! ([`CompletedRecords::soonest_expiry`], published by the store) to find the shard to take
//! from. The record just completed is never the one evicted: the most likely retry of a key
//! comes soon after its first answer.
//!
//! A record removed otherwise (expired on a read, removed by an operator, completed again)
//! leaves its entry in the heap; each entry carries the stamp its record was given, so an
//! entry whose record is gone or newer is skipped, and the heap is rebuilt when such entries
//! outnumber the records. Everything here runs under the shard's lock: the map and the heap
//! never disagree for another thread to see.

use std::{
    cmp::Ordering,
    collections::{BinaryHeap, HashMap},
    time::Duration,
};

use tokio::time::Instant;

use super::{KeyedHash, fill::Counts};
use crate::{fingerprint::Fingerprint, replay::StoredResponse, scope::StoreKey, store::LeaseToken};

/// A completed record, as the store keeps it (by value: cloning it shares the response).
#[derive(Clone)]
pub(super) struct Completed {
    pub(super) fingerprint: Fingerprint,
    /// The token the record was completed under: its holder's repeated completion is `Ok`.
    pub(super) token: LeaseToken,
    pub(super) response: StoredResponse,
    pub(super) ttl: Duration,
    pub(super) expires_at: Instant,
}

impl Completed {
    /// What the record occupies: its response and its entries in the map and the heap.
    pub(super) fn weight(&self) -> u64 {
        (self.response.weight() + ENTRY_BYTES) as u64
    }
}

/// What one completed record costs the store besides its response: its slot in the map (key,
/// record and stamp, at the map's load factor) and its entry in the heap, fitted to the
/// resident memory bench/memory.sh measures.
const ENTRY_BYTES: usize = 530;

/// One shard's completed records.
pub(super) struct CompletedRecords {
    records: HashMap<StoreKey, Slot, KeyedHash>,
    /// The records by expiry, soonest on top, each with the stamp of the record it was pushed
    /// for.
    expiries: BinaryHeap<Due>,
    next_stamp: u64,
}

struct Slot {
    record: Completed,
    stamp: u64,
}

/// A record's place in the heap of expiries, ordered so that the soonest is on top.
struct Due {
    at: Instant,
    stamp: u64,
    key: StoreKey,
}

impl Ord for Due {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed: `BinaryHeap` keeps its greatest on top.
        (other.at, other.stamp).cmp(&(self.at, self.stamp))
    }
}

impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Due {}

impl CompletedRecords {
    pub(super) fn new(hasher: KeyedHash) -> Self {
        Self {
            records: HashMap::with_hasher(hasher),
            expiries: BinaryHeap::new(),
            next_stamp: 0,
        }
    }

    /// The live record of `key`; an expired one is dropped.
    pub(super) fn get(
        &mut self,
        key: &StoreKey,
        now: Instant,
        counts: &Counts,
    ) -> Option<&Completed> {
        if self
            .records
            .get(key)
            .is_some_and(|slot| slot.record.expires_at <= now)
        {
            self.remove(key, counts);
            return None;
        }
        self.records.get(key).map(|slot| &slot.record)
    }

    /// The live record of `key`, leaving an expired one in place (for a caller that holds the
    /// map only to read it).
    pub(super) fn peek(&self, key: &StoreKey, now: Instant) -> Option<&Completed> {
        self.records
            .get(key)
            .map(|slot| &slot.record)
            .filter(|record| record.expires_at > now)
    }

    /// Keeps `record` under `key`, replacing what was there, and drops the shard's records
    /// that have expired.
    pub(super) fn insert(
        &mut self,
        key: StoreKey,
        record: Completed,
        now: Instant,
        counts: &Counts,
    ) {
        let stamp = self.next_stamp;
        self.next_stamp += 1;
        counts.completed(record.weight());
        self.expiries.push(Due {
            at: record.expires_at,
            stamp,
            key,
        });
        if let Some(replaced) = self.records.insert(key, Slot { record, stamp }) {
            counts.left(replaced.record.weight());
        }
        self.drop_expired(now, counts);
    }

    /// Drops the records that have expired, each in O(log n): run at every completion, so that
    /// the shard holds no more than its live records and the ones that expired since.
    fn drop_expired(&mut self, now: Instant, counts: &Counts) {
        while self.expiries.peek().is_some_and(|due| due.at <= now) {
            let due = self.expiries.pop().expect("peeked");
            let live = self
                .records
                .get(&due.key)
                .is_some_and(|slot| slot.stamp == due.stamp);
            if live {
                let slot = self.records.remove(&due.key).expect("looked up");
                counts.left(slot.record.weight());
            }
        }
    }

    /// Removes the record of `key`, live or expired.
    pub(super) fn remove(&mut self, key: &StoreKey, counts: &Counts) -> Option<Completed> {
        let slot = self.records.remove(key)?;
        counts.left(slot.record.weight());
        // Its heap entry stays until it comes to the top or the heap is rebuilt.
        self.rebuild_if_stale();
        Some(slot.record)
    }

    /// When the soonest of the records expires (or a time before it, when that record is
    /// gone): what the store publishes for eviction to find the shard to take from.
    pub(super) fn soonest_expiry(&self) -> Option<Instant> {
        self.expiries.peek().map(|due| due.at)
    }

    /// Evicts the record with the least time left, never `spare` (the record its caller just
    /// completed) unless it expired; whether one was evicted. A live record evicted is
    /// counted as forgotten early.
    pub(super) fn evict_soonest(
        &mut self,
        spare: &StoreKey,
        now: Instant,
        counts: &Counts,
    ) -> bool {
        let mut spared = None;
        let mut evicted = false;
        while let Some(due) = self.expiries.pop() {
            let live = self
                .records
                .get(&due.key)
                .is_some_and(|slot| slot.stamp == due.stamp);
            if !live {
                continue; // removed or replaced since: a stale entry, dropped
            }
            let expired = due.at <= now;
            if due.key == *spare && !expired {
                spared = Some(due);
                continue;
            }
            let slot = self.records.remove(&due.key).expect("looked up");
            let weight = slot.record.weight();
            counts.left(weight);
            if !expired {
                counts.evicted(slot.record.ttl, weight);
            }
            evicted = true;
            break;
        }
        if let Some(due) = spared {
            self.expiries.push(due);
        }
        evicted
    }

    /// Rebuilds the heap without its stale entries once they outnumber the records, so that
    /// it stays within twice the records: amortized O(1).
    fn rebuild_if_stale(&mut self) {
        if self.expiries.len() > 2 * self.records.len() + 64 {
            let records = &self.records;
            self.expiries.retain(|due| {
                records
                    .get(&due.key)
                    .is_some_and(|slot| slot.stamp == due.stamp)
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use http::{HeaderMap, Method, StatusCode};

    use super::*;
    use crate::fingerprint::FingerprintMode;

    fn key() -> StoreKey {
        StoreKey::from_bytes(crate::random::bytes32())
    }

    fn record(ttl: Duration) -> Completed {
        Completed {
            fingerprint: Fingerprint::compute(
                &Method::POST,
                "/",
                &HeaderMap::new(),
                b"",
                FingerprintMode::Raw,
            ),
            token: LeaseToken::random(),
            response: StoredResponse::new(StatusCode::CREATED, &HeaderMap::new(), b"{}")
                .expect("an encodable response"),
            ttl,
            expires_at: Instant::now() + ttl,
        }
    }

    const HOUR: Duration = Duration::from_secs(3600);

    fn shard_of(keys: &[StoreKey], counts: &Counts) -> CompletedRecords {
        let mut shard = CompletedRecords::new(KeyedHash::default());
        for key in keys {
            shard.insert(*key, record(HOUR), Instant::now(), counts);
        }
        shard
    }

    #[tokio::test(start_paused = true)]
    async fn the_record_with_the_least_time_left_goes_first() {
        let counts = Counts::new(100, 1 << 20);
        let mut shard = CompletedRecords::new(KeyedHash::default());
        let [day, minute, hour] = [key(), key(), key()];
        shard.insert(day, record(24 * HOUR), Instant::now(), &counts);
        shard.insert(
            minute,
            record(Duration::from_secs(60)),
            Instant::now(),
            &counts,
        );
        shard.insert(hour, record(HOUR), Instant::now(), &counts);
        let now = Instant::now();
        let nobody = key();
        assert!(shard.evict_soonest(&nobody, now, &counts));
        assert!(shard.peek(&minute, now).is_none());
        assert!(shard.evict_soonest(&nobody, now, &counts));
        assert!(shard.peek(&hour, now).is_none());
        assert!(shard.peek(&day, now).is_some());
        assert_eq!((counts.records(), counts.evicted_early()), (1, 2));
    }

    #[tokio::test(start_paused = true)]
    async fn the_record_spared_is_not_evicted_while_another_can_be() {
        let counts = Counts::new(100, 1 << 20);
        let [a, b] = [key(), key()];
        let mut shard = shard_of(&[a, b], &counts);
        let now = Instant::now();
        assert!(shard.evict_soonest(&a, now, &counts));
        assert!(shard.peek(&a, now).is_some() && shard.peek(&b, now).is_none());
        assert!(
            !shard.evict_soonest(&a, now, &counts),
            "only the spared record is left"
        );
        assert!(shard.peek(&a, now).is_some());
        assert_eq!(
            shard.soonest_expiry(),
            Some(now + HOUR),
            "still in the heap"
        );
        assert_eq!(counts.records(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn an_expired_record_goes_first_and_is_not_counted_as_early() {
        let counts = Counts::new(100, 1 << 20);
        let mut shard = CompletedRecords::new(KeyedHash::default());
        let long = key();
        shard.insert(long, record(HOUR), Instant::now(), &counts);
        let short = key();
        shard.insert(
            short,
            record(Duration::from_secs(1)),
            Instant::now(),
            &counts,
        );
        assert_eq!(
            shard.soonest_expiry(),
            Some(Instant::now() + Duration::from_secs(1))
        );
        tokio::time::advance(Duration::from_secs(2)).await;
        let now = Instant::now();
        assert!(shard.evict_soonest(&key(), now, &counts));
        assert!(shard.peek(&long, now).is_some());
        assert_eq!((counts.records(), counts.evicted_early()), (1, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn a_completion_drops_the_records_of_its_shard_that_expired() {
        let counts = Counts::new(100, 1 << 20);
        let mut shard = CompletedRecords::new(KeyedHash::default());
        for _ in 0..10 {
            shard.insert(
                key(),
                record(Duration::from_secs(1)),
                Instant::now(),
                &counts,
            );
        }
        tokio::time::advance(Duration::from_secs(2)).await;
        shard.insert(key(), record(HOUR), Instant::now(), &counts);
        assert_eq!((counts.records(), counts.evicted_early()), (1, 0));
        assert_eq!(shard.soonest_expiry(), Some(Instant::now() + HOUR));
    }

    #[test]
    fn keys_completed_and_removed_again_and_again_leave_no_trail() {
        let counts = Counts::new(100, 1 << 20);
        let mut shard = CompletedRecords::new(KeyedHash::default());
        let kept = key();
        shard.insert(kept, record(HOUR), Instant::now(), &counts);
        let again = key();
        for _ in 0..10_000 {
            shard.insert(again, record(HOUR), Instant::now(), &counts);
            assert!(shard.remove(&again, &counts).is_some());
        }
        assert!(shard.expiries.len() <= 2 * shard.records.len() + 64);
        assert_eq!(counts.records(), 1);
        assert_eq!(counts.bytes(), record(HOUR).weight());
    }
}
