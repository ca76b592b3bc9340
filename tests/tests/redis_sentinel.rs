//! [`RedisStore`] on a primary with two replicas behind Redis Sentinel
//! (`RedisStoreBuilder::connect_sentinel`), each test with servers of its own: the
//! conformance rules through the connection that follows the primary; a failover Sentinel
//! makes on demand (`SENTINEL FAILOVER`) and one it makes after the primary was killed
//! (`kill -9`), both while requests run; and the window in which a failover loses a claim
//! that no replica received, shown deterministically (the replicas frozen and their links
//! cut, the claim made, the primary killed, a replica promoted, the key sent again): without
//! `WAIT` the key runs twice, with it the claim is refused at once and the key runs once.
//!
//! Skipped when `IDEM_TEST_REDIS_URL` is unset (CI sets it) or `redis-server` is not on
//! `PATH`.

use std::{sync::Arc, time::Duration};

use axum::http::{Method, StatusCode};
use idem::{
    Idempotency, IdempotencyKey, Policy, Scope, StoreKey, redis::Durability, redis::RedisStore,
    redis::SentinelConnection,
};
use idem_conformance::{self, StoreUnderTest};
use idem_tests::{
    key,
    ledger::{Ledger, LedgerService, Load},
    redis_fixture::redis_url,
    redis_sentinel::{NAME, SentinelGroup},
};
use redis::Value;

/// Generous, for a machine whose two cores the servers share with the service.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a durable claim waits for its replicas under load: far longer than a replica on
/// loopback takes.
const WAIT: Duration = Duration::from_secs(2);
/// A durable store waits for both replicas: whichever Sentinel promotes has every claim. (With
/// one of two, a failover Sentinel starts while the primary still takes writes may promote
/// the replica that did not acknowledge the latest ones.)
const REPLICAS: u32 = 2;
/// How long a claim waits for replicas the test froze: they never answer, so short.
const FROZEN_WAIT: Duration = Duration::from_millis(300);
/// How long a key may take to be answered 201 through a failover.
const PATIENCE: Duration = Duration::from_secs(60);
/// The service's lease, well inside [`PATIENCE`]. Releases are not waited for (a release
/// that a failover loses delays a retry and runs nothing twice): a claim that reached the
/// promoted replica and whose release did not leaves its key in flight until the lease
/// lapses, then a retry takes it over. With the default lease (60 s) that wait alone is the
/// whole patience.
const LEASE: Duration = Duration::from_secs(10);

async fn group() -> Option<SentinelGroup> {
    redis_url()?;
    SentinelGroup::start().await
}

async fn store(group: &SentinelGroup, durability: Durability) -> RedisStore<SentinelConnection> {
    idem_tests::redis_fixture::builder()
        .command_timeout(COMMAND_TIMEOUT)
        .connection_timeout(COMMAND_TIMEOUT)
        .durability(durability)
        .connect_sentinel([group.sentinel_url()], NAME)
        .await
        .expect("the sentinel names a primary that answers")
}

async fn service(
    group: &SentinelGroup,
    durability: Durability,
    ledger: &Ledger,
) -> (LedgerService, RedisStore<SentinelConnection>) {
    let store = store(group, durability).await;
    let idem = Idempotency::builder(store.clone())
        .store_timeout(COMMAND_TIMEOUT * 2 + durability.timeout())
        .build();
    let policy = Policy::new().scope(Scope::Global).lease(LEASE);
    (LedgerService::start(idem, policy, ledger).await, store)
}

/// Every conformance rule holds through the connection Sentinel names the primary for, with
/// a store that waits for the replicas after each claim.
#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_conformance_rules_hold_through_sentinel() {
    let Some(group) = group().await else {
        return;
    };
    let store = store(&group, Durability::replicas(REPLICAS, WAIT)).await;
    assert_eq!(
        store.connection().primary_address(),
        Some(format!("127.0.0.1:{}", group.primary().await))
    );
    idem_conformance::every_rule(StoreUnderTest::new(Arc::new(store))).await;
}

/// Sentinel promotes a replica on demand while requests run. The old primary keeps answering
/// until Sentinel reconfigures it, up to ten seconds later, but has lost its replicas: a claim
/// on it cannot reach them, is refused, and sends the store back to Sentinel, which names the
/// new primary; a completion on it falls short too, and the service keeps it and stores it on
/// the new primary. The new primary has both replicas again once the old one follows it. No
/// key runs twice.
#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sentinel_failover_under_load_runs_no_key_twice_with_wait() {
    let Some(group) = group().await else {
        return;
    };
    let ledger = Ledger::open(Duration::from_millis(10));
    let (service, store) = service(&group, Durability::replicas(REPLICAS, WAIT), &ledger).await;
    let old = group.primary().await;

    let mut load = Load::start(&[Arc::new(service)], &ledger, 8, PATIENCE);
    load.progress(20).await;
    let new = group.fail_over().await;
    load.progress(20).await;
    let sent = load.stop().await;

    assert_ne!(new, old);
    assert_eq!(
        store.connection().primary_address(),
        Some(format!("127.0.0.1:{new}")),
        "the store follows the promotion"
    );
    assert_eq!(ledger.all().len(), sent, "every key ran");
    assert!(ledger.run_twice().is_empty(), "{:?}", ledger.run_twice());
}

/// The primary is killed (`kill -9`) while requests run; Sentinel declares it down and
/// promotes a replica, and reconfigures the other to follow it. The store finds the new
/// primary without a restart; it waits for the replicas, so a key claimed before the kill is
/// on the promoted replica, and nothing runs twice. Until the killed server is back (as a
/// replica), claims cannot reach two replicas and are answered 503; the workers retry them.
#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_primary_is_replaced_by_sentinel_and_a_waiting_store_runs_no_key_twice() {
    let Some(mut group) = group().await else {
        return;
    };
    let ledger = Ledger::open(Duration::from_millis(10));
    let (service, _) = service(&group, Durability::replicas(REPLICAS, WAIT), &ledger).await;
    let old = group.primary().await;

    let mut load = Load::start(&[Arc::new(service)], &ledger, 8, PATIENCE);
    load.progress(20).await;
    group.kill(old);
    group.wait_for_new_primary(old).await;
    group.restart_as_replica(old).await;
    load.progress(20).await;
    let sent = load.stop().await;

    assert_eq!(ledger.all().len(), sent, "every key ran");
    assert!(ledger.run_twice().is_empty(), "{:?}", ledger.run_twice());
}

/// The Redis key of the record of a transfer with `key`, as the service's layer makes it.
fn record_of(store: &RedisStore<SentinelConnection>, key: &str) -> String {
    let key = IdempotencyKey::new(key).unwrap();
    store.redis_key(&StoreKey::new(
        &Scope::Global,
        None,
        &Method::POST,
        "/transfers",
        &key,
    ))
}

/// Stops replication from the primary: both replicas frozen (`kill -STOP`), so that they
/// cannot connect again, and their links dropped by the primary (`CLIENT KILL TYPE replica`),
/// so that what it writes next is not even sent: a frozen process's socket still receives.
async fn stop_replication(group: &mut SentinelGroup, primary: u16) -> Vec<u16> {
    let replicas = group.replicas().await;
    for &replica in &replicas {
        group.signal(replica, "STOP");
    }
    group
        .ask(
            primary,
            redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("replica"),
        )
        .await
        .expect("the primary drops its replicas");
    replicas
}

/// Kills the primary, thaws the replicas, and waits until Sentinel has promoted one.
async fn kill_and_promote(group: &mut SentinelGroup, primary: u16, replicas: &[u16]) {
    group.kill(primary);
    for &replica in replicas {
        group.signal(replica, "CONT");
    }
    group.wait_for_new_primary(primary).await;
}

/// Without `WAIT`: a claim the primary acknowledged, and no replica received, is lost when
/// Sentinel promotes a replica, and the retry of its key runs the operation again. This is
/// the window docs/redis.md describes for an asynchronous store.
#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_wait_a_sentinel_failover_loses_a_claim_and_its_key_runs_twice() {
    let Some(mut group) = group().await else {
        return;
    };
    let ledger = Ledger::open(Duration::ZERO);
    let (service, _) = service(&group, Durability::Async, &ledger).await;
    let (key, primary) = (key(), group.primary().await);

    let replicas = stop_replication(&mut group, primary).await;
    let first = service.send(&key).await;
    assert_eq!(first.status, StatusCode::CREATED, "{first:?}");
    kill_and_promote(&mut group, primary, &replicas).await;

    let (retry, _) = service.send_until_created(&key, PATIENCE).await;
    assert!(
        !retry.replayed(),
        "the record went with the primary: {retry:?}"
    );
    assert_eq!(ledger.executions(&key), 2, "the operation ran twice");
}

/// Waiting for the replicas: the claim cannot reach them, so it is released and answered 503
/// with `Retry-After`, and the handler does not run. After Sentinel's failover (and once the
/// old primary is back as a replica), the retry runs the operation: once.
#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_wait_a_claim_no_replica_got_is_refused_and_runs_once() {
    let Some(mut group) = group().await else {
        return;
    };
    let ledger = Ledger::open(Duration::ZERO);
    let (service, store) =
        service(&group, Durability::replicas(REPLICAS, FROZEN_WAIT), &ledger).await;
    let (key, primary) = (key(), group.primary().await);

    let replicas = stop_replication(&mut group, primary).await;
    let first = service.send(&key).await;
    first.refusal(StatusCode::SERVICE_UNAVAILABLE, "store-unavailable");
    assert!(first.header("retry-after").is_some(), "{first:?}");
    assert_eq!(ledger.executions(&key), 0, "the handler did not run");
    let exists = group
        .ask(primary, redis::cmd("EXISTS").arg(record_of(&store, &key)))
        .await
        .unwrap();
    assert_eq!(exists, Value::Int(0), "the claim was released");
    kill_and_promote(&mut group, primary, &replicas).await;
    group.restart_as_replica(primary).await;

    let (retry, _) = service.send_until_created(&key, PATIENCE).await;
    assert!(!retry.replayed(), "{retry:?}");
    assert_eq!(ledger.executions(&key), 1, "the operation ran once");
}
