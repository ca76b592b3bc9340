//! [`Ledger`]: a transfer service whose handler counts its executions per `Idempotency-Key`,
//! so that a test under faults (a store killed, frozen, failed over) can say how many times
//! each key ran; and [`LedgerService`], one instance of it served over HTTP.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use axum::{
    Json, Router,
    extract::State,
    http::{HeaderMap, StatusCode},
    routing::post,
};
use idem::{Idempotency, IdempotencyLayer, Policy};
use serde_json::{Value, json};
use tokio::task::JoinSet;

use crate::{Answer, Served, gate::Gate, key};

/// How many times the handler ran for each key, and a gate a test may hold it at.
#[derive(Clone, Debug)]
pub struct Ledger {
    executions: Arc<Mutex<HashMap<String, usize>>>,
    /// Every run passes it before it counts.
    pub gate: Gate,
    delay: Duration,
}

impl Ledger {
    /// A ledger whose handler runs at once, after `delay`.
    pub fn open(delay: Duration) -> Self {
        Self {
            executions: Arc::default(),
            gate: Gate::open(),
            delay,
        }
    }

    /// A ledger whose handler waits until its gate is lifted.
    pub fn gated() -> Self {
        Self {
            gate: Gate::closed(),
            ..Self::open(Duration::ZERO)
        }
    }

    /// How many times `key` ran.
    pub fn executions(&self, key: &str) -> usize {
        self.executions
            .lock()
            .unwrap()
            .get(key)
            .copied()
            .unwrap_or(0)
    }

    /// How many times each key ran.
    pub fn all(&self) -> HashMap<String, usize> {
        self.executions.lock().unwrap().clone()
    }

    /// A router with the handler at `POST /transfers` under `idem` and `policy`.
    pub fn router(&self, idem: Idempotency, policy: Policy) -> Router {
        Router::new()
            .route("/transfers", post(transfer))
            .layer(IdempotencyLayer::new(idem, policy))
            .with_state(self.clone())
    }

    /// The keys that ran more than once, with their counts.
    pub fn run_twice(&self) -> HashMap<String, usize> {
        let mut all = self.all();
        all.retain(|_, runs| *runs > 1);
        all
    }
}

/// The transfer handler: passes the gate, takes its time, counts the run for its key, and
/// answers 201 with a fresh transfer id and the run's number for the key.
pub async fn transfer(
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

/// One instance of the transfer service (`POST /transfers` under `IdempotencyLayer`), served
/// over HTTP on a loopback port.
#[derive(Debug)]
pub struct LedgerService {
    /// The instance's runtime.
    pub idem: Idempotency,
    /// Where it listens.
    pub served: Served,
    http: reqwest::Client,
}

impl LedgerService {
    /// Serves the ledger's handler under `idem` and `policy`.
    pub async fn start(idem: Idempotency, policy: Policy, ledger: &Ledger) -> Self {
        let router = ledger.router(idem.clone(), policy);
        Self {
            idem,
            served: Served::start(router).await,
            http: reqwest::Client::new(),
        }
    }

    /// A transfer with `key`, not sent yet.
    pub fn request(&self, key: &str) -> reqwest::RequestBuilder {
        self.http
            .post(self.served.url("/transfers"))
            .header("idempotency-key", key)
            .json(&json!({ "amount": 50000 }))
    }

    /// Sends a transfer with `key` and reads the answer.
    pub async fn send(&self, key: &str) -> Answer {
        Answer::of(self.request(key)).await
    }

    /// Sends a transfer with `key` until it is answered 201 (the first run or a replay), for
    /// at most `within`, retrying every answer that says to retry (503, 409) after a short
    /// pause, as a client honouring `Retry-After` would, only sooner. Answers the 201 and how
    /// many answers before it were 503.
    pub async fn send_until_created(&self, key: &str, within: Duration) -> (Answer, usize) {
        let deadline = tokio::time::Instant::now() + within;
        let mut unavailable = 0;
        loop {
            let answer = self.send(key).await;
            match answer.status {
                StatusCode::CREATED => return (answer, unavailable),
                StatusCode::SERVICE_UNAVAILABLE => {
                    answer.refusal(StatusCode::SERVICE_UNAVAILABLE, "store-unavailable");
                    assert!(answer.header("retry-after").is_some(), "{answer:?}");
                    unavailable += 1;
                }
                StatusCode::CONFLICT => {
                    answer.refusal(StatusCode::CONFLICT, "request-in-flight");
                }
                _ => panic!("key {key}: {answer:?}"),
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "key {key} was not answered 201 within {within:?}: {answer:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Load on one or more instances: workers that each send new keys, every one until it is
/// answered 201 (retrying 503 and 409), then once more, which must be a replay of the same
/// answer, until told to stop.
#[derive(Debug)]
pub struct Load {
    running: Arc<AtomicBool>,
    workers: JoinSet<usize>,
    ledger: Ledger,
    patience: Duration,
}

impl Load {
    /// Starts `workers` workers, spread over `services` (which serve `ledger`'s handler); a
    /// key must be answered within `patience`.
    pub fn start(
        services: &[Arc<LedgerService>],
        ledger: &Ledger,
        workers: usize,
        patience: Duration,
    ) -> Self {
        let running = Arc::new(AtomicBool::new(true));
        let mut set = JoinSet::new();
        for worker in 0..workers {
            let service = Arc::clone(&services[worker % services.len()]);
            let running = Arc::clone(&running);
            set.spawn(async move {
                let mut sent = 0;
                while running.load(Ordering::SeqCst) {
                    let key = key();
                    let (first, _) = service.send_until_created(&key, patience).await;
                    let (again, _) = service.send_until_created(&key, patience).await;
                    assert!(again.replayed(), "{key}: {again:?}");
                    assert_eq!(again.body, first.body, "{key}");
                    sent += 1;
                }
                sent
            });
        }
        Self {
            running,
            workers: set,
            ledger: ledger.clone(),
            patience,
        }
    }

    /// Waits until `more` keys have run besides those that had when it was called: load that
    /// has made progress, counted rather than timed. A worker that failed fails the test here,
    /// with its own message; so does load that makes no progress within the patience.
    pub async fn progress(&mut self, more: usize) {
        let target = self.ledger.all().len() + more;
        let deadline = tokio::time::Instant::now() + self.patience;
        while self.ledger.all().len() < target {
            if let Some(ended) = self.workers.try_join_next() {
                match ended {
                    Err(failed) if failed.is_panic() => {
                        std::panic::resume_unwind(failed.into_panic())
                    }
                    other => panic!("a worker stopped: {other:?}"),
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no {more} more keys ran within {:?}",
                self.patience
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Stops the workers once each has finished its key, and answers how many keys they sent.
    pub async fn stop(self) -> usize {
        self.running.store(false, Ordering::SeqCst);
        self.workers.join_all().await.into_iter().sum()
    }
}
