//! With the `metrics` feature, every outcome is counted by route, under the names and labels
//! docs/observability.md lists.
#![cfg(feature = "metrics")]

use std::{collections::BTreeMap, sync::Arc};

use axum::{Router, body::Body, extract::Request, http::StatusCode, routing::post};
use idem::{Idempotency, IdempotencyLayer, Policy, Scope};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use tokio::sync::Notify;
use tower::ServiceExt;

fn request(key: &str) -> Request {
    Request::post("/payments/{id}".replace("{id}", "7"))
        .header("idempotency-key", key)
        .body(Body::from("{}"))
        .unwrap()
}

#[test]
fn outcomes_are_counted_by_route() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let app = Router::new()
                .route("/payments/{id}", post(|| async { StatusCode::CREATED }))
                .layer(IdempotencyLayer::new(
                    Idempotency::default(),
                    Policy::new().scope(Scope::Global),
                ));
            for _ in 0..3 {
                app.clone().oneshot(request("k")).await.unwrap();
            }
        });
    });
    let mut counts = std::collections::BTreeMap::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let key = key.key();
        if key.name() != "idem_requests_total" {
            continue;
        }
        let label = |name: &str| {
            key.labels()
                .find(|l| l.key() == name)
                .map(|l| l.value().to_owned())
        };
        assert_eq!(
            label("route").as_deref(),
            Some("/payments/{id}"),
            "the route template, not the path"
        );
        let DebugValue::Counter(count) = value else {
            panic!("a counter")
        };
        counts.insert(label("outcome").unwrap(), count);
    }
    let expected =
        [("claimed", 1), ("completed", 1), ("replayed", 2)].map(|(o, n)| (o.to_owned(), n));
    assert_eq!(counts, expected.into_iter().collect());
}

/// The page that lists the metric and outcome names a user reads.
const DOCS: &str = include_str!("../../docs/observability.md");

/// The first backticked cell of each table row in the page's section `heading`.
fn documented(heading: &str) -> Vec<String> {
    DOCS.lines()
        .skip_while(|line| *line != format!("## {heading}"))
        .skip(1)
        .take_while(|line| !line.starts_with("## "))
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|row| row.split_once('`').map(|(name, _)| name.to_owned()))
        .collect()
}

/// Every counter in the snapshot by (name, outcome label), summed over the routes.
fn counters(snapshotter: &Snapshotter) -> BTreeMap<(String, Option<String>), u64> {
    let mut counters = BTreeMap::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let key = key.key();
        let outcome = key
            .labels()
            .find(|label| label.key() == "outcome")
            .map(|label| label.value().to_owned());
        // Every metric emitted is documented, whatever its kind; only counters are summed.
        assert!(
            documented("Metrics").contains(&key.name().to_owned()),
            "{} is emitted but not documented",
            key.name()
        );
        let DebugValue::Counter(count) = value else {
            continue;
        };
        *counters
            .entry((key.name().to_owned(), outcome))
            .or_default() += count;
    }
    counters
}

async fn panics() -> StatusCode {
    panic!("the handler failed")
}

fn post_to(path: &str, key: Option<&str>, body: &'static str) -> Request {
    let request = Request::post(path).header("content-type", "application/json");
    match key {
        Some(key) => request.header("idempotency-key", key),
        None => request,
    }
    .body(Body::from(body))
    .unwrap()
}

#[test]
fn the_documented_metric_names_are_the_ones_emitted() {
    let metrics = documented("Metrics");
    let outcomes = documented("Outcomes");
    assert!(
        metrics.contains(&"idem_requests_total".to_owned()),
        "{metrics:?}"
    );
    assert_eq!(outcomes.len(), 15, "{outcomes:?}");

    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let idem = Idempotency::default();
            // The slow route's handler says when it has started, and finishes when told to.
            let (started, proceed) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
            let slow = {
                let (started, proceed) = (started.clone(), proceed.clone());
                move || async move {
                    started.notify_one();
                    proceed.notified().await;
                    StatusCode::CREATED
                }
            };
            let keyed = Router::new()
                .route("/payments", post(|| async { StatusCode::CREATED }))
                .route("/failing", post(|| async { StatusCode::BAD_GATEWAY }))
                .route("/panicking", post(panics))
                .route("/slow", post(slow))
                .layer(IdempotencyLayer::new(
                    idem.clone(),
                    Policy::new().scope(Scope::Global),
                ));
            let optional = Router::new()
                .route("/notes", post(|| async { StatusCode::CREATED }))
                .layer(IdempotencyLayer::new(
                    idem.clone(),
                    Policy::new().scope(Scope::Global).required(false),
                ));
            let app = keyed.merge(optional);
            let send = |request: Request| {
                let app = app.clone();
                async move { app.oneshot(request).await.unwrap().status() }
            };

            assert_eq!(send(post_to("/payments", Some("a"), "{}")).await, 201);
            assert_eq!(send(post_to("/payments", Some("a"), "{}")).await, 201);
            assert_eq!(send(post_to("/payments", Some("a"), "[1]")).await, 422);
            assert_eq!(send(post_to("/payments", None, "{}")).await, 400);
            assert_eq!(send(post_to("/failing", Some("b"), "{}")).await, 502);
            assert_eq!(send(post_to("/panicking", Some("c"), "{}")).await, 500);
            assert_eq!(send(post_to("/notes", None, "{}")).await, 201);

            let first = tokio::spawn(send(post_to("/slow", Some("d"), "{}")));
            started.notified().await;
            assert_eq!(send(post_to("/slow", Some("d"), "{}")).await, 409);
            proceed.notify_one();
            assert_eq!(first.await.unwrap(), 201);
        });
    });

    let counted = counters(&snapshotter);
    for (name, outcome) in counted.keys() {
        assert!(
            metrics.contains(name),
            "{name} is emitted but not documented"
        );
        if let Some(outcome) = outcome {
            assert!(
                outcomes.contains(outcome),
                "outcome {outcome} is not documented"
            );
        }
    }
    let requests =
        |outcome: &str| counted[&("idem_requests_total".to_owned(), Some(outcome.to_owned()))];
    // Two firsts (payments, slow) and two that were released (502, panic) claimed their key.
    assert_eq!(requests("claimed"), 4);
    assert_eq!(requests("completed"), 2);
    assert_eq!(requests("replayed"), 1);
    assert_eq!(requests("mismatch"), 1);
    assert_eq!(requests("refused"), 1);
    assert_eq!(requests("released"), 2);
    assert_eq!(requests("panicked"), 1);
    assert_eq!(requests("unrecorded"), 1);
    assert_eq!(requests("conflict"), 1);
}
