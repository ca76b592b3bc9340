//! What a request pays for idempotency on Redis, next to the in-process memory store:
//!
//! - `claim_complete`: the first request with a key (claim a fresh key, then store the
//!   response): two round trips on Redis.
//! - `replay`: a retry (claim a completed key and get its response): one round trip.
//! - `concurrent_claim_complete`: 64 first requests at once on one connection, which the
//!   redis crate multiplexes; reported per request.
//! - `redis/ping`: one `PING` on the same connection, the cost of a bare round trip.
//!
//! ```text
//! IDEM_TEST_REDIS_URL=redis://127.0.0.1:6379 cargo bench -p idem-core --features redis --bench redis_store
//! ```
//!
//! Without `IDEM_TEST_REDIS_URL` only the memory store is measured.

use std::{hint::black_box, sync::Arc, time::Duration};

use bytes::Bytes;
use criterion::{BenchmarkGroup, Criterion, Throughput, measurement::WallTime};
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use idem::{
    MemoryStore, StoreKey,
    fingerprint::{Fingerprint, FingerprintMode},
    redis::RedisStore,
    replay::StoredResponse,
    store::{Claim, ClaimOutcome, LeaseToken, Store},
};
use tokio::runtime::Runtime;

const LEASE: Duration = Duration::from_secs(60);
/// Short, so the records the benchmark leaves behind expire soon.
const TTL: Duration = Duration::from_secs(60);
const CONCURRENCY: usize = 64;

fn fingerprint() -> Fingerprint {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Fingerprint::compute(
        &Method::POST,
        "/payments",
        &headers,
        br#"{"amount":1250,"currency":"EUR","source":"card_1"}"#,
        FingerprintMode::Json,
    )
}

/// A typical small JSON answer: about 200 bytes with its headers.
fn response() -> StoredResponse {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(
        header::LOCATION,
        HeaderValue::from_static("/payments/pay_1"),
    );
    StoredResponse::new(StatusCode::CREATED, &headers, &Bytes::from_static(
            br#"{"id":"pay_1","amount":1250,"currency":"EUR","status":"succeeded","created":1767225600}"#,
        )).expect("an encodable response")
}

fn claim<'a>(key: &'a StoreKey, fingerprint: &'a Fingerprint, token: LeaseToken) -> Claim<'a> {
    Claim {
        key,
        fingerprint,
        token,
        lease: LEASE,
        ttl: TTL,
        resumable: None,
    }
}

async fn claim_and_complete(
    store: &dyn Store,
    fingerprint: &Fingerprint,
    response: &StoredResponse,
) {
    let key = StoreKey::from_bytes(rand::random());
    let token = LeaseToken::random();
    let outcome = store.claim(claim(&key, fingerprint, token)).await.unwrap();
    assert_eq!(outcome, ClaimOutcome::Claimed);
    store.complete(&key, token, response, TTL).await.unwrap();
}

fn bench_store(
    group: &mut BenchmarkGroup<'_, WallTime>,
    runtime: &Runtime,
    name: &str,
    store: Arc<dyn Store>,
) {
    let (fingerprint, response) = (fingerprint(), response());

    group.throughput(Throughput::Elements(1));
    group.bench_function(format!("{name}/claim_complete"), |b| {
        b.to_async(runtime)
            .iter(|| claim_and_complete(&*store, &fingerprint, &response));
    });

    let done = StoreKey::from_bytes(rand::random());
    runtime.block_on(async {
        let token = LeaseToken::random();
        store
            .claim(claim(&done, &fingerprint, token))
            .await
            .unwrap();
        store
            .complete(&done, token, &response, Duration::from_secs(3600))
            .await
            .unwrap();
    });
    group.bench_function(format!("{name}/replay"), |b| {
        b.to_async(runtime).iter(|| async {
            let outcome = store
                .claim(claim(&done, &fingerprint, LeaseToken::random()))
                .await;
            assert!(matches!(black_box(outcome), Ok(ClaimOutcome::Completed(_))));
        });
    });

    group.throughput(Throughput::Elements(CONCURRENCY as u64));
    group.bench_function(format!("{name}/concurrent_claim_complete"), |b| {
        b.to_async(runtime).iter(|| async {
            let flows =
                (0..CONCURRENCY).map(|_| claim_and_complete(&*store, &fingerprint, &response));
            futures_util::future::join_all(flows).await;
        });
    });
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    // One thread for the benchmark and the connection's driver: no cross-thread wake-ups,
    // which on a busy machine cost more than the round trip itself.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut group = criterion.benchmark_group("store");
    group
        .sample_size(50)
        .measurement_time(Duration::from_secs(5));

    bench_store(
        &mut group,
        &runtime,
        "memory",
        Arc::new(MemoryStore::default()),
    );

    match std::env::var("IDEM_TEST_REDIS_URL") {
        Ok(url) if !url.is_empty() => {
            let prefix = format!("idem-bench:{:016x}:", rand::random::<u64>());
            let store = runtime.block_on(async {
                RedisStore::builder()
                    .prefix(&*prefix)
                    .unwrap()
                    .connect(url.as_str())
                    .await
                    .expect("cannot connect to IDEM_TEST_REDIS_URL")
            });
            let connection = store.connection().clone();
            group.throughput(Throughput::Elements(1));
            group.bench_function("redis/ping", |b| {
                b.to_async(&runtime).iter(|| {
                    let mut connection = connection.clone();
                    async move {
                        let pong: String = redis::cmd("PING")
                            .query_async(&mut connection)
                            .await
                            .unwrap();
                        black_box(pong)
                    }
                });
            });
            bench_store(&mut group, &runtime, "redis", Arc::new(store));
            runtime.block_on(remove_records(connection, &prefix));
        }
        _ => eprintln!("skipped the Redis benchmarks: IDEM_TEST_REDIS_URL is not set"),
    }

    group.finish();
    criterion.final_summary();
}

/// Deletes what the benchmark wrote, rather than leave it to expire.
async fn remove_records(mut connection: redis::aio::ConnectionManager, prefix: &str) {
    let mut cursor = 0u64;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{prefix}*"))
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut connection)
            .await
            .unwrap();
        if !keys.is_empty() {
            let _: () = redis::cmd("UNLINK")
                .arg(&keys)
                .query_async(&mut connection)
                .await
                .unwrap();
        }
        if next == 0 {
            return;
        }
        cursor = next;
    }
}
