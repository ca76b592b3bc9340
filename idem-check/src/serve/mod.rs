//! `idem-check serve`: a real idempotent endpoint (idem itself, on a memory store) with the
//! faults a canned mock cannot have, for testing clients. A canned mock answers the same
//! payment whatever was sent, and fakes "in flight" with a fixed key; this server stores the
//! first answer of each key and replays it, answers 409 while a run is in progress, compares
//! bodies, and on demand:
//!
//! - takes its time (`--delay-ms`, or `?delay_ms=` per request): a client that gives up
//!   meets 409 on its retry, then the first run's answer;
//! - processes a request and drops the connection instead of answering (`--drop-first N`):
//!   the article's case 5 for real, where the operation happened and the client cannot know;
//! - answers 500 on the first N runs of each key (`--fail-first N`), released for a retry
//!   or stored and replayed (`--on-5xx stored`);
//! - reports per key how many requests came and how many times the operation really ran
//!   (`GET /runs`).
//!
//! ```no_run
//! # async fn run() -> std::io::Result<()> {
//! use idem_check::serve::{ServeOptions, serve};
//!
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:4100").await?;
//! let options = ServeOptions { drop_first: 1, ..ServeOptions::default() };
//! serve(listener, options, std::future::pending()).await
//! # }
//! ```

mod faults;
mod routes;
mod runs;

use std::{convert::Infallible, future::Future, io, pin::pin, time::Duration};

use axum::{
    Router,
    body::Body,
    middleware,
    routing::{get, post},
};
use hyper::{body::Incoming, server::conn::http1, service::service_fn};
use hyper_util::rt::TokioIo;
use idem::{Idempotency, IdempotencyLayer, MemoryStore, Policy, Scope};
use tokio::net::{TcpListener, TcpStream};
use tower::ServiceExt;

pub use self::{
    faults::Faults,
    runs::{KeyRuns, Runs},
};
use crate::settings::OnServerError;

/// How `serve` behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServeOptions {
    /// How long a completed key is kept (24 h by default).
    pub ttl: Duration,
    /// What a 5xx does to its key: released for a new run (default), or stored and replayed.
    pub on_server_error: OnServerError,
    /// How long each run takes.
    pub delay: Duration,
    /// How many runs of each key answer 500 first.
    pub fail_first: u32,
    /// How many requests with each key have their connection dropped once processed.
    pub drop_first: u32,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            ttl: Policy::DEFAULT_TTL,
            on_server_error: OnServerError::Rerun,
            delay: Duration::ZERO,
            fail_first: 0,
            drop_first: 0,
        }
    }
}

/// The handlers' state: the faults and the counts.
#[derive(Clone, Debug)]
pub(crate) struct ServeState {
    faults: Faults,
    runs: Runs,
}

/// Marks a response whose connection is dropped instead of answered.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DropConnection;

/// The router of `serve`, its idempotency runtime, and its counts.
pub fn app(options: ServeOptions) -> (Router, Idempotency, Runs) {
    let idem = Idempotency::new(MemoryStore::default());
    let policy = Policy::new()
        .scope(Scope::User)
        .ttl(options.ttl)
        .lease(Policy::DEFAULT_LEASE.min(options.ttl))
        .store_server_errors(options.on_server_error == OnServerError::Stored);
    let runs = Runs::default();
    let state = ServeState {
        faults: Faults {
            delay: options.delay,
            fail_first: options.fail_first,
            drop_first: options.drop_first,
        },
        runs: runs.clone(),
    };
    let router = Router::new()
        .route("/payments", post(routes::create).get(routes::list))
        .route("/runs", get(routes::runs))
        .route("/healthz", get(routes::healthz))
        .route_layer(IdempotencyLayer::new(idem.clone(), policy))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            faults::drop_after_processing,
        ))
        .layer(middleware::from_fn(routes::authenticate))
        // Open to anyone, outside the layers: where the `type` of each Problem leads.
        .route(routes::CATALOGUE_PATH, get(routes::catalogue))
        .route(idem::problem::CATALOGUE_PATH, get(idem::problem::catalogue))
        .with_state(state);
    (router, idem, runs)
}

/// Serves [`app`] on `listener` until `shutdown` completes, then lets the runs in progress
/// store their results.
///
/// # Errors
///
/// None in practice: a failed `accept` is logged and retried.
pub async fn serve(
    listener: TcpListener,
    options: ServeOptions,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let (router, idem, _runs) = app(options);
    serve_app(listener, router, shutdown).await?;
    idem.shutdown().await;
    Ok(())
}

/// Serves `router` (from [`app`]) until `shutdown`, one task per connection, over hyper's
/// HTTP/1 directly, so that a request whose connection is to be dropped gets not a byte of
/// answer.
///
/// ```no_run
/// # async fn run() -> std::io::Result<()> {
/// use idem_check::serve::{ServeOptions, app, serve_app};
///
/// let (router, _idem, runs) = app(ServeOptions::default());
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// tokio::spawn(serve_app(listener, router, std::future::pending()));
/// // ... send requests, then:
/// assert_eq!(runs.of("alice", "order-1").runs, 1);
/// # Ok(()) }
/// ```
///
/// # Errors
///
/// None in practice: a failed `accept` is logged and retried.
pub async fn serve_app(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let mut shutdown = pin!(shutdown);
    loop {
        let socket = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((socket, _)) => socket,
                Err(error) => {
                    tracing::warn!(%error, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => return Ok(()),
        };
        tokio::spawn(serve_connection(socket, router.clone()));
    }
}

/// Serves one connection; a response marked [`DropConnection`] ends it without an answer.
async fn serve_connection(socket: TcpStream, router: Router) {
    let service = service_fn(move |request: hyper::Request<Incoming>| {
        let answer = router.clone().oneshot(request.map(Body::new));
        async move {
            let response = answer
                .await
                .unwrap_or_else(|never: Infallible| match never {});
            if response.extensions().get::<DropConnection>().is_some() {
                // hyper closes the connection on a service error, without answering.
                return Err(io::Error::other(
                    "connection dropped on purpose (drop_first)",
                ));
            }
            Ok(response)
        }
    });
    let served = http1::Builder::new()
        .serve_connection(TokioIo::new(socket), service)
        .await;
    if let Err(error) = served {
        tracing::debug!(%error, "connection ended");
    }
}
