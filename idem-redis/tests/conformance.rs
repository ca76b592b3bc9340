//! The store conformance suite (the crate `idem-conformance`) against a real Redis: every
//! rule, on a key prefix of each test's own, with records damaged on the server the way rule
//! 9's test asks.
//!
//! Needs `IDEM_TEST_REDIS_URL` (CI sets `redis://127.0.0.1:6379`); without it each test says
//! it was skipped. The Cluster and Sentinel deployments run the same rules in the workspace's
//! `tests/` (`redis_cluster.rs`, `redis_sentinel.rs`), on servers those tests start.

use std::sync::Arc;

use idem::redis::RedisStore;
use idem_conformance::{Corruption, StoreUnderTest};

/// Where a completed record's response begins: record format 2, as `RedisStore`'s docs lay
/// it out (the version in byte 0, the state in byte 1).
const RESPONSE_AT: usize = 59;

async fn fresh_store() -> Option<StoreUnderTest> {
    let Some(url) = std::env::var("IDEM_TEST_REDIS_URL")
        .ok()
        .filter(|url| !url.is_empty())
    else {
        eprintln!("IDEM_TEST_REDIS_URL is not set: the Redis conformance tests are skipped");
        return None;
    };
    let store = RedisStore::builder()
        .prefix(format!("idem-conformance:{:016x}:", rand::random::<u64>()))
        .expect("the prefix has no braces")
        .connect(url.as_str())
        .await
        .expect("cannot connect to IDEM_TEST_REDIS_URL");
    let side = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let keys = store.clone();
    Some(
        StoreUnderTest::new(Arc::new(store)).corrupt(move |key, damage| {
            let (mut side, record) = (side.clone(), keys.redis_key(&key));
            Box::pin(async move { damage_record(&mut side, record, damage).await })
        }),
    )
}

/// Damages the completed record at the Redis key `record`, keeping its expiry.
async fn damage_record(
    side: &mut redis::aio::MultiplexedConnection,
    record: String,
    damage: Corruption,
) {
    let mut stored: Vec<u8> = redis::cmd("GET")
        .arg(&record)
        .query_async(side)
        .await
        .unwrap();
    match damage {
        Corruption::Response(bytes) => {
            stored.truncate(RESPONSE_AT);
            stored.extend_from_slice(&bytes);
        }
        Corruption::FormatVersion(version) => {
            stored[0] = u8::try_from(version).expect("a version of one byte")
        }
        other => panic!("unknown corruption {other:?}"),
    }
    let () = redis::cmd("SET")
        .arg(&record)
        .arg(stored)
        .arg("KEEPTTL")
        .query_async(side)
        .await
        .unwrap();
}

idem_conformance::store_conformance_tests!(fresh_store());
