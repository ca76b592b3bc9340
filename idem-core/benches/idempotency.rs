//! What idempotency costs per request: `cargo bench -p idem-core --bench idempotency`.
//!
//! For a 1 KiB and a 64 KiB JSON body it measures
//! - `fingerprint`: canonicalize + SHA-256, the work every keyed request does;
//! - `fingerprint_form/parts` and `fingerprint_form/raw`: the same document as the one field
//!   of a `multipart/form-data` body, read by its parts and hashed as bytes;
//! - `baseline`: a JSON handler behind a plain router;
//! - `first_request`: the same handler behind `IdempotencyLayer`, a fresh key each time
//!   (claim + handler in its own task + capture + complete);
//! - `replay`: the same handler and layer, one key repeated (claim finds the record);
//! - `first_request/macro` and `replay/macro`: the same handler under `#[idempotent]`.
//!
//! The figures and how to read them are in docs/benchmarks.md.

use std::sync::atomic::{AtomicU64, Ordering};

use axum::{
    Json, Router,
    body::Body,
    extract::Request,
    http::{HeaderMap, HeaderValue, Method, StatusCode, header},
    routing::post,
};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use idem::{
    Idempotency, IdempotencyLayer, MemoryStore, Policy, Scope,
    fingerprint::{Fingerprint, FingerprintAlgorithm, FingerprintMode},
};
use serde_json::{Value, json};
use tower::ServiceExt;

async fn create_payment(Json(body): Json<Value>) -> (StatusCode, Json<Value>) {
    (
        StatusCode::CREATED,
        Json(json!({ "id": "pay_1", "status": "succeeded", "echo": body["currency"] })),
    )
}

#[idem::idempotent(scope = "global")]
async fn create_payment_annotated(Json(body): Json<Value>) -> (StatusCode, Json<Value>) {
    create_payment(Json(body)).await
}

/// A payment-like JSON document of about `size` bytes.
fn body_of(size: usize) -> String {
    let mut items = Vec::new();
    let mut body = String::new();
    while body.len() < size {
        let n = items.len();
        items.push(json!({ "sku": format!("SKU-{n:05}"), "quantity": n % 7 + 1, "price": 1250.5 + n as f64 }));
        body = json!({ "amount": 9800, "currency": "JPY", "customer": "cus_42", "items": items })
            .to_string();
    }
    body
}

fn request(body: &str, key: &str) -> Request {
    Request::builder()
        .method(Method::POST)
        .uri("/payments")
        .header(header::CONTENT_TYPE, "application/json")
        .header("idempotency-key", key)
        .body(Body::from(body.to_owned()))
        .unwrap()
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let policy = Policy::new().scope(Scope::Global);
    for (label, size) in [("1KiB", 1024), ("64KiB", 64 * 1024)] {
        let body = body_of(size);
        let mut group = c.benchmark_group(label);
        group.throughput(Throughput::Bytes(body.len() as u64));

        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        group.bench_function("fingerprint", |b| {
            b.iter(|| {
                Fingerprint::compute(
                    &Method::POST,
                    "/payments",
                    &headers,
                    body.as_bytes(),
                    FingerprintMode::Json,
                )
            })
        });

        let boundary = "----idem-bench-7MA4YWxkTrZu0gW";
        let form = format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"payment\"\r\n\
             Content-Type: application/json\r\n\r\n{body}\r\n--{boundary}--\r\n"
        );
        let mut form_headers = HeaderMap::new();
        form_headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_str(&format!("multipart/form-data; boundary={boundary}")).unwrap(),
        );
        let read_by_parts = Fingerprint::compute(
            &Method::POST,
            "/payments",
            &form_headers,
            form.as_bytes(),
            FingerprintMode::Json,
        );
        assert_eq!(
            read_by_parts.algorithm(),
            FingerprintAlgorithm::MultipartSha256V1
        );
        for (name, mode) in [
            ("parts", FingerprintMode::Json),
            ("raw", FingerprintMode::Raw),
        ] {
            group.bench_function(BenchmarkId::new("fingerprint_form", name), |b| {
                b.iter(|| {
                    Fingerprint::compute(
                        &Method::POST,
                        "/payments",
                        &form_headers,
                        form.as_bytes(),
                        mode,
                    )
                })
            });
        }

        let plain = Router::new().route("/payments", post(create_payment));
        group.bench_function(BenchmarkId::new("baseline", "no layer"), |b| {
            b.to_async(&runtime)
                .iter(|| plain.clone().oneshot(request(&body, "k")))
        });

        // The default bounds: a long run fills the store and then evicts, as a service does
        // in its steady state (a store sized for every key of a run would measure page
        // faults of a heap growing to gigabytes instead).
        let store = MemoryStore::default();
        let layered = Router::new()
            .route("/payments", post(create_payment))
            .layer(IdempotencyLayer::new(Idempotency::new(store), policy));
        let fresh = AtomicU64::new(0);
        group.bench_function(BenchmarkId::new("first_request", "layer"), |b| {
            b.to_async(&runtime).iter(|| {
                let key = format!("fresh-{}", fresh.fetch_add(1, Ordering::Relaxed));
                layered.clone().oneshot(request(&body, &key))
            })
        });
        runtime
            .block_on(layered.clone().oneshot(request(&body, "replayed")))
            .unwrap();
        group.bench_function(BenchmarkId::new("replay", "layer"), |b| {
            b.to_async(&runtime)
                .iter(|| layered.clone().oneshot(request(&body, "replayed")))
        });
        let store = MemoryStore::default();
        let annotated = Router::new()
            .route("/payments", post(create_payment_annotated))
            .layer(axum::Extension(Idempotency::new(store)));
        group.bench_function(BenchmarkId::new("first_request", "macro"), |b| {
            b.to_async(&runtime).iter(|| {
                let key = format!("fresh-{}", fresh.fetch_add(1, Ordering::Relaxed));
                annotated.clone().oneshot(request(&body, &key))
            })
        });
        runtime
            .block_on(annotated.clone().oneshot(request(&body, "replayed")))
            .unwrap();
        group.bench_function(BenchmarkId::new("replay", "macro"), |b| {
            b.to_async(&runtime)
                .iter(|| annotated.clone().oneshot(request(&body, "replayed")))
        });
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
