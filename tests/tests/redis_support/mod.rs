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

/// A `redis-server` of the test's own, on a free loopback port, with nothing on disk. It is
/// killed when dropped.
pub(crate) struct RedisServer {
    child: Option<std::process::Child>,
    port: u16,
    extra: Vec<String>,
}

impl RedisServer {
    /// Starts one, or says why it cannot (`redis-server` not on `PATH`) and answers `None`.
    pub(crate) async fn start(extra: &[&str]) -> Option<Self> {
        let found = std::process::Command::new("redis-server")
            .arg("--version")
            .stdout(std::process::Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if !found {
            eprintln!("skipped: `redis-server` is not on PATH");
            return None;
        }
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let mut server = Self {
            child: None,
            port,
            extra: extra.iter().map(|arg| (*arg).to_owned()).collect(),
        };
        server.restart().await;
        Some(server)
    }

    /// The server's URL.
    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Starts the server (again) on its port, and waits until it answers.
    pub(crate) async fn restart(&mut self) {
        assert!(self.child.is_none(), "the server is running");
        let child = std::process::Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .args(&self.extra)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("cannot start redis-server");
        self.child = Some(child);
        let client = redis::Client::open(self.url()).unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(mut connection) = client.get_multiplexed_async_connection().await {
                let pong: redis::RedisResult<String> =
                    redis::cmd("PING").query_async(&mut connection).await;
                if pong.is_ok() {
                    return;
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "redis-server did not come up"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Kills the server (SIGKILL): what a crash or an OOM kill looks like to its clients.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends a signal to the server (`STOP` freezes it, as a stuck host would; `CONT` thaws).
    pub(crate) fn signal(&self, signal: &str) {
        let child = self.child.as_ref().expect("the server is running");
        let status = std::process::Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status()
            .expect("cannot run kill");
        assert!(status.success(), "kill -{signal} failed");
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}
