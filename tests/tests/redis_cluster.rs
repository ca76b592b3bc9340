//! [`RedisStore`] on a six-node Redis Cluster that each test makes for itself (three
//! primaries, three replicas, `redis-cli --cluster create` on free ports): the conformance
//! rules, concurrent duplicates, and slots migrating under load. The failovers are in
//! `redis_cluster_failover.rs`.
//!
//! Skipped when `IDEM_TEST_REDIS_URL` is unset (CI sets it) or `redis-server` and
//! `redis-cli` are not on `PATH`.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use axum::http::StatusCode;
use idem::{Idempotency, Policy, Scope, redis::Durability, redis::RedisStore, store::Store};
use idem_conformance::{self, StoreUnderTest};
use idem_tests::{
    inprocess::{post_to, send},
    key,
    ledger::{Ledger, LedgerService},
    redis_cluster::RedisCluster,
    redis_fixture::redis_url,
    shop_fixture::{TestShop, payment, settings, user},
};
use redis::{cluster::ClusterClient, cluster_async::ClusterConnection};
use shop::{Backend, backend::StoreChoice};
use tokio::{sync::Barrier, task::JoinSet};

/// Generous: thousands of requests at once on two shared cores (with a cluster's twelve
/// processes and other tests beside them) queue for the CPU, and a call that waited longer
/// than this would be answered 503.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);
/// A durable write waits this long for its replica at most: far longer than a replica on
/// loopback takes, however busy the machine.
const WAIT: Duration = Duration::from_secs(2);

/// A cluster of the test's own, or `None` (saying why) when the test is skipped.
async fn cluster() -> Option<RedisCluster> {
    redis_url()?;
    RedisCluster::start().await
}

async fn store(cluster: &RedisCluster, durability: Durability) -> RedisStore<ClusterConnection> {
    idem_tests::redis_fixture::builder()
        .command_timeout(COMMAND_TIMEOUT)
        .durability(durability)
        .connect_cluster(cluster.seeds())
        .await
        .expect("the cluster answers")
}

fn runtime(store: impl Store) -> Idempotency {
    Idempotency::builder(store)
        .store_timeout(COMMAND_TIMEOUT * 2 + WAIT)
        .build()
}

fn global() -> Policy {
    Policy::new().scope(Scope::Global)
}

/// A store under test whose records a side connection can damage, for rule 9.
async fn under_test(cluster: &RedisCluster, durability: Durability) -> StoreUnderTest {
    let store = store(cluster, durability).await;
    let side = ClusterClient::new(cluster.seeds())
        .unwrap()
        .get_async_connection()
        .await
        .unwrap();
    let keys = store.clone();
    StoreUnderTest::new(Arc::new(store)).corrupt(move |key, damage| {
        let (mut side, record) = (side.clone(), keys.redis_key(&key));
        Box::pin(async move {
            idem_tests::redis_fixture::damage(&mut side, record, damage).await;
        })
    })
}

/// Every conformance rule holds through the cluster connection, asynchronous and waiting
/// for a replica alike; and after the nodes forgot the scripts (as after their restart),
/// the next call loads them again.
#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_conformance_rules_hold_on_a_six_node_cluster() {
    let Some(cluster) = cluster().await else {
        return;
    };
    idem_conformance::every_rule(under_test(&cluster, Durability::Async).await).await;
    let waiting = under_test(&cluster, Durability::replicas(1, WAIT)).await;
    idem_conformance::every_rule(waiting.clone()).await;

    for seed in cluster.seeds() {
        let port = seed.rsplit(':').next().unwrap().parse().unwrap();
        cluster
            .ask(port, redis::cmd("SCRIPT").arg("FLUSH"))
            .await
            .unwrap();
    }
    idem_conformance::a_completed_key_replays_the_exact_response(waiting).await;
}

/// 1,000 requests with one key, then 200 keys with 20 duplicates each, all at once: one
/// execution per key, every other request a replay or a 409, on a cluster whose store waits
/// for a replica after each claim.
#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_duplicates_run_once_on_a_cluster() {
    let Some(cluster) = cluster().await else {
        return;
    };
    let ledger = Ledger::open(Duration::from_millis(200));
    let idem = runtime(store(&cluster, Durability::replicas(1, WAIT)).await);
    let app = ledger.router(idem, global());

    let one_key = key();
    let keys: Vec<String> = std::iter::repeat_n(one_key.clone(), 1000).collect();
    let answers = all_at_once(&app, keys).await;
    assert_one_run_per_key(&answers, 1);
    assert_eq!(ledger.executions(&one_key), 1);

    let keys: Vec<String> = (0..200).map(|_| key()).collect();
    let duplicates: Vec<String> = keys
        .iter()
        .flat_map(|key| std::iter::repeat_n(key.clone(), 20))
        .collect();
    let answers = all_at_once(&app, duplicates).await;
    assert_one_run_per_key(&answers, 200);
    assert!(keys.iter().all(|key| ledger.executions(key) == 1));
}

/// Sends one request per key in `keys`, all released at once, and answers (key, status,
/// replayed) for each.
async fn all_at_once(app: &axum::Router, keys: Vec<String>) -> Vec<(String, StatusCode, bool)> {
    let start = Arc::new(Barrier::new(keys.len()));
    let mut requests = JoinSet::new();
    for key in keys {
        let (app, start) = (app.clone(), Arc::clone(&start));
        requests.spawn(async move {
            start.wait().await;
            let answer = send(&app, post_to("/transfers", Some(&key), "{\"amount\":1}")).await;
            let replayed = answer.replayed();
            if answer.status == StatusCode::CONFLICT {
                answer.refusal(StatusCode::CONFLICT, "request-in-flight");
            }
            (key, answer.status, replayed)
        });
    }
    requests.join_all().await
}

/// Exactly `keys` first answers (201, not replayed); every other answer a replay or a 409.
fn assert_one_run_per_key(answers: &[(String, StatusCode, bool)], keys: usize) {
    let first = answers
        .iter()
        .filter(|(_, status, replayed)| *status == StatusCode::CREATED && !replayed)
        .count();
    assert_eq!(first, keys, "one first answer per key");
    for (key, status, replayed) in answers {
        assert!(
            *status == StatusCode::CONFLICT || (*status == StatusCode::CREATED),
            "{key}: {status} (replayed: {replayed})"
        );
    }
}

/// 2,000 slots move from one primary to another (`redis-cli --cluster reshard`)
/// while two services, one asynchronous and one waiting for a replica, send new keys and
/// their retries: every request is answered 201 at its first attempt (the cluster
/// connection follows `MOVED` and `ASK` within the call), every retry is a replay, and no key
/// runs twice.
#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slots_migrate_under_load_without_failures_or_duplicates() {
    let Some(cluster) = cluster().await else {
        return;
    };
    let ledger = Ledger::open(Duration::ZERO);
    let mut services = Vec::new();
    for durability in [Durability::Async, Durability::replicas(1, WAIT)] {
        let idem = runtime(store(&cluster, durability).await);
        services.push(Arc::new(
            LedgerService::start(idem, global(), &ledger).await,
        ));
    }
    let (from, to) = (cluster.primary_of(0).await, cluster.primary_of(16383).await);

    let resharding = Arc::new(AtomicBool::new(true));
    let mut load = JoinSet::new();
    for worker in 0..16 {
        let service = Arc::clone(&services[worker % services.len()]);
        let resharding = Arc::clone(&resharding);
        load.spawn(async move {
            let mut sent = 0;
            while resharding.load(Ordering::SeqCst) || sent < 20 {
                let key = key();
                let first = service.send(&key).await;
                assert_eq!(first.status, StatusCode::CREATED, "{key}: {first:?}");
                assert!(!first.replayed(), "{key}: {first:?}");
                let retry = service.send(&key).await;
                assert!(retry.replayed(), "{key}: {retry:?}");
                assert_eq!(retry.body, first.body);
                sent += 1;
            }
            sent
        });
    }
    cluster.reshard(from, to, 2000).await;
    resharding.store(false, Ordering::SeqCst);
    let sent: usize = load.join_all().await.into_iter().sum();
    assert!(sent >= 16 * 20);
    assert_eq!(ledger.all().len(), sent, "every key ran");
    assert!(ledger.run_twice().is_empty(), "{:?}", ledger.run_twice());
    assert_ne!(cluster.primary_of(0).await, from, "the slots moved");
}

/// The shop on a cluster, as `IDEM_STORE=redis+cluster://HOST:PORT,...` and
/// `SHOP_REDIS_WAIT_REPLICAS` open it: a payment is made once and replayed.
#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_shop_runs_on_a_cluster_named_by_its_environment() {
    let Some(cluster) = cluster().await else {
        return;
    };
    let seeds: Vec<String> = cluster
        .seeds()
        .iter()
        .map(|seed| seed.trim_start_matches("redis://").to_owned())
        .collect();
    let environment = [
        ("IDEM_STORE", format!("redis+cluster://{}", seeds.join(","))),
        ("SHOP_REDIS_WAIT_REPLICAS", "1".to_owned()),
        ("SHOP_REDIS_WAIT_TIMEOUT_MS", "500".to_owned()),
    ];
    let config = match shop::Config::parse([], |name| {
        environment
            .iter()
            .find(|(variable, _)| *variable == name)
            .map(|(_, value)| value.clone())
    }) {
        Ok(shop::config::Command::Run(config)) => config,
        other => panic!("{other:?}"),
    };
    let StoreChoice::Redis(redis) = &config.store else {
        panic!("{:?}", config.store);
    };
    assert_eq!(
        redis.durability,
        Durability::replicas(1, Duration::from_millis(500))
    );
    let backend = Backend::open(&config.store)
        .await
        .expect("the cluster answers");
    assert!(backend.records.contains("cluster"), "{}", backend.records);
    let shop = TestShop::on(backend, settings()).await;
    let (alice, key) = (user(), key());
    let paid = shop.api.pay(&alice, &key, &payment(9800)).await;
    paid.created();
    let again = shop.api.pay(&alice, &key, &payment(9800)).await;
    assert!(again.replayed(), "{again:?}");
    assert_eq!(again.body, paid.body);
    assert_eq!(shop.api.payments(&alice).await.len(), 1);
}
