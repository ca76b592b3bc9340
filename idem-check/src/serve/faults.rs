//! The faults `serve` injects: a delay before answering, a 5xx on the first runs of a key,
//! and a connection dropped after the request was processed. Each is set for the server
//! (`--delay-ms`, `--fail-first`, `--drop-first`) and can be set per request in the query
//! (`?delay_ms=1500&fail_first=1`), so that one server offers a fast, a slow and a failing
//! variant of the same endpoint.

use std::time::Duration;

use axum::{
    extract::{Query, Request, State},
    middleware::Next,
    response::Response,
};
use http::{HeaderMap, Method, Uri};
use idem::{
    Principal,
    key::{IdempotencyKey, KeySyntax},
};
use serde::Deserialize;

use crate::serve::{DropConnection, ServeState};

/// The faults of one request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// How long a run takes before it answers.
    pub delay: Duration,
    /// How many runs of each key answer 500 before one succeeds.
    pub fail_first: u32,
    /// How many requests with each key are processed and then have their connection dropped
    /// instead of an answer.
    pub drop_first: u32,
}

#[derive(Debug, Default, Deserialize)]
struct FaultQuery {
    delay_ms: Option<u64>,
    fail_first: Option<u32>,
    drop_first: Option<u32>,
}

impl Faults {
    /// These faults, with those the request's query sets instead.
    pub(crate) fn for_request(self, uri: &Uri) -> Self {
        let query = Query::<FaultQuery>::try_from_uri(uri)
            .map(|Query(query)| query)
            .unwrap_or_default();
        Self {
            delay: query.delay_ms.map_or(self.delay, Duration::from_millis),
            fail_first: query.fail_first.unwrap_or(self.fail_first),
            drop_first: query.drop_first.unwrap_or(self.drop_first),
        }
    }
}

/// The key of a request as idem reads it (either spelling), if it has a valid one.
pub(crate) fn key_of(headers: &HeaderMap) -> Option<String> {
    IdempotencyKey::from_headers(headers, KeySyntax::Lenient)
        .ok()
        .flatten()
        .map(|key| key.as_str().to_owned())
}

/// Counts each keyed POST, and drops the connection of the first `drop_first` of a key once
/// idem has processed them (run and stored, or replayed): the client never hears the answer
/// its request produced, as when a network fails on the way back. Other methods pass: idem
/// does not intercept them, and a GET is never the operation.
pub(crate) async fn drop_after_processing(
    State(state): State<ServeState>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let key = key_of(request.headers());
    let principal = request
        .extensions()
        .get::<Principal>()
        .map(|principal| principal.as_str().to_owned())
        .unwrap_or_default();
    let faults = state.faults.for_request(request.uri());
    let attempt = key.as_ref().map(|key| state.runs.attempt(&principal, key));
    let mut response = next.run(request).await;
    if let (Some(key), Some(attempt)) = (key, attempt)
        && attempt <= faults.drop_first
    {
        tracing::info!(
            principal,
            key,
            attempt,
            status = response.status().as_u16(),
            "processed; dropping the connection instead of answering (drop_first)"
        );
        response.extensions_mut().insert(DropConnection);
    }
    response
}
