//! What a PostgreSQL record costs, next to the memory store:
//! `IDEM_TEST_DATABASE_URL=postgres://... cargo bench -p idem-core --features postgres --bench postgres_store`.
//!
//! - `claim_complete`: a fresh key claimed, then completed with a small response: what the
//!   first request with a key costs the store (two statements on PostgreSQL).
//! - `replay`: a claim of a completed key, which answers the stored response (one statement).
//! - `claim_complete_in_transaction` (PostgreSQL only): a claim, then `BEGIN`, the fenced
//!   completion and `COMMIT`, as a transactional handler that writes nothing else costs.
//! - `claim_complete_16_at_once`: 16 claims and completions of fresh keys in flight together,
//!   for the throughput of a pool of 10 connections.
//!
//! `postgres` is a store from `PostgresStore::connect`'s defaults; `postgres_without_ping` the
//! same with `test_before_acquire(false)`, which saves the pool's ping before each call.
//!
//! Skipped, with a note, when `IDEM_TEST_DATABASE_URL` is unset. The figures are in
//! docs/postgres.md.

use std::{sync::Arc, time::Duration};

use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use idem::{
    StoreKey,
    fingerprint::{Fingerprint, FingerprintMode},
    postgres::PostgresStore,
    replay::StoredResponse,
    store::{Claim, ClaimOutcome, LeaseToken, MemoryStore, Store},
};

const LEASE: Duration = Duration::from_secs(60);
const TTL: Duration = Duration::from_secs(3600);

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
    let body = Bytes::from_static(br#"{"id":"pay_1","status":"succeeded","amount":9800}"#);
    StoredResponse::new(StatusCode::CREATED, &headers, &body).expect("an encodable response")
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

async fn claim_complete(store: &dyn Store, fingerprint: &Fingerprint, response: &StoredResponse) {
    let (key, token) = (StoreKey::from_bytes(rand::random()), LeaseToken::random());
    let outcome = store.claim(claim(&key, fingerprint, token)).await.unwrap();
    assert_eq!(outcome, ClaimOutcome::Claimed);
    store.complete(&key, token, response, TTL).await.unwrap();
}

fn bench(c: &mut Criterion) {
    let Ok(url) = std::env::var("IDEM_TEST_DATABASE_URL") else {
        eprintln!("skipped the postgres_store benchmark: IDEM_TEST_DATABASE_URL is not set");
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let table = format!("idem_bench_{:016x}", rand::random::<u64>());
    let (postgres, unpinged) = runtime.block_on(async {
        let builder = PostgresStore::builder().table(&table).unwrap();
        let store = builder
            .clone()
            .connect(&url)
            .await
            .expect("cannot connect to IDEM_TEST_DATABASE_URL");
        store.migrate().await.unwrap();
        let unpinged = builder
            .test_before_acquire(false)
            .connect(&url)
            .await
            .unwrap();
        (store, unpinged)
    });
    let memory = MemoryStore::builder()
        .max_entries(10_000_000)
        .max_bytes(8 << 30)
        .build();
    let stores: [(&str, Arc<dyn Store>); 3] = [
        ("memory", Arc::new(memory)),
        ("postgres", Arc::new(postgres.clone())),
        ("postgres_without_ping", Arc::new(unpinged)),
    ];
    let fingerprint = Fingerprint::compute(
        &Method::POST,
        "/payments",
        &HeaderMap::new(),
        br#"{"amount":9800,"currency":"JPY"}"#,
        FingerprintMode::Json,
    );
    let response = response();

    let mut group = c.benchmark_group("postgres_store");
    for (name, store) in &stores {
        group.bench_function(BenchmarkId::new("claim_complete", name), |b| {
            b.to_async(&runtime)
                .iter(|| claim_complete(&**store, &fingerprint, &response))
        });
    }
    for (name, store) in &stores {
        let (key, token) = (StoreKey::from_bytes(rand::random()), LeaseToken::random());
        runtime.block_on(async {
            store.claim(claim(&key, &fingerprint, token)).await.unwrap();
            store.complete(&key, token, &response, TTL).await.unwrap();
        });
        group.bench_function(BenchmarkId::new("replay", name), |b| {
            b.to_async(&runtime).iter(|| async {
                let outcome = store
                    .claim(claim(&key, &fingerprint, LeaseToken::random()))
                    .await
                    .unwrap();
                assert!(matches!(outcome, ClaimOutcome::Completed(_)));
            })
        });
    }
    group.bench_function(
        BenchmarkId::new("claim_complete_in_transaction", "postgres"),
        |b| {
            b.to_async(&runtime).iter(|| async {
                let (key, token) = (StoreKey::from_bytes(rand::random()), LeaseToken::random());
                let outcome = postgres.claim(claim(&key, &fingerprint, token)).await;
                assert_eq!(outcome.unwrap(), ClaimOutcome::Claimed);
                let transaction = postgres.begin().await.unwrap();
                transaction
                    .complete(&key, token, &response, TTL)
                    .await
                    .unwrap();
            })
        },
    );
    group.throughput(Throughput::Elements(16));
    for (name, store) in &stores {
        group.bench_function(BenchmarkId::new("claim_complete_16_at_once", name), |b| {
            b.to_async(&runtime).iter(|| async {
                let mut running = tokio::task::JoinSet::new();
                for _ in 0..16 {
                    let (store, response) = (Arc::clone(store), response.clone());
                    running.spawn(async move {
                        claim_complete(&*store, &fingerprint, &response).await;
                    });
                }
                running.join_all().await;
            })
        });
    }
    group.finish();

    runtime.block_on(async {
        let drop = format!("DROP TABLE {table}");
        sqlx::query(sqlx::AssertSqlSafe(drop))
            .execute(postgres.pool())
            .await
            .unwrap();
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
