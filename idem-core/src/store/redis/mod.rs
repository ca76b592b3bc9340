//! [`RedisStore`]: a store that several instances of a service share (feature `redis`).
//!
//! ```no_run
//! use idem_core::{Idempotency, RedisStore};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let idem = Idempotency::new(RedisStore::connect("redis://127.0.0.1:6379").await?);
//! # drop(idem);
//! # Ok(()) }
//! ```
//!
//! [`RedisStore::connect`] opens a [`ConnectionManager`], which reconnects in the
//! background. Any other connection of the [`redis`] crate works too, through
//! [`RedisStore::builder`]: a [`MultiplexedConnection`](::redis::aio::MultiplexedConnection),
//! or a [`ClusterConnection`](::redis::cluster_async::ClusterConnection) for Redis Cluster.
//!
//! # Round trips
//!
//! Each store call is one Lua script, sent as `EVALSHA`: a claim is one round trip whether
//! it claims the key, finds the completed record (a replay) or finds it in flight, and so
//! are a completion, a renewal and a release. The scripts run atomically on the server,
//! which is what makes a claim atomic across instances. After a Redis restart or a
//! `SCRIPT FLUSH`, the first call of each script is answered `NOSCRIPT` and sent again as
//! `EVAL` with the script's source, which caches it (two round trips, once).
//!
//! # Record layout
//!
//! One key per record, `<prefix>{<64 hex digits of the StoreKey>}` (prefix `idem:` by
//! default), holding a hash:
//!
//! | field | value |
//! | --- | --- |
//! | `v` | the record format version, `1` |
//! | `state` | `in_flight` or `done` |
//! | `fp` | the request [`Fingerprint`], hex of [`Fingerprint::to_bytes`] |
//! | `token` | the lease holder's [`LeaseToken`], 32 hex digits; kept after completion, so that the holder's repeated completion answers `Ok` |
//! | `lease_until` | when the lease lapses, in ms since the epoch on the server's clock (in flight only) |
//! | `response` | the response, [`StoredResponse::encode`] bytes (completed only) |
//!
//! The key's expiry is the record's lifetime: `max(ttl, lease)` from the claim while in
//! flight, at least `lease` from each renewal, `ttl` from the completion. Leases and
//! expiries use the Redis server's clock (`TIME`), so every instance agrees on them
//! whatever their own clocks say. The braces are a hash tag: every key a record may need
//! stays in one Redis Cluster slot.
//!
//! A record this build cannot read (another type at the key, a missing field, a format
//! version it does not know, a response that does not decode) is answered
//! [`StoreError::Corrupt`], and never overwritten.
//!
//! # Failures
//!
//! Every Redis error, and every call that takes longer than the command timeout, is an
//! error to the runtime ([`StoreError::Backend`], [`StoreError::Timeout`]): the outcome is
//! unknown, never guessed. The request then fails closed (503 Problem Details with
//! `Retry-After`) or runs without idempotency, as its policy's
//! [`OnStoreError`](crate::policy::OnStoreError) says. A `ConnectionManager` reconnects in the
//! background, so the service recovers by itself once Redis is back.
//!
//! # What Redis must be configured for
//!
//! - `maxmemory-policy noeviction` (or a memory limit that is never reached): an evicting
//!   policy may drop a record, and a retry of its key then runs the operation again.
//! - Persistence (AOF with `appendfsync everysec`, or RDB snapshots) if records must
//!   survive a restart of Redis. Without it every key is new after a restart, so retries of
//!   operations completed before the restart run again.
//! - With replication, a failover to a replica can lose the latest claims and completions
//!   (replication is asynchronous): their retries may run again.
//!
//! See `docs/redis.md` in the repository for more, and for performance figures.

use std::{fmt, sync::Arc, sync::LazyLock, time::Duration};

use ::redis::{
    Cmd, ErrorKind, IntoConnectionInfo, RedisError, Script, ServerErrorKind, ToRedisArgs, Value,
    aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig},
};
use async_trait::async_trait;

use super::{Claim, ClaimOutcome, LeaseToken, Store, StoreError};
use crate::{
    fingerprint::Fingerprint,
    replay::{DecodeError, StoredResponse},
    scope::StoreKey,
};

/// One of the store's Lua scripts: its source, and the SHA-1 that `EVALSHA` names it by.
struct LuaScript {
    source: &'static str,
    sha: String,
}

impl LuaScript {
    fn new(source: &'static str) -> Self {
        Self {
            source,
            sha: Script::new(source).get_hash().to_owned(),
        }
    }

    /// A call of this script on one record.
    fn call(&self, key: String) -> ScriptCall<'_> {
        ScriptCall {
            script: self,
            key,
            args: Vec::new(),
        }
    }
}

/// A script call: the script, its one key and its arguments.
struct ScriptCall<'a> {
    script: &'a LuaScript,
    key: String,
    args: Vec<Vec<u8>>,
}

impl ScriptCall<'_> {
    fn arg(mut self, arg: impl ToRedisArgs) -> Self {
        arg.write_redis_args(&mut self.args);
        self
    }

    /// `EVALSHA sha 1 key args..`, or with `EVAL` the script's source instead of its SHA.
    fn command(&self, eval: bool) -> Cmd {
        let mut command = if eval {
            let mut command = ::redis::cmd("EVAL");
            command.arg(self.script.source);
            command
        } else {
            let mut command = ::redis::cmd("EVALSHA");
            command.arg(&self.script.sha);
            command
        };
        command.arg(1).arg(&self.key).arg(&*self.args);
        command
    }
}

struct Scripts {
    claim: LuaScript,
    complete: LuaScript,
    renew: LuaScript,
    release: LuaScript,
}

macro_rules! script {
    ($file:literal) => {
        LuaScript::new(concat!(
            include_str!("scripts/prelude.lua"),
            include_str!(concat!("scripts/", $file))
        ))
    };
}

static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    claim: script!("claim.lua"),
    complete: script!("complete.lua"),
    renew: script!("renew.lua"),
    release: script!("release.lua"),
});

/// Durations reach Redis as whole milliseconds, rounded up (a lease never ends early) and
/// capped far beyond any sensible TTL so that server-side arithmetic stays exact.
fn millis(duration: Duration) -> u64 {
    const MAX: u128 = 1 << 45; // about 1,100 years
    duration.as_nanos().div_ceil(1_000_000).clamp(1, MAX) as u64
}

fn token_hex(token: LeaseToken) -> String {
    format!("{:032x}", token.as_u128())
}

/// A store on Redis (7.0 or later), shared by every instance of a service that uses the same
/// Redis. See the [module docs](self) for the record layout, round trips and the Redis
/// configuration it needs.
///
/// `C` is the connection: a [`ConnectionManager`] (what [`connect`](Self::connect) opens),
/// a [`MultiplexedConnection`](::redis::aio::MultiplexedConnection), a
/// [`ClusterConnection`](::redis::cluster_async::ClusterConnection), or any other
/// [`ConnectionLike`] that is cheap to clone.
///
/// ```no_run
/// use std::time::Duration;
/// use idem_core::{Idempotency, RedisStore};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let client = redis::Client::open("redis://127.0.0.1:6379")?;
/// let connection = client.get_multiplexed_async_connection().await?;
/// let store = RedisStore::builder()
///     .prefix("shop:idem:")?
///     .command_timeout(Duration::from_millis(500))
///     .build(connection);
/// let idem = Idempotency::new(store);
/// # drop(idem);
/// # Ok(()) }
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
#[derive(Clone)]
pub struct RedisStore<C = ConnectionManager> {
    connection: C,
    prefix: Arc<str>,
    command_timeout: Duration,
}

impl RedisStore<ConnectionManager> {
    /// Connects to the Redis at `url` (`redis://host:port/db`, `rediss://` with a TLS
    /// feature of the `redis` crate) with the default settings of [`RedisStoreBuilder`].
    ///
    /// The connection is a [`ConnectionManager`]: when Redis goes away, calls fail (and
    /// requests fail closed) until it reconnects in the background.
    ///
    /// ```no_run
    /// use idem_core::{Idempotency, RedisStore};
    ///
    /// # async fn run() -> Result<(), redis::RedisError> {
    /// let idem = Idempotency::new(RedisStore::connect("redis://127.0.0.1:6379").await?);
    /// # drop(idem);
    /// # Ok(()) }
    /// ```
    pub async fn connect(url: impl IntoConnectionInfo) -> Result<Self, RedisError> {
        Self::builder().connect(url).await
    }

    /// A builder for the key prefix and the timeouts.
    ///
    /// ```
    /// use std::time::Duration;
    /// use idem_core::RedisStore;
    ///
    /// let builder = RedisStore::builder()
    ///     .prefix("billing:idem:")
    ///     .expect("no braces in the prefix")
    ///     .command_timeout(Duration::from_secs(1));
    /// # drop(builder);
    /// ```
    pub fn builder() -> RedisStoreBuilder {
        RedisStoreBuilder {
            prefix: RedisStoreBuilder::DEFAULT_PREFIX.into(),
            command_timeout: RedisStoreBuilder::DEFAULT_COMMAND_TIMEOUT,
            connection_timeout: RedisStoreBuilder::DEFAULT_CONNECTION_TIMEOUT,
        }
    }
}

impl<C> RedisStore<C> {
    /// A store on `connection` with the default prefix and command timeout.
    ///
    /// ```no_run
    /// use idem_core::RedisStore;
    ///
    /// # async fn run() -> Result<(), redis::RedisError> {
    /// let client = redis::Client::open("redis://127.0.0.1:6379")?;
    /// let store = RedisStore::new(client.get_multiplexed_async_connection().await?);
    /// # drop(store);
    /// # Ok(()) }
    /// ```
    pub fn new(connection: C) -> Self {
        RedisStore::builder().build(connection)
    }

    /// The key prefix.
    ///
    /// ```
    /// use idem_core::RedisStore;
    ///
    /// // A store is built without I/O; `()` stands in for a connection here.
    /// let store = RedisStore::builder().prefix("shop:idem:")?.build(());
    /// assert_eq!(store.prefix(), "shop:idem:");
    /// # Ok::<(), idem_core::store::redis::InvalidPrefix>(())
    /// ```
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The time one store call may take before it answers [`StoreError::Timeout`].
    ///
    /// ```
    /// use idem_core::{RedisStore, store::redis::RedisStoreBuilder};
    ///
    /// let store = RedisStore::new(());
    /// assert_eq!(store.command_timeout(), RedisStoreBuilder::DEFAULT_COMMAND_TIMEOUT);
    /// ```
    pub fn command_timeout(&self) -> Duration {
        self.command_timeout
    }

    /// The connection the store uses, to send commands of your own on it.
    ///
    /// ```no_run
    /// use idem_core::RedisStore;
    ///
    /// # async fn run() -> Result<(), redis::RedisError> {
    /// let store = RedisStore::connect("redis://127.0.0.1:6379").await?;
    /// let pong: String = redis::cmd("PING").query_async(&mut store.connection().clone()).await?;
    /// # drop(pong);
    /// # Ok(()) }
    /// ```
    pub fn connection(&self) -> &C {
        &self.connection
    }

    /// The Redis key of `key`'s record: `<prefix>{<64 hex digits>}`.
    ///
    /// ```
    /// use idem_core::{RedisStore, StoreKey};
    ///
    /// let store = RedisStore::new(());
    /// let key = StoreKey::from_bytes([0xab; 32]);
    /// assert_eq!(store.redis_key(&key), format!("idem:{{{}}}", "ab".repeat(32)));
    /// ```
    pub fn redis_key(&self, key: &StoreKey) -> String {
        format!("{}{{{}}}", self.prefix, key.to_hex())
    }
}

impl<C> fmt::Debug for RedisStore<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.prefix)
            .field("command_timeout", &self.command_timeout)
            .finish_non_exhaustive()
    }
}

/// Configures a [`RedisStore`]: its key prefix and timeouts. Made by
/// [`RedisStore::builder`].
///
/// ```no_run
/// use std::time::Duration;
/// use idem_core::{Idempotency, RedisStore};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let store = RedisStore::builder()
///     .prefix("payments:idem:")?
///     .command_timeout(Duration::from_millis(500))
///     .connection_timeout(Duration::from_secs(1))
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
}

/// A key prefix that [`RedisStoreBuilder::prefix`] refuses.
///
/// ```
/// use idem_core::{RedisStore, store::redis::InvalidPrefix};
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

impl RedisStoreBuilder {
    /// The default key prefix: `idem:`.
    pub const DEFAULT_PREFIX: &'static str = "idem:";
    /// The default time one store call may take: 2 seconds.
    pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(2);
    /// The default time one connection attempt of [`connect`](Self::connect) may take:
    /// 2 seconds.
    pub const DEFAULT_CONNECTION_TIMEOUT: Duration = Duration::from_secs(2);

    /// The prefix of every key the store writes (`idem:` by default), to keep the records
    /// of several services or environments apart in one Redis. It may not contain `{` or
    /// `}`, which would change the keys' hash tag.
    ///
    /// ```
    /// use idem_core::RedisStore;
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
    /// answers [`StoreError::Timeout`], whose outcome is unknown. Keep it below the
    /// runtime's [`store_timeout`](crate::runtime::IdempotencyBuilder::store_timeout) (5 seconds by
    /// default), which is only a backstop.
    ///
    /// ```
    /// use std::time::Duration;
    /// use idem_core::RedisStore;
    ///
    /// let store = RedisStore::builder().command_timeout(Duration::from_millis(300)).build(());
    /// assert_eq!(store.command_timeout(), Duration::from_millis(300));
    /// ```
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    /// The most time one connection attempt of [`connect`](Self::connect) may take,
    /// including each reconnection in the background (2 seconds by default). Unused by
    /// [`build`](Self::build), whose connection is already configured.
    ///
    /// ```
    /// use std::time::Duration;
    /// use idem_core::RedisStore;
    ///
    /// let builder = RedisStore::builder().connection_timeout(Duration::from_secs(1));
    /// # drop(builder);
    /// ```
    pub fn connection_timeout(mut self, timeout: Duration) -> Self {
        self.connection_timeout = timeout;
        self
    }

    /// The store on a connection of your own.
    ///
    /// ```no_run
    /// use idem_core::RedisStore;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = redis::cluster::ClusterClient::new(vec!["redis://10.0.0.1:6379", "redis://10.0.0.2:6379"])?;
    /// let store = RedisStore::builder().build(client.get_async_connection().await?);
    /// # drop(store);
    /// # Ok(()) }
    /// ```
    pub fn build<C>(self, connection: C) -> RedisStore<C> {
        RedisStore {
            connection,
            prefix: self.prefix.into(),
            command_timeout: self.command_timeout,
        }
    }

    /// Connects to the Redis at `url` through a [`ConnectionManager`] whose connection
    /// attempts time out after the [connection timeout](Self::connection_timeout) and whose
    /// commands time out after the [command timeout](Self::command_timeout). It reconnects
    /// in the background, at most a second apart, while Redis is away.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use idem_core::RedisStore;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = RedisStore::builder()
    ///     .command_timeout(Duration::from_millis(500))
    ///     .connect("redis://127.0.0.1:6379")
    ///     .await?;
    /// # drop(store);
    /// # Ok(()) }
    /// ```
    pub async fn connect(
        self,
        url: impl IntoConnectionInfo,
    ) -> Result<RedisStore<ConnectionManager>, RedisError> {
        let client = ::redis::Client::open(url)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.connection_timeout))
            .set_response_timeout(Some(self.command_timeout))
            .set_max_delay(Duration::from_secs(1))
            .set_number_of_retries(3);
        let connection = ConnectionManager::new_with_config(client, config).await?;
        Ok(self.build(connection))
    }
}

/// Why a record could not be read back.
#[derive(Debug, thiserror::Error)]
enum RecordError {
    #[error("the record has format version {0:?}, which this build does not know")]
    UnknownVersion(String),
    #[error("malformed record: {0}")]
    Malformed(String),
    #[error("the stored response does not decode")]
    Response(#[source] DecodeError),
}

/// A script's answer that is not one it can give: the server runs other scripts than ours.
#[derive(Debug, thiserror::Error)]
#[error("unexpected reply from a store script: {0}")]
struct UnexpectedReply(String);

/// A script's answer: the outcome's name, and its payload if it has one.
struct Reply {
    outcome: Vec<u8>,
    payload: Option<Vec<u8>>,
}

impl Reply {
    fn parse(value: Value) -> Result<Self, StoreError> {
        let unexpected = |value: &Value| StoreError::backend(UnexpectedReply(format!("{value:?}")));
        let Value::Array(items) = value else {
            return Err(unexpected(&value));
        };
        if !(1..=2).contains(&items.len()) {
            return Err(unexpected(&Value::Array(items)));
        }
        let mut fields = Vec::with_capacity(2);
        for item in items {
            match item {
                Value::BulkString(bytes) => fields.push(bytes),
                Value::SimpleString(text) => fields.push(text.into_bytes()),
                other => return Err(unexpected(&other)),
            }
        }
        let mut fields = fields.into_iter();
        let outcome = fields.next().expect("one or two fields");
        Ok(Self {
            outcome,
            payload: fields.next(),
        })
    }

    /// The error for the outcomes every script may answer besides its own.
    fn into_error(self) -> StoreError {
        let payload = String::from_utf8_lossy(self.payload.as_deref().unwrap_or_default());
        match &self.outcome[..] {
            b"lost" => StoreError::LeaseLost,
            b"version" => StoreError::corrupt(RecordError::UnknownVersion(payload.into())),
            b"corrupt" => StoreError::corrupt(RecordError::Malformed(payload.into())),
            outcome => StoreError::backend(UnexpectedReply(
                String::from_utf8_lossy(outcome).into_owned(),
            )),
        }
    }

    /// The answer of a fenced write: `ok`, or the reason it was refused.
    fn into_write_result(self) -> Result<(), StoreError> {
        match &self.outcome[..] {
            b"ok" => Ok(()),
            _ => Err(self.into_error()),
        }
    }
}

impl<C> RedisStore<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// Runs one script under the command timeout. Any error is an unknown outcome.
    ///
    /// The script is called by its SHA; a Redis that does not have it cached (after a restart
    /// or `SCRIPT FLUSH`) answers `NOSCRIPT`, and the call is sent again with the source, which
    /// also caches it. Both are one command each, sent from this future only: if the caller
    /// stops waiting, nothing more is sent, so a call cannot land after a later one (a
    /// release, say) on the same connection.
    async fn run(&self, call: ScriptCall<'_>) -> Result<Reply, StoreError> {
        let mut connection = self.connection.clone();
        let attempt = async {
            match call
                .command(false)
                .query_async::<Value>(&mut connection)
                .await
            {
                Err(error) if error.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                    call.command(true)
                        .query_async::<Value>(&mut connection)
                        .await
                }
                answered => answered,
            }
        };
        match tokio::time::timeout(self.command_timeout, attempt).await {
            Ok(Ok(value)) => Reply::parse(value),
            Ok(Err(error)) => Err(StoreError::backend(error)),
            Err(_) => Err(StoreError::Timeout(self.command_timeout)),
        }
    }
}

#[async_trait]
impl<C> Store for RedisStore<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    async fn claim(&self, claim: Claim<'_>) -> Result<ClaimOutcome, StoreError> {
        let call = SCRIPTS
            .claim
            .call(self.redis_key(claim.key))
            .arg(hex::encode(claim.fingerprint.to_bytes()))
            .arg(token_hex(claim.token))
            .arg(millis(claim.lease))
            .arg(millis(claim.in_flight_lifetime()));
        let reply = self.run(call).await?;
        match (&reply.outcome[..], &reply.payload) {
            (b"claimed", None) => Ok(ClaimOutcome::Claimed),
            (b"in_flight", None) => Ok(ClaimOutcome::InFlight),
            (b"completed", Some(response)) => StoredResponse::decode(response)
                .map(ClaimOutcome::Completed)
                .map_err(|error| StoreError::corrupt(RecordError::Response(error))),
            (b"mismatch", Some(stored)) => {
                let stored = hex::decode(stored).map_err(|_| {
                    StoreError::corrupt(RecordError::Malformed("the fingerprint is not hex".into()))
                })?;
                Ok(ClaimOutcome::Mismatch {
                    stored_algorithm: Fingerprint::from_bytes(&stored)
                        .map(|fingerprint| fingerprint.algorithm()),
                })
            }
            _ => Err(reply.into_error()),
        }
    }

    async fn complete(
        &self,
        key: &StoreKey,
        token: LeaseToken,
        response: &StoredResponse,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let encoded = response.encode().map_err(StoreError::Unencodable)?;
        let call = SCRIPTS
            .complete
            .call(self.redis_key(key))
            .arg(token_hex(token))
            .arg(encoded)
            .arg(millis(ttl));
        self.run(call).await?.into_write_result()
    }

    async fn release(&self, key: &StoreKey, token: LeaseToken) -> Result<(), StoreError> {
        let call = SCRIPTS
            .release
            .call(self.redis_key(key))
            .arg(token_hex(token));
        self.run(call).await?.into_write_result()
    }

    async fn renew(
        &self,
        key: &StoreKey,
        token: LeaseToken,
        lease: Duration,
    ) -> Result<(), StoreError> {
        let call = SCRIPTS
            .renew
            .call(self.redis_key(key))
            .arg(token_hex(token))
            .arg(millis(lease));
        self.run(call).await?.into_write_result()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_whole_milliseconds_rounded_up() {
        assert_eq!(millis(Duration::ZERO), 1);
        assert_eq!(millis(Duration::from_micros(1)), 1);
        assert_eq!(millis(Duration::from_micros(1_001)), 2);
        assert_eq!(millis(Duration::from_secs(60)), 60_000);
        assert_eq!(millis(Duration::MAX), 1 << 45);
    }

    #[test]
    fn tokens_are_32_hex_digits() {
        assert_eq!(
            token_hex(LeaseToken::from_u128(0xab)),
            format!("{}ab", "0".repeat(30))
        );
    }

    #[test]
    fn replies_parse_and_map_to_errors() {
        let bulk = |text: &str| Value::BulkString(text.as_bytes().to_vec());
        let lost = Reply::parse(Value::Array(vec![bulk("lost")])).unwrap();
        assert!(matches!(
            lost.into_write_result(),
            Err(StoreError::LeaseLost)
        ));
        let version = Reply::parse(Value::Array(vec![bulk("version"), bulk("2")])).unwrap();
        assert!(matches!(version.into_error(), StoreError::Corrupt(_)));
        assert!(matches!(
            Reply::parse(Value::Int(1)),
            Err(StoreError::Backend(_))
        ));
        assert!(matches!(
            Reply::parse(Value::Array(vec![])),
            Err(StoreError::Backend(_))
        ));
    }

    #[test]
    fn every_script_compiles_to_its_own_sha() {
        let shas = [
            &SCRIPTS.claim.sha,
            &SCRIPTS.complete.sha,
            &SCRIPTS.renew.sha,
            &SCRIPTS.release.sha,
        ];
        for (i, sha) in shas.iter().enumerate() {
            assert!(!shas[i + 1..].contains(sha));
        }
    }
}
