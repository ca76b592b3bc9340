//! Sending one probe through a router, and what it met there.

use std::{
    convert::Infallible,
    fmt,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use axum::{Router, body::Body, extract::Request};
use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use http_body::Frame;
use tower_service::Service;

use super::{
    DocumentError, Endpoint,
    probe::{Probe, Sighting},
};

/// What a route did with its probe.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// idem guards the route: it said what it runs (boxed, so that the other outcome does
    /// not carry a policy's size).
    Guarded(Box<Sighting>),
    /// The route answered without idem, with this status.
    Unguarded(StatusCode),
}

/// What a probe of one endpoint found: the route the router matched, and what it did.
#[derive(Debug)]
pub(crate) struct Found {
    pub(crate) route: String,
    pub(crate) outcome: Outcome,
}

/// Sends a probe of `endpoint`, with `headers`, through `router` (one that marks the route it
/// matched: see [`mark_matched`](super::probe::mark_matched)), and waits `timeout` at most.
pub(crate) async fn ask(
    router: &Router,
    endpoint: &Endpoint,
    headers: &HeaderMap,
    timeout: Duration,
) -> Result<Found, DocumentError> {
    let not_routed = || DocumentError::NotRouted {
        endpoint: endpoint.clone(),
    };
    let probe = Probe::new();
    let mut request = Request::builder()
        .method(endpoint.method())
        .uri(endpoint.probe_path())
        .body(Body::new(Unreadable))
        .map_err(|_| not_routed())?;
    request.headers_mut().extend(headers.clone());
    request.extensions_mut().insert(probe.clone());
    let mut router = router.clone();
    let answered = async move {
        std::future::poll_fn(|cx| <Router as Service<Request>>::poll_ready(&mut router, cx))
            .await
            .unwrap_or_else(|never: Infallible| match never {});
        let answer = router.call(request).await;
        answer.unwrap_or_else(|never| match never {})
    };
    let answer =
        tokio::time::timeout(timeout, answered)
            .await
            .map_err(|_| DocumentError::TimedOut {
                endpoint: endpoint.clone(),
                after: timeout,
            })?;
    let seen = probe.seen();
    // A route the router did not match is its fallback, even if a layer guards that too.
    let route = seen.matched.ok_or_else(not_routed)?;
    let outcome = match seen.sighting {
        Some(sighting) => Outcome::Guarded(Box::new(sighting)),
        None if is_refusal(answer.status()) => {
            return Err(DocumentError::ProbeRefused {
                endpoint: endpoint.clone(),
                status: answer.status(),
            });
        }
        None => Outcome::Unguarded(answer.status()),
    };
    Ok(Found { route, outcome })
}

/// Whether a status says the request lacked credentials or rights: then it did not get as
/// far as idem or the handler, and says nothing about either.
fn is_refusal(status: StatusCode) -> bool {
    [
        StatusCode::UNAUTHORIZED,
        StatusCode::FORBIDDEN,
        StatusCode::PROXY_AUTHENTICATION_REQUIRED,
    ]
    .contains(&status)
}

/// The body of a probe: an error as soon as it is read, so that a route without idem refuses
/// the probe in its body extractor rather than run its handler on an empty body.
struct Unreadable;

/// Why a probe's body cannot be read.
#[derive(Debug)]
struct ProbeHasNoBody;

impl fmt::Display for ProbeHasNoBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a probe of idem's has no body to read")
    }
}

impl std::error::Error for ProbeHasNoBody {}

impl http_body::Body for Unreadable {
    type Data = Bytes;
    type Error = ProbeHasNoBody;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, ProbeHasNoBody>>> {
        Poll::Ready(Some(Err(ProbeHasNoBody)))
    }
}
