//! The Redis store's durable resumption against a real Redis: what a resumable claim keeps
//! and where, and what its due index does with an entry whose record cannot be resumed (a
//! kept request that does not decode, a record that expired, was removed, completed, or does
//! not read back). Each is logged or dropped, never a panic, and never a run of a step that
//! ended.
//!
//! Needs `IDEM_TEST_REDIS_URL` (CI sets `redis://127.0.0.1:6379`); skipped without it.

use std::{
    sync::atomic::{AtomicUsize, Ordering},
    time::Duration,
};

use axum::{Extension, Router, http::StatusCode, routing::post};
use bytes::Bytes;
use http::{HeaderMap, Method};
use idem::{
    Idempotency, IdempotencyKey, Principal, StoreKey,
    fingerprint::Fingerprint,
    idempotent,
    redis::RedisStore,
    replay::StoredResponse,
    steps::{StepError, Steps},
    store::{
        Claim, ClaimOutcome, LeaseToken, Store,
        held::Held,
        operation::{KeptRequest, RecordedStep, Resumable},
    },
};
use idem_conformance::{fingerprint, new_key};
use idem_tests::redis_fixture::redis_url;
use redis::aio::MultiplexedConnection;

const MINUTE: Duration = Duration::from_secs(60);
const SHORT: Duration = Duration::from_millis(300);

fn request() -> KeptRequest {
    KeptRequest::new(
        Method::POST,
        "/transfers",
        IdempotencyKey::new("due-test").unwrap(),
        Some(Principal::new("alice")),
        HeaderMap::new(),
        Bytes::from_static(b"{\"amount\":1}"),
    )
}

/// A resumable claim of `key` under `token`, with a lease of `lease`, due at once after it.
fn resumable<'a>(
    key: &'a StoreKey,
    fingerprint: &'a Fingerprint,
    token: LeaseToken,
    lease: Duration,
    request: &'a KeptRequest,
) -> Claim<'a> {
    Claim {
        key,
        fingerprint,
        token,
        lease,
        ttl: MINUTE,
        resumable: Some(Resumable {
            request,
            after: Duration::ZERO,
        }),
    }
}

fn created() -> StoredResponse {
    StoredResponse::new(StatusCode::CREATED, &HeaderMap::new(), b"{}").unwrap()
}

async fn store_and_side(url: &str) -> (RedisStore, MultiplexedConnection) {
    let store = idem_tests::redis_fixture::connect(url).await;
    let side = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    (store, side)
}

/// The score of the due index's entry of `key` under `token`, if it has one.
async fn entry_score(
    side: &mut MultiplexedConnection,
    store: &RedisStore,
    key: &StoreKey,
    token: LeaseToken,
) -> Option<f64> {
    let mut entry = key.as_bytes().to_vec();
    entry.extend_from_slice(&token.to_bytes());
    redis::cmd("ZSCORE")
        .arg(format!("{}due", store.prefix()))
        .arg(entry)
        .query_async(side)
        .await
        .unwrap()
}

async fn stored(side: &mut MultiplexedConnection, record: &str) -> Vec<u8> {
    redis::cmd("GET")
        .arg(record)
        .query_async(side)
        .await
        .unwrap()
}

async fn overwrite(side: &mut MultiplexedConnection, record: &str, value: Vec<u8>) {
    let () = redis::cmd("SET")
        .arg(record)
        .arg(value)
        .arg("KEEPTTL")
        .query_async(side)
        .await
        .unwrap();
}

async fn server_ms(side: &mut MultiplexedConnection) -> f64 {
    let (seconds, micros): (u64, u64) = redis::cmd("TIME").query_async(side).await.unwrap();
    (seconds * 1000 + micros / 1000) as f64
}

/// A resumable claim writes its entry in the due index, due a lease and `resume_after` from
/// now, and a record that keeps the request after its header; a look-up says when it is due.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
async fn a_resumable_claim_keeps_its_request_beside_an_entry_of_the_due_index() {
    let Some(url) = redis_url() else {
        return;
    };
    let (store, mut side) = store_and_side(&url).await;
    let (key, fp, token, kept) = (
        new_key(),
        fingerprint("{}"),
        LeaseToken::random(),
        request(),
    );
    let before = server_ms(&mut side).await;
    let claim = Claim {
        resumable: Some(Resumable {
            request: &kept,
            after: Duration::from_secs(5),
        }),
        ..resumable(&key, &fp, token, MINUTE, &kept)
    };
    assert_eq!(store.claim(claim).await.unwrap(), ClaimOutcome::Claimed);
    let after = server_ms(&mut side).await;
    let score = entry_score(&mut side, &store, &key, token)
        .await
        .expect("an entry");
    assert!(
        (before + 65_000.0..=after + 65_000.0).contains(&score),
        "due a lease and resume_after from the claim: {score} ({before}..{after})"
    );
    let record = stored(&mut side, &store.redis_key(&key)).await;
    let encoded = kept.encode();
    assert_eq!(record[1], b'C', "a fresh claim that keeps a request");
    assert_eq!(
        f64::from_be_bytes(record[75..83].try_into().unwrap()),
        5000.0
    );
    assert_eq!(record[91..95], (encoded.len() as u32).to_be_bytes());
    assert_eq!(&record[95..], &encoded[..], "the request, and no steps yet");
    let Some(Held::InFlight(held)) = store.look_up(&key).await.unwrap() else {
        panic!("the key is in flight");
    };
    let resumes_at = held.resumes_at.expect("a durable store says when");
    let due_in = resumes_at.duration_since(held.at).unwrap();
    assert!(
        (Duration::from_secs(64)..=Duration::from_secs(65)).contains(&due_in),
        "{due_in:?}"
    );
    // A step turns it in flight on the server's clock, and keeps the request before the step.
    let step = RecordedStep::new("bank-order", Bytes::from_static(b"{\"id\":1}"));
    store.record_step(&key, token, 0, &step).await.unwrap();
    let record = stored(&mut side, &store.redis_key(&key)).await;
    assert_eq!(record[1], b'F');
    assert_eq!(&record[95..95 + encoded.len()], &encoded[..]);
    assert!(record.ends_with(&step.encode()));
    // Completion leaves a completed record of the usual layout; the entry goes when it falls
    // due and finds it.
    store
        .complete(&key, token, &created(), MINUTE)
        .await
        .unwrap();
    assert_eq!(stored(&mut side, &store.redis_key(&key)).await[1], b'd');
}

/// A record whose kept request does not decode is answered as such (the resumer logs it and
/// resumes nothing), deferred like any other, and left as it is: the client's retry still
/// resumes it, after the step it recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
async fn a_kept_request_that_does_not_decode_is_answered_as_such_and_left_alone() {
    let Some(url) = redis_url() else {
        return;
    };
    let (store, mut side) = store_and_side(&url).await;
    let (key, fp, token, kept) = (
        new_key(),
        fingerprint("{}"),
        LeaseToken::random(),
        request(),
    );
    store
        .claim(resumable(&key, &fp, token, SHORT, &kept))
        .await
        .unwrap();
    let step = RecordedStep::new("bank-order", Bytes::from_static(b"{\"id\":1}"));
    store.record_step(&key, token, 0, &step).await.unwrap();
    // The request's bytes become a request of a version no build knows, its framing intact.
    let mut record = stored(&mut side, &store.redis_key(&key)).await;
    record[95] = 9;
    overwrite(&mut side, &store.redis_key(&key), record).await;
    tokio::time::sleep(SHORT * 2).await;
    let due = store.due(10, MINUTE).await.unwrap();
    assert_eq!(due.len(), 1, "{due:?}");
    assert_eq!(due[0].key, key);
    assert!(due[0].request.is_err(), "{:?}", due[0].request);
    assert!(
        store.due(10, MINUTE).await.unwrap().is_empty(),
        "deferred like any other"
    );
    let retry = store
        .claim(Claim {
            resumable: None,
            ..resumable(&key, &fp, LeaseToken::random(), MINUTE, &kept)
        })
        .await
        .unwrap();
    let ClaimOutcome::Resumed(progress) = retry else {
        panic!("the retry resumes the operation: {retry:?}");
    };
    assert_eq!(progress.steps, [step], "after the step that ended");
}

/// An entry whose record is gone (it expired, or an operator removed it), or completed, or
/// does not read back, answers nothing and is no error; the entries of records that are gone
/// leave the index, and an operation due beside them is answered all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
async fn entries_whose_records_are_gone_or_unreadable_are_skipped() {
    let Some(url) = redis_url() else {
        return;
    };
    let (store, mut side) = store_and_side(&url).await;
    let (fp, kept) = (fingerprint("{}"), request());
    let [expired, removed, completed, unreadable, due] = [(); 5].map(|()| new_key());
    let tokens = [(); 5].map(|()| LeaseToken::random());
    let keys = [expired, removed, completed, unreadable, due];
    for (key, token) in keys.iter().zip(tokens) {
        let claim = resumable(key, &fp, token, SHORT, &kept);
        // The expired one lives no longer than its lease.
        let claim = if *key == expired {
            Claim {
                ttl: SHORT,
                ..claim
            }
        } else {
            claim
        };
        store.claim(claim).await.unwrap();
    }
    store.remove(&removed).await.unwrap();
    let response = created();
    store
        .complete(&completed, tokens[2], &response, MINUTE)
        .await
        .unwrap();
    let mut record = stored(&mut side, &store.redis_key(&unreadable)).await;
    record[0] = 99;
    overwrite(&mut side, &store.redis_key(&unreadable), record).await;
    tokio::time::sleep(SHORT * 2).await;
    let answered = store.due(10, MINUTE).await.expect("no error");
    let answered: Vec<StoreKey> = answered.iter().map(|operation| operation.key).collect();
    assert_eq!(answered, [due], "only the operation that is due");
    for (key, token, gone) in [
        (expired, tokens[0], true),
        (removed, tokens[1], true),
        (completed, tokens[2], true),
        (unreadable, tokens[3], false),
        (due, tokens[4], false),
    ] {
        let entry = entry_score(&mut side, &store, &key, token).await;
        assert_eq!(entry.is_none(), gone, "{key:?}: {entry:?}");
    }
    assert!(store.due(10, MINUTE).await.unwrap().is_empty());
}

/// How many times the handler below ran, and how many times its step did.
static RUNS: AtomicUsize = AtomicUsize::new(0);
static STEP_RUNS: AtomicUsize = AtomicUsize::new(0);

/// A step, then a failure that may pass later on the first run only: the first run leaves the
/// operation suspended after its step, for the resumer.
#[idempotent(scope = "global", resume_after = "1s")]
async fn counted(mut steps: Steps) -> Result<StatusCode, StepError> {
    let run = RUNS.fetch_add(1, Ordering::SeqCst) + 1;
    steps
        .local("count", || async {
            STEP_RUNS.fetch_add(1, Ordering::SeqCst);
            Ok(1)
        })
        .await?;
    if run == 1 {
        return Err(StepError::retryable(StatusCode::SERVICE_UNAVAILABLE));
    }
    Ok(StatusCode::CREATED)
}

/// The resumer, meeting an operation whose kept request does not decode, logs it and runs
/// nothing; the client's retry then resumes the operation after its step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
async fn the_resumer_runs_nothing_for_a_request_that_does_not_decode() {
    let Some(url) = redis_url() else {
        return;
    };
    let (store, mut side) = store_and_side(&url).await;
    let idem = Idempotency::new(store.clone());
    let app = Router::new()
        .route("/counted", post(counted))
        .layer(Extension(idem.clone()));
    let served = idem_tests::Served::start(app.clone()).await;
    let send = || {
        reqwest::Client::new()
            .post(served.url("/counted"))
            .header("idempotency-key", "broken-request")
            .send()
    };
    assert_eq!(
        send().await.unwrap().status(),
        503,
        "suspended after its step"
    );
    let key = StoreKey::new(
        &idem::Scope::Global,
        None,
        &Method::POST,
        "/counted",
        &IdempotencyKey::new("broken-request").unwrap(),
    );
    // Its request becomes one of a version no build knows, its framing intact, before the
    // operation is due (a second after its suspension).
    let mut record = stored(&mut side, &store.redis_key(&key)).await;
    assert_eq!(record[1], b'F');
    record[95] = 9;
    overwrite(&mut side, &store.redis_key(&key), record).await;
    idem.resumer(app)
        .poll(Duration::from_millis(50))
        .start()
        .unwrap();
    // The resumer takes it once due, and defers it by its hold (10 s) whether it runs it or
    // not; a deferral that far ahead says it was taken.
    let deadline = tokio::time::Instant::now() + MINUTE;
    loop {
        let Some(Held::InFlight(held)) = store.look_up(&key).await.unwrap() else {
            panic!("the operation is still in flight");
        };
        let due_in = held
            .resumes_at
            .and_then(|at| at.duration_since(held.at).ok())
            .unwrap_or_default();
        if due_in > Duration::from_secs(5) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "never taken");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(RUNS.load(Ordering::SeqCst), 1, "the resumer ran nothing");
    let retry = send().await.unwrap();
    assert_eq!(retry.status(), 201, "the client's retry resumes it");
    assert_eq!(RUNS.load(Ordering::SeqCst), 2);
    assert_eq!(STEP_RUNS.load(Ordering::SeqCst), 1, "its step ran once");
    idem.shutdown().await;
}
