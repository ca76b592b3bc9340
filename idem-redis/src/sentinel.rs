//! [`SentinelConnection`]: a connection to the primary that Redis Sentinel names, which
//! follows a promotion.

use std::{
    fmt,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
};

use ::redis::{
    AsyncConnectionConfig, Client, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, RedisResult,
    ServerErrorKind, Value,
    aio::{ConnectionLike, MultiplexedConnection},
    sentinel::SentinelClient,
};
use futures_util::future::BoxFuture;

use super::lanes::{LaneConnection, OpenLane};

/// A connection to the primary of a replicated Redis that [Redis
/// Sentinel](https://redis.io/docs/latest/operate/oss_and_stack/management/sentinel/) watches.
/// It asks the sentinels where the primary is, connects to it, and asks again when the
/// primary stops answering as one: the connection breaks (the primary died), or a write is
/// refused `READONLY` (it was demoted to a replica). The call that met the failure fails
/// (its outcome is unknown); the next call goes to the primary the sentinels name then.
///
/// Cheap to clone: clones share the connection. Made by
/// [`RedisStoreBuilder::connect_sentinel`](super::RedisStoreBuilder::connect_sentinel).
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
#[derive(Clone)]
pub struct SentinelConnection {
    inner: Arc<Inner>,
}

struct Inner {
    /// Asked one call at a time, so that a failover looks the primary up once.
    sentinel: tokio::sync::Mutex<SentinelClient>,
    config: AsyncConnectionConfig,
    primary: Mutex<Option<Primary>>,
    /// How many lookups there have been.
    lookups: AtomicU64,
}

/// The primary as the sentinels last named it.
#[derive(Clone)]
struct Primary {
    /// Counts lookups, so that a failure forgets only the primary it met.
    generation: u64,
    client: Client,
    connection: MultiplexedConnection,
}

impl SentinelConnection {
    /// Asks the sentinels of `client` for the primary, and connects to it with `config`.
    pub(super) async fn new(
        client: SentinelClient,
        config: AsyncConnectionConfig,
    ) -> RedisResult<Self> {
        let connection = Self {
            inner: Arc::new(Inner {
                sentinel: tokio::sync::Mutex::new(client),
                config,
                primary: Mutex::new(None),
                lookups: AtomicU64::new(0),
            }),
        };
        connection.primary().await?;
        Ok(connection)
    }

    /// The primary's address, as the sentinels last named it (`None` while it is being
    /// looked up again).
    ///
    /// ```no_run
    /// use idem::redis::RedisStore;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = RedisStore::builder()
    ///     .connect_sentinel(["redis://10.0.0.1:26379", "redis://10.0.0.2:26379"], "shop")
    ///     .await?;
    /// println!("the primary: {:?}", store.connection().primary_address());
    /// # Ok(()) }
    /// ```
    pub fn primary_address(&self) -> Option<String> {
        let primary = self.inner.primary.lock().expect("never poisoned");
        primary
            .as_ref()
            .map(|primary| primary.client.get_connection_info().addr().to_string())
    }

    /// The current primary, looked up if there is none.
    async fn primary(&self) -> RedisResult<Primary> {
        if let Some(primary) = self.current() {
            return Ok(primary);
        }
        let mut sentinel = self.inner.sentinel.lock().await;
        // Another call may have looked it up while this one waited.
        if let Some(primary) = self.current() {
            return Ok(primary);
        }
        let client = sentinel.async_get_client().await?;
        let connection = client
            .get_multiplexed_async_connection_with_config(&self.inner.config)
            .await?;
        let generation = self.inner.lookups.fetch_add(1, Ordering::Relaxed) + 1;
        let mut current = self.inner.primary.lock().expect("never poisoned");
        let primary = Primary {
            generation,
            client,
            connection,
        };
        *current = Some(primary.clone());
        Ok(primary)
    }

    fn current(&self) -> Option<Primary> {
        self.inner.primary.lock().expect("never poisoned").clone()
    }

    /// Forgets the primary of `generation`, if it is still the current one.
    fn forget(&self, generation: u64) {
        let mut current = self.inner.primary.lock().expect("never poisoned");
        if current
            .as_ref()
            .is_some_and(|primary| primary.generation == generation)
        {
            *current = None;
        }
    }

    /// Forgets the primary of `generation` if `answer` says it is no longer the primary.
    fn check<T>(&self, generation: u64, answer: &RedisResult<T>, values: &[&Value]) {
        let moved = match answer {
            Err(error) => primary_moved(error),
            Ok(_) => values.iter().any(|value| match value {
                Value::ServerError(error) => matches!(
                    error.kind(),
                    Some(ServerErrorKind::ReadOnly | ServerErrorKind::MasterDown)
                ),
                _ => false,
            }),
        };
        if moved {
            self.forget(generation);
        }
    }
}

/// Whether `error` says that the node may no longer be the primary: the connection broke or
/// timed out, or the node refused a write as a replica.
pub(super) fn primary_moved(error: &RedisError) -> bool {
    error.is_unrecoverable_error()
        || error.is_timeout()
        || matches!(
            error.kind(),
            ErrorKind::Server(ServerErrorKind::ReadOnly | ServerErrorKind::MasterDown)
        )
}

impl ConnectionLike for SentinelConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let mut primary = self.primary().await?;
            let answer = primary.connection.req_packed_command(cmd).await;
            let values: Vec<&Value> = answer.iter().collect();
            self.check(primary.generation, &answer, &values);
            answer
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let mut primary = self.primary().await?;
            let answer = primary
                .connection
                .req_packed_commands(pipeline, offset, count)
                .await;
            let values: Vec<&Value> = answer.iter().flatten().collect();
            self.check(primary.generation, &answer, &values);
            answer
        })
    }

    fn get_db(&self) -> i64 {
        self.current()
            .map_or(0, |primary| primary.connection.get_db())
    }
}

impl fmt::Debug for SentinelConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SentinelConnection")
            .field("primary", &self.primary_address())
            .finish_non_exhaustive()
    }
}

/// Lanes to the primary the sentinels name.
pub(super) struct SentinelLanes {
    pub(super) connection: SentinelConnection,
    pub(super) config: AsyncConnectionConfig,
}

impl OpenLane for SentinelLanes {
    fn open(&self) -> BoxFuture<'_, RedisResult<LaneConnection>> {
        Box::pin(async move {
            let primary = self.connection.primary().await?;
            let lane = primary
                .client
                .get_multiplexed_async_connection_with_config(&self.config)
                .await
                .inspect_err(|_| self.connection.forget(primary.generation))?;
            Ok(LaneConnection::of_generation(lane, primary.generation))
        })
    }

    fn is_current(&self, lane: &LaneConnection) -> bool {
        self.connection
            .current()
            .is_some_and(|primary| primary.generation == lane.generation)
    }

    fn failed(&self, error: &RedisError) {
        if primary_moved(error) {
            self.forget_current();
        }
    }

    fn fell_short(&self) {
        self.forget_current();
    }
}

impl SentinelLanes {
    /// A lane does not know which lookup it was opened from: the current primary is
    /// forgotten, which at worst looks it up once more.
    fn forget_current(&self) {
        if let Some(primary) = self.connection.current() {
            self.connection.forget(primary.generation);
        }
    }
}
