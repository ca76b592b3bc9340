//! One execution per key through Redis outages, against `redis-server` processes that each
//! test starts itself: killed while a handler runs and started again after it finished
//! (with `appendfsync always`, so Redis keeps what it acknowledged), frozen while a claim is
//! on its way (on a Redis that has no script cached yet), and restarted under load.
//!
//! Skipped when `IDEM_TEST_REDIS_URL` is unset (CI sets it) or `redis-server` is not on
//! `PATH`.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{
    Json, Router,
    extract::State,
    http::{HeaderMap, StatusCode},
    routing::post,
};
use idem_core::{Idempotency, IdempotencyLayer, Policy, RedisStore, Scope};
use idem_tests::redis_fixture::{fresh_prefix, redis_url};
use idem_tests::{Answer, Served, eventually, gate::Gate, key, redis_server::RedisServer};
use serde_json::{Value, json};

const COMMAND_TIMEOUT: Duration = Duration::from_millis(500);
const STORE_TIMEOUT: Duration = Duration::from_secs(1);
/// Long enough for anything the runtime does in the background to land on a slow machine.
const PATIENCE: Duration = Duration::from_secs(20);

/// How many times the handler ran for each key, and a gate a test may hold it at.
#[derive(Clone)]
struct Ledger {
    executions: Arc<Mutex<HashMap<String, usize>>>,
    gate: Gate,
    delay: Duration,
}

impl Ledger {
    /// A ledger whose handler runs at once, after `delay`.
    fn open(delay: Duration) -> Self {
        Self {
            executions: Arc::default(),
            gate: Gate::open(),
            delay,
        }
    }

    /// A ledger whose handler waits until its gate is lifted.
    fn gated() -> Self {
        Self {
            gate: Gate::closed(),
            ..Self::open(Duration::ZERO)
        }
    }

    fn executions(&self, key: &str) -> usize {
        self.executions
            .lock()
            .unwrap()
            .get(key)
            .copied()
            .unwrap_or(0)
    }

    fn all(&self) -> HashMap<String, usize> {
        self.executions.lock().unwrap().clone()
    }
}

async fn transfer(
    State(ledger): State<Ledger>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let key = headers["idempotency-key"].to_str().unwrap().to_owned();
    ledger.gate.pass().await;
    tokio::time::sleep(ledger.delay).await;
    let execution = {
        let mut executions = ledger.executions.lock().unwrap();
        let count = executions.entry(key.clone()).or_default();
        *count += 1;
        *count
    };
    let id = format!("tr_{:016x}", rand::random::<u64>());
    (
        StatusCode::CREATED,
        Json(json!({ "id": id, "key": key, "execution": execution, "amount": body["amount"] })),
    )
}

/// One instance of the service on the Redis at `url`, under `prefix`.
struct Instance {
    idem: Idempotency,
    served: Served,
    http: reqwest::Client,
}

impl Instance {
    async fn start(url: &str, prefix: &str, lease: Duration, ledger: &Ledger) -> Self {
        let store = RedisStore::builder()
            .prefix(prefix)
            .unwrap()
            .command_timeout(COMMAND_TIMEOUT)
            .connection_timeout(COMMAND_TIMEOUT)
            .connect(url)
            .await
            .expect("cannot connect to the test's redis-server");
        let idem = Idempotency::builder(store)
            .store_timeout(STORE_TIMEOUT)
            .build();
        let policy = Policy::new().scope(Scope::Global).lease(lease);
        let router = Router::new()
            .route("/transfers", post(transfer))
            .layer(IdempotencyLayer::new(idem.clone(), policy))
            .with_state(ledger.clone());
        Self {
            idem,
            served: Served::start(router).await,
            http: reqwest::Client::new(),
        }
    }

    fn request(&self, key: &str) -> reqwest::RequestBuilder {
        self.http
            .post(self.served.url("/transfers"))
            .header("idempotency-key", key)
            .json(&json!({ "amount": 50000 }))
    }

    async fn send(&self, key: &str) -> Answer {
        Answer::of(self.request(key)).await
    }
}

#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_result_that_finished_while_redis_was_down_is_stored_when_it_is_back() {
    if redis_url().is_none() {
        return;
    }
    let Some(mut server) = RedisServer::start_durable().await else {
        return;
    };
    let (prefix, ledger) = (fresh_prefix(), Ledger::gated());
    // A short lease, which lapses while Redis is away: only a takeover may fence the
    // holder, and nothing takes the key over.
    let lease = Duration::from_millis(500);
    let first = Instance::start(&server.url(), &prefix, lease, &ledger).await;
    let key = key();

    let answer = tokio::spawn(Answer::of(first.request(&key)));
    ledger.gate.arrival(PATIENCE).await;
    server.kill();
    ledger.gate.lift();
    let answer = answer.await.unwrap();
    assert_eq!(
        answer.status,
        StatusCode::CREATED,
        "the operation ran: {answer:?}"
    );
    assert_eq!(
        first.idem.pending_completions(),
        1,
        "its result waits for Redis"
    );

    tokio::time::sleep(lease * 3).await;
    let retry = first.send(&key).await;
    assert!(
        retry.replayed(),
        "answered from the process's copy: {retry:?}"
    );
    assert_eq!(retry.body, answer.body);

    server.restart().await;
    assert!(
        eventually(PATIENCE, async || first.idem.pending_completions() == 0).await,
        "the completion reached Redis once it was back"
    );
    // Another instance, which has no copy: the record is in Redis.
    let second = Instance::start(&server.url(), &prefix, lease, &ledger).await;
    let elsewhere = second.send(&key).await;
    assert!(elsewhere.replayed(), "{elsewhere:?}");
    assert_eq!(elsewhere.body, answer.body);
    assert_eq!(ledger.executions(&key), 1, "one transfer for one key");
}

/// The claim of a request on a frozen Redis times out; the request is answered 503, and its
/// key must not stay blocked for the lease once Redis answers again.
async fn a_claim_on_a_frozen_redis_frees_its_key(warm: bool) {
    if redis_url().is_none() {
        return;
    }
    let Some(server) = RedisServer::start(&[]).await else {
        return;
    };
    let ledger = Ledger::open(Duration::ZERO);
    let instance = Instance::start(
        &server.url(),
        &fresh_prefix(),
        Duration::from_secs(60),
        &ledger,
    )
    .await;
    if warm {
        // Every script is cached: the frozen claim lands the moment Redis thaws.
        assert_eq!(instance.send(&key()).await.status, StatusCode::CREATED);
    }
    let key = key();

    server.signal("STOP");
    let refused = instance.send(&key).await;
    refused.problem(StatusCode::SERVICE_UNAVAILABLE, "store-unavailable");
    tokio::time::sleep(Duration::from_secs(2)).await;
    server.signal("CONT");
    let thawed = Instant::now();

    let mut last = None;
    let freed = eventually(PATIENCE, async || {
        let retry = instance.send(&key).await;
        let done = retry.status == StatusCode::CREATED;
        last = Some(retry);
        done
    })
    .await;
    let took = thawed.elapsed();
    assert!(freed, "the key stayed blocked: {last:?}");
    // The lease is 60 s: a key blocked until it lapses would take a minute.
    assert!(
        took < Duration::from_secs(10),
        "the key was free again {took:?} after Redis thawed"
    );
    assert_eq!(ledger.executions(&key), 1);
}

#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_claim_on_a_frozen_cold_redis_frees_its_key_once_it_thaws() {
    a_claim_on_a_frozen_redis_frees_its_key(false).await;
}

#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_claim_on_a_frozen_warm_redis_frees_its_key_once_it_thaws() {
    a_claim_on_a_frozen_redis_frees_its_key(true).await;
}

#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_redis_restart_under_load_runs_no_key_twice() {
    if redis_url().is_none() {
        return;
    }
    let Some(mut server) = RedisServer::start_durable().await else {
        return;
    };
    let ledger = Ledger::open(Duration::from_millis(20));
    let instance = Arc::new(
        Instance::start(
            &server.url(),
            &fresh_prefix(),
            Duration::from_secs(2),
            &ledger,
        )
        .await,
    );
    let stopping = Arc::new(std::sync::atomic::AtomicBool::new(false));

    // Clients that each pay one key after another, retrying a key until it succeeds, as the
    // seed article's client does.
    let workers: Vec<_> = (0..8)
        .map(|_| {
            let (instance, stopping) = (Arc::clone(&instance), Arc::clone(&stopping));
            tokio::spawn(async move {
                let mut paid = Vec::new();
                while !stopping.load(std::sync::atomic::Ordering::SeqCst) {
                    let key = key();
                    let started = Instant::now();
                    loop {
                        let sent = instance
                            .request(&key)
                            .timeout(Duration::from_secs(3))
                            .send()
                            .await;
                        if let Ok(response) = sent {
                            let status = response.status();
                            let body = response.bytes().await.unwrap_or_default();
                            if status == StatusCode::CREATED {
                                paid.push((key, body));
                                break;
                            }
                        }
                        assert!(started.elapsed() < PATIENCE, "key {key} never succeeded");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
                paid
            })
        })
        .collect();

    tokio::time::sleep(Duration::from_secs(1)).await;
    server.kill();
    tokio::time::sleep(Duration::from_secs(1)).await;
    server.restart().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    stopping.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut paid = Vec::new();
    for worker in workers {
        paid.extend(worker.await.unwrap());
    }

    assert!(
        eventually(PATIENCE, async || instance.idem.pending_completions() == 0).await,
        "every result reached Redis"
    );
    let executions = ledger.all();
    let twice: Vec<_> = executions.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "keys that ran twice: {twice:?}");
    assert!(paid.len() > 20, "the load was real: {} keys", paid.len());
    for (key, body) in &paid {
        assert_eq!(executions.get(key), Some(&1), "key {key}");
        let again = instance.send(key).await;
        assert!(again.replayed(), "key {key}: {again:?}");
        assert_eq!(&again.body, body, "key {key} replays its first answer");
    }
}
