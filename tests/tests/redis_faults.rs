//! A service on a Redis that goes away: it fails closed with 503 Problem Details, promptly,
//! while Redis is down or frozen, runs handlers unrecorded where the policy says so, and
//! recovers by itself when Redis is back.
//!
//! Each test starts a `redis-server` of its own. Skipped when `IDEM_TEST_REDIS_URL` is unset
//! (CI sets it) or `redis-server` is not on `PATH`.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use axum::{Json, Router, extract::State, http::StatusCode, routing::post};
use idem::{Idempotency, IdempotencyLayer, OnStoreError, Policy, Scope};
use idem_tests::redis_server::RedisServer;
use idem_tests::{Served, redis_fixture::redis_url};
use serde_json::{Value, json};

/// The store gives up on a call after this long; the runtime's own timeout is a backstop.
const COMMAND_TIMEOUT: Duration = Duration::from_millis(500);
const STORE_TIMEOUT: Duration = Duration::from_secs(1);
/// How long a request may take while Redis is away: well under the client's timeout.
const PROMPT: Duration = Duration::from_millis(2500);

async fn create(
    State(executions): State<Arc<AtomicUsize>>,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let n = executions.fetch_add(1, Ordering::SeqCst) + 1;
    (
        StatusCode::CREATED,
        Json(json!({ "execution": n, "amount": body["amount"] })),
    )
}

/// A service on `url` with `/payments` (fail closed, the default) and `/tips` (run without
/// idempotency when the store fails).
async fn service(url: &str, executions: Arc<AtomicUsize>) -> Served {
    let store = idem_tests::redis_fixture::builder()
        .command_timeout(COMMAND_TIMEOUT)
        .connection_timeout(COMMAND_TIMEOUT)
        .connect(url)
        .await
        .expect("cannot connect to the test's redis-server");
    let idem = Idempotency::builder(store)
        .store_timeout(STORE_TIMEOUT)
        .build();
    let strict = Policy::new().scope(Scope::Global);
    let lenient = strict.on_store_error(OnStoreError::RunWithoutRecord);
    let tips = Router::new()
        .route("/tips", post(create))
        .layer(IdempotencyLayer::new(idem.clone(), lenient));
    let app = Router::new()
        .route("/payments", post(create))
        .layer(IdempotencyLayer::new(idem, strict))
        .merge(tips)
        .with_state(executions);
    Served::start(app).await
}

struct Client {
    http: reqwest::Client,
    service: Served,
}

/// What the client saw.
#[derive(Debug)]
struct Answer {
    status: StatusCode,
    content_type: Option<String>,
    retry_after: Option<String>,
    replayed: bool,
    body: Value,
    took: Duration,
}

impl Client {
    async fn post(&self, path: &str, key: &str) -> Answer {
        let started = Instant::now();
        let response = self
            .http
            .post(self.service.url(path))
            .header("Idempotency-Key", key)
            .json(&json!({ "amount": 100 }))
            .send()
            .await
            .expect("the service did not answer within the client's timeout");
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .map(|value| value.to_str().unwrap().to_owned())
        };
        let (status, content_type, retry_after) = (
            response.status(),
            header("content-type"),
            header("retry-after"),
        );
        let replayed = header("idempotent-replayed").as_deref() == Some("true");
        let body = response.json().await.expect("a JSON body");
        Answer {
            status,
            content_type,
            retry_after,
            replayed,
            body,
            took: started.elapsed(),
        }
    }

    /// Posts until the service answers 201, for at most `within`.
    async fn until_created(&self, path: &str, key: &str, within: Duration) -> Answer {
        let deadline = Instant::now() + within;
        loop {
            let answer = self.post(path, key).await;
            if answer.status == StatusCode::CREATED {
                return answer;
            }
            assert_unavailable(&answer, "while recovering");
            assert!(
                Instant::now() < deadline,
                "the service did not recover within {within:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// A prompt 503 Problem Details with `Retry-After`.
fn assert_unavailable(answer: &Answer, when: &str) {
    assert_eq!(
        answer.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{when}: {answer:?}"
    );
    assert_eq!(
        answer.content_type.as_deref(),
        Some("application/problem+json"),
        "{when}"
    );
    let retry_after: u64 = answer
        .retry_after
        .as_deref()
        .expect("a 503 carries Retry-After")
        .parse()
        .expect("Retry-After in seconds");
    assert!(retry_after >= 1, "{when}");
    assert_eq!(answer.body["status"], 503, "{when}");
    assert!(answer.body["type"].is_string(), "{when}");
    assert!(answer.took < PROMPT, "{when}: took {:?}", answer.took);
}

async fn setup() -> Option<(RedisServer, Client, Arc<AtomicUsize>)> {
    redis_url()?;
    let server = RedisServer::start(&[]).await?;
    let executions = Arc::new(AtomicUsize::new(0));
    let service = service(&server.url(), Arc::clone(&executions)).await;
    let client = Client {
        http: idem_tests::redis_fixture::client(Duration::from_secs(5)),
        service,
    };
    Some((server, client, executions))
}

#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_redis_fails_requests_closed_and_the_service_recovers_when_it_is_back() {
    let Some((mut server, client, executions)) = setup().await else {
        return;
    };

    let first = client.post("/payments", "before").await;
    assert_eq!(first.status, StatusCode::CREATED);
    assert_eq!(executions.load(Ordering::SeqCst), 1);
    let replay = client.post("/payments", "before").await;
    assert!(replay.replayed);

    server.kill();

    // New keys and retries alike: the store cannot say, so nothing runs.
    for key in ["during-1", "during-2", "before", "during-3"] {
        let answer = client.post("/payments", key).await;
        assert_unavailable(&answer, &format!("key {key} while Redis is down"));
    }
    assert_eq!(
        executions.load(Ordering::SeqCst),
        1,
        "no handler ran while Redis was down"
    );

    // A route whose policy says run: it runs, without idempotency, once per request.
    let tip = client.post("/tips", "tip-1").await;
    assert_eq!(tip.status, StatusCode::CREATED);
    assert!(!tip.replayed);
    let again = client.post("/tips", "tip-1").await;
    assert_eq!(again.status, StatusCode::CREATED);
    assert!(!again.replayed, "there is no record to replay");
    assert_eq!(executions.load(Ordering::SeqCst), 3, "both tips ran");

    // Redis comes back on its port; the service reconnects by itself.
    server.restart().await;
    let recovered = client
        .until_created("/payments", "after", Duration::from_secs(10))
        .await;
    assert!(!recovered.replayed);
    let replay = client.post("/payments", "after").await;
    assert_eq!(replay.status, StatusCode::CREATED);
    assert!(replay.replayed, "records are kept again");
    assert_eq!(replay.body, recovered.body);

    // This Redis keeps nothing on disk: the record of the first request died with it, so a
    // retry of that key runs again (see docs/redis.md on persistence).
    let forgotten = client.post("/payments", "before").await;
    assert_eq!(forgotten.status, StatusCode::CREATED);
    assert!(!forgotten.replayed);
    assert_ne!(forgotten.body, first.body);
}

#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_redis_times_out_into_503_and_the_service_recovers_when_it_thaws() {
    let Some((server, client, executions)) = setup().await else {
        return;
    };

    assert_eq!(
        client.post("/payments", "before").await.status,
        StatusCode::CREATED
    );

    // SIGSTOP: the connection stays open and nothing answers, as with a stuck host.
    server.signal("STOP");
    let answer = client.post("/payments", "frozen").await;
    assert_unavailable(&answer, "while Redis is frozen");
    assert!(
        answer.took >= COMMAND_TIMEOUT - Duration::from_millis(50),
        "answered before the command timeout: {:?}",
        answer.took
    );
    let tip = client.post("/tips", "tip-frozen").await;
    assert_eq!(tip.status, StatusCode::CREATED);
    assert!(tip.took < PROMPT);
    assert_eq!(executions.load(Ordering::SeqCst), 2, "only the tip ran");

    server.signal("CONT");
    let recovered = client
        .until_created("/payments", "thawed", Duration::from_secs(10))
        .await;
    assert!(!recovered.replayed);
    let replay = client.post("/payments", "before").await;
    assert!(
        replay.replayed,
        "the record written before the freeze is still there"
    );
}
