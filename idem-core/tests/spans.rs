//! Each keyed request runs in a span, `idempotency`, whose fields an OpenTelemetry pipeline
//! (`tracing-opentelemetry`, the SDK's in-memory exporter) receives as attributes, one value
//! each: the route, the store key's prefix, the outcome and whether the request was replayed.
//! The spans carry neither the client's key nor a body.

use std::collections::BTreeMap;

use axum::{Router, body::Body, extract::Request, http::StatusCode, routing::post};
use idem::{Idempotency, IdempotencyLayer, Policy, Scope};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use tower::ServiceExt;
use tracing_subscriber::layer::SubscriberExt;

/// A client's key in a global scope: whoever knows it gets the result, so it is a secret.
const SECRET_KEY: &str = "k-7c1e-secret";
const BODY: &str = r#"{"amount":9800,"card":"4242424242424242"}"#;

fn payment(key: &str, body: &'static str) -> Request {
    Request::post("/payments/7")
        .header("idempotency-key", key)
        .header("content-type", "application/json")
        .body(Body::from(body))
        .unwrap()
}

/// The finished spans named `idempotency`, each as its attributes.
fn requests_traced(send: impl AsyncFnOnce(Router)) -> Vec<BTreeMap<String, String>> {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    // Without the layer's own attributes (timings, location, thread, target, level): the
    // span's own are left.
    let layer = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("idem-core-tests"))
        .with_tracked_inactivity(false)
        .with_location(false)
        .with_threads(false)
        .with_target(false)
        .with_level(false);
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let app = Router::new()
                .route("/payments/{id}", post(|| async { StatusCode::CREATED }))
                .route("/failing", post(|| async { StatusCode::BAD_GATEWAY }))
                .layer(IdempotencyLayer::new(
                    Idempotency::default(),
                    Policy::new().scope(Scope::Global),
                ));
            send(app).await;
        });
    });
    provider.force_flush().unwrap();
    exporter
        .get_finished_spans()
        .unwrap()
        .into_iter()
        .filter(|span| span.name == "idempotency")
        .map(|span| {
            let mut attributes = BTreeMap::new();
            for pair in span.attributes {
                let key = pair.key.as_str().to_owned();
                let previous = attributes.insert(key.clone(), pair.value.to_string());
                assert!(previous.is_none(), "{key} recorded twice");
            }
            attributes
        })
        .collect()
}

#[test]
fn a_request_span_carries_its_route_key_outcome_and_replay() {
    let spans = requests_traced(async |app| {
        for body in [BODY, BODY, r#"{"amount":1}"#] {
            app.clone()
                .oneshot(payment(SECRET_KEY, body))
                .await
                .unwrap();
        }
    });
    assert_eq!(spans.len(), 3, "{spans:?}");
    let outcomes: Vec<(&str, &str)> = spans
        .iter()
        .map(|span| (span["outcome"].as_str(), span["replayed"].as_str()))
        .collect();
    assert_eq!(
        outcomes,
        [
            ("completed", "false"),
            ("replayed", "true"),
            ("mismatch", "false")
        ]
    );
    for span in &spans {
        assert_eq!(
            span["route"], "/payments/{id}",
            "the template, not the path"
        );
        let key = &span["key"];
        assert!(
            key.len() == 16 && key.bytes().all(|byte| byte.is_ascii_hexdigit()),
            "the store key's prefix: {key}"
        );
        let values: String = span.values().cloned().collect();
        assert!(!values.contains(SECRET_KEY), "the client's key: {span:?}");
        assert!(!values.contains("4242"), "the body: {span:?}");
    }
    assert_eq!(spans[0]["key"], spans[1]["key"], "one key, one store key");
}

#[test]
fn every_span_field_is_documented() {
    let spans = requests_traced(async |app| {
        app.clone().oneshot(payment("k-1", BODY)).await.unwrap();
        let released = Request::post("/failing")
            .header("idempotency-key", "k-2")
            .body(Body::empty())
            .unwrap();
        app.oneshot(released).await.unwrap();
    });
    assert_eq!(spans[1]["outcome"], "released");
    let documented = idem_core_docs::span_fields();
    for span in &spans {
        let names: Vec<&String> = span.keys().collect();
        for name in &names {
            assert!(
                documented.contains(name),
                "{name} is on the span but not in docs/observability.md"
            );
        }
        assert_eq!(names.len(), documented.len(), "{span:?}");
    }
}

/// What docs/observability.md lists.
mod idem_core_docs {
    /// The first backticked cell of each row of the table under `## Spans`.
    pub(super) fn span_fields() -> Vec<String> {
        include_str!("../../docs/observability.md")
            .lines()
            .skip_while(|line| !line.starts_with("## Spans"))
            .skip(1)
            .take_while(|line| !line.starts_with("## "))
            .filter_map(|line| line.strip_prefix("| `"))
            .filter_map(|row| row.split_once('`').map(|(name, _)| name.to_owned()))
            .collect()
    }
}
