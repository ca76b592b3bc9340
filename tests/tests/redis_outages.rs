//! One execution per key through Redis outages, against `redis-server` processes that each
//! test starts itself: killed while a handler runs and started again after it finished
//! (with `appendfsync always`, so Redis keeps what it acknowledged), frozen while a claim is
//! on its way (on a Redis that has no script cached yet), and restarted under load.
//!
//! Skipped when `IDEM_TEST_REDIS_URL` is unset (CI sets it) or `redis-server` is not on
//! `PATH`.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use axum::http::StatusCode;
use idem::{Idempotency, Policy, Scope, redis::RedisStore};
use idem_tests::ledger::{Ledger, LedgerService};
use idem_tests::redis_fixture::{fresh_prefix, redis_url};
use idem_tests::{Answer, eventually, key, redis_server::RedisServer};

const COMMAND_TIMEOUT: Duration = Duration::from_millis(500);
const STORE_TIMEOUT: Duration = Duration::from_secs(1);
/// Long enough for anything the runtime does in the background to land on a slow machine.
const PATIENCE: Duration = Duration::from_secs(20);

/// One instance of the service on the Redis at `url`, under `prefix`.
async fn instance(url: &str, prefix: &str, lease: Duration, ledger: &Ledger) -> LedgerService {
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
    LedgerService::start(idem, policy, ledger).await
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
    let first = instance(&server.url(), &prefix, lease, &ledger).await;
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
    let second = instance(&server.url(), &prefix, lease, &ledger).await;
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
    let instance = instance(
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
        instance(
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
