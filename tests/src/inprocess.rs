//! Driving a router in the test's own process, without a socket: requests go through
//! `tower::ServiceExt::oneshot`, and what comes back is read into the same [`Answer`] a
//! client over HTTP sees.
//!
//! For the tests of the layer and of the attribute, which check the runtime's decisions one
//! request at a time and need no server. The handlers count their runs in a [`Counter`];
//! the stores that misbehave are a `FaultyStore` over a memory store ([`unreachable()`],
//! [`hanging()`]).
//!
//! ```
//! use axum::{Json, Router, extract::State};
//! use idem::{Idempotency, IdempotencyLayer, Policy, Scope};
//! use idem_tests::inprocess::{Counter, post_to, send};
//! use serde_json::Value;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let counter = Counter::default();
//! let handler = |State(counter): State<Counter>, Json(body): Json<Value>| async move {
//!     counter.run(body).await
//! };
//! let policy = Policy::new().scope(Scope::Global);
//! let app = Router::new()
//!     .route("/payments", axum::routing::post(handler))
//!     .layer(IdempotencyLayer::new(Idempotency::default(), policy))
//!     .with_state(counter.clone());
//! let first = send(&app, post_to("/payments", Some("k"), "{}")).await;
//! let again = send(&app, post_to("/payments", Some("k"), "{}")).await;
//! assert!(!first.replayed() && again.replayed());
//! assert_eq!((again.run(), counter.runs()), (1, 1));
//! # });
//! ```

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use axum::{
    Json, Router,
    body::Body,
    extract::Request,
    http::{HeaderValue, Method, StatusCode, header},
    middleware::Next,
    response::Response,
};
use idem::{MemoryStore, Principal};
use idem_conformance::{Call, Fault, FaultyStore};
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::Answer;

/// The state the tests' handlers share: how often they ran, how often their own body
/// extractors ran, and how long each run takes.
#[derive(Clone, Debug, Default)]
pub struct Counter {
    runs: Arc<AtomicUsize>,
    extractions: Arc<AtomicUsize>,
    delay: Duration,
}

impl Counter {
    /// A counter whose handlers take `delay` per run, so that a duplicate can find the
    /// first one in flight.
    pub fn slow(delay: Duration) -> Self {
        Self {
            delay,
            ..Self::default()
        }
    }

    /// How many times a handler ran.
    pub fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }

    /// How many times a counting body extractor ran.
    pub fn extractions(&self) -> usize {
        self.extractions.load(Ordering::SeqCst)
    }

    /// Counts a run without waiting, and answers its number (the first is 1).
    pub fn count_run(&self) -> usize {
        self.runs.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Counts a run of a body extractor.
    pub fn count_extraction(&self) {
        self.extractions.fetch_add(1, Ordering::SeqCst);
    }

    /// Counts a run, takes its time, and answers its number.
    pub async fn start_run(&self) -> usize {
        let run = self.count_run();
        tokio::time::sleep(self.delay).await;
        run
    }

    /// A whole handler's work: counts a run, takes its time, and answers 201 with the run
    /// number and the request it was given.
    pub async fn run(&self, request: Value) -> (StatusCode, Json<Value>) {
        let run = self.start_run().await;
        (
            StatusCode::CREATED,
            Json(json!({ "run": run, "request": request })),
        )
    }
}

/// A POST to `uri` with a JSON `body` and, if given, an `Idempotency-Key`.
pub fn post_to(uri: &str, key: Option<&str>, body: &str) -> Request {
    let mut builder = Request::builder()
        .method(Method::POST)
        .uri(uri)
        .header(header::CONTENT_TYPE, "application/json");
    if let Some(key) = key {
        builder = builder.header("idempotency-key", key);
    }
    builder
        .body(Body::from(body.to_owned()))
        .expect("a valid request")
}

/// `request` with the header `name` set to `value`.
pub fn with_header(mut request: Request, name: &'static str, value: &str) -> Request {
    request.headers_mut().insert(
        name,
        HeaderValue::from_str(value).expect("a valid header value"),
    );
    request
}

/// An application's authentication, as a middleware: the `x-user` header, when there is
/// one, names the request's principal. Every request is let through, so that a test sees
/// what idem does without a principal.
pub async fn authenticate(mut request: Request, next: Next) -> Response {
    let user = request
        .headers()
        .get("x-user")
        .and_then(|value| value.to_str().ok())
        .map(Principal::new);
    if let Some(principal) = user {
        request.extensions_mut().insert(principal);
    }
    next.run(request).await
}

/// Sends `request` through `app` and reads the whole answer.
pub async fn send(app: &Router, request: Request) -> Answer {
    let response = app
        .clone()
        .oneshot(request)
        .await
        .expect("a router never fails");
    let (parts, body) = response.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX)
        .await
        .expect("the body is read");
    Answer {
        status: parts.status,
        headers: parts.headers,
        body,
    }
}

impl Answer {
    /// The run number a [`Counter::run`] handler answered with.
    #[track_caller]
    pub fn run(&self) -> u64 {
        self.json()["run"].as_u64().expect("a handler's answer")
    }
}

/// A store that is down: every call fails the way a refused connection does.
pub fn unreachable() -> FaultyStore {
    faulty_everywhere(Fault::Fail)
}

/// A store that never answers, as a frozen server does.
pub fn hanging() -> FaultyStore {
    faulty_everywhere(Fault::Hang)
}

fn faulty_everywhere(fault: Fault) -> FaultyStore {
    let store = FaultyStore::new(MemoryStore::default());
    for call in [Call::Claim, Call::Complete, Call::Release, Call::Renew] {
        store.inject(call, fault, None);
    }
    store
}
