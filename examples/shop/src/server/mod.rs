//! Serving the shop over HTTP/1.1 so that slow or idle clients cannot hold its connections.
//!
//! `axum::serve` has no header-read timeout and no bound on connections: a client that sends
//! half a request head, or keeps an idle connection open, holds a socket forever. [`serve`]
//! drives hyper's own HTTP/1 connection with hyper-util's graceful shutdown instead, within
//! [`ConnectionLimits`]:
//!
//! - **idle timeout**: a connection with no request in progress and no byte of a new one,
//!   freshly accepted or after its last answer, is closed after this long;
//! - **header-read timeout**: once a request head has started to arrive, it must be complete
//!   within this long of its first byte, or the connection is closed (without an answer: there
//!   is no request to answer yet);
//! - **connection bound**: at most this many connections at once. The next one waits in the
//!   kernel's accept queue until a connection closes (see [`ConnectionLimits::max_connections`]).
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//!
//! use shop::{Backend, ConnectionLimits, Settings, Shop};
//!
//! let backend = Backend::memory();
//! let router = shop::app(Shop::new(backend.ledger.clone(), Settings::default()), backend.idem.clone());
//! let limits = ConnectionLimits {
//!     idle_timeout: Duration::from_secs(5),
//!     ..ConnectionLimits::default()
//! };
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! shop::serve(listener, router, backend.idem.clone(), limits, shop::shutdown_signal()).await?;
//! # Ok(()) }
//! ```

mod activity;
mod header_count;

use std::{convert::Infallible, future::Future, io, pin::pin, sync::Arc, time::Duration};

use axum::{Router, body::Body, middleware};
use http_body_util::BodyExt;
use hyper::{body::Incoming, server::conn::http1, service::service_fn};
use hyper_util::{
    rt::{TokioIo, TokioTimer},
    server::graceful::GracefulShutdown,
};
use idem_core::Idempotency;
use tokio::{
    net::{TcpListener, TcpStream},
    sync::{OwnedSemaphorePermit, Semaphore},
};
use tower::ServiceExt;

use self::activity::{Activity, Overdue, Watched};
pub use self::header_count::{HYPER_MAX_HEADERS, MAX_HEADERS};

/// How long a connection may wait and read, and how many may be open at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// How long a connection may sit with no request in progress and no byte of a new one:
    /// freshly accepted, or kept alive after its last answer. Then it is closed.
    pub idle_timeout: Duration,
    /// How long a request head may take to arrive, from its first byte to its end. Then the
    /// connection is closed.
    pub header_read_timeout: Duration,
    /// How many connections may be open at once.
    ///
    /// Over the bound, a new connection waits in the kernel's accept queue, unaccepted, until
    /// an open one closes: a burst over the bound is served late rather than refused, and costs
    /// the process nothing while it waits. The timeouts above free the slots that slow or idle
    /// clients hold. [`serve`] lowers the bound to what the process's file-descriptor limit can
    /// hold, and logs a warning when it does.
    pub max_connections: usize,
}

impl ConnectionLimits {
    /// The default idle timeout: 20 seconds.
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(20);
    /// The default header-read timeout: 10 seconds.
    pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
    /// The default connection bound: 512.
    pub const DEFAULT_MAX_CONNECTIONS: usize = 512;

    /// File descriptors kept free for everything but client connections: the listener, the
    /// store's connections, the runtime's own, logs.
    const RESERVED_FDS: u64 = 64;

    /// These limits, with the connection bound lowered to what the process can open.
    fn within_fd_limit(mut self) -> Self {
        if let Some(room) = client_fd_room()
            && self.max_connections > room
        {
            tracing::warn!(
                configured = self.max_connections,
                lowered_to = room,
                "the connection bound is more than the file-descriptor limit allows (ulimit -n); \
                 raise the limit, or lower SHOP_MAX_CONNECTIONS"
            );
            self.max_connections = room;
        }
        self.max_connections = self.max_connections.clamp(1, Semaphore::MAX_PERMITS);
        self
    }
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            idle_timeout: Self::DEFAULT_IDLE_TIMEOUT,
            header_read_timeout: Self::DEFAULT_HEADER_READ_TIMEOUT,
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// How many client connections the file-descriptor limit leaves room for, if it is known.
#[cfg(unix)]
fn client_fd_room() -> Option<usize> {
    let (soft, _hard) = rlimit::getrlimit(rlimit::Resource::NOFILE).ok()?;
    let room = soft.saturating_sub(ConnectionLimits::RESERVED_FDS).max(1);
    Some(usize::try_from(room).unwrap_or(usize::MAX))
}

#[cfg(not(unix))]
fn client_fd_room() -> Option<usize> {
    None
}

/// Serves `router` on `listener` within `limits` until `shutdown` completes, then lets every
/// running handler finish and store its result, including those whose client has gone.
///
/// On shutdown the listener closes, idle connections close at once, and the requests in
/// progress are answered (hyper-util's graceful shutdown); [`Idempotency::shutdown`] then waits
/// for the handlers that carry on after their client disconnected (a timed-out transfer, say),
/// so the client's retry finds the result.
///
/// A request with more than [`MAX_HEADERS`] header lines is answered `431` Problem Details.
///
/// # Errors
///
/// None in practice: a failed `accept` (out of file descriptors, say) is logged and retried.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    idem: Idempotency,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let limits = limits.within_fd_limit();
    let router = router.layer(middleware::from_fn(header_count::limit_header_count));
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        // hyper's timer starts when a connection begins to wait for a request, not at its
        // first byte, so it runs for the idle spell too: the connection's own timers
        // (`Activity`) close it first, and hyper's is only a backstop.
        .header_read_timeout(limits.idle_timeout + limits.header_read_timeout)
        .max_headers(HYPER_MAX_HEADERS);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    let mut shutdown = pin!(shutdown);
    loop {
        let slot = tokio::select! {
            slot = Arc::clone(&slots).acquire_owned() => slot.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let socket = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((socket, _peer)) => socket,
                Err(error) => {
                    wait_after_accept_error(&error).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        serve_connection(socket, slot, &http, &graceful, router.clone(), limits);
    }
    drop(listener);
    let open = graceful.count();
    if open > 0 {
        tracing::info!(open, "waiting for the requests in progress");
    }
    graceful.shutdown().await;
    let running = idem.running();
    if running > 0 {
        tracing::info!(
            running,
            "waiting for running handlers to store their results"
        );
    }
    idem.shutdown().await;
    Ok(())
}

/// Serves one connection in a task of its own, which holds `slot` until the connection closes.
fn serve_connection(
    socket: TcpStream,
    slot: OwnedSemaphorePermit,
    http: &http1::Builder,
    graceful: &GracefulShutdown,
    router: Router,
    limits: ConnectionLimits,
) {
    let activity = Activity::new();
    let service = {
        let activity = activity.clone();
        service_fn(move |request: hyper::Request<Incoming>| {
            let busy = activity.request_started();
            let answer = router.clone().oneshot(request.map(Body::new));
            async move {
                let response = match answer.await {
                    Ok(response) => response,
                    Err(never) => match never {},
                };
                // The connection is busy until the body has been sent: the guard lives in the
                // body, which hyper drops once it has written the last frame.
                Ok::<_, Infallible>(response.map(move |body| {
                    body.map_frame(move |frame| {
                        let _busy = &busy;
                        frame
                    })
                }))
            }
        })
    };
    let connection = graceful.watch(http.serve_connection(
        TokioIo::new(Watched::new(socket, activity.clone())),
        service,
    ));
    tokio::spawn(async move {
        let _slot = slot;
        tokio::select! {
            served = connection => {
                if let Err(error) = served {
                    // A client that went away or sent garbage: its business, not the shop's.
                    tracing::debug!(%error, "connection ended with an error");
                }
            }
            overdue = activity.overdue(limits.idle_timeout, limits.header_read_timeout) => {
                match overdue {
                    Overdue::Idle => tracing::debug!("closing an idle connection"),
                    Overdue::HeaderRead => tracing::debug!("closing a connection whose request head is late"),
                }
            }
        }
    });
}

/// What to do when `accept` fails: go on at once when one connection failed, or pause when
/// the process is out of file descriptors (or another resource), as `axum::serve` does, so
/// the loop does not spin while connections close.
async fn wait_after_accept_error(error: &io::Error) {
    let one_connection = matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    );
    if !one_connection {
        tracing::error!(%error, "cannot accept connections; retrying in 1 s");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_is_lowered_to_the_file_descriptor_limit() {
        let room = client_fd_room().unwrap_or(usize::MAX);
        let limits = ConnectionLimits {
            max_connections: usize::MAX,
            ..ConnectionLimits::default()
        }
        .within_fd_limit();
        assert_eq!(
            limits.max_connections,
            room.min(Semaphore::MAX_PERMITS),
            "{limits:?}"
        );
        let small = ConnectionLimits {
            max_connections: 3,
            ..ConnectionLimits::default()
        };
        assert_eq!(small.within_fd_limit(), small);
    }
}
