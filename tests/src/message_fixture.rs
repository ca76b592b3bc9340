//! Message handlers for the broker tests, and the effect they have: a counter of runs, per
//! key, that a test reads to check that each key ran exactly once.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{Json, extract::State};
use idem::{
    idempotent,
    message::{MessageError, RunnerStats},
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{eventually, gate::Gate};

/// An event as the test handlers read it.
#[derive(Debug, Deserialize)]
pub struct Event {
    /// The business id the JSON-keyed handlers key on.
    pub id: String,
    /// What the handler does: `ok`, `fail` (a retryable error), `terminal`, `panic`.
    #[serde(default)]
    pub does: String,
}

/// An event body: `{"id": id, "does": does}`.
pub fn event(id: &str, does: &str) -> Value {
    json!({ "id": id, "does": does })
}

/// What the handlers did, shared with the test.
#[derive(Clone, Debug)]
pub struct Effects {
    /// Each handler waits here before it acts.
    pub gate: Gate,
    runs: Arc<Mutex<HashMap<String, usize>>>,
    attempts: Arc<Mutex<HashMap<String, usize>>>,
}

impl Effects {
    /// Effects whose handlers pass the gate at once.
    pub fn new() -> Self {
        Self::with_gate(Gate::open())
    }

    /// Effects whose handlers wait at `gate`.
    pub fn with_gate(gate: Gate) -> Self {
        Self {
            gate,
            runs: Arc::default(),
            attempts: Arc::default(),
        }
    }

    /// How many times the handler's effect happened for `id`.
    pub fn runs(&self, id: &str) -> usize {
        self.runs.lock().unwrap().get(id).copied().unwrap_or(0)
    }

    /// How many effects happened in all.
    pub fn total(&self) -> usize {
        self.runs.lock().unwrap().values().sum()
    }

    /// How many times the handler was called for `id`, failures included.
    pub fn attempts(&self, id: &str) -> usize {
        self.attempts.lock().unwrap().get(id).copied().unwrap_or(0)
    }

    async fn act(&self, event: &Event) -> Result<(), MessageError> {
        *self
            .attempts
            .lock()
            .unwrap()
            .entry(event.id.clone())
            .or_default() += 1;
        self.gate.pass().await;
        match event.does.as_str() {
            "fail" => return Err(MessageError::retry("the test says this fails for now")),
            "terminal" => return Err(MessageError::terminal("the test says this never works")),
            "panic" => panic!("the test says this panics"),
            // A handler with some work to do, so that deliveries overlap.
            "slow" => tokio::time::sleep(Duration::from_millis(200)).await,
            _ => {}
        }
        *self
            .runs
            .lock()
            .unwrap()
            .entry(event.id.clone())
            .or_default() += 1;
        Ok(())
    }
}

impl Default for Effects {
    fn default() -> Self {
        Self::new()
    }
}

/// Keys on the event's `id` member: one effect per business event, whatever its message id.
#[idempotent(key = json("/id"), lease = "1s", ttl = "1h")]
pub async fn by_event_id(
    State(effects): State<Effects>,
    Json(event): Json<Event>,
) -> Result<(), MessageError> {
    effects.act(&event).await
}

/// Keys on the event's `id` member, and leaves its `sentAt` out of the fingerprint: the same
/// event sent again at another time is a duplicate, not a poison message.
#[idempotent(key = json("/id"), lease = "1s", ttl = "1h", fingerprint_omit = ["/sentAt"])]
pub async fn by_event_id_whenever_sent(
    State(effects): State<Effects>,
    Json(event): Json<Event>,
) -> Result<(), MessageError> {
    effects.act(&event).await
}

/// Keys on the publisher's message id, `Nats-Msg-Id`.
#[idempotent(key = header("Nats-Msg-Id"), lease = "1s", ttl = "1h")]
pub async fn by_message_id(
    State(effects): State<Effects>,
    Json(event): Json<Event>,
) -> Result<(), MessageError> {
    effects.act(&event).await
}

/// Keys on the AMQP `message-id` property.
#[idempotent(key = header("message-id"), lease = "1s", ttl = "1h")]
pub async fn by_amqp_message_id(
    State(effects): State<Effects>,
    Json(event): Json<Event>,
) -> Result<(), MessageError> {
    effects.act(&event).await
}

/// Waits until `check` holds of the runner's counters, for at most `within`.
pub async fn stats_reach(
    stats: &RunnerStats,
    within: Duration,
    check: impl Fn(&RunnerStats) -> bool,
) {
    let reached = eventually(within, async || check(stats)).await;
    assert!(
        reached,
        "the runner's counters did not get there: {}",
        describe(stats)
    );
}

/// The counters, for a failing assertion.
pub fn describe(stats: &RunnerStats) -> String {
    format!(
        "completed {}, duplicates {}, deferred {}, retried {}, ended {}, unsettled {}",
        stats.completed(),
        stats.duplicates(),
        stats.deferred(),
        stats.retried(),
        stats.ended(),
        stats.unsettled()
    )
}

/// A runner running in a task of its own until [`stop`](Self::stop).
#[derive(Debug)]
pub struct Running {
    /// Its counters.
    pub stats: RunnerStats,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), idem::message::RunnerError>>,
}

impl Running {
    /// Runs `runner` over `source`.
    pub fn start<S: idem::message::MessageSource>(
        runner: idem::message::Runner,
        source: S,
    ) -> Self {
        let stats = runner.stats();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(runner.run(source, async {
            let _ = stopped.await;
        }));
        Self {
            stats,
            stop: Some(stop),
            task,
        }
    }

    /// Stops it gracefully and answers how its run ended.
    pub async fn stop(mut self) -> Result<(), idem::message::RunnerError> {
        let _ = self.stop.take().expect("stopped once").send(());
        tokio::time::timeout(Duration::from_secs(30), &mut self.task)
            .await
            .expect("the runner stops")
            .expect("the runner does not panic")
    }

    /// How its run ended, when it ended on its own (a refusal at start-up).
    pub async fn ended(mut self) -> Result<(), idem::message::RunnerError> {
        tokio::time::timeout(Duration::from_secs(30), &mut self.task)
            .await
            .expect("the runner ends")
            .expect("the runner does not panic")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The state of [`write_row`]: the table its rows go to.
#[derive(Clone, Debug)]
pub struct Rows(pub std::sync::Arc<str>);

/// Writes one row per event into the table of its state, in the message's own PostgreSQL
/// transaction: the row and the key's completion commit together. Keyed on the event's `id`.
#[idempotent(key = json("/id"), lease = "2s", ttl = "1h")]
pub async fn write_row(
    State(Rows(table)): State<Rows>,
    mut tx: idem::extract::Tx,
    Json(event): Json<Event>,
) -> Result<(), MessageError> {
    let insert = format!("INSERT INTO {table} (id) VALUES ($1)");
    sqlx::query(sqlx::AssertSqlSafe(insert))
        .bind(&event.id)
        .execute(tx.conn::<sqlx::PgConnection>().await?)
        .await?;
    Ok(())
}

/// A source that notes which delivery of its message each delivery is, and, if asked,
/// never acknowledges: at the ack, each says so on stdout (`holding the ack of <id>`) and
/// waits forever, for a consumer that the test kills (or whose channel it closes) between
/// its commit and its ack.
#[derive(Debug)]
pub struct Watched<S> {
    source: S,
    hold_acks: bool,
    /// The attempt of each delivery, in order.
    pub attempts: Arc<Mutex<Vec<u64>>>,
}

impl<S> Watched<S> {
    /// `source`, its acks sent.
    pub fn new(source: S) -> Self {
        Self {
            source,
            hold_acks: false,
            attempts: Arc::default(),
        }
    }

    /// `source`, its acks held forever.
    pub fn holding_acks(source: S) -> Self {
        Self {
            hold_acks: true,
            ..Self::new(source)
        }
    }
}

/// A delivery of [`Watched`].
#[derive(Debug)]
pub struct Held<D> {
    delivery: D,
    hold_ack: bool,
}

impl<S: idem::message::MessageSource> idem::message::MessageSource for Watched<S> {
    type Delivery = Held<S::Delivery>;

    fn route(&self) -> String {
        self.source.route()
    }

    async fn check(
        &mut self,
        needs: idem::message::Requirements,
    ) -> Result<(), idem::message::CheckError> {
        self.source.check(needs).await
    }

    async fn next(&mut self) -> Option<Result<Held<S::Delivery>, idem::message::BrokerError>> {
        use idem::message::Delivery as _;
        let delivery = self.source.next().await?;
        Some(delivery.map(|delivery| {
            self.attempts.lock().unwrap().push(delivery.attempt());
            Held {
                delivery,
                hold_ack: self.hold_acks,
            }
        }))
    }
}

impl<D: idem::message::Delivery> idem::message::Delivery for Held<D> {
    fn headers(&self) -> http::HeaderMap {
        self.delivery.headers()
    }

    fn payload(&self) -> bytes::Bytes {
        self.delivery.payload()
    }

    fn attempt(&self) -> u64 {
        self.delivery.attempt()
    }

    async fn ack(self) -> Result<(), idem::message::BrokerError> {
        if !self.hold_ack {
            return self.delivery.ack().await;
        }
        let event: Value = serde_json::from_slice(&self.delivery.payload()).unwrap_or_default();
        println!("holding the ack of {}", event["id"].as_str().unwrap_or("?"));
        std::future::pending().await
    }

    async fn redeliver(self, delay: Duration) -> Result<(), idem::message::BrokerError> {
        self.delivery.redeliver(delay).await
    }

    async fn end(self, reason: &str) -> Result<(), idem::message::BrokerError> {
        self.delivery.end(reason).await
    }

    async fn in_progress(&self) -> Result<(), idem::message::BrokerError> {
        self.delivery.in_progress().await
    }
}
