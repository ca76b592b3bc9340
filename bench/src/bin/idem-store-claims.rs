//! The memory store's own cost, in process and without HTTP: a replay's claim and a first
//! request's claim and completion, as the store fills. It completes records with new keys up
//! to each size in turn (1, 100,000, 400,000 and 1,200,000), printing what a completion took on
//! average on the way, and then claims one completed key two million times (each a replay),
//! printing the nanoseconds a claim takes at that size.
//!
//! `cargo run --release -p idem-bench --bin idem-store-claims`
//!
//! To compare with another commit, copy this file into `bench/src/bin/` of a worktree of it and
//! run it there the same way (docs/benchmarks.md, *Before and after the crate split*).

use std::time::{Duration, Instant};

use axum::http::{HeaderMap, Method, StatusCode};
use idem::{
    MemoryStore,
    fingerprint::{Fingerprint, FingerprintMode},
    replay::StoredResponse,
    scope::StoreKey,
    store::{Claim, ClaimOutcome, LeaseToken, Store},
};

/// A store key of its own for every `index`, spread over the store's shards as digests are.
fn key(index: u64) -> StoreKey {
    let mut bytes = [0u8; 32];
    let spread = index.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    bytes[..8].copy_from_slice(&spread.to_le_bytes());
    bytes[8..16].copy_from_slice(&index.to_le_bytes());
    StoreKey::from_bytes(bytes)
}

/// A claim of `key` under a new token.
fn claim<'a>(key: &'a StoreKey, fingerprint: &'a Fingerprint, ttl: Duration) -> Claim<'a> {
    Claim {
        key,
        fingerprint,
        token: LeaseToken::random(),
        lease: ttl,
        ttl,
        resumable: None,
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let fingerprint = Fingerprint::compute(
        &Method::POST,
        "/payments",
        &HeaderMap::new(),
        b"{}",
        FingerprintMode::Raw,
    );
    let response = StoredResponse::new(StatusCode::CREATED, &HeaderMap::new(), &[b'x'; 100])
        .expect("an encodable response");
    // Room for every record: the figures are the store's lookups and inserts, not eviction.
    let store = MemoryStore::builder()
        .max_entries(100_000_000)
        .max_bytes(1 << 40)
        .build();
    let ttl = Duration::from_secs(3600);
    let mut filled = 0;
    for size in [1, 100_000, 400_000, 1_200_000] {
        let started = Instant::now();
        let from = filled;
        while filled < size {
            let key = key(filled);
            let first = claim(&key, &fingerprint, ttl);
            assert_eq!(store.claim(first).await.unwrap(), ClaimOutcome::Claimed);
            store
                .complete(&key, first.token, &response, ttl)
                .await
                .unwrap();
            filled += 1;
        }
        let per_first = started.elapsed().as_nanos() as f64 / (size - from).max(1) as f64;
        let replayed = key(0);
        let replays = 2_000_000;
        let started = Instant::now();
        for _ in 0..replays {
            let outcome = store
                .claim(claim(&replayed, &fingerprint, ttl))
                .await
                .unwrap();
            std::hint::black_box(outcome);
        }
        let per_replay = started.elapsed().as_nanos() as f64 / f64::from(replays);
        println!(
            "records={size} replay_claim_ns={per_replay:.0} first_claim_and_completion_ns={per_first:.0}"
        );
    }
}
