//! The memory mode (see `bench/memory.sh`): what the memory store's byte bound holds in real
//! memory. It sends first requests through `IdempotencyLayer` in process, each with a new key,
//! until the store has evicted for a while, then prints what the records occupy.
//!
//! `idem-memory MAX_BYTES MAX_ENTRIES REQUESTS [BODY_BYTES [HEADERS]]`
//!
//! The handler answers 201 with a JSON body of BODY_BYTES (default 100) and HEADERS headers
//! besides its content type (default 0, each `x-header-N: value-N`), and keeps nothing, so
//! that every byte the process gained is the store's. It prints one line of `name=value` pairs:
//! the records kept, the heap they hold (bytes allocated and not freed since the start, counted
//! by the global allocator), the process's resident set growth, and both per record, next to
//! the configured bound; and the heap blocks held per record (allocations not freed), which is
//! what the eviction of one record frees.

use std::{alloc::System, fs};

use axum::{
    Router,
    body::Body,
    extract::Request,
    http::{HeaderValue, Method, StatusCode, header},
    response::{IntoResponse, Response},
    routing::post,
};
use idem::{Idempotency, IdempotencyLayer, MemoryStore, Policy, Scope};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use tower::ServiceExt;

/// Counts every allocation, so the heap the records hold is known to the byte.
#[global_allocator]
static ALLOCATOR: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const USAGE: &str = "usage: idem-memory MAX_BYTES MAX_ENTRIES REQUESTS [BODY_BYTES [HEADERS]]";

/// The process's resident set, in bytes (Linux).
fn resident_bytes() -> u64 {
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map_or(0, |kib| kib * 1024)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|arg| arg.parse::<u64>())
        .collect::<Result<_, _>>()
        .map_err(|_| USAGE)?;
    let [max_bytes, max_entries, requests, rest @ ..] = args.as_slice() else {
        return Err(USAGE.into());
    };
    let body_bytes = rest.first().copied().unwrap_or(100);
    let headers = rest.get(1).copied().unwrap_or(0);
    let body: &'static str = Box::leak(
        format!(
            r#"{{"id":"pay_1","pad":"{}"}}"#,
            "x".repeat(body_bytes.saturating_sub(23) as usize)
        )
        .into_boxed_str(),
    );

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let store = MemoryStore::builder()
        .max_bytes(*max_bytes)
        .max_entries(*max_entries)
        .build();
    let app = Router::new()
        .route(
            "/payments",
            post(move || async move { created(body, headers) }),
        )
        .layer(IdempotencyLayer::new(
            Idempotency::new(store.clone()),
            Policy::new().scope(Scope::Global),
        ));

    let resident_before = resident_bytes();
    let heap = Region::new(ALLOCATOR);
    runtime.block_on(async {
        for number in 0..*requests {
            let request = Request::builder()
                .method(Method::POST)
                .uri("/payments")
                .header(header::CONTENT_TYPE, "application/json")
                .header(
                    "idempotency-key",
                    HeaderValue::try_from(format!("memory-{number:012}"))
                        .expect("a valid header value"),
                )
                .body(Body::from(r#"{"amount":9800,"currency":"JPY"}"#))
                .expect("a valid request");
            let response = app.clone().oneshot(request).await.expect("infallible");
            assert_eq!(response.status(), StatusCode::CREATED);
            axum::body::to_bytes(response.into_body(), usize::MAX)
                .await
                .expect("in memory");
        }
    });
    let records = store.completed_records();
    let stats = heap.change();
    // A reallocation's growth is counted in `bytes_allocated` (or its shrinking in
    // `bytes_deallocated`) already.
    let held = stats.bytes_allocated as i64 - stats.bytes_deallocated as i64;
    // The heap blocks the store holds: each one a record's eviction frees.
    let blocks = stats.allocations as i64 - stats.deallocations as i64;
    let resident = resident_bytes().saturating_sub(resident_before);
    let per = |bytes: f64| bytes / records.max(1) as f64;
    println!(
        "records={records} bound_bytes={max_bytes} heap_bytes={held} resident_bytes={resident} \
         heap_per_record={:.0} resident_per_record={:.0} heap_over_bound={:.2} \
         resident_over_bound={:.2} blocks_per_record={:.1}",
        per(held as f64),
        per(resident as f64),
        held as f64 / *max_bytes as f64,
        resident as f64 / *max_bytes as f64,
        per(blocks as f64),
    );
    drop(app);
    Ok(())
}

fn created(body: &'static str, headers: u64) -> Response {
    // Owned, as a real handler's serialized body is: a static one would be shared, not kept.
    let mut response = (
        StatusCode::CREATED,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_owned(),
    )
        .into_response();
    for number in 0..headers {
        let name = header::HeaderName::try_from(format!("x-header-{number}")).expect("a name");
        let value = HeaderValue::try_from(format!("value-{number}")).expect("a value");
        response.headers_mut().insert(name, value);
    }
    response
}
