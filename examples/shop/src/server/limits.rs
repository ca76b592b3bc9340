//! [`ConnectionLimits`]: how long a connection may wait and read, how many are served at once,
//! and what a client past the bound sees; and the bound lowered to the process's
//! file-descriptor limit.

use std::time::Duration;

use tokio::sync::Semaphore;

#[cfg(doc)]
use super::{LISTEN_BACKLOG, REFUSAL_TIME, bind, serve};

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
    ///    and twice the queue's size more, waiting or being refused. When all are taken, new
    ///    connections stay in the kernel's accept queue ([`LISTEN_BACKLOG`] of them, for a
    ///    listener from [`bind`]) until one closes, which a refusal does within
    ///    [`REFUSAL_TIME`] and a queued connection within the queue timeout and
    ///    [`REFUSAL_TIME`]; past the accept queue, the kernel drops connection attempts and the
    ///    client's TCP tries again a second or more later.
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
    pub(super) fn within_fd_limit(mut self) -> Self {
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
