//! The idle timeout: a connection with no request in progress and no byte of a new one is
//! closed once it has been so for the idle timeout.
//!
//! hyper knows when a request head is complete but has no idle timer of its own, so the
//! connection reports what it does to an [`Activity`]: the socket says when bytes arrive
//! ([`Watched`]), the service says when a request starts and when its answer has been sent
//! ([`Activity::request_started`]). [`Activity::idle_expired`] completes when the connection
//! has been idle for too long; the connection task then drops the connection, which closes the
//! socket. Nothing is in progress on an idle connection, so nothing is lost.

use std::{
    io,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    sync::watch,
    time::Instant,
};

/// What a connection is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// No request in progress and no byte of the next one, since this instant: the connection
    /// was just accepted, or its last answer has been sent.
    Waiting(Instant),
    /// Bytes of a request head have arrived; hyper's header-read timeout now governs.
    Reading,
    /// This many requests are being answered.
    Busy(usize),
}

/// The phase of one connection, shared by its socket, its service and its idle timer.
#[derive(Clone, Debug)]
pub(super) struct Activity(Arc<watch::Sender<Phase>>);

impl Activity {
    /// A connection accepted now.
    pub(super) fn new() -> Self {
        Self(Arc::new(watch::Sender::new(Phase::Waiting(Instant::now()))))
    }

    /// Bytes arrived on the socket.
    fn heard(&self) {
        self.0.send_if_modified(|phase| match phase {
            Phase::Waiting(_) => {
                *phase = Phase::Reading;
                true
            }
            Phase::Reading | Phase::Busy(_) => false,
        });
    }

    /// A request's head is complete and its handling starts. The connection is busy until the
    /// returned guard is dropped, which the service does once the answer's body has been sent
    /// (or the request was abandoned).
    pub(super) fn request_started(&self) -> Busy {
        self.0.send_modify(|phase| {
            *phase = match *phase {
                Phase::Busy(requests) => Phase::Busy(requests + 1),
                Phase::Waiting(_) | Phase::Reading => Phase::Busy(1),
            }
        });
        Busy(self.clone())
    }

    fn request_finished(&self) {
        self.0.send_modify(|phase| {
            *phase = match *phase {
                Phase::Busy(requests) if requests > 1 => Phase::Busy(requests - 1),
                _ => Phase::Waiting(Instant::now()),
            }
        });
    }

    /// Completes once the connection has been waiting, with nothing received, for `timeout`.
    pub(super) async fn idle_expired(&self, timeout: Duration) {
        let mut phases = self.0.subscribe();
        loop {
            let phase = *phases.borrow_and_update();
            if let Phase::Waiting(since) = phase {
                tokio::select! {
                    () = tokio::time::sleep_until(since + timeout) => {
                        // A change may have raced the timer: only the same idle spell counts.
                        if *phases.borrow() == phase {
                            return;
                        }
                    }
                    // `self` holds the sender, so the channel cannot close while this runs.
                    _ = phases.changed() => {}
                }
            } else {
                let _ = phases.changed().await;
            }
        }
    }
}

/// Keeps the connection busy while it lives: one request being answered.
#[derive(Debug)]
pub(super) struct Busy(Activity);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.request_finished();
    }
}

/// A socket that tells its [`Activity`] when bytes arrive.
#[derive(Debug)]
pub(super) struct Watched<S> {
    socket: S,
    activity: Activity,
}

impl<S> Watched<S> {
    pub(super) fn new(socket: S, activity: Activity) -> Self {
        Self { socket, activity }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.socket).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.heard();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.socket).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.socket).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        // hyper writes a head and a body in one call when the socket takes vectors.
        self.socket.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.socket).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.socket).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(5);

    /// Whether the idle timer has fired after the paused clock moved by `elapsed`.
    async fn expired_after(activity: &Activity, elapsed: Duration) -> bool {
        let timer = activity.idle_expired(TIMEOUT);
        tokio::pin!(timer);
        tokio::select! {
            biased;
            () = &mut timer => true,
            () = tokio::time::sleep(elapsed) => false,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_connection_expires_after_the_timeout_and_not_before() {
        let activity = Activity::new();
        assert!(!expired_after(&activity, TIMEOUT - Duration::from_millis(1)).await);
        assert!(expired_after(&activity, Duration::from_millis(2)).await);
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_sending_a_head_or_busy_never_expires() {
        let activity = Activity::new();
        activity.heard();
        assert!(!expired_after(&activity, TIMEOUT * 10).await);
        let busy = activity.request_started();
        assert!(!expired_after(&activity, TIMEOUT * 10).await);
        drop(busy);
        // The idle spell starts when the answer has been sent.
        assert!(!expired_after(&activity, TIMEOUT - Duration::from_millis(1)).await);
        assert!(expired_after(&activity, TIMEOUT).await);
    }

    #[tokio::test(start_paused = true)]
    async fn the_connection_stays_busy_until_its_last_request_is_answered() {
        let activity = Activity::new();
        let first = activity.request_started();
        let second = activity.request_started();
        drop(first);
        assert!(!expired_after(&activity, TIMEOUT * 2).await);
        drop(second);
        assert!(expired_after(&activity, TIMEOUT * 2).await);
    }
}
