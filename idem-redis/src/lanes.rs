//! Lanes: connections of the store's own for the writes that wait for their durability
//! target, each used by one call at a time.
//!
//! `WAIT` and `WAITAOF` block the connection they are sent on until the replicas answer, and
//! they must be sent on the connection that made the write (Redis waits for that
//! connection's last write). On the multiplexed connection that every other request shares,
//! one claim waiting for a slow replica would hold up every request behind it. So a durable
//! write takes a lane, sends its script and the wait on it in one pipeline, and gives the lane
//! back once answered; a lane whose call failed or timed out is closed, never reused.

use std::{
    fmt,
    sync::{Arc, Mutex},
};

use ::redis::{
    Cmd, Pipeline, RedisError, RedisFuture, RedisResult, Value,
    aio::{ConnectionLike, MultiplexedConnection},
};
use futures_util::future::BoxFuture;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A connection of any kind (one server, a cluster), boxed so that every topology's lanes
/// are one type, and the lookup of the primary it was opened after (for Sentinel).
pub(super) struct LaneConnection {
    connection: Box<dyn ConnectionLike + Send + Sync>,
    pub(super) generation: u64,
}

impl LaneConnection {
    pub(super) fn new(connection: impl ConnectionLike + Send + Sync + 'static) -> Self {
        Self::of_generation(connection, 0)
    }

    pub(super) fn of_generation(
        connection: impl ConnectionLike + Send + Sync + 'static,
        generation: u64,
    ) -> Self {
        Self {
            connection: Box::new(connection),
            generation,
        }
    }
}

impl ConnectionLike for LaneConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        self.connection.req_packed_command(cmd)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        self.connection.req_packed_commands(pipeline, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.connection.get_db()
    }
}

/// Opens lanes: connections to the primary (or, for a cluster, a cluster connection of
/// their own).
pub(super) trait OpenLane: Send + Sync + 'static {
    /// Opens one more connection.
    fn open(&self) -> BoxFuture<'_, RedisResult<LaneConnection>>;

    /// A lane met `error`. A topology that follows its primary (Sentinel) looks it up again
    /// when the error says the primary moved.
    fn failed(&self, error: &RedisError) {
        let _ = error;
    }

    /// A write on a lane fell short of its durability target. A topology that follows its
    /// primary checks that it still writes to the primary: a demoted primary that still
    /// answers (Sentinel has promoted its replica and not yet reconfigured it) has lost the
    /// replica it waited for.
    fn fell_short(&self) {}

    /// Whether a lane is still good after its call failed. A cluster connection is: it
    /// reconnects to its nodes and follows the cluster by itself. A connection to one server
    /// is not, and is closed.
    fn survives_errors(&self) -> bool {
        false
    }

    /// Whether an idle lane still reaches the primary: not when it was opened before the
    /// primary was last looked up (Sentinel). Stale lanes are closed rather than used.
    fn is_current(&self, lane: &LaneConnection) -> bool {
        let _ = lane;
        true
    }
}

/// Lanes of one server: multiplexed connections of the store's own, opened from its client.
pub(super) struct ClientLanes {
    pub(super) client: ::redis::Client,
    pub(super) config: ::redis::AsyncConnectionConfig,
}

impl OpenLane for ClientLanes {
    fn open(&self) -> BoxFuture<'_, RedisResult<LaneConnection>> {
        Box::pin(async move {
            let connection: MultiplexedConnection = self
                .client
                .get_multiplexed_async_connection_with_config(&self.config)
                .await?;
            Ok(LaneConnection::new(connection))
        })
    }
}

/// Lanes of a cluster: a cluster connection each, which follows `MOVED` and `ASK` for the
/// script and its wait together.
pub(super) struct ClusterLanes {
    pub(super) client: ::redis::cluster::ClusterClient,
}

impl OpenLane for ClusterLanes {
    fn open(&self) -> BoxFuture<'_, RedisResult<LaneConnection>> {
        Box::pin(async move {
            let connection = self.client.get_async_connection().await?;
            Ok(LaneConnection::new(connection))
        })
    }

    fn survives_errors(&self) -> bool {
        true
    }
}

/// No lanes of its own: every durable write goes through clones of the store's one
/// connection, whose other traffic then waits behind each `WAIT`. For a connection the user
/// built, which the store cannot open more of.
pub(super) struct SharedLane<C>(pub(super) C);

impl<C> OpenLane for SharedLane<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn open(&self) -> BoxFuture<'_, RedisResult<LaneConnection>> {
        Box::pin(async move { Ok(LaneConnection::new(self.0.clone())) })
    }
}

/// The lanes of one store: at most `max` at once, idle ones kept for the next call.
pub(super) struct Lanes {
    opener: Box<dyn OpenLane>,
    idle: Mutex<Vec<LaneConnection>>,
    permits: Arc<Semaphore>,
}

impl Lanes {
    pub(super) fn new(opener: impl OpenLane, max: usize) -> Arc<Self> {
        Arc::new(Self {
            opener: Box::new(opener),
            idle: Mutex::new(Vec::new()),
            permits: Arc::new(Semaphore::new(max.max(1))),
        })
    }

    /// Opens one lane now and keeps it idle: the store's first durable write does not wait
    /// for a connection, and a store that cannot open lanes fails when it connects rather than
    /// at its first claim. (A cluster lane connects to every seed node, and waits out the
    /// connection timeout of one that hangs.)
    pub(super) async fn warm(&self) -> RedisResult<()> {
        let connection = self.opener.open().await?;
        self.idle.lock().expect("never poisoned").push(connection);
        Ok(())
    }

    /// A lane for one call: an idle one, or a new one, once fewer than `max` are in use.
    pub(super) async fn acquire(self: &Arc<Self>) -> RedisResult<Lane> {
        let permit = Arc::clone(&self.permits)
            .acquire_owned()
            .await
            .expect("the semaphore is never closed");
        let idle = {
            let mut idle = self.idle.lock().expect("never poisoned");
            idle.retain(|lane| self.opener.is_current(lane));
            idle.pop()
        };
        let connection = match idle {
            Some(connection) => connection,
            None => self.opener.open().await.inspect_err(|error| {
                self.opener.failed(error);
            })?,
        };
        Ok(Lane {
            lanes: Arc::clone(self),
            connection: Some(connection),
            reusable: true,
            _permit: permit,
        })
    }
}

impl fmt::Debug for Lanes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lanes")
            .field("available", &self.permits.available_permits())
            .finish_non_exhaustive()
    }
}

/// One lane, held by one call. Dropped, it goes back to the idle lanes if its last call was
/// answered (or failed in a way the connection survives), and is closed otherwise: a call
/// cancelled half-way may have left a `WAIT` on the connection that the next call would
/// queue behind.
pub(super) struct Lane {
    lanes: Arc<Lanes>,
    connection: Option<LaneConnection>,
    reusable: bool,
    _permit: OwnedSemaphorePermit,
}

impl Lane {
    /// Sends `commands` as one pipeline and answers each command's reply, server errors
    /// included (`NOSCRIPT` among them). An error is the connection's, and the lanes' opener
    /// hears of it.
    pub(super) async fn send(&mut self, commands: &[Cmd]) -> RedisResult<Vec<Value>> {
        let mut pipeline = ::redis::pipe();
        for command in commands {
            pipeline.add_command(command.clone());
        }
        pipeline.ignore_errors();
        let connection = self.connection.as_mut().expect("a lane has its connection");
        // Not reusable until answered: a call dropped while it waits leaves its reply due.
        self.reusable = false;
        let answers = pipeline.query_async::<Vec<Value>>(connection).await;
        if let Err(error) = &answers {
            self.lanes.opener.failed(error);
        }
        self.reusable = answers.is_ok() || self.lanes.opener.survives_errors();
        answers
    }

    /// The write on this lane fell short of its durability target.
    pub(super) fn fell_short(&self) {
        self.lanes.opener.fell_short();
    }

    /// The script was answered with a server error: the lane is closed, and the opener hears
    /// of it (an error that says the lane reaches a node that is no longer the primary,
    /// `READONLY` or `MASTERDOWN`, makes Sentinel's opener look the primary up again).
    pub(super) fn refused(&mut self, error: &RedisError) {
        self.reusable = false;
        self.lanes.opener.failed(error);
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        if let Some(connection) = self.connection.take()
            && self.reusable
        {
            self.lanes
                .idle
                .lock()
                .expect("never poisoned")
                .push(connection);
        }
    }
}
