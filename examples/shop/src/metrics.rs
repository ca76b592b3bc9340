//! `GET /metrics`: the shop's series and idem's, as Prometheus text (`metrics-exporter-prometheus`).
//!
//! idem emits through the `metrics` facade (its feature `metrics`); the shop installs the
//! Prometheus recorder for the whole process the first time a router is built, and serves what
//! it has gathered. Before each scrape it asks a memory store how full it is
//! ([`MemoryStore::fill`](idem::MemoryStore::fill)), which sets idem's gauges and runs the cache's pending maintenance, so
//! that `idem_memory_evicted_early_total` counts every record evicted so far. The shop's own
//! series is `shop_payments_created_total`: payments made, which replays never count. The
//! endpoint is open, like `/healthz`: it says how busy the shop is, never whose data it holds.

use std::sync::OnceLock;

use axum::{
    extract::State,
    http::{HeaderValue, header},
    response::{IntoResponse, Response},
};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::Shop;

/// The media type of Prometheus' text format.
pub const TEXT_FORMAT: &str = "text/plain; version=0.0.4";

/// The buckets of idem's store call histogram, in seconds: from a memory store's microseconds
/// to the 5 s store timeout.
const STORE_CALL_BUCKETS: [f64; 12] = [
    0.000_01, 0.000_05, 0.000_1, 0.000_5, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0,
];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// The process's Prometheus recorder, installed on first use. A process that has installed
/// another recorder already keeps it, and this one renders nothing.
pub fn handle() -> &'static PrometheusHandle {
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(
                Matcher::Full("idem_store_call_seconds".to_owned()),
                &STORE_CALL_BUCKETS,
            )
            .expect("the buckets are not empty")
            .build_recorder();
        let handle = recorder.handle();
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!("another metrics recorder is installed; GET /metrics will be empty");
        }
        handle
    })
}

/// Counts a payment the shop made (not a replay: the handler does not run for one).
pub fn payment_created() {
    metrics::counter!("shop_payments_created_total").increment(1);
}

/// `GET /metrics`.
pub async fn metrics(State(shop): State<Shop>) -> Response {
    if let Some(store) = shop.memory_store() {
        store.fill();
    }
    let mut response = handle().render().into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(TEXT_FORMAT));
    response
}

/// The value of the series `name` (with these exact labels, as rendered: `{a="b"}`, or none)
/// in Prometheus text, if it is there.
pub fn value_of(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .find_map(|line| {
            let (name, value) = line.rsplit_once(' ')?;
            (name == series).then(|| value.parse().ok()).flatten()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_series_is_found_by_its_name_and_labels() {
        let text = "# TYPE a counter\na 3\na{x=\"1\"} 4\nb 0.5\n";
        assert_eq!(value_of(text, "a"), Some(3.0));
        assert_eq!(value_of(text, "a{x=\"1\"}"), Some(4.0));
        assert_eq!(value_of(text, "b"), Some(0.5));
        assert_eq!(value_of(text, "c"), None);
    }
}
