//! [`MemoryStore`]: the embedded default, for a service that runs as one process.
//!
//! ```
//! use idem::{Idempotency, MemoryStore};
//!
//! let store = MemoryStore::builder()
//!     .max_entries(50_000)
//!     .max_bytes(32 * 1024 * 1024)
//!     .build();
//! let idem = Idempotency::new(store);
//! # drop(idem);
//! ```
//!
//! # How it keeps the store rules
//!
//! The keys are split into 64 shards, each behind a mutex, and a shard holds its keys' records
//! in flight and completed records in two maps. A claim, a completion, a renewal and a release
//! of one key all run under its shard's lock, so each is one atomic step: a completion moves a
//! record from one map to the other, and a claim never sees neither or both.
//!
//! - **In flight**: never evicted. Their number is bounded by the requests running at once,
//!   and an eviction would let a duplicate run.
//! - **Completed**: each with its own TTL, bounded together by entries and by bytes. The byte
//!   bound counts what a record really occupies (see [`MemoryStoreBuilder::max_bytes`]). When
//!   the store is past a bound, a completion evicts the records with the least time left, in
//!   whichever shard they are: expired ones first, then the ones that would expire soonest
//!   (Redis's `volatile-ttl`; with one TTL, the oldest). The record just completed is never
//!   the one evicted. An evicted live record is forgotten early: a retry of its key would run
//!   again.
//!
//! # Sizing
//!
//! A store forgets nothing early when it can hold every record completed within one TTL:
//!
//! - `max_entries` ≥ keyed requests per second × TTL in seconds: 5 payments a second kept
//!   24 h are 432,000 records, more than the default 100,000, which holds 24 h of about 1.2
//!   a second (or 28 h of one a second);
//! - `max_bytes` ≥ that × the weight of a record: about 710 bytes for a small JSON answer
//!   (one header, 100 bytes of body); a larger one weighs its body and headers, a sixteenth
//!   more, and about 560 bytes ([`StoredResponse::weight`] plus the store's entry); 432,000
//!   small records need about 300 MiB. The weight is what the record may occupy at worst
//!   (the store's maps grow by doubling); the resident memory of small records is nearer
//!   500 bytes each.
//!
//! A store past that forgets records before their time, and says so: it counts each
//! ([`Fill::evicted_early`], `idem_memory_evicted_early_total` with the feature `metrics`) and
//! warns in the log, at once and then at most once a minute, with the rate it saw, the TTL and
//! the bound that would hold them ([`fill`] has the details). [`MemoryStore::fill`] tells how
//! full it is; a service whose rate × TTL does not fit in its memory wants a shared store
//! (Redis, PostgreSQL), or a shorter TTL
//! ([`IdempotencyBuilder::max_ttl`](crate::IdempotencyBuilder::max_ttl)).
//!
//! Leases and TTLs are checked on tokio's clock, so tests can drive them with a paused clock.
//! Records do not survive a restart, and other processes do not see them: for several
//! instances, use a shared store.

use std::{
    collections::HashMap,
    fmt,
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

mod completed;
pub mod fill;

use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use tokio::time::Instant;

pub use self::fill::Fill;
use self::{
    completed::{Completed, CompletedRecords},
    fill::Counts,
};

use super::{
    Claim, ClaimOutcome, LeaseToken, Store, StoreError,
    held::{CompletedRecord, Held, InFlightRecord, RecordState},
    operation::{Progress, RecordedStep, StepSupport},
};
use crate::{fingerprint::Fingerprint, replay::StoredResponse, scope::StoreKey};

const SHARDS: usize = 64;
// `make_room` marks the shards it skips in the bits of a `u64`.
const _: () = assert!(SHARDS <= 64);

/// The embedded, in-process store: records in a map split into shards, completed ones bounded
/// by entries and bytes.
#[derive(Clone)]
pub struct MemoryStore {
    records: Arc<Records>,
}

/// The records, shared by the store's clones.
struct Records {
    shards: [Mutex<Shard>; SHARDS],
    /// Each shard's soonest expiry of a completed record, in ms on `clock` (`u64::MAX` for
    /// none), published under its lock and read without it: where to find an expired record.
    soonest_expiry: [AtomicU64; SHARDS],
    clock: Clock,
    counts: Counts,
}

struct Shard {
    in_flight: HashMap<StoreKey, InFlight, KeyedHash>,
    /// The size of `in_flight` after its last sweep of expired records; the next sweep runs at
    /// twice that.
    swept_at: usize,
    completed: CompletedRecords,
}

struct InFlight {
    fingerprint: Fingerprint,
    token: LeaseToken,
    /// When the key was first claimed; a takeover keeps it (store rule 14).
    since: Instant,
    lease_until: Instant,
    expires_at: Instant,
    /// The steps that ended, for an operation of several steps (empty, unallocated, for the
    /// others), and how often the operation was suspended.
    steps: Vec<RecordedStep>,
    suspensions: u32,
}

impl MemoryStore {
    /// The default bound on the number of completed records kept.
    pub const DEFAULT_MAX_ENTRIES: u64 = 100_000;
    /// The default bound on the bytes of completed records kept: 64 MiB.
    pub const DEFAULT_MAX_BYTES: u64 = 64 * 1024 * 1024;

    /// A builder to set the store's bounds.
    pub fn builder() -> MemoryStoreBuilder {
        MemoryStoreBuilder {
            max_entries: Self::DEFAULT_MAX_ENTRIES,
            max_bytes: Self::DEFAULT_MAX_BYTES,
        }
    }

    /// The number of completed records kept now.
    pub fn completed_records(&self) -> u64 {
        self.records.counts.records()
    }

    /// How full the store is, and how many records it evicted before their TTL: what to size
    /// it by (see [`fill`] and [docs/observability.md](https://github.com/idem-rs/idem/blob/main/docs/observability.md)).
    /// With the feature `metrics` it also sets the store's gauges, which a service calls before
    /// each scrape for exact figures.
    ///
    /// ```
    /// use idem::MemoryStore;
    ///
    /// let store = MemoryStore::builder().max_entries(50_000).build();
    /// let fill = store.fill();
    /// assert_eq!((fill.records, fill.in_flight, fill.evicted_early), (0, 0, 0));
    /// assert_eq!(fill.max_entries, 50_000);
    /// ```
    pub fn fill(&self) -> Fill {
        let fill = self.fill_now();
        #[cfg(feature = "metrics")]
        set_gauges(&fill);
        fill
    }

    /// The figures as they stand.
    fn fill_now(&self) -> Fill {
        let in_flight = (0..SHARDS)
            .map(|index| self.lock(index).in_flight.len() as u64)
            .sum();
        let counts = &self.records.counts;
        Fill {
            records: counts.records(),
            bytes: counts.bytes(),
            in_flight,
            evicted_early: counts.evicted_early(),
            max_entries: counts.max_entries,
            max_bytes: counts.max_bytes,
        }
    }

    /// Sets the gauges from a call of the store's, at most once a second.
    fn observe(&self) {
        #[cfg(feature = "metrics")]
        if self.records.counts.gauges_due() {
            set_gauges(&self.fill_now());
        }
    }

    fn shard(&self, key: &StoreKey) -> MutexGuard<'_, Shard> {
        self.lock(shard_index(key))
    }

    fn lock(&self, index: usize) -> MutexGuard<'_, Shard> {
        // A panic while holding a shard lock cannot leave a record half-written (every
        // mutation is one map operation, or a record moved from one map of the shard to the
        // other with nothing between that can panic), so a poisoned lock is safe to keep using.
        self.records.shards[index]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Publishes the soonest expiry of shard `index`'s completed records, under its lock.
    fn publish(&self, index: usize, shard: &Shard) {
        let at = shard
            .completed
            .soonest_expiry()
            .map_or(u64::MAX, |at| self.records.clock.millis(at));
        self.records.soonest_expiry[index].store(at, Ordering::Relaxed);
    }

    /// Evicts completed records until the store is within its bounds, each time the one with
    /// the least time left in any shard (by what the shards published): expired ones first,
    /// then the ones that would expire soonest; never the record `spare` just completed.
    /// Called with no shard lock held: it takes them one at a time.
    fn make_room(&self, spare: &StoreKey) {
        let counts = &self.records.counts;
        // Shards found with nothing to evict but `spare`, or nothing at all (others evicted
        // from them meanwhile), one bit each: skipped for the rest of this call.
        let mut fruitless: u64 = 0;
        while counts.over_bound() {
            let Some(index) = self.soonest_shard(fruitless) else {
                return;
            };
            let mut shard = self.lock(index);
            let evicted = shard.completed.evict_soonest(spare, Instant::now(), counts);
            self.publish(index, &shard);
            if !evicted {
                fruitless |= 1 << index;
            }
        }
    }

    /// The shard whose published soonest expiry is the soonest, among those not `skipped`.
    fn soonest_shard(&self, skipped: u64) -> Option<usize> {
        self.records
            .soonest_expiry
            .iter()
            .enumerate()
            .filter(|(index, _)| skipped & (1 << index) == 0)
            .map(|(index, at)| (at.load(Ordering::Relaxed), index))
            .filter(|(at, _)| *at != u64::MAX)
            .min()
            .map(|(_, index)| index)
    }
}

/// The shard of `key`: its first byte, uniform since the key is a digest.
fn shard_index(key: &StoreKey) -> usize {
    usize::from(key.as_bytes()[0]) % SHARDS
}

#[cfg(feature = "metrics")]
fn set_gauges(fill: &Fill) {
    metrics::gauge!("idem_memory_records").set(fill.records as f64);
    metrics::gauge!("idem_memory_bytes").set(fill.bytes as f64);
    metrics::gauge!("idem_memory_in_flight").set(fill.in_flight as f64);
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::builder().build()
    }
}

impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("completed_records", &self.completed_records())
            .finish_non_exhaustive()
    }
}

/// Sets the bounds of a [`MemoryStore`].
#[derive(Clone, Debug)]
#[must_use]
pub struct MemoryStoreBuilder {
    max_entries: u64,
    max_bytes: u64,
}

impl MemoryStoreBuilder {
    /// The most completed records kept (100,000 by default).
    pub fn max_entries(mut self, entries: u64) -> Self {
        self.max_entries = entries.max(1);
        self
    }

    /// The most heap the completed records may occupy (64 MiB by default): each weighs
    /// [`StoredResponse::weight`] plus what its entry in the store costs, both fitted to
    /// measured memory, so this is the real bound on what the records hold, not a nominal one.
    /// A small JSON answer (one header, 100 bytes of body) weighs about 710 bytes: 64 MiB keeps
    /// about 94,000 of them; the entry bound keeps the count under `max_entries` whatever their
    /// size.
    ///
    /// The weight counts the process's resident set, which grows by a little more than the
    /// records' heap (the allocator's own bookkeeping, about 5% to 20% by record size on
    /// glibc); [docs/benchmarks.md](https://github.com/idem-rs/idem/blob/main/docs/benchmarks.md), *Memory*, has the figures.
    pub fn max_bytes(mut self, bytes: u64) -> Self {
        self.max_bytes = bytes.max(1);
        self
    }

    /// Builds the store.
    pub fn build(self) -> MemoryStore {
        // One hasher for every map: its seeds are drawn once per store.
        let hasher = KeyedHash::default();
        MemoryStore {
            records: Arc::new(Records {
                shards: std::array::from_fn(|_| {
                    Mutex::new(Shard {
                        in_flight: HashMap::with_hasher(hasher),
                        swept_at: 0,
                        completed: CompletedRecords::new(hasher),
                    })
                }),
                soonest_expiry: std::array::from_fn(|_| AtomicU64::new(u64::MAX)),
                clock: Clock::start(),
                counts: Counts::new(self.max_entries, self.max_bytes),
            }),
        }
    }
}

/// Hashes a [`StoreKey`]'s eight-byte prefix (all its `Hash` writes) with a keyed mix.
///
/// The key is already a SHA-256 digest, so SipHash over it is wasted work on every lookup.
/// Its bytes still derive from client input, though: the mix is keyed with per-store random
/// seeds so that nobody can grind keys into one hash bucket.
#[derive(Clone, Copy)]
struct KeyedHash {
    seeds: [u64; 2],
}

impl Default for KeyedHash {
    fn default() -> Self {
        Self {
            seeds: [crate::random::u64(), crate::random::u64() | 1],
        }
    }
}

impl std::hash::BuildHasher for KeyedHash {
    type Hasher = KeyedHasher;

    fn build_hasher(&self) -> KeyedHasher {
        KeyedHasher {
            seeds: self.seeds,
            value: 0,
        }
    }
}

struct KeyedHasher {
    seeds: [u64; 2],
    value: u64,
}

impl std::hash::Hasher for KeyedHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Only reached through a `Hash` other than StoreKey's; fold the bytes in.
        for &byte in bytes {
            self.value = self.value.rotate_left(8) ^ u64::from(byte);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.value ^= value;
    }

    fn finish(&self) -> u64 {
        // A folded multiply, as in foldhash: every input bit reaches every output bit.
        let product = u128::from(self.value ^ self.seeds[0]) * u128::from(self.seeds[1]);
        (product as u64) ^ ((product >> 64) as u64)
    }
}

impl Shard {
    /// The live in-flight record of `key`, dropping it first if it has expired.
    fn live(&mut self, key: &StoreKey, now: Instant) -> Option<&mut InFlight> {
        if self
            .in_flight
            .get(key)
            .is_some_and(|record| record.expires_at <= now)
        {
            self.in_flight.remove(key);
        }
        self.in_flight.get_mut(key)
    }

    /// The record held under `token`, if any.
    fn held(
        &mut self,
        key: &StoreKey,
        token: LeaseToken,
        now: Instant,
    ) -> Result<&mut InFlight, StoreError> {
        self.live(key, now)
            .filter(|record| record.token == token)
            .ok_or(StoreError::LeaseLost)
    }

    fn insert(&mut self, key: StoreKey, record: InFlight, now: Instant) {
        self.in_flight.insert(key, record);
        // Records are removed when completed or released; this sweep only reclaims the few
        // whose holder never came back (a task aborted at shutdown), at amortized O(1).
        if self.in_flight.len() > (2 * self.swept_at).max(64) {
            self.in_flight.retain(|_, record| record.expires_at > now);
            self.swept_at = self.in_flight.len();
        }
    }
}

/// The calls, answered at once: nothing here waits.
impl MemoryStore {
    fn claim_sync(&self, claim: &Claim<'_>) -> ClaimOutcome {
        let now = Instant::now();
        let mut shard = self.shard(claim.key);
        let counts = &self.records.counts;
        if let Some(done) = shard.completed.get(claim.key, now, counts) {
            return if done.fingerprint == *claim.fingerprint {
                ClaimOutcome::Completed(done.response.clone())
            } else {
                ClaimOutcome::Mismatch {
                    stored_algorithm: Some(done.fingerprint.algorithm()),
                }
            };
        }
        let fresh = InFlight {
            fingerprint: *claim.fingerprint,
            token: claim.token,
            since: now,
            lease_until: now + claim.lease,
            expires_at: now + claim.in_flight_lifetime(),
            steps: Vec::new(),
            suspensions: 0,
        };
        match shard.live(claim.key, now) {
            None => {
                shard.insert(*claim.key, fresh, now);
                ClaimOutcome::Claimed
            }
            Some(record) if record.fingerprint != *claim.fingerprint => ClaimOutcome::Mismatch {
                stored_algorithm: Some(record.fingerprint.algorithm()),
            },
            Some(record) if record.lease_until > now => ClaimOutcome::InFlight,
            Some(record) if record.steps.is_empty() && record.suspensions == 0 => {
                // The holder's lease lapsed: take over, fencing it out with the new token.
                *record = InFlight {
                    since: record.since,
                    ..fresh
                };
                ClaimOutcome::Claimed
            }
            Some(record) => {
                // An operation that stopped part-way: take over and resume it, keeping its
                // steps and its expiry (rule 12).
                record.token = claim.token;
                record.lease_until = now + claim.lease;
                record.expires_at = record.expires_at.max(now + claim.lease);
                ClaimOutcome::Resumed(Progress {
                    steps: record.steps.clone(),
                    suspensions: record.suspensions,
                })
            }
        }
    }

    fn complete_sync(
        &self,
        key: &StoreKey,
        token: LeaseToken,
        response: &StoredResponse,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let now = Instant::now();
        let mut shard = self.shard(key);
        let fingerprint = match shard.held(key, token, now) {
            Ok(record) => record.fingerprint,
            Err(lost) => {
                // The holder's own completion, sent again after its first answer was lost.
                let repeated = shard
                    .completed
                    .peek(key, now)
                    .is_some_and(|record| record.token == token);
                return if repeated { Ok(()) } else { Err(lost) };
            }
        };
        let record = Completed {
            fingerprint,
            token,
            // Shares the runtime's record: nothing is copied.
            response: response.clone(),
            ttl,
            expires_at: now + ttl,
        };
        shard.in_flight.remove(key);
        shard
            .completed
            .insert(*key, record, now, &self.records.counts);
        self.publish(shard_index(key), &shard);
        drop(shard);
        self.make_room(key);
        Ok(())
    }
}

/// The operator's calls (store rules 14 and 15), under the key's shard lock like the others.
impl MemoryStore {
    fn look_up_sync(&self, key: &StoreKey) -> Option<Held> {
        let now = Instant::now();
        let clock = self.records.clock;
        let at = clock.wall(now);
        let mut shard = self.shard(key);
        if let Some(done) = shard.completed.peek(key, now) {
            return Some(Held::Completed(CompletedRecord {
                status: done.response.status(),
                stored_at: Some(clock.wall(done.expires_at - done.ttl)),
                expires_at: clock.wall(done.expires_at),
                bytes: done.response.as_bytes().len() as u64,
                body_kept: done.response.body().is_some(),
                at,
            }));
        }
        let record = shard.live(key, now)?;
        Some(Held::InFlight(InFlightRecord {
            since: Some(clock.wall(record.since)),
            lease_expires_at: clock.wall(record.lease_until),
            expires_at: clock.wall(record.expires_at),
            steps: record
                .steps
                .iter()
                .map(|step| step.name().to_owned())
                .collect(),
            suspensions: record.suspensions,
            // The runtime resumes an operation of this store itself.
            resumes_at: None,
            at,
        }))
    }

    fn remove_sync(&self, key: &StoreKey) -> Option<RecordState> {
        let now = Instant::now();
        let mut shard = self.shard(key);
        let completed = shard
            .completed
            .remove(key, &self.records.counts)
            .filter(|record| record.expires_at > now)
            .map(|_| RecordState::Completed);
        let in_flight = shard
            .in_flight
            .remove(key)
            .filter(|record| record.expires_at > now)
            .map(|_| RecordState::InFlight);
        completed.or(in_flight)
    }
}

/// tokio's clock as wall-clock time: the memory store keeps leases and TTLs on tokio's clock,
/// and a look-up answers times an operator can read. One reading of both clocks, taken when
/// the store is built, maps the one onto the other, so that a time reads the same in every
/// look-up.
#[derive(Clone, Copy)]
struct Clock {
    instant: Instant,
    wall: std::time::SystemTime,
}

impl Clock {
    fn start() -> Self {
        Self {
            instant: Instant::now(),
            wall: std::time::SystemTime::now(),
        }
    }

    /// `instant` in whole milliseconds since the store was built (0 for any time before).
    fn millis(&self, instant: Instant) -> u64 {
        u64::try_from(instant.saturating_duration_since(self.instant).as_millis())
            .unwrap_or(u64::MAX)
    }

    fn wall(&self, instant: Instant) -> std::time::SystemTime {
        if instant >= self.instant {
            self.wall + (instant - self.instant)
        } else {
            self.wall - (self.instant - instant)
        }
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn claim(&self, claim: Claim<'_>) -> Result<ClaimOutcome, StoreError> {
        let outcome = self.claim_sync(&claim);
        self.observe();
        Ok(outcome)
    }

    fn claim_now(&self, claim: Claim<'_>) -> Option<Result<ClaimOutcome, StoreError>> {
        let outcome = self.claim_sync(&claim);
        self.observe();
        Some(Ok(outcome))
    }

    async fn complete(
        &self,
        key: &StoreKey,
        token: LeaseToken,
        response: &StoredResponse,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.complete_sync(key, token, response, ttl)
    }

    fn complete_now(
        &self,
        key: &StoreKey,
        token: LeaseToken,
        response: &StoredResponse,
        ttl: Duration,
    ) -> Option<Result<(), StoreError>> {
        Some(self.complete_sync(key, token, response, ttl))
    }

    async fn release(&self, key: &StoreKey, token: LeaseToken) -> Result<(), StoreError> {
        let now = Instant::now();
        let mut shard = self.shard(key);
        shard.held(key, token, now)?;
        shard.in_flight.remove(key);
        Ok(())
    }

    async fn renew(
        &self,
        key: &StoreKey,
        token: LeaseToken,
        lease: Duration,
    ) -> Result<(), StoreError> {
        let now = Instant::now();
        let mut shard = self.shard(key);
        let record = shard.held(key, token, now)?;
        record.lease_until = now + lease;
        record.expires_at = record.expires_at.max(now + lease);
        Ok(())
    }

    /// Steps live with the in-flight record, in this process; the runtime resumes an
    /// abandoned operation itself.
    fn step_support(&self) -> StepSupport {
        StepSupport::Steps
    }

    async fn record_step(
        &self,
        key: &StoreKey,
        token: LeaseToken,
        index: usize,
        step: &RecordedStep,
    ) -> Result<(), StoreError> {
        let now = Instant::now();
        let mut shard = self.shard(key);
        let record = shard.held(key, token, now)?;
        match record.steps.get(index) {
            // The holder's own step, sent again.
            Some(recorded) if recorded == step => Ok(()),
            None if record.steps.len() == index => {
                record.steps.push(step.clone());
                Ok(())
            }
            _ => Err(StoreError::LeaseLost),
        }
    }

    async fn suspend(
        &self,
        key: &StoreKey,
        token: LeaseToken,
        _resume_in: Option<Duration>,
    ) -> Result<(), StoreError> {
        let now = Instant::now();
        let mut shard = self.shard(key);
        let record = shard.held(key, token, now)?;
        record.lease_until = now;
        record.suspensions = record.suspensions.saturating_add(1);
        Ok(())
    }

    async fn look_up(&self, key: &StoreKey) -> Result<Option<Held>, StoreError> {
        Ok(self.look_up_sync(key))
    }

    async fn remove(&self, key: &StoreKey) -> Result<Option<RecordState>, StoreError> {
        Ok(self.remove_sync(key))
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use http::{HeaderMap, Method, StatusCode};

    use super::*;
    use crate::fingerprint::FingerprintMode;

    fn fingerprint() -> Fingerprint {
        Fingerprint::compute(
            &Method::POST,
            "/",
            &HeaderMap::new(),
            b"",
            FingerprintMode::Raw,
        )
    }

    /// Completes `count` distinct keys with empty responses kept for `ttl`.
    async fn flood_with_ttl(store: &MemoryStore, count: usize, ttl: Duration) {
        let fingerprint = fingerprint();
        let response = StoredResponse::new(StatusCode::OK, &HeaderMap::new(), &Bytes::new())
            .expect("an encodable response");
        for _ in 0..count {
            let (key, token) = (
                StoreKey::from_bytes(crate::random::bytes32()),
                LeaseToken::random(),
            );
            let claim = Claim {
                key: &key,
                fingerprint: &fingerprint,
                token,
                lease: ttl,
                ttl,
                resumable: None,
            };
            assert_eq!(store.claim(claim).await.unwrap(), ClaimOutcome::Claimed);
            store.complete(&key, token, &response, ttl).await.unwrap();
        }
    }

    /// Completes `count` distinct keys with `body_len`-byte responses.
    async fn flood(store: &MemoryStore, count: usize, body_len: usize) {
        let fingerprint = fingerprint();
        let response = StoredResponse::new(
            StatusCode::OK,
            &HeaderMap::new(),
            &Bytes::from(vec![b'x'; body_len]),
        )
        .expect("an encodable response");
        for _ in 0..count {
            let (key, token) = (
                StoreKey::from_bytes(crate::random::bytes32()),
                LeaseToken::random(),
            );
            let claim = Claim {
                key: &key,
                fingerprint: &fingerprint,
                token,
                lease: Duration::from_secs(60),
                ttl: Duration::from_secs(3600),
                resumable: None,
            };
            assert_eq!(store.claim(claim).await.unwrap(), ClaimOutcome::Claimed);
            store
                .complete(&key, token, &response, Duration::from_secs(3600))
                .await
                .unwrap();
        }
    }

    #[tokio::test]
    async fn a_flood_of_keys_stays_within_the_entry_bound() {
        let store = MemoryStore::builder()
            .max_entries(100)
            .max_bytes(1 << 30)
            .build();
        flood(&store, 2_000, 10).await;
        let kept = store.completed_records();
        assert!(kept <= 100, "{kept} records kept, bound 100");
        assert!(
            kept >= 50,
            "{kept} records kept: the bound should be used, not emptied"
        );
    }

    #[tokio::test]
    async fn a_full_store_counts_every_record_it_evicts_before_its_ttl() {
        let store = MemoryStore::builder().max_entries(100).build();
        flood(&store, 2_000, 10).await;
        let fill = store.fill();
        assert!(fill.records <= 100, "{fill:?}");
        // Nothing expired and nothing was removed: whatever is gone was evicted early.
        assert_eq!(fill.evicted_early, 2_000 - fill.records, "{fill:?}");
        // What the records occupy (about 580 bytes for a 10-byte body and no header), not
        // their share of the bound (671 KB each here).
        let each = fill.bytes / fill.records;
        assert!((500..1_000).contains(&each), "{fill:?}");
        assert_eq!(fill.in_flight, 0);
        assert_eq!(
            (fill.max_entries, fill.max_bytes),
            (100, MemoryStore::DEFAULT_MAX_BYTES)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn records_that_expired_are_not_counted_as_evicted_early() {
        let store = MemoryStore::builder().max_entries(100).build();
        flood_with_ttl(&store, 100, Duration::from_secs(1)).await;
        tokio::time::advance(Duration::from_secs(2)).await;
        flood_with_ttl(&store, 100, Duration::from_secs(3600)).await;
        let fill = store.fill();
        assert_eq!(fill.evicted_early, 0, "{fill:?}");
    }

    #[tokio::test]
    async fn a_flood_of_large_responses_stays_within_the_byte_bound() {
        let store = MemoryStore::builder()
            .max_entries(1_000_000)
            .max_bytes(64 * 1024)
            .build();
        flood(&store, 500, 4096).await;
        let kept = store.completed_records();
        // Each record weighs a little over 4 KiB, so at most 15 fit in 64 KiB.
        assert!(kept <= 15, "{kept} records of 4 KiB kept in 64 KiB");
        assert!(
            kept >= 8,
            "{kept} records kept: the bound should be used, not emptied"
        );
    }

    #[tokio::test]
    async fn claims_in_flight_are_never_evicted() {
        let store = MemoryStore::builder().max_entries(10).build();
        let fingerprint = fingerprint();
        let key = StoreKey::from_bytes(crate::random::bytes32());
        let claim = Claim {
            key: &key,
            fingerprint: &fingerprint,
            token: LeaseToken::random(),
            lease: Duration::from_secs(60),
            ttl: Duration::from_secs(60),
            resumable: None,
        };
        store.claim(claim).await.unwrap();
        flood(&store, 1_000, 10).await;
        let retry = Claim {
            token: LeaseToken::random(),
            ..claim
        };
        assert_eq!(store.claim(retry).await.unwrap(), ClaimOutcome::InFlight);
    }
}
