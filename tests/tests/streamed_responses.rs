//! A response whose body is still coming when its handler returns (a stream, server-sent
//! events) reaches its first caller as it is produced, over real HTTP, while the runtime
//! captures it: stored when it ends, completed without its body once it outgrows the cap, and
//! still stored when the caller disconnects half-way.
//!
//! Each stream waits for the test before it sends its next frame, so that a server which
//! buffered the body whole would never send the first one: the tests would fail, not flake.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use axum::{
    Router,
    body::{Body, Bytes},
    extract::State,
    response::Response,
    routing::post,
};
use futures_util::stream;
use idem::{Idempotency, IdempotencyLayer, Policy, Scope};
use idem_tests::{Answer, Served, eventually};
use reqwest::StatusCode;
use tokio::sync::Semaphore;

const PATIENCE: Duration = Duration::from_secs(10);

#[derive(Clone)]
struct Feed {
    /// One permit per frame the stream may send.
    permits: Arc<Semaphore>,
    executions: Arc<AtomicUsize>,
}

impl Feed {
    fn new() -> Self {
        Self {
            permits: Arc::new(Semaphore::new(0)),
            executions: Arc::default(),
        }
    }

    fn allow(&self, frames: usize) {
        self.permits.add_permits(frames);
    }
}

/// Three frames, `a`, `b`, `c`, each sent when the test allows it.
async fn three_frames(State(feed): State<Feed>) -> Response {
    feed.executions.fetch_add(1, Ordering::SeqCst);
    let frames = stream::unfold((feed, 0), |(feed, sent)| async move {
        if sent == 3 {
            return None;
        }
        feed.permits.acquire().await.unwrap().forget();
        let frame = Bytes::from(["a", "b", "c"][sent]);
        Some((Ok::<_, std::io::Error>(frame), (feed, sent + 1)))
    });
    Response::new(Body::from_stream(frames))
}

/// Server-sent events that never end: an event each time the test allows one.
async fn events(State(feed): State<Feed>) -> Response {
    feed.executions.fetch_add(1, Ordering::SeqCst);
    let frames = stream::unfold((feed, 0u64), |(feed, n)| async move {
        feed.permits.acquire().await.unwrap().forget();
        let event = Bytes::from(format!("data: {n}\n\n"));
        Some((Ok::<_, std::io::Error>(event), (feed, n + 1)))
    });
    let mut response = Response::new(Body::from_stream(frames));
    response.headers_mut().insert(
        "content-type",
        axum::http::HeaderValue::from_static("text/event-stream"),
    );
    response
}

struct Service {
    feed: Feed,
    served: Served,
    http: reqwest::Client,
}

impl Service {
    async fn start() -> Self {
        let feed = Feed::new();
        // A cap of 64 bytes: the three frames are kept, the endless events outgrow it.
        let policy = Policy::new().scope(Scope::Global).max_stored_body(64);
        let router = Router::new()
            .route("/frames", post(three_frames))
            .route("/events", post(events))
            .layer(IdempotencyLayer::new(Idempotency::default(), policy))
            .with_state(feed.clone());
        Self {
            feed,
            served: Served::start(router).await,
            http: reqwest::Client::new(),
        }
    }

    fn request(&self, path: &str, key: &str) -> reqwest::RequestBuilder {
        self.http
            .post(self.served.url(path))
            .header("idempotency-key", key)
            .timeout(PATIENCE)
    }

    fn executions(&self) -> usize {
        self.feed.executions.load(Ordering::SeqCst)
    }
}

/// The next chunk of `response`'s body, failing the test rather than hanging.
async fn next_chunk(response: &mut reqwest::Response) -> Option<Bytes> {
    tokio::time::timeout(PATIENCE, response.chunk())
        .await
        .expect("a chunk arrives")
        .expect("the body reads")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_reaches_its_caller_frame_by_frame_and_is_replayed_whole() {
    let service = Service::start().await;
    let mut first = service.request("/frames", "frames").send().await.unwrap();
    assert_eq!(
        first.status(),
        StatusCode::OK,
        "the head came before the body ended"
    );

    service.feed.allow(1);
    assert_eq!(next_chunk(&mut first).await.unwrap(), "a");
    // Still streaming: the key is in flight.
    let during = Answer::of(service.request("/frames", "frames")).await;
    during.problem(StatusCode::CONFLICT, "request-in-flight");

    service.feed.allow(2);
    let mut rest = Vec::new();
    while let Some(chunk) = next_chunk(&mut first).await {
        rest.extend_from_slice(&chunk);
    }
    assert_eq!(rest, b"bc");

    // The record was stored before the caller's body ended.
    let retry = Answer::of(service.request("/frames", "frames")).await;
    assert!(retry.replayed(), "{retry:?}");
    assert_eq!(retry.body, "abc");
    assert_eq!(service.executions(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_whose_caller_left_half_way_is_still_stored() {
    let service = Service::start().await;
    let mut first = service.request("/frames", "left").send().await.unwrap();
    service.feed.allow(1);
    assert_eq!(next_chunk(&mut first).await.unwrap(), "a");
    drop(first);

    service.feed.allow(2);
    let mut last = None;
    let stored = eventually(PATIENCE, async || {
        let retry = Answer::of(service.request("/frames", "left")).await;
        let done = retry.replayed();
        last = Some(retry);
        done
    })
    .await;
    assert!(stored, "the stream was not stored: {last:?}");
    assert_eq!(last.unwrap().body, "abc");
    assert_eq!(service.executions(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_events_stream_and_complete_the_key_once_they_outgrow_the_cap() {
    let service = Service::start().await;
    let mut first = service.request("/events", "events").send().await.unwrap();
    assert_eq!(first.headers()["content-type"], "text/event-stream");
    service.feed.allow(1);
    assert_eq!(next_chunk(&mut first).await.unwrap(), "data: 0\n\n");

    // Past 64 bytes the record is completed without the body: the operation ran, and a
    // retry is told it cannot be replayed, while the first caller still gets every event.
    service.feed.allow(10);
    let mut received = 0;
    while received < 10 {
        next_chunk(&mut first).await.unwrap();
        received += 1;
    }
    let mut last = None;
    let completed = eventually(PATIENCE, async || {
        let retry = Answer::of(service.request("/events", "events")).await;
        let done = retry.status == StatusCode::GONE;
        last = Some(retry);
        done
    })
    .await;
    assert!(completed, "{last:?}");
    let retry = last.unwrap();
    retry.problem(StatusCode::GONE, "response-not-replayable");
    assert!(retry.replayed());
    service.feed.allow(1);
    assert!(next_chunk(&mut first).await.is_some(), "the stream goes on");
    assert_eq!(service.executions(), 1);
}
