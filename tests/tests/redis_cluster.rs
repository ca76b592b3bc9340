//! [`RedisStore`] on a Redis Cluster connection: the conformance rules hold through the
//! cluster client's routing (EVALSHA goes to the slot of the record's key, a script missing
//! on the node is loaded there).
//!
//! The test starts a one-node cluster of its own (`redis-server --cluster-enabled yes`, every
//! slot on that node). Skipped when `IDEM_TEST_REDIS_URL` is unset (CI sets it) or
//! `redis-server` is not on `PATH`.

use std::{sync::Arc, time::Duration};

use idem_core::store::{Store, conformance};
use idem_tests::redis_fixture::redis_url;
use idem_tests::redis_server::RedisServer;
use redis::cluster::ClusterClient;

/// Removes the cluster's config directory when the test ends, however it ends.
struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_conformance_rules_hold_on_a_cluster_connection() {
    if redis_url().is_none() {
        return;
    }
    let dir =
        TempDir(std::env::temp_dir().join(format!("idem-cluster-{:016x}", rand::random::<u64>())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let config = dir.0.join("nodes.conf");
    let Some(server) = RedisServer::start(&[
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        config.to_str().unwrap(),
        "--dir",
        dir.0.to_str().unwrap(),
    ])
    .await
    else {
        return;
    };

    let mut node = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let _: () = redis::cmd("CLUSTER")
        .arg("ADDSLOTSRANGE")
        .arg(0)
        .arg(16383)
        .query_async(&mut node)
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let info: String = redis::cmd("CLUSTER")
            .arg("INFO")
            .query_async(&mut node)
            .await
            .unwrap();
        if info.contains("cluster_state:ok") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the cluster did not come up: {info}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let cluster = ClusterClient::new(vec![server.url()])
        .unwrap()
        .get_async_connection()
        .await
        .unwrap();
    let store: Arc<dyn Store> = Arc::new(idem_tests::redis_fixture::builder().build(cluster));
    let store = conformance::StoreUnderTest::new(store);

    conformance::an_absent_key_is_claimed(store.clone()).await;
    conformance::a_claimed_key_is_in_flight_for_the_same_request(store.clone()).await;
    conformance::a_claimed_key_refuses_another_fingerprint(store.clone()).await;
    conformance::a_completed_key_replays_the_exact_response(store.clone()).await;
    conformance::a_completed_key_refuses_another_fingerprint(store.clone()).await;
    conformance::a_large_body_round_trips(store.clone()).await;
    conformance::only_the_holder_completes(store.clone()).await;
    conformance::a_repeated_completion_by_the_holder_changes_nothing(store.clone()).await;
    conformance::release_frees_the_key_for_any_request(store.clone()).await;
    conformance::only_the_holder_releases(store.clone()).await;
    conformance::only_the_holder_renews(store.clone()).await;
    conformance::renewal_keeps_the_lease_alive(store.clone()).await;
    conformance::a_lapsed_lease_is_taken_over_and_the_old_holder_fenced(store.clone()).await;
    conformance::a_completed_record_expires_after_its_ttl(store.clone()).await;
    conformance::keys_are_independent(store.clone()).await;
    conformance::concurrent_claims_grant_the_key_once(store.clone()).await;

    // The scripts are gone from the node (as after its restart): they are loaded again.
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut node)
        .await
        .unwrap();
    conformance::a_completed_key_replays_the_exact_response(store).await;
}
