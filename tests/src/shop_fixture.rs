//! The example shop, served for its end-to-end tests: a server on a loopback port, a real
//! HTTP client for its API, and the bodies and keys its requests take.
//!
//! Every server is the shop's own router (or a small one built for a test), served by
//! `shop::serve` (hyper's HTTP/1 server with the shop's connection limits and graceful
//! shutdown) on `127.0.0.1:0`, and every request goes through reqwest over TCP.

use std::{net::SocketAddr, time::Duration};

use axum::Router;
use hmac::{Hmac, KeyInit, Mac};
use idem::Idempotency;
use reqwest::RequestBuilder;
use serde_json::{Value, json};
use sha2::Sha256;
use shop::{Backend, ConnectionLimits, Settings, Shop};
use tokio::{sync::oneshot, task::JoinHandle};

use crate::{Answer, REQUEST_TIMEOUT};

/// A server on a loopback port, stopped through its graceful shutdown.
#[derive(Debug)]
pub struct Server {
    /// Where it listens.
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<std::io::Result<()>>,
}

impl Server {
    /// Serves `router` (whose runtime is `idem`) on a fresh port, with the default limits.
    pub async fn start(router: Router, idem: Idempotency) -> Self {
        Self::start_with(router, idem, ConnectionLimits::default()).await
    }

    /// Serves `router` (whose runtime is `idem`) on a fresh port, within `limits`.
    pub async fn start_with(router: Router, idem: Idempotency, limits: ConnectionLimits) -> Self {
        // The binary's listener, with its accept queue.
        let listener = shop::server::bind("127.0.0.1:0".parse().unwrap(), "another port").unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(shop::serve(listener, router, idem, limits, async {
            let _ = stopped.await;
        }));
        Self {
            addr,
            stop: Some(stop),
            task,
        }
    }

    /// The URL of `path` on this server.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Sends the shutdown signal and waits until the server has stopped and every running
    /// handler has stored its result.
    pub async fn stop(mut self) {
        let _ = self.stop.take().expect("stopped once").send(());
        tokio::time::timeout(REQUEST_TIMEOUT, &mut self.task)
            .await
            .expect("the server stops")
            .unwrap()
            .unwrap();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Settings for tests: the bank is quick unless a test says otherwise.
pub fn settings() -> Settings {
    Settings {
        transfer_delay: Duration::from_millis(200),
        refund_delay: Duration::from_millis(50),
        ..Settings::default()
    }
}

/// A shop, served.
#[derive(Debug)]
pub struct TestShop {
    /// The shop's state, for looking behind its API.
    pub shop: Shop,
    /// Its idempotency runtime.
    pub idem: Idempotency,
    /// Its server.
    pub server: Server,
    /// A client of its API.
    pub api: Api,
}

impl TestShop {
    /// The shop with everything in memory, as `cargo run -p shop` starts it.
    pub async fn memory(settings: Settings) -> Self {
        Self::on(Backend::memory(), settings).await
    }

    /// The shop on `backend`.
    pub async fn on(backend: Backend, settings: Settings) -> Self {
        let shop = Shop::on(&backend, settings, None);
        let idem = backend.idem.clone();
        let server = Server::start(shop::app(shop.clone(), idem.clone()), idem.clone()).await;
        let api = Api::new(&server);
        Self {
            shop,
            idem,
            server,
            api,
        }
    }
}

/// A fresh user id, so tests that share a store never share a user.
pub fn user() -> String {
    format!("user-{:012x}", rand::random::<u64>() >> 16)
}

/// A payment body.
pub fn payment(amount: i64) -> Value {
    json!({ "amount": amount, "currency": "JPY" })
}

/// A transfer body.
pub fn transfer(amount: i64) -> Value {
    json!({ "amount": amount, "currency": "JPY", "toAccount": "0000000" })
}

/// A real HTTP client for one server.
#[derive(Clone, Debug)]
pub struct Api {
    /// The client, which gives up on a request after [`REQUEST_TIMEOUT`].
    pub http: reqwest::Client,
    /// The server's URL, without a path.
    pub base: String,
}

impl Api {
    /// A client of `server`.
    pub fn new(server: &Server) -> Self {
        Self::at(&server.url(""))
    }

    /// A client of the server at `base`.
    pub fn at(base: &str) -> Self {
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .pool_max_idle_per_host(256)
            .build()
            .unwrap();
        Self {
            http,
            base: base.to_owned(),
        }
    }

    /// The URL of `path` on the server.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `POST path` as `user` (none: no `Authorization`), with `key` (none: no header).
    pub fn post(&self, path: &str, user: Option<&str>, key: Option<&str>) -> RequestBuilder {
        let mut request = self.http.post(self.url(path));
        if let Some(user) = user {
            request = request.bearer_auth(user);
        }
        if let Some(key) = key {
            request = request.header("idempotency-key", key);
        }
        request
    }

    /// `GET path` as `user`.
    pub fn get(&self, path: &str, user: &str) -> RequestBuilder {
        self.http.get(self.url(path)).bearer_auth(user)
    }

    /// `POST /payments` as `user` with `key` and a JSON `body`.
    pub async fn pay(&self, user: &str, key: &str, body: &Value) -> Answer {
        Answer::of(self.post("/payments", Some(user), Some(key)).json(body)).await
    }

    /// `POST /transfers` as `user` with `key` and a JSON `body`.
    pub async fn transfer(&self, user: &str, key: &str, body: &Value) -> Answer {
        Answer::of(self.post("/transfers", Some(user), Some(key)).json(body)).await
    }

    /// Delivers the bank's webhook `body` with `key`, signed with `signature` (none: no
    /// `Bank-Signature`).
    pub async fn deliver(&self, key: &str, body: &str, signature: Option<&str>) -> Answer {
        let mut request = self
            .http
            .post(self.url("/webhooks/bank"))
            .header("content-type", "application/json")
            .header("idempotency-key", key)
            .body(body.to_owned());
        if let Some(signature) = signature {
            request = request.header("bank-signature", signature);
        }
        Answer::of(request).await
    }

    /// `GET /payments` as `user`: the items.
    pub async fn payments(&self, user: &str) -> Vec<Value> {
        self.items("/payments", user).await
    }

    /// `GET /transfers` as `user`: the items.
    pub async fn transfers(&self, user: &str) -> Vec<Value> {
        self.items("/transfers", user).await
    }

    async fn items(&self, path: &str, user: &str) -> Vec<Value> {
        let answer = Answer::of(self.get(path, user)).await;
        assert_eq!(answer.status, 200, "{answer:?}");
        assert!(!answer.replayed(), "a GET is never a replay");
        answer.json()["items"].as_array().unwrap().clone()
    }
}

/// The bank's signature of `body` (`sha256=` and the hex HMAC under the shop's default
/// webhook secret), computed here independently of the shop.
pub fn bank_signature(body: &str) -> String {
    let mut mac =
        <Hmac<Sha256> as KeyInit>::new_from_slice(Settings::DEFAULT_WEBHOOK_SECRET.as_bytes())
            .expect("an HMAC takes a key of any length");
    mac.update(body.as_bytes());
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// Waits for the time a 409 or 503 asks for in `Retry-After` (whole seconds).
pub async fn honour_retry_after(answer: &Answer) {
    let seconds: u64 = answer
        .header("retry-after")
        .expect("a 409 carries Retry-After")
        .parse()
        .expect("Retry-After in seconds");
    assert!((1..=60).contains(&seconds), "Retry-After: {seconds}");
    tokio::time::sleep(Duration::from_secs(seconds)).await;
}
