//! The shared Redis, for the tests that use it: its URL, and stores under key prefixes no
//! other test uses.

use std::time::Duration;

use idem_core::{RedisStore, store::redis::RedisStoreBuilder};
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
