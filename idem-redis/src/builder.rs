//! [`RedisStoreBuilder`]: the key prefix, the timeouts, the durability of claims, and the
//! deployment the store connects to (one server, a cluster, Sentinel).

use std::{sync::Arc, time::Duration};

use ::redis::{
    AsyncConnectionConfig, ErrorKind, IntoConnectionInfo, RedisError, RedisResult, Value,
    aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig},
    cluster::ClusterClientBuilder,
    cluster_async::ClusterConnection,
    sentinel::{SentinelClient, SentinelServerType},
};

use idem_core::store::ConnectError;

use super::{
    Durability, Durable, RedisStore,
    lanes::{ClientLanes, ClusterLanes, Lanes, OpenLane},
    sentinel::{SentinelConnection, SentinelLanes},
};

/// The stores' names in a [`ConnectError`].
const REDIS: &str = "Redis";
const REDIS_CLUSTER: &str = "the Redis Cluster";

/// Addresses as an error names them: `host:port` (never a password), comma-separated.
fn addresses<'a>(addrs: impl Iterator<Item = &'a ::redis::ConnectionAddr>) -> String {
    addrs
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Configures a [`RedisStore`]: its key prefix, timeouts and [`Durability`]. Made by
/// [`RedisStore::builder`]; it ends with the deployment to connect to:
/// [`connect`](Self::connect) (one server), [`connect_cluster`](Self::connect_cluster)
/// (Redis Cluster), [`connect_sentinel`](Self::connect_sentinel) (a primary with replicas
/// behind Sentinel), or [`build`](Self::build) (a connection of your own).
///
/// ```no_run
/// use std::time::Duration;
/// use idem::{Idempotency, redis::{Durability, RedisStore}};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let store = RedisStore::builder()
///     .prefix("payments:idem:")?
///     .command_timeout(Duration::from_millis(500))
///     .connection_timeout(Duration::from_secs(1))
///     .durability(Durability::replicas(1, Duration::from_millis(100)))
///     .connect("redis://127.0.0.1:6379")
///     .await?;
/// let idem = Idempotency::builder(store).store_timeout(Duration::from_secs(1)).build();
/// # drop(idem);
/// # Ok(()) }
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
#[derive(Clone, Debug)]
#[must_use]
pub struct RedisStoreBuilder {
    prefix: String,
    command_timeout: Duration,
    connection_timeout: Duration,
    durability: Durability,
    durable_connections: usize,
}

/// A key prefix that [`RedisStoreBuilder::prefix`] refuses.
///
/// ```
/// use idem::redis::{RedisStore, InvalidPrefix};
///
/// let refused = RedisStore::builder().prefix("{tenant}:").unwrap_err();
/// assert_eq!(refused, InvalidPrefix("{tenant}:".into()));
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the key prefix {0:?} contains a brace: Redis Cluster would read it as a hash tag and put \
     every record in one slot"
)]
pub struct InvalidPrefix(pub String);

impl Default for RedisStoreBuilder {
    fn default() -> Self {
        Self {
            prefix: Self::DEFAULT_PREFIX.into(),
            command_timeout: Self::DEFAULT_COMMAND_TIMEOUT,
            connection_timeout: Self::DEFAULT_CONNECTION_TIMEOUT,
            durability: Durability::Async,
            durable_connections: Self::DEFAULT_DURABLE_CONNECTIONS,
        }
    }
}

impl RedisStoreBuilder {
    /// The default key prefix: `idem:`.
    pub const DEFAULT_PREFIX: &'static str = "idem:";
    /// The default time one store call may take: 2 seconds.
    pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(2);
    /// The default time one connection attempt of [`connect`](Self::connect) may take:
    /// 2 seconds.
    pub const DEFAULT_CONNECTION_TIMEOUT: Duration = Duration::from_secs(2);
    /// The default number of connections that durable writes may hold at once: 32.
    pub const DEFAULT_DURABLE_CONNECTIONS: usize = 32;

    /// The prefix of every key the store writes (`idem:` by default), to keep the records
    /// of several services or environments apart in one Redis. It may not contain `{` or
    /// `}`, which would change the keys' hash tag.
    ///
    /// ```
    /// use idem::redis::RedisStore;
    ///
    /// assert!(RedisStore::builder().prefix("shop:idem:").is_ok());
    /// assert!(RedisStore::builder().prefix("shop:{idem}:").is_err());
    /// ```
    pub fn prefix(mut self, prefix: impl Into<String>) -> Result<Self, InvalidPrefix> {
        let prefix = prefix.into();
        if prefix.contains(['{', '}']) {
            return Err(InvalidPrefix(prefix));
        }
        self.prefix = prefix;
        Ok(self)
    }

    /// The most time one store call may take (2 seconds by default); past it the call
    /// answers [`StoreError::Timeout`](idem_core::store::StoreError::Timeout), whose outcome is
    /// unknown. A durable write may take its [`Durability`]'s timeout on top. Keep both below
    /// the runtime's [`store_timeout`](idem_core::IdempotencyBuilder::store_timeout) (5 seconds by
    /// default), which is only a backstop.
    ///
    /// ```
    /// use std::time::Duration;
    /// use idem::redis::RedisStore;
    ///
    /// let store = RedisStore::builder().command_timeout(Duration::from_millis(300)).build(());
    /// assert_eq!(store.command_timeout(), Duration::from_millis(300));
    /// ```
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    /// The most time one connection attempt may take, including each reconnection in the
    /// background (2 seconds by default). Unused by [`build`](Self::build), whose connection
    /// is already configured.
    ///
    /// ```
    /// use std::time::Duration;
    /// use idem::redis::RedisStore;
    ///
    /// let builder = RedisStore::builder().connection_timeout(Duration::from_secs(1));
    /// # drop(builder);
    /// ```
    pub fn connection_timeout(mut self, timeout: Duration) -> Self {
        self.connection_timeout = timeout;
        self
    }

    /// How far a claim must have travelled before the store answers it
    /// ([`Durability::Async`] by default: the primary's memory). With
    /// [`Durability::Replicas`] a failover cannot lose a claim the handler ran on; see
    /// [`Durability`] for what each setting survives and what it costs.
    ///
    /// The store sends each durable write and its `WAIT` on a connection of its own (at most
    /// [`durable_connections`](Self::durable_connections) at once), so that a slow replica
    /// holds up no other request. Through [`build`](Self::build), which cannot open more
    /// connections, they go on the connection given, and its other traffic waits behind them.
    ///
    /// ```
    /// use std::time::Duration;
    /// use idem::redis::{RedisStore, Durability};
    ///
    /// let durability = Durability::replicas(1, Duration::from_millis(100));
    /// let store = RedisStore::builder().durability(durability).build(());
    /// assert_eq!(store.durability(), durability);
    /// ```
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// How many connections durable writes may hold at once (32 by default). A durable write
    /// holds one for a round trip and its wait; more writes at once wait for one, within
    /// their command timeout. Unused with [`Durability::Async`].
    ///
    /// ```
    /// use idem::redis::RedisStore;
    ///
    /// let builder = RedisStore::builder().durable_connections(8);
    /// # drop(builder);
    /// ```
    pub fn durable_connections(mut self, connections: usize) -> Self {
        self.durable_connections = connections.max(1);
        self
    }

    /// The store on a connection of your own: any [`ConnectionLike`] of the `redis` crate
    /// that is cheap to clone. With a [`Durability`] other than `Async`, the durable writes
    /// and their waits go on this connection too.
    ///
    /// ```no_run
    /// use idem::redis::RedisStore;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = redis::Client::open("redis://127.0.0.1:6379")?;
    /// let store = RedisStore::builder().build(client.get_multiplexed_async_connection().await?);
    /// # drop(store);
    /// # Ok(()) }
    /// ```
    pub fn build<C>(self, connection: C) -> RedisStore<C> {
        let durable = (!self.durability.is_async()).then(|| {
            Arc::new(Durable {
                durability: self.durability,
                lanes_wanted: self.durable_connections,
                lanes: Default::default(),
            })
        });
        RedisStore {
            connection,
            prefix: self.prefix.into(),
            command_timeout: self.command_timeout,
            durable,
        }
    }

    /// [`build`](Self::build), with the lanes of durable writes opened by `lanes`, after
    /// checking that the server can wait as the durability asks.
    /// `at` names the deployment in an error.
    async fn build_with_lanes<C>(
        self,
        mut connection: C,
        lanes: impl OpenLane,
        at: &str,
    ) -> Result<RedisStore<C>, ConnectError>
    where
        C: ConnectionLike + Send,
    {
        check_server_can_wait(&mut connection, self.durability)
            .await
            .map_err(|error| ConnectError::unsuited(REDIS, at, error))?;
        let wanted = self.durable_connections;
        let store = self.build(connection);
        if let Some(durable) = &store.durable {
            let lanes = Lanes::new(lanes, wanted);
            lanes
                .warm()
                .await
                .map_err(|error| ConnectError::new(REDIS, at, error))?;
            let _ = durable.lanes.set(lanes);
        }
        Ok(store)
    }

    /// The configuration of connections that the store sends durable writes on: no response
    /// timeout of their own (the store's timeout covers the call, its wait included).
    fn lane_config(&self) -> AsyncConnectionConfig {
        AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.connection_timeout))
            .set_response_timeout(None)
    }

    /// Connects to the Redis at `url` through a [`ConnectionManager`] whose connection
    /// attempts time out after the [connection timeout](Self::connection_timeout) and whose
    /// commands time out after the [command timeout](Self::command_timeout). It reconnects
    /// in the background, at most a second apart, while Redis is away. It does not follow a
    /// failover to another address: for that, use [`connect_sentinel`](Self::connect_sentinel)
    /// or [`connect_cluster`](Self::connect_cluster).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use idem::redis::RedisStore;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = RedisStore::builder()
    ///     .command_timeout(Duration::from_millis(500))
    ///     .connect("redis://127.0.0.1:6379")
    ///     .await?;
    /// # drop(store);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// A [`ConnectError`] that names Redis and its address (never its password) when the URL
    /// is not one, Redis cannot be reached, or it cannot wait as the durability asks.
    pub async fn connect(
        self,
        url: impl IntoConnectionInfo,
    ) -> Result<RedisStore<ConnectionManager>, ConnectError> {
        let info = url
            .into_connection_info()
            .map_err(|error| ConnectError::new(REDIS, "the URL given", error))?;
        let at = info.addr().to_string();
        let unreachable = |error| ConnectError::new(REDIS, at.as_str(), error);
        let client = ::redis::Client::open(info).map_err(unreachable)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.connection_timeout))
            .set_response_timeout(Some(self.command_timeout))
            .set_max_delay(Duration::from_secs(1))
            .set_number_of_retries(3);
        let connection = ConnectionManager::new_with_config(client.clone(), config)
            .await
            .map_err(unreachable)?;
        let lanes = ClientLanes {
            client,
            config: self.lane_config(),
        };
        self.build_with_lanes(connection, lanes, &at).await
    }

    /// Connects to the Redis Cluster that `nodes` belong to (any of its nodes; the store
    /// finds the others). Every record lives in one hash slot, and the cluster connection
    /// follows `MOVED` and `ASK` answers while slots migrate, and finds a promoted replica
    /// after a failover, without failing the request (within the command timeout).
    ///
    /// ```no_run
    /// use idem::redis::RedisStore;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = RedisStore::builder()
    ///     .connect_cluster(["redis://10.0.0.1:6379", "redis://10.0.0.2:6379"])
    ///     .await?;
    /// # drop(store);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// A [`ConnectError`] that names the nodes (never a password) when one is not a URL, or
    /// the cluster cannot be reached.
    pub async fn connect_cluster<T>(
        self,
        nodes: impl IntoIterator<Item = T>,
    ) -> Result<RedisStore<ClusterConnection>, ConnectError>
    where
        T: IntoConnectionInfo,
    {
        let nodes = nodes
            .into_iter()
            .map(IntoConnectionInfo::into_connection_info)
            .collect::<RedisResult<Vec<_>>>()
            .map_err(|error| ConnectError::new(REDIS_CLUSTER, "the nodes given", error))?;
        let at = addresses(nodes.iter().map(|node| node.addr()));
        let unreachable = |error| ConnectError::new(REDIS_CLUSTER, at.as_str(), error);
        let client = |response_timeout: Option<Duration>| {
            let builder = ClusterClientBuilder::new(nodes.clone())
                .connection_timeout(self.connection_timeout)
                // Retries (a node that went away, a cluster that is electing a new primary)
                // within the command timeout rather than after the crate's 1.28 s minimum.
                .min_retry_wait(10)
                .max_retry_wait(250);
            match response_timeout {
                Some(timeout) => builder.response_timeout(timeout),
                None => builder,
            }
            .build()
        };
        let shared = client(Some(self.command_timeout)).map_err(unreachable)?;
        let connection = shared.get_async_connection().await.map_err(unreachable)?;
        let lanes = ClusterLanes {
            client: client(None).map_err(unreachable)?,
        };
        self.build_with_lanes(connection, lanes, &at).await
    }

    /// Connects to the primary that the sentinels at `sentinels` name for `primary_name`
    /// (Sentinel's *master name*), and follows it to the replica Sentinel promotes when it
    /// fails. See [`SentinelConnection`].
    ///
    /// ```no_run
    /// use idem::redis::RedisStore;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = RedisStore::builder()
    ///     .connect_sentinel(["redis://10.0.0.1:26379", "redis://10.0.0.2:26379"], "shop")
    ///     .await?;
    /// # drop(store);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// A [`ConnectError`] that names the sentinels and the primary (never a password) when
    /// a sentinel is not a URL, or the primary cannot be found or reached.
    pub async fn connect_sentinel<T>(
        self,
        sentinels: impl IntoIterator<Item = T>,
        primary_name: &str,
    ) -> Result<RedisStore<SentinelConnection>, ConnectError>
    where
        T: IntoConnectionInfo,
    {
        let sentinels = sentinels
            .into_iter()
            .map(IntoConnectionInfo::into_connection_info)
            .collect::<RedisResult<Vec<_>>>()
            .map_err(|error| ConnectError::new(REDIS, "the sentinels given", error))?;
        let at = format!(
            "the primary `{primary_name}` of the sentinels {}",
            addresses(sentinels.iter().map(|sentinel| sentinel.addr()))
        );
        let client = SentinelClient::build(
            sentinels,
            primary_name.to_owned(),
            None,
            SentinelServerType::Master,
        )
        .map_err(|error| ConnectError::new(REDIS, at.as_str(), error))?;
        self.connect_sentinel_at(client, &at).await
    }

    /// [`connect_sentinel`](Self::connect_sentinel) with a [`SentinelClient`] you
    /// configured (authentication, TLS, a database), which must name the primary
    /// ([`SentinelServerType::Master`]).
    ///
    /// ```no_run
    /// use idem::redis::RedisStore;
    /// use redis::sentinel::{SentinelClient, SentinelServerType};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = SentinelClient::build(
    ///     vec!["redis://10.0.0.1:26379"],
    ///     "shop".to_owned(),
    ///     None,
    ///     SentinelServerType::Master,
    /// )?;
    /// let store = RedisStore::builder().connect_sentinel_client(client).await?;
    /// # drop(store);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// A [`ConnectError`] when the primary cannot be found or reached.
    pub async fn connect_sentinel_client(
        self,
        client: SentinelClient,
    ) -> Result<RedisStore<SentinelConnection>, ConnectError> {
        self.connect_sentinel_at(client, "the primary its sentinels name")
            .await
    }

    /// [`connect_sentinel_client`](Self::connect_sentinel_client), with `at` naming the
    /// deployment in an error.
    async fn connect_sentinel_at(
        self,
        client: SentinelClient,
        at: &str,
    ) -> Result<RedisStore<SentinelConnection>, ConnectError> {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.connection_timeout))
            .set_response_timeout(Some(self.command_timeout));
        let connection = SentinelConnection::new(client, config)
            .await
            .map_err(|error| ConnectError::new(REDIS, at, error))?;
        let lanes = SentinelLanes {
            connection: connection.clone(),
            config: self.lane_config(),
        };
        self.build_with_lanes(connection, lanes, at).await
    }
}

/// Refuses a durability that the server cannot wait for: `WAITAOF` on a Redis older than
/// 7.2. Asked once, when the store connects, so that the service does not start at all
/// rather than answer every request 503.
async fn check_server_can_wait(
    connection: &mut (impl ConnectionLike + Send),
    durability: Durability,
) -> RedisResult<()> {
    if !matches!(durability, Durability::AppendOnlyFile { .. }) {
        return Ok(());
    }
    let known: Value = ::redis::cmd("COMMAND")
        .arg("INFO")
        .arg("WAITAOF")
        .query_async(connection)
        .await?;
    match known {
        Value::Array(items) if items.iter().all(|item| *item != Value::Nil) => Ok(()),
        _ => Err(RedisError::from((
            ErrorKind::InvalidClientConfig,
            "the durability asked for cannot be kept",
            format!(
                "{durability} needs the WAITAOF command (Redis 7.2 or later), which this \
                 server does not have; use Durability::Replicas, or upgrade Redis"
            ),
        ))),
    }
}
