//! Serving the shop over HTTP/1.1 so that slow or idle clients cannot hold its connections,
//! and a crowd of clients is answered rather than left hanging.
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
//! - **connection bound**: at most this many connections are served at once. The next ones wait
//!   briefly for a slot and are then refused with `503` (see
//!   [`ConnectionLimits::max_connections`]).
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
//! let listener = shop::server::bind("127.0.0.1:3000".parse()?)?;
//! shop::serve(listener, router, backend.idem.clone(), limits, shop::shutdown_signal()).await?;
//! # Ok(()) }
//! ```

mod activity;
mod admission;
mod header_count;
mod refusal;

use std::{convert::Infallible, future::Future, io, net::SocketAddr, pin::pin, time::Duration};

use axum::{Router, body::Body, middleware};
use http_body_util::BodyExt;
use hyper::{body::Incoming, server::conn::http1, service::service_fn};
use hyper_util::{
    rt::{TokioIo, TokioTimer},
    server::graceful::{GracefulShutdown, Watcher},
};
use idem_core::Idempotency;
use tokio::{
    net::{TcpListener, TcpSocket, TcpStream},
    sync::{Semaphore, watch},
};
use tower::ServiceExt;

use self::{
    activity::{Activity, Overdue, Watched},
    admission::{Admission, Admitted, Arrival, Place},
    refusal::Refusal,
};
pub use self::{
    header_count::{HYPER_MAX_HEADERS, MAX_HEADERS},
    refusal::REFUSAL_TIME,
};

/// How long a connection may wait and read, and how many may be open at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// How long a connection may sit with no request in progress and no byte of a new one:
    /// freshly accepted, or kept alive after its last answer. Then it is closed.
    pub idle_timeout: Duration,
    /// How long a request head may take to arrive, from its first byte to its end. Then the
    /// connection is closed.
    pub header_read_timeout: Duration,
    /// How many connections are served at once.
    ///
    /// A client whose connection arrives while every slot is taken sees this:
    ///
    /// 1. The connection is accepted. If fewer than [`max_queued`](Self::max_queued)
    ///    connections (a quarter of the bound) are waiting, it waits too, its request unread,
    ///    for a slot to free, first come first served, for at most
    ///    [`queue_timeout`](Self::queue_timeout). If one frees, it is served as any other, a
    ///    little late.
    /// 2. Otherwise, if no slot frees in time, or if the shop starts shutting down meanwhile,
    ///    the shop reads the request head and answers `503` Problem Details (type
    ///    `…#unavailable`) with `Retry-After: 1` and `Connection: close`. It then ends its side
    ///    of the connection, and reads and discards what the client still sends until the
    ///    client closes its own, so that the client reads the answer rather than a reset even
    ///    when its body was never read. A refusal takes at most [`REFUSAL_TIME`] (2 s); a client
    ///    that sends no request head within it is closed without an answer.
    /// 3. The process holds at most [`max_open`](Self::max_open) connections: those served,
    ///    and twice the queue's size more, waiting or being refused. When all are taken, new connections stay in
    ///    the kernel's accept queue ([`LISTEN_BACKLOG`] of them, for a listener from [`bind`])
    ///    until one closes, which a refusal does within [`REFUSAL_TIME`] and a queued
    ///    connection within the queue timeout and [`REFUSAL_TIME`]; past the accept queue, the
    ///    kernel drops connection attempts and the client's TCP tries again a second or more
    ///    later.
    ///
    /// Every connection the shop does not serve thus holds a file descriptor for a bounded
    /// time. [`serve`] lowers the bound so that [`max_open`](Self::max_open) connections fit in
    /// the process's file-descriptor limit, and logs a warning when it does.
    pub max_connections: usize,
    /// How long a connection past [`max_connections`](Self::max_connections) waits in the
    /// queue for a slot before it is refused with `503`.
    pub queue_timeout: Duration,
}

impl ConnectionLimits {
    /// The default idle timeout: 20 seconds.
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(20);
    /// The default header-read timeout: 10 seconds.
    pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
    /// The default connection bound: 512.
    pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
    /// The default queue timeout: 1 second, as long as the `Retry-After` of the refusal.
    pub const DEFAULT_QUEUE_TIMEOUT: Duration = Duration::from_secs(1);

    /// File descriptors kept free for everything but client connections: the listener, the
    /// store's connections, the runtime's own, logs.
    const RESERVED_FDS: u64 = 64;

    /// How many connections past the bound may wait for a slot at once: a quarter of the
    /// bound, and at least one.
    pub fn max_queued(&self) -> usize {
        (self.max_connections / 4).max(1)
    }

    /// How many connections the process holds at most: the bound, and twice
    /// [`max_queued`](Self::max_queued) more, waiting or being refused. 768 with the default
    /// bound.
    pub fn max_open(&self) -> usize {
        self.max_connections
            .saturating_add(2 * self.max_queued())
            .min(Semaphore::MAX_PERMITS)
    }

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
            queue_timeout: Self::DEFAULT_QUEUE_TIMEOUT,
        }
    }
}

/// How large a connection bound the file-descriptor limit leaves room for, with the half as
/// many again that may be queued or being refused ([`ConnectionLimits::max_open`]), if the
/// limit is known.
#[cfg(unix)]
fn client_fd_room() -> Option<usize> {
    let (soft, _hard) = rlimit::getrlimit(rlimit::Resource::NOFILE).ok()?;
    let sockets = soft.saturating_sub(ConnectionLimits::RESERVED_FDS);
    let room = (sockets / 3 * 2).max(1);
    Some(usize::try_from(room).unwrap_or(usize::MAX))
}

#[cfg(not(unix))]
fn client_fd_room() -> Option<usize> {
    None
}

/// How many connections the kernel keeps for [`bind`]'s listener until the shop accepts them:
/// a burst of a thousand fits, where `TcpListener::bind`'s 128 would leave the rest to their
/// clients' TCP retries. Linux caps it at `net.core.somaxconn` (4096 by default).
pub const LISTEN_BACKLOG: u32 = 1024;

/// A listener on `addr` with an accept queue of [`LISTEN_BACKLOG`], as the shop binary uses.
///
/// # Errors
///
/// When the address cannot be bound (it is in use, say).
pub fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    // As `TcpListener::bind` does: a restarted shop can listen again at once.
    #[cfg(unix)]
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Serves `router` on `listener` within `limits` until `shutdown` completes, then lets every
/// running handler finish and store its result, including those whose client has gone.
///
/// On shutdown the listener closes, idle connections close at once, the requests in progress
/// are answered (hyper-util's graceful shutdown), and connections waiting for a slot are
/// refused with `503`; [`Idempotency::shutdown`] then waits for the handlers that carry on
/// after their client disconnected (a timed-out transfer, say), so the client's retry finds
/// the result.
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
    let (stop, stopping) = watch::channel(false);
    let connections = Connections::new(router, limits.within_fd_limit(), stopping);
    let graceful = GracefulShutdown::new();
    connections
        .accept_until(&listener, &graceful, shutdown)
        .await;
    stop.send_replace(true);
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

/// What every connection needs: how to speak HTTP, what to serve, and the bounds it is
/// admitted within.
#[derive(Clone)]
struct Connections {
    http: http1::Builder,
    router: Router,
    limits: ConnectionLimits,
    admission: Admission,
    /// Becomes `true` when the shop starts shutting down.
    stopping: watch::Receiver<bool>,
}

impl Connections {
    fn new(router: Router, limits: ConnectionLimits, stopping: watch::Receiver<bool>) -> Self {
        let mut http = http1::Builder::new();
        http.timer(TokioTimer::new())
            // hyper's timer starts when a connection begins to wait for a request, not at its
            // first byte, so it runs for the idle spell too: the connection's own timers
            // (`Activity`) close it first, and hyper's is only a backstop.
            .header_read_timeout(limits.idle_timeout + limits.header_read_timeout)
            .max_headers(HYPER_MAX_HEADERS);
        Self {
            http,
            router: router.layer(middleware::from_fn(header_count::limit_header_count)),
            limits,
            admission: Admission::new(&limits),
            stopping,
        }
    }

    /// Accepts connections, each once the process may hold it, until `shutdown` completes.
    async fn accept_until(
        &self,
        listener: &TcpListener,
        graceful: &GracefulShutdown,
        shutdown: impl Future<Output = ()>,
    ) {
        let mut shutdown = pin!(shutdown);
        loop {
            let place = tokio::select! {
                place = self.admission.place() => place,
                () = &mut shutdown => return,
            };
            let socket = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((socket, _peer)) => socket,
                    Err(error) => {
                        wait_after_accept_error(&error).await;
                        continue;
                    }
                },
                () = &mut shutdown => return,
            };
            self.admit(socket, place, graceful.watcher());
        }
    }

    /// Serves `socket` if a slot is free; otherwise, in a task of its own, lets it wait in the
    /// queue or refuses it. `watcher` keeps the shutdown waiting for it.
    fn admit(&self, socket: TcpStream, place: Place, watcher: Watcher) {
        let (place, turn) = match self.admission.arrive(place) {
            Arrival::Served(admitted) => return self.serve(socket, admitted, watcher),
            Arrival::Queued(place, turn) => (place, turn),
            Arrival::Refused(place, refusal) => {
                tokio::spawn(refuse(socket, place, refusal, watcher));
                return;
            }
        };
        let connections = self.clone();
        tokio::spawn(async move {
            let stopping = connections.stopping.clone();
            match connections.admission.wait(place, turn, stopping).await {
                Ok(admitted) => connections.serve(socket, admitted, watcher),
                Err((place, refusal)) => refuse(socket, place, refusal, watcher).await,
            }
        });
    }

    /// Serves one connection in a task of its own, which holds `admitted` until the connection
    /// closes.
    fn serve(&self, socket: TcpStream, admitted: Admitted, watcher: Watcher) {
        let activity = Activity::new();
        let service = {
            let (router, activity) = (self.router.clone(), activity.clone());
            service_fn(move |request: hyper::Request<Incoming>| {
                let busy = activity.request_started();
                let answer = router.clone().oneshot(request.map(Body::new));
                async move {
                    let response = match answer.await {
                        Ok(response) => response,
                        Err(never) => match never {},
                    };
                    // The connection is busy until the body has been sent: the guard lives in
                    // the body, which hyper drops once it has written the last frame.
                    Ok::<_, Infallible>(response.map(move |body| {
                        body.map_frame(move |frame| {
                            let _busy = &busy;
                            frame
                        })
                    }))
                }
            })
        };
        let connection = watcher.watch(self.http.serve_connection(
            TokioIo::new(Watched::new(socket, activity.clone())),
            service,
        ));
        let limits = self.limits;
        tokio::spawn(async move {
            let _admitted = admitted;
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
}

/// Refuses `socket`, holding its `place` and `watcher` until it is closed.
async fn refuse(socket: TcpStream, place: Place, refusal: Refusal, watcher: Watcher) {
    tracing::debug!(?refusal, "refusing a connection");
    refusal::refuse(socket, refusal).await;
    drop((place, watcher));
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
