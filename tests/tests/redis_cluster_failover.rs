//! Failovers of a six-node Redis Cluster that each test makes for itself, while a service
//! on it runs requests: a manual failover (`CLUSTER FAILOVER`), a primary killed with
//! `kill -9` and replaced by its replica, and the window in which a failover loses a claim
//! its replica never received, shown deterministically: the replica is frozen
//! (`kill -STOP`) and its link cut (so that the primary's next writes do not even reach its
//! socket), the claim made, the primary killed, the replica promoted, and the key sent
//! again. Without `WAIT` the key runs twice; with it, the claim is refused at once (503) and
//! the key runs once, after the failover.
//!
//! Skipped when `IDEM_TEST_REDIS_URL` is unset (CI sets it) or `redis-server` and
//! `redis-cli` are not on `PATH`.

use std::{sync::Arc, time::Duration};

use axum::http::{Method, StatusCode};
use idem::{
    Idempotency, IdempotencyKey, Policy, Scope, StoreKey, redis::Durability, redis::RedisStore,
};
use idem_tests::{
    key,
    ledger::{Ledger, LedgerService, Load},
    redis_cluster::RedisCluster,
    redis_fixture::redis_url,
};
use redis::{Value, cluster_async::ClusterConnection};

/// Generous, for a machine whose two cores the cluster's processes share with the service.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a durable claim waits for its replica under load: far longer than a replica on
/// loopback takes.
const WAIT: Duration = Duration::from_secs(2);
/// How long a claim waits for a replica the test froze: it never comes, so short.
const FROZEN_WAIT: Duration = Duration::from_millis(300);
/// How long a key may take to be answered 201 through a failover.
const PATIENCE: Duration = Duration::from_secs(60);
/// The service's lease, well inside [`PATIENCE`]. Releases are not waited for (a release
/// that a failover loses delays a retry and runs nothing twice): a claim that reached the
/// promoted replica and whose release did not leaves its key in flight until the lease
/// lapses, then a retry takes it over. With the default lease (60 s) that wait alone is the
/// whole patience.
const LEASE: Duration = Duration::from_secs(10);

async fn cluster() -> Option<RedisCluster> {
    redis_url()?;
    RedisCluster::start().await
}

async fn service(
    cluster: &RedisCluster,
    durability: Durability,
    ledger: &Ledger,
) -> (LedgerService, RedisStore<ClusterConnection>) {
    let store = idem_tests::redis_fixture::builder()
        .command_timeout(COMMAND_TIMEOUT)
        .connection_timeout(COMMAND_TIMEOUT)
        .durability(durability)
        .connect_cluster(cluster.seeds())
        .await
        .expect("the cluster answers");
    let idem = Idempotency::builder(store.clone())
        .store_timeout(COMMAND_TIMEOUT * 2 + durability.timeout())
        .build();
    let policy = Policy::new().scope(Scope::Global).lease(LEASE);
    (LedgerService::start(idem, policy, ledger).await, store)
}

/// A manual failover (`CLUSTER FAILOVER` on a replica: its primary stops taking writes
/// until the replica has caught up, then they swap) while two services, one asynchronous and
/// one waiting for a replica, run requests: no key runs twice in either.
#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_manual_failover_under_load_runs_no_key_twice() {
    let Some(cluster) = cluster().await else {
        return;
    };
    let ledger = Ledger::open(Duration::from_millis(10));
    let mut services = Vec::new();
    for durability in [Durability::Async, Durability::replicas(1, WAIT)] {
        services.push(Arc::new(service(&cluster, durability, &ledger).await.0));
    }
    let primary = cluster.primary_of(0).await;
    let replica = cluster.replica_of(primary).await;

    let mut load = Load::start(&services, &ledger, 8, PATIENCE);
    load.progress(20).await;
    cluster.fail_over(replica).await;
    load.progress(20).await;
    let sent = load.stop().await;

    assert_eq!(
        cluster.primary_of(0).await,
        replica,
        "the replica took over"
    );
    assert_eq!(ledger.all().len(), sent, "every key ran");
    assert!(ledger.run_twice().is_empty(), "{:?}", ledger.run_twice());
}

/// A primary killed (`kill -9`) under load is replaced by its replica, which the cluster
/// elects, and the service follows without a restart. Its store waits for one replica: a key
/// claimed before the kill is on the replica, so nothing runs twice. Until the killed node
/// comes back (as a replica of the new primary), claims on its slots cannot reach a replica
/// and are answered 503; the workers retry them.
#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_primary_is_replaced_and_a_waiting_store_runs_no_key_twice() {
    let Some(mut cluster) = cluster().await else {
        return;
    };
    let ledger = Ledger::open(Duration::from_millis(10));
    let service = Arc::new(
        service(&cluster, Durability::replicas(1, WAIT), &ledger)
            .await
            .0,
    );
    let primary = cluster.primary_of(0).await;
    let replica = cluster.replica_of(primary).await;

    let mut load = Load::start(&[service], &ledger, 8, PATIENCE);
    load.progress(20).await;
    cluster.kill(primary);
    cluster.wait_for_primary(replica).await;
    cluster.restart(primary).await;
    cluster.wait_until_settled().await;
    load.progress(20).await;
    let sent = load.stop().await;

    assert_eq!(
        cluster.primary_of(0).await,
        replica,
        "the replica took over"
    );
    assert_eq!(ledger.all().len(), sent, "every key ran");
    assert!(ledger.run_twice().is_empty(), "{:?}", ledger.run_twice());
}

/// The Redis key of the record of a transfer with `key`, as the service's layer makes it.
fn record_of(store: &RedisStore<ClusterConnection>, key: &str) -> String {
    let key = IdempotencyKey::new(key).unwrap();
    store.redis_key(&StoreKey::new(
        &Scope::Global,
        None,
        &Method::POST,
        "/transfers",
        &key,
    ))
}

/// The primary that serves `record`, and its replica.
async fn primary_and_replica(cluster: &RedisCluster, record: &str) -> (u16, u16) {
    let primary = cluster.primary_of(cluster.slot_of(record).await).await;
    (primary, cluster.replica_of(primary).await)
}

/// Stops replication from `primary` to `replica`: the replica is frozen (`kill -STOP`), so
/// it cannot connect again, and the primary drops its link (`CLIENT KILL TYPE replica`), so
/// that what it writes next is not even sent: a frozen process's socket still receives.
async fn stop_replication(cluster: &mut RedisCluster, primary: u16, replica: u16) {
    cluster.signal(replica, "STOP");
    cluster
        .ask(
            primary,
            redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("replica"),
        )
        .await
        .expect("the primary drops its replica");
}

/// Without `WAIT`: a claim the primary acknowledged, and its replica never received, is
/// lost when the replica takes over, and the retry of its key runs the operation again.
/// This is the window docs/redis.md describes for an asynchronous store.
#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_wait_a_failover_loses_a_claim_and_its_key_runs_twice() {
    let Some(mut cluster) = cluster().await else {
        return;
    };
    let ledger = Ledger::open(Duration::ZERO);
    let (service, store) = service(&cluster, Durability::Async, &ledger).await;
    let key = key();
    let (primary, replica) = primary_and_replica(&cluster, &record_of(&store, &key)).await;

    stop_replication(&mut cluster, primary, replica).await;
    let first = service.send(&key).await;
    assert_eq!(first.status, StatusCode::CREATED, "{first:?}");
    cluster.kill(primary);
    cluster.signal(replica, "CONT");
    cluster.take_over(replica).await;

    let (retry, _) = service.send_until_created(&key, PATIENCE).await;
    assert!(
        !retry.replayed(),
        "the record went with the primary: {retry:?}"
    );
    assert_ne!(retry.body, first.body);
    assert_eq!(ledger.executions(&key), 2, "the operation ran twice");
}

/// With `WAIT 1`: the claim cannot reach the frozen replica, so it is released and answered
/// 503 with `Retry-After`, and the handler does not run. After the failover (and once the
/// old primary is back as the new primary's replica), the retry runs the operation: once.
#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_wait_a_claim_the_replica_did_not_get_is_refused_and_runs_once() {
    let Some(mut cluster) = cluster().await else {
        return;
    };
    let ledger = Ledger::open(Duration::ZERO);
    let (service, store) = service(&cluster, Durability::replicas(1, FROZEN_WAIT), &ledger).await;
    let key = key();
    let record = record_of(&store, &key);
    let (primary, replica) = primary_and_replica(&cluster, &record).await;

    stop_replication(&mut cluster, primary, replica).await;
    let first = service.send(&key).await;
    first.refusal(StatusCode::SERVICE_UNAVAILABLE, "store-unavailable");
    assert!(first.header("retry-after").is_some(), "{first:?}");
    assert_eq!(ledger.executions(&key), 0, "the handler did not run");
    let exists = cluster
        .ask(primary, redis::cmd("EXISTS").arg(&record))
        .await
        .unwrap();
    assert_eq!(exists, Value::Int(0), "the claim was released");
    cluster.kill(primary);
    cluster.signal(replica, "CONT");
    cluster.take_over(replica).await;
    cluster.restart(primary).await;
    cluster.wait_until_settled().await;

    let (retry, _) = service.send_until_created(&key, PATIENCE).await;
    assert!(!retry.replayed(), "{retry:?}");
    assert_eq!(ledger.executions(&key), 1, "the operation ran once");
}
