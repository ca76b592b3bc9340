//! With the `metrics` feature, every outcome is counted by route.
#![cfg(feature = "metrics")]

use axum::{Router, body::Body, extract::Request, http::StatusCode, routing::post};
use idem_core::{Idempotency, IdempotencyLayer, Policy, Scope};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
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
