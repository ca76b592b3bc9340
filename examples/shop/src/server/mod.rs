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
//! let listener = shop::server::bind("127.0.0.1:3000".parse()?, "--addr HOST:PORT")?;
//! shop::serve(listener, router, backend.idem.clone(), limits, shop::shutdown_signal()).await?;
//! # Ok(()) }
//! ```

mod activity;
mod bounds;
mod header_count;
mod limits;
mod listen;
mod refusal;

use std::{convert::Infallible, future::Future, io, pin::pin, time::Duration};

use axum::{Router, body::Body, middleware};
use http_body_util::BodyExt;
use hyper::{body::Incoming, server::conn::http1, service::service_fn};
use hyper_util::{
    rt::{TokioIo, TokioTimer},
    server::graceful::{GracefulShutdown, Watcher},
};
use idem::Idempotency;
use tokio::{
    net::{TcpListener, TcpStream},
    sync::watch,
};
use tower::ServiceExt;

use self::{
    activity::{Activity, Overdue, Watched},
    bounds::{Arrival, ConnectionBounds, Place, Serving},
    refusal::Refusal,
};
pub use self::{
    header_count::{HYPER_MAX_HEADERS, MAX_HEADERS},
    limits::ConnectionLimits,
    listen::{BindError, bind},
    refusal::REFUSAL_TIME,
};

/// How many connections the kernel keeps for [`bind`]'s listener until the shop accepts them:
/// a burst of a thousand fits, where `TcpListener::bind`'s 128 would leave the rest to their
/// clients' TCP retries. Linux caps it at `net.core.somaxconn` (4096 by default).
pub const LISTEN_BACKLOG: u32 = 1024;

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
    admission: ConnectionBounds,
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
            admission: ConnectionBounds::new(&limits),
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
    fn serve(&self, socket: TcpStream, admitted: Serving, watcher: Watcher) {
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
