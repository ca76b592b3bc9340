//! What the Redis tests share: the server's URL, fresh key prefixes, and a real HTTP server.
//!
//! Each test file uses a part of it.
#![allow(dead_code)]

use std::{net::SocketAddr, time::Duration};

use axum::Router;
use idem_core::{RedisStore, store::redis::RedisStoreBuilder};
use redis::aio::ConnectionManager;

/// The variable that names the Redis the tests use. CI sets it; without it they are skipped.
pub(crate) const URL_VARIABLE: &str = "IDEM_TEST_REDIS_URL";

/// The test Redis's URL, or `None` (saying so) when the tests are to be skipped.
pub(crate) fn redis_url() -> Option<String> {
    match std::env::var(URL_VARIABLE) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            eprintln!("skipped: {URL_VARIABLE} is not set");
            None
        }
    }
}

/// A key prefix no other test run uses, so that runs never see each other's records.
pub(crate) fn fresh_prefix() -> String {
    format!("idem-test:{:016x}:", rand::random::<u64>())
}

/// A builder with a fresh prefix.
pub(crate) fn builder() -> RedisStoreBuilder {
    RedisStore::builder()
        .prefix(fresh_prefix())
        .expect("the prefix has no braces")
}

/// A store under a fresh prefix on the Redis at `url`.
pub(crate) async fn connect(url: &str) -> RedisStore<ConnectionManager> {
    builder()
        .connect(url)
        .await
        .expect("cannot connect to the test Redis")
}

/// Serves `app` on a free loopback port over real HTTP, and answers its address.
pub(crate) async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    address
}

/// An HTTP client that gives up on a request after `timeout`, so a hanging service fails the
/// test instead of hanging it.
pub(crate) fn client(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder().timeout(timeout).build().unwrap()
}
