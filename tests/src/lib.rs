//! Helpers shared by the end-to-end tests: a service served on a loopback port, a real HTTP
//! client, and what the client saw.
//!
//! Every test that claims to test HTTP behaviour goes through these: a router served by
//! axum on `127.0.0.1:0`, requests sent by reqwest over TCP.

pub mod amqp_fixture;
pub mod gate;
pub mod grpc_fixture;
pub mod inprocess;
pub mod ledger;
pub mod message_fixture;
pub mod mysql_fixture;
pub mod mysql_server;
pub mod nats_fixture;
pub mod partition;
pub mod postgres_fixture;
pub mod postgres_server;
pub mod redis_cluster;
pub mod redis_fixture;
pub mod redis_sentinel;
pub mod redis_server;
pub mod shop_fixture;
pub mod sqlite_fixture;
pub mod step_stores;

use std::{net::SocketAddr, time::Duration};

use axum::Router;
use bytes::Bytes;
use reqwest::{StatusCode, header::HeaderMap};
use serde_json::Value;

/// How long any one request may take before the test fails rather than hangs.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A router served on a free loopback port until the test ends.
#[derive(Debug)]
pub struct Served {
    /// Where it listens.
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Served {
    /// Serves `router`.
    pub async fn start(router: Router) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a free loopback port");
        let addr = listener.local_addr().expect("a bound address");
        let task = tokio::spawn(async move {
            axum::serve(listener, router)
                .await
                .expect("the server runs");
        });
        Self { addr, task }
    }

    /// The URL of `path` on this server.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What the client saw of one answer.
#[derive(Clone)]
pub struct Answer {
    /// The status code.
    pub status: StatusCode,
    /// The headers.
    pub headers: HeaderMap,
    /// The body's bytes.
    pub body: Bytes,
}

impl Answer {
    /// Sends `request` and reads the whole answer.
    pub async fn of(request: reqwest::RequestBuilder) -> Self {
        let response = request
            .timeout(REQUEST_TIMEOUT)
            .send()
            .await
            .expect("the request gets an answer");
        Self::read(response).await
    }

    /// Reads the whole of `response`.
    pub async fn read(response: reqwest::Response) -> Self {
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.bytes().await.expect("the body is read");
        Self {
            status,
            headers,
            body,
        }
    }

    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|error| panic!("the body is not JSON ({error}): {:?}", self.body))
    }

    /// Whether the answer is a replay (`Idempotent-Replayed: true`); the header never has
    /// another value.
    #[track_caller]
    pub fn replayed(&self) -> bool {
        match self.headers.get("idempotent-replayed") {
            None => false,
            Some(value) if value == "true" => true,
            Some(other) => panic!("Idempotent-Replayed: {other:?}"),
        }
    }

    /// A header as text, if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }

    /// Asserts that the answer is Problem Details of `status` whose `type` ends with
    /// `#slug`, with a `title` and a `detail`, and answers its body.
    #[track_caller]
    pub fn problem(&self, status: StatusCode, slug: &str) -> Value {
        assert_eq!(self.status, status, "status of {:?}", self.body);
        assert_eq!(
            self.header("content-type"),
            Some("application/problem+json"),
            "media type of a {status} answer"
        );
        let body = self.json();
        let kind = body["type"].as_str().unwrap_or_default();
        assert!(
            kind.ends_with(&format!("#{slug}")),
            "type {kind:?}, expected one ending with #{slug}"
        );
        assert_eq!(body["status"], status.as_u16());
        let text = |member: &str| body[member].as_str().is_some_and(|text| !text.is_empty());
        assert!(
            text("title") && text("detail"),
            "title and detail of {body}"
        );
        body
    }

    /// Asserts that the answer is a `201 Created`, and answers its body as JSON.
    #[track_caller]
    pub fn created(&self) -> Value {
        assert_eq!(self.status, StatusCode::CREATED, "{self:?}");
        self.json()
    }

    /// Asserts [`problem`](Self::problem), and that the answer is the runtime's own refusal,
    /// not a stored answer sent again.
    #[track_caller]
    pub fn refusal(&self, status: StatusCode, slug: &str) -> Value {
        let body = self.problem(status, slug);
        assert!(!self.replayed(), "a refusal is never a replay");
        body
    }
}

impl std::fmt::Debug for Answer {
    /// The status, the headers and the body as text: what a failing assertion shows.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {:?} {}",
            self.status,
            self.headers,
            String::from_utf8_lossy(&self.body)
        )
    }
}

/// Polls `check` every 20 ms until it holds, for at most `within`; answers whether it did.
/// For waiting on work the runtime does in the background, with a bound generous enough
/// that a slow machine does not fail the test.
pub async fn eventually(within: Duration, mut check: impl AsyncFnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A fresh `Idempotency-Key`, as a client makes one per operation (UUID-shaped), so that
/// tests that share a store never share a key.
pub fn key() -> String {
    let bits: u128 = rand::random();
    let hex = format!("{bits:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// A loopback port that was free a moment ago, for a server of the test's own, below the
/// kernel's range of ephemeral ports.
///
/// Below it because tests kill servers and start them again on the port they were given (a
/// bank, a shop, a redis-server): a port of the ephemeral range may be taken meanwhile as the
/// local port of an outgoing connection (to PostgreSQL, say), and the restart then fails with
/// "Address already in use". The kernel gives outgoing connections ports of its range only. A
/// port is handed out once per test binary, so two servers of one run never get the same one.
pub fn free_port() -> u16 {
    use std::{
        collections::BTreeSet,
        hash::{BuildHasher, RandomState},
        net::TcpListener,
        sync::Mutex,
    };
    static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    /// Above the ports services listen on by default (PostgreSQL, Redis, MySQL, NATS, AMQP).
    const FLOOR: u16 = 10_000;
    let ephemeral_from = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    let mut handed_out = HANDED_OUT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if ephemeral_from > FLOOR + 1_000 {
        let random = RandomState::new();
        for attempt in 0_u32..10_000 {
            let port =
                FLOOR + (random.hash_one(attempt) % u64::from(ephemeral_from - FLOOR)) as u16;
            if !handed_out.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
                handed_out.insert(port);
                return port;
            }
        }
    }
    // No room below the ephemeral range on this machine: one of the range, as the kernel picks.
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port();
    handed_out.insert(port);
    port
}
