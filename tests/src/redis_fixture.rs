//! The shared Redis, for the tests that use it: its URL, and stores under key prefixes no
//! other test uses.

use std::time::Duration;

use idem::redis::{RedisStore, RedisStoreBuilder};
use redis::aio::ConnectionManager;

/// The variable that names the Redis the tests use. CI sets it; without it they are skipped.
pub const URL_VARIABLE: &str = "IDEM_TEST_REDIS_URL";

/// The test Redis's URL, or `None` (saying so) when the tests are to be skipped.
pub fn redis_url() -> Option<String> {
    match std::env::var(URL_VARIABLE) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            eprintln!("skipped: {URL_VARIABLE} is not set");
            None
        }
    }
}

/// A key prefix no other test run uses, so that runs never see each other's records.
pub fn fresh_prefix() -> String {
    format!("idem-test:{:016x}:", rand::random::<u64>())
}

/// A builder with a fresh prefix.
pub fn builder() -> RedisStoreBuilder {
    RedisStore::builder()
        .prefix(fresh_prefix())
        .expect("the prefix has no braces")
}

/// A store under a fresh prefix on the Redis at `url`.
pub async fn connect(url: &str) -> RedisStore<ConnectionManager> {
    builder()
        .connect(url)
        .await
        .expect("cannot connect to the test Redis")
}

/// An HTTP client that gives up on a request after `timeout`, so a hanging service fails the
/// test instead of hanging it.
pub fn client(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder().timeout(timeout).build().unwrap()
}

/// Where a completed record's response begins: record format 2, as `RedisStore`'s docs lay
/// it out (the version in byte 0, the state in byte 1).
pub const RESPONSE_AT: usize = 59;

/// Damages the completed record at the Redis key `record` as a conformance test asks
/// (store rule 9), keeping its expiry.
pub async fn damage(
    side: &mut (impl redis::aio::ConnectionLike + Send),
    record: String,
    damage: idem_conformance::Corruption,
) {
    use idem_conformance::Corruption;
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

/// The state byte of the record at the Redis key `record` (`c`, `f`, `C` or `F` in flight,
/// `d` done), or `None` without a record.
pub async fn state_of(
    side: &mut (impl redis::aio::ConnectionLike + Send),
    record: &str,
) -> Option<u8> {
    let stored: Option<Vec<u8>> = redis::cmd("GET")
        .arg(record)
        .query_async(side)
        .await
        .unwrap();
    stored.map(|stored| stored[1])
}

/// How many records under `prefix` on the Redis at `url` are in flight (`c`, `f`, and their
/// resumable forms `C`, `F`): operations nobody has completed yet.
pub async fn in_flight(url: &str, prefix: &str) -> usize {
    let mut side = redis::Client::open(url)
        .expect("a valid URL")
        .get_multiplexed_async_connection()
        .await
        .expect("the Redis answers");
    let pattern = format!("{prefix}{{*");
    let (mut cursor, mut open) = (0u64, 0);
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut side)
            .await
            .expect("the Redis answers");
        for key in keys {
            if matches!(
                state_of(&mut side, &key).await,
                Some(b'c' | b'f' | b'C' | b'F')
            ) {
                open += 1;
            }
        }
        if next == 0 {
            return open;
        }
        cursor = next;
    }
}
