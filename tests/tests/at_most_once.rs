//! Steps called at most once (docs/steps.md, *At least once, or at most once*), through real
//! HTTP on the memory, Redis, PostgreSQL and MySQL stores: an SMS gateway without keys, whose
//! every call sends an SMS.
//!
//! A run that is abandoned after the call was sent (its handler panics there, as a process
//! that dies would leave it) is never followed by a second call: the operation ends 502
//! `step-outcome-unknown`, replayed to every retry, or a step of the handler's asks the
//! gateway what became of the first call. And a process killed with SIGKILL after the call
//! was sent (`src/bin/sms_service.rs`, on Redis): the process started after it never calls
//! again either.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicU32, Ordering},
    },
    time::Duration,
};

use axum::{
    Extension, Json, Router,
    extract::State,
    http::{HeaderMap, StatusCode},
    routing::post,
};
use idem::{
    Idempotency, Store, idempotent,
    steps::{StepError, Steps},
};
use idem_tests::{Answer, Served, key, redis_fixture, step_stores::step_stores};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
    sync::mpsc,
};

/// The SMS gateway, and how the next run of the handler fails.
#[derive(Clone, Default)]
struct Gateway {
    /// The references each SMS was sent under.
    sent: Arc<Mutex<Vec<String>>>,
    /// How often the gateway was asked about an SMS.
    asked: Arc<AtomicU32>,
    /// How many of the next runs die right after sending (the answer never reaches them).
    deaths: Arc<AtomicU32>,
    /// How many of the next runs fail retryably after their SMS, at a later step.
    later_failures: Arc<AtomicU32>,
}

impl Gateway {
    fn sent(&self) -> Vec<String> {
        self.sent.lock().unwrap().clone()
    }

    fn take(counter: &AtomicU32) -> bool {
        counter
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }

    /// Sends an SMS under `reference`; a run told to die does so once it is sent.
    fn send(&self, reference: &str) -> Result<String, StepError> {
        let count = {
            let mut sent = self.sent.lock().unwrap();
            sent.push(reference.to_owned());
            sent.len()
        };
        assert!(
            !Self::take(&self.deaths),
            "the run dies after the SMS was sent"
        );
        Ok(format!("sms_{count}"))
    }

    /// What became of the SMS sent under `reference`.
    fn find(&self, reference: &str) -> Option<String> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        let sent = self.sent.lock().unwrap();
        let at = sent.iter().position(|sent| sent == reference)?;
        Some(format!("sms_{}", at + 1))
    }
}

/// The notification: the SMS, sent at most once, then a later step that may fail.
async fn notify(gateway: &Gateway, steps: &mut Steps, ask: bool) -> Result<String, StepError> {
    let send = |key: idem::IdempotencyKey| {
        let gateway = gateway.clone();
        async move { gateway.send(key.as_str()) }
    };
    let sms: String = if ask {
        let find = |key: idem::IdempotencyKey| {
            let gateway = gateway.clone();
            async move {
                match gateway.find(key.as_str()) {
                    Some(found) => Ok(found),
                    None => gateway.send(key.as_str()),
                }
            }
        };
        steps.at_most_once_or_ask("sms", send, find).await?
    } else {
        steps.at_most_once("sms", send).await?
    };
    let failing = Gateway::take(&gateway.later_failures);
    steps
        .local("log", || async move {
            if failing {
                return Err(StepError::retryable(StatusCode::SERVICE_UNAVAILABLE));
            }
            Ok(1_u32)
        })
        .await?;
    Ok(sms)
}

#[idempotent(scope = "global")]
async fn unasked(
    State(gateway): State<Gateway>,
    mut steps: Steps,
    Json(_to): Json<Value>,
) -> Result<(StatusCode, Json<Value>), StepError> {
    let sms = notify(&gateway, &mut steps, false).await?;
    Ok((StatusCode::CREATED, Json(json!({ "sms": sms }))))
}

#[idempotent(scope = "global")]
async fn asked(
    State(gateway): State<Gateway>,
    mut steps: Steps,
    Json(_to): Json<Value>,
) -> Result<(StatusCode, Json<Value>), StepError> {
    let sms = notify(&gateway, &mut steps, true).await?;
    Ok((StatusCode::CREATED, Json(json!({ "sms": sms }))))
}

struct Service {
    gateway: Gateway,
    served: Served,
    http: reqwest::Client,
}

impl Service {
    async fn on(store: Arc<dyn Store>) -> Self {
        let gateway = Gateway::default();
        let app = Router::new()
            .route("/unasked", post(unasked))
            .route("/asked", post(asked))
            .with_state(gateway.clone())
            .layer(Extension(Idempotency::from_arc(store)));
        Self {
            gateway,
            served: Served::start(app).await,
            http: redis_fixture::client(Duration::from_secs(30)),
        }
    }

    async fn post(&self, path: &str, key: &str) -> Answer {
        Answer::of(
            self.http
                .post(self.served.url(path))
                .header("idempotency-key", key)
                .json(&json!({ "to": "+4412345678" })),
        )
        .await
    }
}

async fn stores() -> Vec<(&'static str, Arc<dyn Store>)> {
    step_stores("the at-most-once suite").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_whose_run_died_after_the_call_is_never_called_again() {
    for (store, on) in stores().await {
        let service = Service::on(on).await;
        service.gateway.deaths.store(1, Ordering::SeqCst);
        let key = key();
        let died = service.post("/unasked", &key).await;
        died.problem(StatusCode::INTERNAL_SERVER_ERROR, "handler-failed");
        let unknown = service.post("/unasked", &key).await;
        let problem = unknown.problem(StatusCode::BAD_GATEWAY, "step-outcome-unknown");
        assert!(!unknown.replayed(), "{store}: {unknown:?}");
        assert!(
            problem["detail"].as_str().unwrap().contains("`sms`"),
            "{store}: {problem}"
        );
        for _ in 0..3 {
            let again = service.post("/unasked", &key).await;
            again.problem(StatusCode::BAD_GATEWAY, "step-outcome-unknown");
            assert!(again.replayed(), "{store}: {again:?}");
            assert_eq!(again.body, unknown.body, "{store}");
        }
        assert_eq!(service.gateway.sent().len(), 1, "{store}: one SMS");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_that_ended_gives_its_output_and_is_not_called_again() {
    for (store, on) in stores().await {
        let service = Service::on(on).await;
        service.gateway.later_failures.store(1, Ordering::SeqCst);
        let key = key();
        let first = service.post("/unasked", &key).await;
        assert_eq!(
            first.status,
            StatusCode::SERVICE_UNAVAILABLE,
            "{store}: {first:?}"
        );
        let resumed = service.post("/unasked", &key).await;
        assert_eq!(resumed.created(), json!({ "sms": "sms_1" }), "{store}");
        assert!(service.post("/unasked", &key).await.replayed(), "{store}");
        assert_eq!(service.gateway.sent().len(), 1, "{store}: one SMS");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_whose_run_died_is_asked_about_by_the_reference_it_sent() {
    for (store, on) in stores().await {
        let service = Service::on(on).await;
        service.gateway.deaths.store(1, Ordering::SeqCst);
        let key = key();
        let died = service.post("/asked", &key).await;
        died.problem(StatusCode::INTERNAL_SERVER_ERROR, "handler-failed");
        let found = service.post("/asked", &key).await;
        assert_eq!(found.created(), json!({ "sms": "sms_1" }), "{store}");
        assert_eq!(service.gateway.sent().len(), 1, "{store}: one SMS");
        assert_eq!(service.gateway.asked.load(Ordering::SeqCst), 1, "{store}");
        let again = service.post("/asked", &key).await;
        assert!(again.replayed(), "{store}");
        assert_eq!(service.gateway.asked.load(Ordering::SeqCst), 1, "{store}");
    }
}

/// A gateway that records the reference of each SMS, tells the test, and never answers: the
/// answer of a call that a killed process was waiting for.
async fn silent_gateway() -> (Served, Arc<Mutex<Vec<String>>>, mpsc::UnboundedReceiver<()>) {
    let references = Arc::new(Mutex::new(Vec::new()));
    let (called, calls) = mpsc::unbounded_channel();
    let sms = {
        let references = Arc::clone(&references);
        move |headers: HeaderMap| async move {
            let reference = headers
                .get("reference")
                .and_then(|value| value.to_str().ok());
            references
                .lock()
                .unwrap()
                .push(reference.unwrap_or_default().to_owned());
            let _ = called.send(());
            std::future::pending::<String>().await
        }
    };
    let served = Served::start(Router::new().route("/sms", post(sms))).await;
    (served, references, calls)
}

/// `src/bin/sms_service.rs` as a process, on the Redis at `redis` under `prefix`; killed when
/// dropped.
struct SmsService {
    child: Child,
    url: String,
}

impl SmsService {
    async fn start(redis: &str, prefix: &str, gateway: &str) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sms_service"))
            .env("SMS_REDIS_URL", redis)
            .env("SMS_REDIS_PREFIX", prefix)
            .env("SMS_GATEWAY", gateway)
            .stdout(std::process::Stdio::piped())
            // Its conflicts while the killed run's lease lapses would fill the test's output.
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("the SMS service starts");
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .await
            .unwrap();
        let url = first
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
            .to_owned();
        Self { child, url }
    }

    fn notify(&self, http: &reqwest::Client, key: &str) -> reqwest::RequestBuilder {
        http.post(format!("{}/notify", self.url))
            .header("idempotency-key", key)
            .json(&json!({ "to": "+4412345678" }))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_whose_process_was_killed_after_the_call_is_never_called_again() {
    let Some(redis) = redis_fixture::redis_url() else {
        return;
    };
    let prefix = redis_fixture::fresh_prefix();
    let (gateway, references, mut calls) = silent_gateway().await;
    let mut killed = SmsService::start(&redis, &prefix, &gateway.url("")).await;
    let http = redis_fixture::client(Duration::from_secs(30));
    let key = key();
    let sending = tokio::spawn(killed.notify(&http, &key).send());
    tokio::time::timeout(Duration::from_secs(10), calls.recv())
        .await
        .expect("the SMS was sent")
        .unwrap();
    killed.child.kill().await.unwrap();
    assert!(
        sending.await.unwrap().is_err(),
        "the killed process answered"
    );

    // The next process resumes the operation (its resumer, or the client's retry, whichever
    // takes it first once the lease lapsed) and ends it without calling.
    let next = SmsService::start(&redis, &prefix, &gateway.url("")).await;
    let ended = tokio::time::timeout(Duration::from_secs(15), async {
        loop {
            let answer = Answer::of(next.notify(&http, &key)).await;
            if answer.status != StatusCode::CONFLICT {
                break answer;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the operation ended");
    ended.problem(StatusCode::BAD_GATEWAY, "step-outcome-unknown");
    for _ in 0..3 {
        let again = Answer::of(next.notify(&http, &key)).await;
        again.problem(StatusCode::BAD_GATEWAY, "step-outcome-unknown");
        assert!(again.replayed(), "{again:?}");
    }
    let sent = references.lock().unwrap().clone();
    assert_eq!(sent.len(), 1, "one SMS: {sent:?}");
    assert!(sent[0].ends_with(":sms"), "{sent:?}");
}
