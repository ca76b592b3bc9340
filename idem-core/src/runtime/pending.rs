//! Results that ran but are not in the store yet: this process's own copies.
//!
//! When the completion of a key fails (the store is down or slow), its handler has already
//! run and its client may have seen the response. The runtime keeps the record here while a
//! background task retries the completion (see [`background`](super::background)), and answers
//! retries of the key that reach this process from this copy, as the store would: a replay
//! for the same request, 422 for another ([`Idempotency::own_copy`]). Without it a retry would find the key in flight and
//! get 409 until the store came back, and after the lease lapsed run the operation again.
//!
//! The map is empty unless a store has failed; a request checks one atomic counter and never
//! takes the lock then.

use std::{
    collections::HashMap,
    sync::{
        Mutex, PoisonError,
        atomic::{AtomicUsize, Ordering},
    },
};

use super::Idempotency;
use crate::{
    fingerprint::Fingerprint,
    replay::StoredResponse,
    scope::StoreKey,
    store::{ClaimOutcome, LeaseToken},
};

impl Idempotency {
    /// What this process's own copy of `key`'s result, if it keeps one, answers a request with
    /// `fingerprint`, as the store would once it has the result: completed (a replay), or a
    /// mismatch.
    pub(crate) fn own_copy(
        &self,
        key: &StoreKey,
        fingerprint: &Fingerprint,
    ) -> Option<ClaimOutcome> {
        self.pending().outcome(key, fingerprint)
    }

    /// Whether this process keeps `key`'s result until the store takes it: the result exists
    /// nowhere else yet. A message is not acknowledged meanwhile.
    pub(crate) fn awaits_store(&self, key: &StoreKey) -> bool {
        self.pending().contains(key)
    }
}

/// The results this process keeps until the store takes them.
#[derive(Default)]
pub(super) struct Pending {
    /// The number of records in `records`, read without the lock.
    count: AtomicUsize,
    records: Mutex<HashMap<StoreKey, PendingRecord>>,
}

struct PendingRecord {
    token: LeaseToken,
    fingerprint: Fingerprint,
    response: StoredResponse,
}

impl Pending {
    /// Keeps `response` as the result of `key`, held under `token`, until
    /// [`remove`](Self::remove).
    pub(super) fn insert(
        &self,
        key: StoreKey,
        token: LeaseToken,
        fingerprint: Fingerprint,
        response: StoredResponse,
    ) {
        let record = PendingRecord {
            token,
            fingerprint,
            response,
        };
        let mut records = self.lock();
        if records.insert(key, record).is_none() {
            self.count.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Forgets the copy of `key` kept under `token` (the store took it, or gave up).
    pub(super) fn remove(&self, key: &StoreKey, token: LeaseToken) {
        let mut records = self.lock();
        if records.get(key).is_some_and(|record| record.token == token) {
            records.remove(key);
            self.count.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Forgets the copy of `key` whoever keeps it: its record was removed, and the next
    /// request with its key must run again, not be answered from here.
    pub(super) fn forget(&self, key: &StoreKey) {
        if self.count.load(Ordering::SeqCst) == 0 {
            return;
        }
        if self.lock().remove(key).is_some() {
            self.count.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// What the copy of `key`, if there is one, answers to a request with `fingerprint`.
    fn outcome(&self, key: &StoreKey, fingerprint: &Fingerprint) -> Option<ClaimOutcome> {
        if self.count.load(Ordering::SeqCst) == 0 {
            return None;
        }
        let records = self.lock();
        let record = records.get(key)?;
        Some(if record.fingerprint == *fingerprint {
            ClaimOutcome::Completed(record.response.clone())
        } else {
            ClaimOutcome::Mismatch {
                stored_algorithm: Some(record.fingerprint.algorithm()),
            }
        })
    }

    /// Whether a copy of `key` is kept.
    fn contains(&self, key: &StoreKey) -> bool {
        self.count.load(Ordering::SeqCst) != 0 && self.lock().contains_key(key)
    }

    /// How many results are waiting for the store.
    pub(super) fn len(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<StoreKey, PendingRecord>> {
        // Every change is one map operation: a panic elsewhere cannot leave it half-done.
        self.records.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use http::{HeaderMap, Method, StatusCode};

    use super::*;
    use crate::fingerprint::FingerprintMode;

    fn fingerprint(body: &[u8]) -> Fingerprint {
        Fingerprint::compute(
            &Method::POST,
            "/",
            &HeaderMap::new(),
            body,
            FingerprintMode::Raw,
        )
    }

    #[test]
    fn answers_replays_and_mismatches_until_removed() {
        let pending = Pending::default();
        let key = StoreKey::from_bytes([7; 32]);
        let token = LeaseToken::random();
        let response =
            StoredResponse::new(StatusCode::CREATED, &HeaderMap::new(), &Bytes::from("tr_1"))
                .expect("an encodable response");
        assert!(pending.outcome(&key, &fingerprint(b"a")).is_none());
        pending.insert(key, token, fingerprint(b"a"), response.clone());
        assert_eq!(pending.len(), 1);
        assert_eq!(
            pending.outcome(&key, &fingerprint(b"a")),
            Some(ClaimOutcome::Completed(response))
        );
        assert!(matches!(
            pending.outcome(&key, &fingerprint(b"b")),
            Some(ClaimOutcome::Mismatch {
                stored_algorithm: Some(_)
            })
        ));
        // Another token's removal leaves it: only its own background task removes a copy.
        pending.remove(&key, LeaseToken::random());
        assert_eq!(pending.len(), 1);
        pending.remove(&key, token);
        assert_eq!(pending.len(), 0);
        assert!(pending.outcome(&key, &fingerprint(b"a")).is_none());
    }

    #[test]
    fn a_removed_record_forgets_its_copy_whoever_keeps_it() {
        let pending = Pending::default();
        let key = StoreKey::from_bytes([8; 32]);
        let token = LeaseToken::random();
        let response = StoredResponse::new(StatusCode::CREATED, &HeaderMap::new(), &Bytes::new())
            .expect("an encodable response");
        pending.insert(key, token, fingerprint(b"a"), response);
        pending.forget(&key);
        assert_eq!(pending.len(), 0);
        assert!(pending.outcome(&key, &fingerprint(b"a")).is_none());
        // Its background task's own removal, later, finds nothing and counts nothing.
        pending.remove(&key, token);
        assert_eq!(pending.len(), 0);
    }
}
