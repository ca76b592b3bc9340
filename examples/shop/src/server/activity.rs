//! The idle and header-read timers: what a connection is doing, and whether it has done it for
//! too long.
//!
//! A connection with no request in progress and no byte of a new one is closed after the idle
//! timeout; one whose request head has started to arrive is closed if the head is not complete
//! within the header-read timeout of its first byte. hyper has no idle timer, and its
//! header-read timer starts when the connection begins to wait, not at the first byte, so the
//! connection reports what it does to an [`Activity`]: the socket says when bytes arrive
//! ([`Watched`]), the service says when a request starts and when its answer has been sent
//! ([`Activity::request_started`]). [`Activity::overdue`] completes when a timer has run out;
//! the connection task then drops the connection, which closes the socket. No request is being
//! answered in either case, so nothing is lost.

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
    /// Bytes of a request head have been arriving since this instant.
    Reading(Instant),
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
                *phase = Phase::Reading(Instant::now());
                true
            }
            Phase::Reading(_) | Phase::Busy(_) => false,
        });
    }

    /// A request's head is complete and its handling starts. The connection is busy until the
    /// returned guard is dropped, which the service does once the answer's body has been sent
    /// (or the request was abandoned).
    pub(super) fn request_started(&self) -> Busy {
        self.0.send_modify(|phase| {
            *phase = match *phase {
                Phase::Busy(requests) => Phase::Busy(requests + 1),
                Phase::Waiting(_) | Phase::Reading(_) => Phase::Busy(1),
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

    /// Completes once the connection has been idle for `idle`, or reading one request head
    /// for `header_read`, and says which.
    pub(super) async fn overdue(&self, idle: Duration, header_read: Duration) -> Overdue {
        let mut phases = self.0.subscribe();
        loop {
            let phase = *phases.borrow_and_update();
            let (deadline, overdue) = match phase {
                Phase::Waiting(since) => (since + idle, Overdue::Idle),
                Phase::Reading(since) => (since + header_read, Overdue::HeaderRead),
                Phase::Busy(_) => {
                    // `self` holds the sender, so the channel cannot close while this runs.
                    let _ = phases.changed().await;
                    continue;
                }
            };
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => {
                    // A change may have raced the timer: only the same spell counts.
                    if *phases.borrow() == phase {
                        return overdue;
                    }
                }
                _ = phases.changed() => {}
            }
        }
    }
}

/// Which timer ran out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Overdue {
    /// Nothing arrived for the idle timeout.
    Idle,
    /// A request head did not arrive within the header-read timeout.
    HeaderRead,
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

    const IDLE: Duration = Duration::from_secs(5);
    const HEADER_READ: Duration = Duration::from_secs(3);
    const MS: Duration = Duration::from_millis(1);

    /// Which timer has run out once the paused clock has moved by `elapsed`, if one has.
    async fn overdue_after(activity: &Activity, elapsed: Duration) -> Option<Overdue> {
        let timer = activity.overdue(IDLE, HEADER_READ);
        tokio::pin!(timer);
        tokio::select! {
            biased;
            overdue = &mut timer => Some(overdue),
            () = tokio::time::sleep(elapsed) => None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_connection_is_overdue_after_the_idle_timeout_and_not_before() {
        let activity = Activity::new();
        assert_eq!(overdue_after(&activity, IDLE - MS).await, None);
        assert_eq!(overdue_after(&activity, 2 * MS).await, Some(Overdue::Idle));
    }

    #[tokio::test(start_paused = true)]
    async fn a_head_is_overdue_after_the_header_read_timeout_from_its_first_byte() {
        let activity = Activity::new();
        tokio::time::advance(IDLE - MS).await;
        activity.heard();
        // More bytes of the same head do not restart the timer.
        assert_eq!(overdue_after(&activity, HEADER_READ / 2).await, None);
        activity.heard();
        assert_eq!(overdue_after(&activity, HEADER_READ / 2 - MS).await, None);
        assert_eq!(
            overdue_after(&activity, 2 * MS).await,
            Some(Overdue::HeaderRead)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_busy_connection_is_never_overdue_and_idles_from_its_answer() {
        let activity = Activity::new();
        activity.heard();
        let busy = activity.request_started();
        assert_eq!(overdue_after(&activity, IDLE * 10).await, None);
        drop(busy);
        assert_eq!(overdue_after(&activity, IDLE - MS).await, None);
        assert_eq!(overdue_after(&activity, 2 * MS).await, Some(Overdue::Idle));
    }

    #[tokio::test(start_paused = true)]
    async fn the_connection_stays_busy_until_its_last_request_is_answered() {
        let activity = Activity::new();
        let first = activity.request_started();
        let second = activity.request_started();
        drop(first);
        assert_eq!(overdue_after(&activity, IDLE * 2).await, None);
        drop(second);
        assert_eq!(
            overdue_after(&activity, IDLE * 2).await,
            Some(Overdue::Idle)
        );
    }
}
