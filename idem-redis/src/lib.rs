//! [`RedisStore`]: a store that several instances of a service share (feature `redis` of
//! `idem`).
//!
//! ```no_run
//! use idem::{Idempotency, redis::RedisStore};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // A key prefix of the service's own, apart from every other program's on that Redis.
//! let store = RedisStore::builder()
//!     .prefix("orders:idem:")?
//!     .connect("redis://127.0.0.1:6379")
//!     .await?;
//! let idem = Idempotency::new(store);
//! # drop(idem);
//! # Ok(()) }
//! ```
//!
//! # Deployments
//!
//! [`RedisStoreBuilder`] connects to each deployment of Redis:
//!
//! - one server: [`connect`](RedisStoreBuilder::connect), through a [`ConnectionManager`]
//!   that reconnects in the background;
//! - Redis Cluster: [`connect_cluster`](RedisStoreBuilder::connect_cluster), through a
//!   [`ClusterConnection`](::redis::cluster_async::ClusterConnection) that follows slot
//!   migrations and failovers;
//! - a primary with replicas behind Sentinel:
//!   [`connect_sentinel`](RedisStoreBuilder::connect_sentinel), through a
//!   [`SentinelConnection`] that follows a promotion;
//! - any other connection of the [`redis`] crate: [`build`](RedisStoreBuilder::build).
//!
//! # Durability
//!
//! Redis acknowledges a write once its primary holds it in memory. A failover to a replica
//! that had not received a claim yet forgets the claim, and a retry then runs the operation
//! again. With [`Durability::Replicas`] the store waits (`WAIT`) until replicas have each
//! claim before the handler runs, and a claim that does not get there in time is released
//! and answered [`StoreError::NotDurable`] (503). See [`Durability`], and [docs/redis.md](https://github.com/idem-rs/idem/blob/main/docs/redis.md) for
//! what each deployment and setting survives.
//!
//! # Round trips
//!
//! A claim is one command, `SET key <a fresh claim> NX GET PX <lifetime>`, with no script:
//! it claims a key that has no record, and answers the record of one that has. A replay, a
//! fresh claim and a request with another body (422) are then that one round trip and no
//! Lua. Only a claim that finds the key in flight sends the claim script after it (a second
//! round trip), because whether the holder's lease lapsed is read on the server's clock. Every
//! other call is one Lua script, sent as `EVALSHA`: a completion, a renewal, a release, a
//! step, a suspension, a look-up and a removal. Scripts run atomically on the server, and so
//! does `SET NX`, which is what makes a claim atomic across instances. After a Redis restart
//! or a `SCRIPT FLUSH`, the first call of each script is answered `NOSCRIPT` and sent again as
//! `EVAL` with the script's source, which caches it (two round trips, once). With a
//! [`Durability`] that waits, a claim that claimed the key is confirmed on a connection of the
//! store's own (the claim script, and `WAIT`, in one pipeline: a second round trip, plus the
//! replicas' acknowledgement), and a completion sends its wait in the same pipeline.
//!
//! # Record layout
//!
//! One key per record, `<prefix>{<64 hex digits of the StoreKey>}` (prefix `idem:` by
//! default), holding one string (record format 2):
//!
//! | bytes | in flight | completed |
//! | --- | --- | --- |
//! | 0 | the format version, `2` | the same |
//! | 1 | `c` (a fresh claim) or `f` | `d` |
//! | 2..35 | the request [`Fingerprint`] ([`Fingerprint::to_bytes`]) | the same |
//! | 35..51 | the lease holder's [`LeaseToken`] ([`LeaseToken::to_bytes`]) | the same, kept so that the holder's repeated completion answers `Ok` |
//! | 51..67 | `f`: when the lease lapses and when the key was first claimed (a takeover keeps it); `c`: the lease and the record's lifetime. Milliseconds, big-endian doubles | 51..59: the TTL it was stored with, ms |
//! | 67..75 | the suspensions and the steps that ended (two big-endian `u32`) | 59..: the response, [`StoredResponse::as_bytes`] bytes |
//! | 75.. | each step: its length (`u32`), then its bytes | |
//!
//! A route the service resumes itself (`resume_after`) writes its in-flight record as `C` (a
//! fresh claim) or `F` rather than `c` or `f`, with `resume_after`, when it is due, and the
//! [`KeptRequest`](idem_core::store::operation::KeptRequest) between the header and the steps;
//! see [Resumption](#resumption).
//!
//! A fresh claim cannot read the server's clock without a script, so it writes `c`: the
//! lease's length rather than its end. Its expiry, set to the lifetime at the claim, has run
//! down by the time elapsed since, so the claim was `lifetime - PTTL` ms ago; the first
//! script that writes the record in flight turns it `f`. A completed record keeps its TTL
//! the same way: it was stored `ttl - PTTL` ms ago. The key's expiry is the record's
//! lifetime: `max(ttl, lease)` from the claim while in flight, at least `lease` from each
//! renewal, `ttl` from the completion. Leases and expiries use the Redis server's clock
//! (`TIME`, and the key's expiry), so every instance agrees on them whatever their own clocks
//! say. The braces are a hash tag: everything of one record lives in one Redis Cluster slot.
//!
//! A record this build cannot read (another type at the key, a format version it does not
//! know, a record cut short, a response that does not decode) is answered
//! [`StoreError::Corrupt`], and never overwritten. Records of format 1 (a hash per record,
//! written by builds before this layout; never released) are of another type and read as such.
//!
//! # Resumption
//!
//! The store is [`StepSupport::Durable`]: it keeps an operation's steps in its record, and
//! the request of a route the service resumes itself with its claim (never credentials), so
//! that any instance's resumer finishes an operation whose process died. The operations that
//! are due are found through one sorted set per prefix, `<prefix>due`, beside the records:
//! an entry (the store key and the claim's token) is written before the record it points
//! at, and the record decides whether the operation is due, in the script that defers it,
//! so that of any number of instances one answers it. On a Redis Cluster no script can write
//! a record and an index of many records together; this design needs no such script. A
//! route without `resume_after` writes and reads no entry. `docs/redis.md` has the design
//! and the choices it was weighed against.
//!
//! # Failures
//!
//! Every Redis error, and every call that takes longer than the command timeout, is an
//! error to the runtime ([`StoreError::Backend`], [`StoreError::Timeout`]): the outcome is
//! unknown, never guessed. The request then fails closed (503 Problem Details with
//! `Retry-After`) or runs without idempotency, as its policy's
//! [`OnStoreError`](idem_core::policy::OnStoreError) says. Every connection the store opens reconnects
//! by itself, so the service recovers once Redis is back.
//!
//! # What Redis must be configured for
//!
//! - `maxmemory-policy noeviction` (or a memory limit that is never reached): an evicting
//!   policy may drop a record, and a retry of its key then runs the operation again.
//! - Persistence (AOF with `appendfsync everysec`, or RDB snapshots) if records must
//!   survive a restart of Redis. Without it every key is new after a restart, so retries of
//!   operations completed before the restart run again.
//! - With replication, a failover to a replica can lose the latest claims and completions
//!   (replication is asynchronous) unless the [`Durability`] waits for the replicas.
//!
//! See [docs/redis.md](https://github.com/idem-rs/idem/blob/main/docs/redis.md) in the repository for more, and for performance figures.

mod builder;
mod due;
mod durability;
mod durable;
mod lanes;
mod record;
mod script;
mod sentinel;

use std::{fmt, sync::Arc, time::Duration};

use ::redis::{
    ErrorKind, IntoConnectionInfo, ServerErrorKind, Value,
    aio::{ConnectionLike, ConnectionManager},
};
use async_trait::async_trait;

pub use self::{
    builder::{InvalidPrefix, RedisStoreBuilder},
    durability::Durability,
    sentinel::SentinelConnection,
};
use self::{
    durable::Durable,
    lanes::{Lanes, SharedLane},
    script::{RecordError, Reply, SCRIPTS, ScriptCall, UnexpectedReply},
};
use idem_core::store::{
    Claim, ClaimOutcome, LeaseToken, Store, StoreError,
    held::{CompletedRecord, Held, InFlightRecord, RecordState},
    operation::{DueOperation, Progress, RecordedStep, StepSupport, decode_steps},
};
use idem_core::{
    fingerprint::Fingerprint,
    replay::{ResponseHead, StoredResponse},
    scope::StoreKey,
};

/// The longest duration sent to Redis, in ms: about 1,100 years, far beyond any sensible TTL,
/// so that server-side arithmetic stays exact.
const MOST_MILLIS: u128 = 1 << 45;

/// Durations reach Redis as whole milliseconds, rounded up (a lease never ends early), at least
/// one (an expiry of 0 is refused), and capped at [`MOST_MILLIS`].
fn millis(duration: Duration) -> u64 {
    duration
        .as_nanos()
        .div_ceil(1_000_000)
        .clamp(1, MOST_MILLIS) as u64
}

/// A delay before an operation is due, in whole milliseconds rounded up: as [`millis`], but
/// zero stays zero, so that an operation suspended to be resumed at once is due at once, not
/// a millisecond later (which a resumer asking within that millisecond would miss).
fn delay_millis(delay: Duration) -> u64 {
    delay.as_nanos().div_ceil(1_000_000).min(MOST_MILLIS) as u64
}

/// A store on Redis (7.0 or later), shared by every instance of a service that uses the same
/// Redis. See the [module docs](self) for the deployments, the durability of claims, the
/// record layout, round trips and the Redis configuration it needs.
///
/// `C` is the connection: a [`ConnectionManager`] (what [`connect`](Self::connect) opens),
/// a [`ClusterConnection`](::redis::cluster_async::ClusterConnection), a
/// [`SentinelConnection`], a [`MultiplexedConnection`](::redis::aio::MultiplexedConnection),
/// or any other [`ConnectionLike`] that is cheap to clone.
///
/// ```no_run
/// use std::time::Duration;
/// use idem::{Idempotency, redis::RedisStore};
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
    /// `None` when writes are asynchronous.
    durable: Option<Arc<Durable>>,
}

impl RedisStore<ConnectionManager> {
    /// Connects to the Redis at `url` (`redis://host:port/db`, `rediss://` with a TLS
    /// feature of the `redis` crate) with the default settings of [`RedisStoreBuilder`].
    ///
    /// The connection is a [`ConnectionManager`]: when Redis goes away, calls fail (and
    /// requests fail closed) until it reconnects in the background.
    ///
    /// ```no_run
    /// use idem::{Idempotency, redis::RedisStore};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let idem = Idempotency::new(RedisStore::connect("redis://127.0.0.1:6379").await?);
    /// # drop(idem);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// A [`ConnectError`](idem_core::store::ConnectError) that names Redis and its address,
    /// never its password, when it cannot be reached.
    pub async fn connect(
        url: impl IntoConnectionInfo,
    ) -> Result<Self, idem_core::store::ConnectError> {
        Self::builder().connect(url).await
    }

    /// A builder for the key prefix, the timeouts, the durability and the deployment.
    ///
    /// ```
    /// use std::time::Duration;
    /// use idem::redis::RedisStore;
    ///
    /// let builder = RedisStore::builder()
    ///     .prefix("billing:idem:")
    ///     .expect("no braces in the prefix")
    ///     .command_timeout(Duration::from_secs(1));
    /// # drop(builder);
    /// ```
    pub fn builder() -> RedisStoreBuilder {
        RedisStoreBuilder::default()
    }
}

impl<C> RedisStore<C> {
    /// A store on `connection` with the default prefix and command timeout.
    ///
    /// ```no_run
    /// use idem::redis::RedisStore;
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
    /// use idem::redis::RedisStore;
    ///
    /// // A store is built without I/O; `()` stands in for a connection here.
    /// let store = RedisStore::builder().prefix("shop:idem:")?.build(());
    /// assert_eq!(store.prefix(), "shop:idem:");
    /// # Ok::<(), idem::redis::InvalidPrefix>(())
    /// ```
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The time one store call may take before it answers [`StoreError::Timeout`] (a durable
    /// write: this plus its [`Durability`]'s timeout).
    ///
    /// ```
    /// use idem::redis::{RedisStore, RedisStoreBuilder};
    ///
    /// let store = RedisStore::new(());
    /// assert_eq!(store.command_timeout(), RedisStoreBuilder::DEFAULT_COMMAND_TIMEOUT);
    /// ```
    pub fn command_timeout(&self) -> Duration {
        self.command_timeout
    }

    /// How far a claim must have travelled before the store answers it.
    ///
    /// ```
    /// use idem::redis::{RedisStore, Durability};
    ///
    /// assert_eq!(RedisStore::new(()).durability(), Durability::Async);
    /// ```
    pub fn durability(&self) -> Durability {
        self.durable
            .as_ref()
            .map_or(Durability::Async, |durable| durable.durability)
    }

    /// The connection the store uses, to send commands of your own on it.
    ///
    /// ```no_run
    /// use idem::redis::RedisStore;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
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
    /// use idem::{StoreKey, redis::RedisStore};
    ///
    /// let store = RedisStore::new(());
    /// let key = StoreKey::from_bytes([0xab; 32]);
    /// assert_eq!(store.redis_key(&key), format!("idem:{{{}}}", "ab".repeat(32)));
    /// ```
    pub fn redis_key(&self, key: &StoreKey) -> String {
        // Written into one buffer of its final size: every store call names its key, and
        // `format!` with `hex::encode` took an allocation more and a char at a time.
        let mut hex = [0; 64];
        hex::encode_to_slice(key.as_bytes(), &mut hex).expect("64 digits for 32 bytes");
        let mut redis_key = String::with_capacity(self.prefix.len() + 66);
        redis_key.push_str(&self.prefix);
        redis_key.push('{');
        redis_key.push_str(std::str::from_utf8(&hex).expect("hex digits are ASCII"));
        redis_key.push('}');
        redis_key
    }
}

impl<C> fmt::Debug for RedisStore<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.prefix)
            .field("command_timeout", &self.command_timeout)
            .field("durability", &self.durability())
            .finish_non_exhaustive()
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
    async fn run(&self, call: &ScriptCall<'_>) -> Result<Reply, StoreError> {
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

    /// The lanes of durable writes: opened by the store's connector, or else the store's own
    /// connection.
    fn lanes<'a>(&self, durable: &'a Durable) -> &'a Arc<Lanes> {
        durable
            .lanes
            .get_or_init(|| Lanes::new(SharedLane(self.connection.clone()), durable.lanes_wanted))
    }

    fn release_call(&self, key: &StoreKey, token: LeaseToken) -> ScriptCall<'static> {
        SCRIPTS
            .release
            .call(self.redis_key(key))
            .arg(&token.to_bytes()[..])
    }

    /// Claims `key` without a script, if it has no record: one `SET NX GET` that writes a
    /// fresh claim (keeping `kept`, for a resumable route), or answers what the key holds.
    async fn claim_without_script(
        &self,
        key: &str,
        claim: &Claim<'_>,
        kept: Option<&Kept>,
    ) -> Result<AtKey, StoreError> {
        let lifetime = millis(claim.in_flight_lifetime());
        let plain = record::claimed(
            claim.fingerprint,
            claim.token,
            millis(claim.lease),
            lifetime,
        );
        let resumable;
        let fresh: &[u8] = match kept {
            None => &plain,
            Some(kept) => {
                resumable = record::resumable_claimed(plain, kept.after_ms, &kept.request)
                    .map_err(StoreError::backend)?;
                &resumable
            }
        };
        let mut command = ::redis::cmd("SET");
        command
            .arg(key)
            .arg(fresh)
            .arg("NX")
            .arg("GET")
            .arg("PX")
            .arg(lifetime);
        let mut connection = self.connection.clone();
        match tokio::time::timeout(
            self.command_timeout,
            command.query_async::<Value>(&mut connection),
        )
        .await
        {
            Ok(Ok(Value::Nil)) => Ok(AtKey::Nothing),
            Ok(Ok(Value::BulkString(record))) => Ok(AtKey::Record(record)),
            // Nothing was written: the key holds a hash, a list, ..., which the claim script
            // names.
            Ok(Err(error)) if error.code() == Some("WRONGTYPE") => Ok(AtKey::OtherType),
            Ok(Ok(other)) => Err(StoreError::backend(UnexpectedReply(format!("{other:?}")))),
            Ok(Err(error)) => Err(StoreError::backend(error)),
            Err(_) => Err(StoreError::Timeout(self.command_timeout)),
        }
    }

    /// The claim script's call for `claim`, on the Redis key `key`, keeping `kept` for a
    /// resumable route.
    fn claim_call(key: String, claim: &Claim<'_>, kept: Option<&Kept>) -> ScriptCall<'static> {
        let call = SCRIPTS
            .claim
            .call(key)
            .arg(&claim.fingerprint.to_bytes()[..])
            .arg(&claim.token.to_bytes()[..])
            .arg(millis(claim.lease))
            .arg(millis(claim.in_flight_lifetime()));
        match kept {
            None => call,
            Some(kept) => call.arg(kept.after_ms).arg(&kept.request[..]),
        }
    }

    /// What a claim that found the key in flight, or claimed it under a durability that
    /// waits, answers: the claim script's reply, read.
    async fn claim_reply(
        &self,
        claim: &Claim<'_>,
        reply: Reply,
    ) -> Result<ClaimOutcome, StoreError> {
        match (&reply.outcome[..], &reply.payload) {
            (b"claimed", None) => Ok(ClaimOutcome::Claimed),
            (b"resumed", Some(progress)) => match read_progress(progress) {
                Ok(progress) => Ok(ClaimOutcome::Resumed(progress)),
                Err(corrupt) => {
                    // The claim took the key over before its steps were found unreadable. Its
                    // lease ends at once, so that the record stays as it is, for whoever reads
                    // it next (and gets the same error), rather than blocked for a lease.
                    let suspend = SCRIPTS
                        .suspend
                        .call(self.redis_key(claim.key))
                        .arg(&claim.token.to_bytes()[..]);
                    let _ = self.run(&suspend).await;
                    Err(corrupt)
                }
            },
            (b"in_flight", None) => Ok(ClaimOutcome::InFlight),
            (b"completed", Some(response)) => completed(response),
            (b"mismatch", Some(stored)) => Ok(mismatch(stored)),
            _ => Err(reply.into_error()),
        }
    }
}

/// What a resumable claim keeps with its record: the route's `resume_after` and the request
/// (`KeptRequest::encode`), encoded once for the calls of one claim.
struct Kept {
    after_ms: u64,
    request: Vec<u8>,
}

impl Kept {
    fn of(claim: &Claim<'_>) -> Option<Self> {
        claim.resumable.map(|resumable| Self {
            after_ms: delay_millis(resumable.after),
            request: resumable.request.encode(),
        })
    }
}

/// What a claim without a script found at the key.
enum AtKey {
    /// No record: the key is claimed.
    Nothing,
    /// The record the key holds.
    Record(Vec<u8>),
    /// Another type than a string, which the claim script names.
    OtherType,
}

/// A completed record's response, decoded for replay.
fn completed(response: &[u8]) -> Result<ClaimOutcome, StoreError> {
    StoredResponse::decode(response)
        .map(ClaimOutcome::Completed)
        .map_err(|error| StoreError::corrupt(RecordError::Response(error)))
}

/// The answer to a claim whose fingerprint is not the record's `stored` one.
fn mismatch(stored: &[u8]) -> ClaimOutcome {
    ClaimOutcome::Mismatch {
        stored_algorithm: Fingerprint::from_bytes(stored)
            .map(|fingerprint| fingerprint.algorithm()),
    }
}

#[async_trait]
impl<C> Store for RedisStore<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    async fn claim(&self, claim: Claim<'_>) -> Result<ClaimOutcome, StoreError> {
        let kept = Kept::of(&claim);
        if let Some(resumable) = claim.resumable {
            // The entry first: whenever this process dies, a record that keeps its request
            // has its entry (see `due`).
            let due_in = claim.lease.saturating_add(resumable.after);
            self.mark_due(claim.key, claim.token, due_in, true).await?;
        }
        let kept = kept.as_ref();
        let key = self.redis_key(claim.key);
        let mut reply = match self.claim_without_script(&key, &claim, kept).await? {
            AtKey::Nothing if self.durable.is_none() => return Ok(ClaimOutcome::Claimed),
            AtKey::Nothing => Reply::claimed(),
            AtKey::Record(stored) => match record::read_found(&stored, claim.fingerprint) {
                Ok(record::Found::Completed(response)) => return completed(response),
                Ok(record::Found::Mismatch(fingerprint)) => return Ok(mismatch(fingerprint)),
                // Whether the holder's lease lapsed is for the server's clock to say.
                Ok(record::Found::InFlight) => {
                    self.run(&Self::claim_call(key.clone(), &claim, kept))
                        .await?
                }
                Err(unreadable) => return Err(StoreError::corrupt(RecordError::from(unreadable))),
            },
            AtKey::OtherType => {
                self.run(&Self::claim_call(key.clone(), &claim, kept))
                    .await?
            }
        };
        if let Some(durable) = &self.durable
            && reply.wrote()
        {
            let release = self.release_call(claim.key, claim.token);
            let lanes = self.lanes(durable);
            reply = durable
                .confirm_claim(
                    lanes,
                    &Self::claim_call(key, &claim, kept),
                    release,
                    self.command_timeout,
                    claim.lease,
                )
                .await?;
        }
        self.claim_reply(&claim, reply).await
    }

    async fn complete(
        &self,
        key: &StoreKey,
        token: LeaseToken,
        response: &StoredResponse,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let call = SCRIPTS
            .complete
            .call(self.redis_key(key))
            .arg(&token.to_bytes()[..])
            .arg(response.as_bytes())
            .arg(millis(ttl));
        let reply = match &self.durable {
            None => self.run(&call).await?,
            Some(durable) => {
                let lanes = self.lanes(durable);
                durable
                    .write_waited(lanes, call, self.command_timeout, "complete")
                    .await?
            }
        };
        reply.into_write_result()
    }

    /// Releases are never waited for: a release that a failover loses leaves the key in
    /// flight until its lease lapses, which delays a retry and runs nothing twice.
    async fn release(&self, key: &StoreKey, token: LeaseToken) -> Result<(), StoreError> {
        self.run(&self.release_call(key, token))
            .await?
            .into_write_result()
    }

    /// Renewals are never waited for: a renewal that a failover loses leaves the lease the
    /// claim (or the last renewal that reached the replicas) set, and the next renewal, a
    /// third of a lease later, extends it again.
    async fn renew(
        &self,
        key: &StoreKey,
        token: LeaseToken,
        lease: Duration,
    ) -> Result<(), StoreError> {
        let call = SCRIPTS
            .renew
            .call(self.redis_key(key))
            .arg(&token.to_bytes()[..])
            .arg(millis(lease));
        self.run(&call).await?.into_write_result()
    }

    /// Steps are part of the record, and so is the request of a resumable route; the due
    /// index finds the operations to resume from any instance, after a crash too.
    fn step_support(&self) -> StepSupport {
        StepSupport::Durable
    }

    /// Waited for like a completion: a step that a failover loses would be done again.
    async fn record_step(
        &self,
        key: &StoreKey,
        token: LeaseToken,
        index: usize,
        step: &RecordedStep,
    ) -> Result<(), StoreError> {
        let call = SCRIPTS
            .record_step
            .call(self.redis_key(key))
            .arg(&token.to_bytes()[..])
            .arg(index)
            .arg(step.encode());
        let reply = match &self.durable {
            None => self.run(&call).await?,
            Some(durable) => {
                let lanes = self.lanes(durable);
                durable
                    .write_waited(lanes, call, self.command_timeout, "record_step")
                    .await?
            }
        };
        reply.into_write_result()
    }

    /// Not waited for, as a release is not: a suspension that a failover loses leaves the
    /// lease to lapse on its own, which delays the resumption and runs nothing twice. With a
    /// time to resume, its entry in the due index moves first (an operation whose record
    /// keeps no request drops it when it falls due).
    async fn suspend(
        &self,
        key: &StoreKey,
        token: LeaseToken,
        resume_in: Option<Duration>,
    ) -> Result<(), StoreError> {
        if let Some(resume_in) = resume_in {
            self.mark_due(key, token, resume_in, false).await?;
        }
        let call = SCRIPTS
            .suspend
            .call(self.redis_key(key))
            .arg(&token.to_bytes()[..])
            .arg(resume_in.map_or(-1, |resume_in| delay_millis(resume_in) as i64));
        self.run(&call).await?.into_write_result()
    }

    /// One script lists the index's entries whose time has come, one per entry reads and
    /// defers its record (concurrently), and one moves or drops the entries: see `due`.
    async fn due(&self, limit: usize, hold: Duration) -> Result<Vec<DueOperation>, StoreError> {
        self.take_due(limit, hold).await
    }

    /// One script, which reads the record and the server's clock and writes nothing.
    async fn look_up(&self, key: &StoreKey) -> Result<Option<Held>, StoreError> {
        let reply = self.run(&SCRIPTS.look_up.call(self.redis_key(key))).await?;
        match (&reply.outcome[..], &reply.payload) {
            (b"none", None) => Ok(None),
            (b"completed", Some(payload)) => read_completed(payload).map(Some),
            (b"in_flight", Some(payload)) => read_in_flight(payload).map(Some),
            _ => Err(reply.into_error()),
        }
    }

    /// Not waited for, as a release is not: a removal that a failover loses leaves the record
    /// it meant to remove, which a look-up shows, and which the operator removes again.
    async fn remove(&self, key: &StoreKey) -> Result<Option<RecordState>, StoreError> {
        let reply = self.run(&SCRIPTS.remove.call(self.redis_key(key))).await?;
        match (&reply.outcome[..], reply.payload.as_deref()) {
            (b"none", None) => Ok(None),
            (b"removed", Some(b"in_flight")) => Ok(Some(RecordState::InFlight)),
            (b"removed", Some(b"done")) => Ok(Some(RecordState::Completed)),
            (b"removed", Some(b"unreadable")) => Ok(Some(RecordState::Unreadable)),
            _ => Err(reply.into_error()),
        }
    }
}

/// Reads the `n` big-endian doubles at the start of a look-up's answer: times in ms on the
/// server's clock (`-1` for one the record does not keep), and lengths.
fn read_doubles<const N: usize>(payload: &[u8]) -> Result<([f64; N], &[u8]), StoreError> {
    let corrupt =
        || StoreError::corrupt(RecordError::Malformed("a look-up answer ends early".into()));
    let mut values = [0.0; N];
    let mut rest = payload;
    for value in &mut values {
        let (bytes, tail) = rest.split_first_chunk::<8>().ok_or_else(corrupt)?;
        *value = f64::from_be_bytes(*bytes);
        rest = tail;
    }
    Ok((values, rest))
}

/// A time in ms as the scripts answer it; `None` for `-1`, a time the record does not keep.
fn server_time(millis: f64) -> Option<std::time::SystemTime> {
    (millis >= 0.0).then(|| std::time::UNIX_EPOCH + Duration::from_millis(millis as u64))
}

fn read_completed(payload: &[u8]) -> Result<Held, StoreError> {
    let ([now, at, expires, len], head) = read_doubles::<4>(payload)?;
    let ResponseHead { status, body_kept } = StoredResponse::read_head(head)
        .map_err(|error| StoreError::corrupt(RecordError::Response(error)))?;
    let now = server_time(now).unwrap_or(std::time::UNIX_EPOCH);
    Ok(Held::Completed(CompletedRecord {
        status,
        stored_at: server_time(at),
        expires_at: server_time(expires).unwrap_or(now),
        bytes: len as u64,
        body_kept,
        at: now,
    }))
}

fn read_in_flight(payload: &[u8]) -> Result<Held, StoreError> {
    let ([now, since, lease_until, expires, resumes], rest) = read_doubles::<5>(payload)?;
    let (suspensions, steps) = rest.split_first_chunk::<4>().ok_or_else(|| {
        StoreError::corrupt(RecordError::Malformed("a look-up answer ends early".into()))
    })?;
    let steps =
        decode_steps(steps).map_err(|error| StoreError::corrupt(RecordError::Steps(error)))?;
    let now = server_time(now).unwrap_or(std::time::UNIX_EPOCH);
    Ok(Held::InFlight(InFlightRecord {
        since: server_time(since),
        lease_expires_at: server_time(lease_until).unwrap_or(now),
        expires_at: server_time(expires).unwrap_or(now),
        steps: steps.iter().map(|step| step.name().to_owned()).collect(),
        suspensions: u32::from_be_bytes(*suspensions),
        resumes_at: server_time(resumes),
        at: now,
    }))
}

/// The progress a resumed claim answers: the suspensions as four big-endian bytes, then the
/// steps.
fn read_progress(bytes: &[u8]) -> Result<Progress, StoreError> {
    let corrupt = |why: &str| StoreError::corrupt(RecordError::Malformed(why.into()));
    let (suspensions, steps) = bytes
        .split_first_chunk::<4>()
        .ok_or_else(|| corrupt("a resumed claim without its count of suspensions"))?;
    Ok(Progress {
        steps: decode_steps(steps)
            .map_err(|error| StoreError::corrupt(RecordError::Steps(error)))?,
        suspensions: u32::from_be_bytes(*suspensions),
    })
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
}
