//! The durability of claims on a primary with one replica (`RedisStoreBuilder::connect` with a
//! `Durability`), each test with servers of its own: a claim that cannot reach its replica
//! (frozen with `kill -STOP`) is released and answered 503 with `Retry-After`, the handler does
//! not run, and the key is free again at once; a completion that cannot is answered, counted,
//! and kept by the process until it lands; a claim that waits for its replica holds up no
//! other request; and `WAITAOF`, refused by a server that lacks it (before Redis 7.2).
//!
//! Skipped when `IDEM_TEST_REDIS_URL` is unset (CI sets it) or `redis-server` is not on
//! `PATH`. The test of `WAITAOF` itself runs where `redis-server` is 7.2 or later, and shows
//! as ignored elsewhere.

use std::time::Duration;

use axum::http::{Method, StatusCode};
use idem::{
    Idempotency, IdempotencyKey, OnStoreError, Policy, Scope, StoreKey, redis::Durability,
    redis::RedisStore,
};
use idem_tests::{
    eventually, key,
    ledger::{Ledger, LedgerService},
    redis_fixture::redis_url,
    redis_server::RedisServer,
};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use redis::{Value, aio::ConnectionManager};

const COMMAND_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a claim waits for a replica the test froze: it never comes, so short.
const FROZEN_WAIT: Duration = Duration::from_millis(300);
/// Long enough for anything the runtime does in the background to land on a slow machine.
const PATIENCE: Duration = Duration::from_secs(20);

/// A primary and its replica, in sync; `None` (saying why) when the test is skipped.
async fn primary_and_replica() -> Option<(RedisServer, RedisServer)> {
    redis_url()?;
    let primary = RedisServer::start(&["--repl-diskless-sync-delay", "0"]).await?;
    let replica = RedisServer::start_replica_of(&primary).await?;
    Some((primary, replica))
}

async fn service(
    primary: &RedisServer,
    durability: Durability,
    ledger: &Ledger,
) -> (LedgerService, RedisStore<ConnectionManager>) {
    let store = idem_tests::redis_fixture::builder()
        .command_timeout(COMMAND_TIMEOUT)
        .durability(durability)
        .connect(primary.url())
        .await
        .expect("the primary answers");
    let idem = Idempotency::builder(store.clone())
        .store_timeout(COMMAND_TIMEOUT * 2 + durability.timeout())
        .build();
    let policy = Policy::new().scope(Scope::Global);
    (LedgerService::start(idem, policy, ledger).await, store)
}

/// The Redis key of the record of a transfer with `key`, as the service's layer makes it.
fn record_of(store: &RedisStore<ConnectionManager>, key: &str) -> String {
    let key = IdempotencyKey::new(key).unwrap();
    store.redis_key(&StoreKey::new(
        &Scope::Global,
        None,
        &Method::POST,
        "/transfers",
        &key,
    ))
}

async fn exists(server: &RedisServer, record: &str) -> bool {
    let mut connection = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let exists: Value = redis::cmd("EXISTS")
        .arg(record)
        .query_async(&mut connection)
        .await
        .unwrap();
    exists == Value::Int(1)
}

/// The replica is frozen: a claim cannot reach it within the wait, so the store releases it
/// and the service answers 503 with `Retry-After`; the handler does not run and no record is
/// left. Once the replica answers again, the same key runs at once (it is not held in flight).
#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_claim_short_of_its_replica_is_refused_and_its_key_stays_free() {
    let Some((primary, replica)) = primary_and_replica().await else {
        return;
    };
    let ledger = Ledger::open(Duration::ZERO);
    let (service, store) = service(&primary, Durability::replicas(1, FROZEN_WAIT), &ledger).await;
    let key = key();

    replica.signal("STOP");
    let refused = service.send(&key).await;
    refused.refusal(StatusCode::SERVICE_UNAVAILABLE, "store-unavailable");
    assert!(refused.header("retry-after").is_some(), "{refused:?}");
    assert_eq!(ledger.executions(&key), 0, "the handler did not run");
    assert!(
        !exists(&primary, &record_of(&store, &key)).await,
        "the claim was released"
    );

    replica.signal("CONT");
    replica.wait_in_sync(&primary).await;
    let answer = service.send(&key).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    assert!(!answer.replayed());
    assert_eq!(ledger.executions(&key), 1);
}

/// A store that waits for a replica, on a server that has none, refuses every claim: the
/// durability asked for cannot be met, and nothing runs.
#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_store_waiting_for_a_replica_that_does_not_exist_runs_nothing() {
    if redis_url().is_none() {
        return;
    }
    let Some(alone) = RedisServer::start(&[]).await else {
        return;
    };
    let ledger = Ledger::open(Duration::ZERO);
    let (service, _) = service(&alone, Durability::replicas(1, FROZEN_WAIT), &ledger).await;
    for _ in 0..3 {
        service
            .send(&key())
            .await
            .refusal(StatusCode::SERVICE_UNAVAILABLE, "store-unavailable");
    }
    assert!(ledger.all().is_empty());
}

/// `on_store_error = "run"` trades idempotency for availability when the store cannot be
/// reached; a claim the store refused as not durable is not that, and still runs nothing.
#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_claim_short_of_its_replica_runs_nothing_even_when_the_route_runs_without_records() {
    if redis_url().is_none() {
        return;
    }
    let Some(alone) = RedisServer::start(&[]).await else {
        return;
    };
    let store = idem_tests::redis_fixture::builder()
        .command_timeout(COMMAND_TIMEOUT)
        .durability(Durability::replicas(1, FROZEN_WAIT))
        .connect(alone.url())
        .await
        .expect("the server answers");
    let idem = Idempotency::builder(store).build();
    let policy = Policy::new()
        .scope(Scope::Global)
        .on_store_error(OnStoreError::RunWithoutRecord);
    let ledger = Ledger::open(Duration::ZERO);
    let service = LedgerService::start(idem, policy, &ledger).await;
    let refused = service.send(&key()).await;
    refused.refusal(StatusCode::SERVICE_UNAVAILABLE, "store-unavailable");
    assert!(refused.header("retry-after").is_some(), "{refused:?}");
    assert!(ledger.all().is_empty(), "the handler did not run");
}

/// The counter of writes short of their target, by call.
fn shortfalls(snapshotter: &Snapshotter, call: &str) -> u64 {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, ..)| key.key().name() == "idem_redis_durability_shortfalls_total")
        .filter(|(key, ..)| {
            key.key()
                .labels()
                .any(|l| l.key() == "call" && l.value() == call)
        })
        .map(|(.., value)| match value {
            DebugValue::Counter(count) => count,
            other => panic!("a counter, not {other:?}"),
        })
        .sum()
}

/// The replica is frozen while the handler runs: the completion cannot reach it. The caller
/// still gets the handler's answer; the shortfall is counted; the service keeps the result
/// and answers a retry from its copy; and once the replica answers again, the completion
/// lands and the record is on the replica.
#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[test]
fn a_completion_short_of_its_replica_is_answered_counted_and_kept_until_it_lands() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    // The counter is read from this thread's recorder, so the whole test runs on it.
    metrics::with_local_recorder(&recorder, || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(completion_short_of_its_replica(&snapshotter));
    });
}

async fn completion_short_of_its_replica(snapshotter: &Snapshotter) {
    let Some((primary, replica)) = primary_and_replica().await else {
        return;
    };
    let ledger = Ledger::gated();
    let (service, store) = service(&primary, Durability::replicas(1, FROZEN_WAIT), &ledger).await;
    let key = key();

    let mut first = tokio::spawn(idem_tests::Answer::of(service.request(&key)));
    tokio::select! {
        () = ledger.gate.arrival(PATIENCE) => {}
        answer = &mut first => panic!("answered before the handler ran: {answer:?}"),
    }
    replica.signal("STOP");
    ledger.gate.lift();
    let first = first.await.unwrap();
    assert_eq!(first.status, StatusCode::CREATED, "answered: {first:?}");
    assert_eq!(shortfalls(snapshotter, "complete"), 1);
    assert_eq!(shortfalls(snapshotter, "claim"), 0);
    assert_eq!(service.idem.pending_completions(), 1, "kept by the service");
    let retry = service.send(&key).await;
    assert!(retry.replayed(), "from the service's copy: {retry:?}");
    assert_eq!(retry.body, first.body);

    replica.signal("CONT");
    assert!(
        eventually(PATIENCE, async || service.idem.pending_completions() == 0).await,
        "the completion landed once the replica answered"
    );
    let record = record_of(&store, &key);
    let mut on_replica = redis::Client::open(replica.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    assert_eq!(
        idem_tests::redis_fixture::state_of(&mut on_replica, &record).await,
        Some(b'd'),
        "the replica has the completion"
    );
    assert_eq!(ledger.executions(&key), 1);
}

/// While a claim waits for a frozen replica on a connection of its own, a replay on the same
/// store is answered at once: the wait holds up no other request.
#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_claim_waiting_for_its_replica_holds_up_no_other_request() {
    let Some((primary, replica)) = primary_and_replica().await else {
        return;
    };
    let ledger = Ledger::open(Duration::ZERO);
    // A wait far longer than a replay takes, so that the order of the two answers cannot be
    // the machine's doing.
    let (service, _) = service(&primary, Durability::replicas(1, PATIENCE), &ledger).await;
    let done = key();
    service.send(&done).await;

    replica.signal("STOP");
    let waiting = tokio::spawn(idem_tests::Answer::of(service.request(&key())));
    assert!(
        eventually(PATIENCE, async || blocked_in_wait(&primary).await).await,
        "the claim waits for its replica"
    );
    let replay = service.send(&done).await;
    assert!(replay.replayed(), "{replay:?}");
    assert!(
        !waiting.is_finished(),
        "the claim still waits for its replica"
    );
    replica.signal("CONT");
    let claimed = waiting.await.unwrap();
    assert_eq!(claimed.status, StatusCode::CREATED, "{claimed:?}");
}

/// Whether a client of `server` is blocked in `WAIT` (`CLIENT LIST`).
async fn blocked_in_wait(server: &RedisServer) -> bool {
    let mut connection = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let clients: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(&mut connection)
        .await
        .unwrap();
    clients.lines().any(|client| client.contains(" cmd=wait "))
}

/// `WAITAOF` needs Redis 7.2: on an older server, a store asked for the append-only file's
/// durability refuses to connect, and says why.
#[cfg_attr(
    any(not(idem_test_redis), idem_test_waitaof),
    ignore = "needs IDEM_TEST_REDIS_URL, and a redis-server older than 7.2 (without WAITAOF)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_append_only_file_durability_is_refused_without_waitaof() {
    if redis_url().is_none() {
        return;
    }
    let Some(server) = RedisServer::start_durable().await else {
        return;
    };
    let refused = RedisStore::builder()
        .durability(Durability::append_only_file(0, FROZEN_WAIT))
        .connect(server.url())
        .await
        .expect_err("a server without WAITAOF is refused");
    // What `main` prints for the error it returns: the store's reason is in the one line.
    let message = format!("{refused:?}");
    assert!(
        message.contains("WAITAOF") && message.contains("7.2"),
        "{message}"
    );
}

/// With `WAITAOF` (Redis 7.2 and later) on a server that syncs its append-only file only
/// every second: a request answered 201 has its record on disk, so a `kill -9` right after
/// it loses nothing, and its retry is a replay.
#[cfg_attr(
    not(all(idem_test_redis, idem_test_waitaof)),
    ignore = "needs IDEM_TEST_REDIS_URL and redis-server 7.2 or later (WAITAOF)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_append_only_file_durability_survives_a_kill_9() {
    if redis_url().is_none() {
        return;
    }
    let Some(mut server) = RedisServer::start_with_aof_every_second().await else {
        return;
    };
    let ledger = Ledger::open(Duration::ZERO);
    let durability = Durability::append_only_file(0, Duration::from_secs(2));
    let (service, _) = service(&server, durability, &ledger).await;
    let key = key();
    let first = service.send(&key).await;
    assert_eq!(first.status, StatusCode::CREATED, "{first:?}");
    server.kill();
    server.restart().await;
    let (retry, _) = service.send_until_created(&key, PATIENCE).await;
    assert!(retry.replayed(), "{retry:?}");
    assert_eq!(retry.body, first.body);
    assert_eq!(ledger.executions(&key), 1);
}
