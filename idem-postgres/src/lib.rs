//! [`PostgresStore`]: durable records, shared by every instance, and completed in the same
//! transaction as the handler's own writes (see [docs/contract.md](https://github.com/idem-rs/idem/blob/main/docs/contract.md), *Stores*).
//!
//! ```no_run
//! use std::time::Duration;
//! use axum::{Router, routing::post};
//! use idem::{Idempotency, IdempotencyLayer, Policy};
//! use idem::postgres::PostgresStore;
//!
//! # async fn create_payment() {}
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let store = PostgresStore::connect("postgres://app@db.internal/app").await?;
//! store.migrate().await?; // or run migrations/001_idempotency_records.sql yourself
//! let sweeper = store.spawn_sweeper(Duration::from_secs(300));
//!
//! let idem = Idempotency::new(store);
//! let app: Router = Router::new()
//!     .route("/payments", post(create_payment))
//!     .route_layer(IdempotencyLayer::new(idem, Policy::new()));
//! # drop((app, sweeper)); Ok(()) }
//! ```
//!
//! The full guide, with the reasoning behind each choice, the comparison with Brandur Leach's
//! "Implementing Stripe-like Idempotency Keys in Postgres" and measured figures, is
//! [docs/postgres.md](https://github.com/idem-rs/idem/blob/main/docs/postgres.md) in the repository.
//!
//! # The table
//!
//! One row per store key, created by [`migrate`](PostgresStore::migrate) (or by the SQL file
//! `migrations/001_idempotency_records.sql`, the same text; see [`migration_sql`]).
//! The name is `idempotency_records` unless set with
//! [`PostgresStoreBuilder::table`]; it may be schema-qualified.
//!
//! | column | type | |
//! | --- | --- | --- |
//! | `key` | `bytea` primary key | the 32-byte [`StoreKey`] |
//! | `fingerprint` | `bytea` | [`Fingerprint::to_bytes`](idem_core::fingerprint::Fingerprint::to_bytes) |
//! | `state` | `text` | `in_flight` or `completed` |
//! | `lease_token`, `lease_expires_at` | `bytea`, `timestamptz` | the holder of an in-flight record (the token stays once it is completed: the holder's repeated completion answers `Ok`) |
//! | `expires_at` | `timestamptz`, indexed | when the record is forgotten |
//! | `response_status`, `response_format`, `response` | `smallint`, `smallint`, `bytea` | the stored response |
//! | `created_at`, `updated_at` | `timestamptz` | |
//!
//! The response is kept as [`StoredResponse::as_bytes`](idem_core::replay::StoredResponse::as_bytes)'s
//! versioned bytes rather than as status, headers and body columns: that encoding keeps every
//! header value byte for byte and in order (a `jsonb` of headers would not: header values need
//! not be UTF-8), it is read back in one column, and `response_format` names its version so a
//! later format can be told apart in SQL. The status is repeated in `response_status` for
//! your own queries.
//!
//! # The claim: one statement
//!
//! A claim is one `INSERT ... ON CONFLICT (key) DO UPDATE ... WHERE ...` statement, in its own
//! transaction, so it is visible to every instance as soon as it returns (store rule 2):
//!
//! - A CTE first reads the existing row in the statement's snapshot, without locking it. If
//!   that row is live and may not be replaced (completed, or in flight under a live lease, or
//!   claimed with another fingerprint) the statement inserts nothing and returns the row:
//!   replays, `409`s and `422`s are plain reads, with no row lock and no write.
//! - Otherwise it inserts. Of concurrent inserts of one key, PostgreSQL's unique index lets one
//!   win; the others take the `ON CONFLICT` branch, whose `WHERE` (the record expired, or its
//!   lease lapsed and the fingerprint is the same) is checked against the latest committed
//!   version of the row, under its lock. So at most one claim wins (store rule 1), and a lapsed
//!   lease is taken over by exactly one claim, with a fresh token (rule 4).
//! - A snapshot can be older than the row that caused the conflict (READ COMMITTED takes it
//!   when the statement starts). Then the statement answers no row, or a row it found
//!   replaceable but did not replace; the store runs it again, and the fresh snapshot sees the
//!   winner. This happens only when claims of one key race, and each rerun needs another
//!   concurrent change; after 5 attempts the claim fails with an error rather than guess.
//!
//! Completion, renewal and release are single statements fenced by `key`, `lease_token` and
//! `state = 'in_flight'` (rule 5); zero rows answer [`StoreError::LeaseLost`]. An operator's
//! look-up is one `SELECT` of the row's state and times (and the first bytes of its response,
//! never the rest), its removal one `DELETE` of the row whatever holds it (rules 14 and 15). Time is the
//! database's (`clock_timestamp()`), so all instances agree on leases and TTLs.
//!
//! # Transactional mode
//!
//! [`Store::begin`] opens a transaction on the pool; the [`Tx`](idem_core::extract::Tx)
//! extractor hands it to the handler, beginning it on first use. The runtime then completes
//! the record inside it (the same fenced `UPDATE`) and commits: the handler's rows and the
//! record commit together, or neither does. If the lease was taken over meanwhile, the update
//! finds no row, the transaction rolls back and the request answers 409. A failed handler
//! (5xx, [`NoStore`](idem_core::replay::NoStore), panic) rolls back and releases the key. A handler that
//! answers after one of its statements failed (which aborts the transaction) has its answer
//! stored on its own, without its writes, which could only roll back.
//!
//! # Timeouts
//!
//! [`connect`](PostgresStore::connect) builds a pool whose connections set `lock_timeout`
//! (2 s) and `statement_timeout` (5 s), so no statement, the handler's included, waits for a
//! row lock for long, and whose acquire timeout (2 s) makes an exhausted pool fail promptly.
//! Change them on the [builder](PostgresStoreBuilder), which also sets the pool's size and
//! whether it pings a connection before each use. A pool of your own, given to
//! [`PostgresStore::new`], keeps its own settings.
//!
//! # Failures
//!
//! Every database error is a [`StoreError`] other than `LeaseLost`, and the runtime answers
//! 503 Problem Details (or runs without a record, as the policy says). Nothing is guessed:
//! after a lost connection the pool reconnects on the next request.

mod look_up;
mod migrate;
mod sql;
mod sweep;
mod table;
mod transaction;

use std::{fmt, sync::Arc, time::Duration};

use async_trait::async_trait;
use sqlx::{
    PgPool, Row,
    postgres::{PgConnectOptions, PgPoolOptions, PgRow},
};

use self::sql::{RESPONSE_FORMAT, Statements};
pub use self::{
    migrate::{migrate, migration_files, migration_sql},
    table::{TableName, TableNameError},
    transaction::PostgresTransaction,
};
/// The sweeper's pace and handle, shared by the stores that sweep ([`idem_core::store::sweep`]).
pub use idem_core::store::sweep::{SweepPace, SweepPaceError, SweeperHandle};
use idem_core::store::{
    Claim, ClaimOutcome, ConnectError, LeaseToken, Store, StoreError, StoreTransaction,
    held::{Held, RecordState},
    operation::{DueOperation, KeptRequest, Progress, RecordedStep, StepSupport, decode_steps},
};
use idem_core::{fingerprint::Fingerprint, replay::StoredResponse, scope::StoreKey};

/// The store's name in a [`ConnectError`].
const POSTGRESQL: &str = "PostgreSQL";

/// How many times a claim runs when its snapshot keeps missing concurrent changes.
const CLAIM_ATTEMPTS: u32 = 5;

/// Idempotency records in a PostgreSQL table. Cheap to clone; clones share the pool.
///
/// See the [module docs](self) for the table, the statements and transactional mode.
///
/// ```no_run
/// use idem::{Idempotency, postgres::PostgresStore};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let store = PostgresStore::connect("postgres://localhost/app").await?;
/// store.migrate().await?;
/// let idem = Idempotency::new(store.clone());
/// // The same pool serves the application's own queries.
/// let users: i64 = sqlx::query_scalar("SELECT count(*) FROM users")
///     .fetch_one(store.pool())
///     .await?;
/// # drop((idem, users)); Ok(()) }
/// ```
#[derive(Clone)]
pub struct PostgresStore {
    shared: Arc<Shared>,
}

/// What the store's clones share: the pool, and the statements written for its table.
struct Shared {
    pool: PgPool,
    table: TableName,
    statements: Arc<Statements>,
}

impl PostgresStore {
    /// The `lock_timeout` of [`connect`](Self::connect)'s connections: 2 seconds.
    pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(2);
    /// The `statement_timeout` of [`connect`](Self::connect)'s connections: 5 seconds.
    pub const DEFAULT_STATEMENT_TIMEOUT: Duration = Duration::from_secs(5);
    /// How long [`connect`](Self::connect)'s pool waits for a free connection: 2 seconds.
    pub const DEFAULT_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(2);
    /// The size of [`connect`](Self::connect)'s pool: 10 connections.
    pub const DEFAULT_MAX_CONNECTIONS: u32 = 10;

    /// A store on `pool`, in the table `idempotency_records`. The pool keeps its own settings:
    /// see [the timeouts](self#timeouts).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), sqlx::Error> {
    /// let pool = sqlx::PgPool::connect("postgres://localhost/app").await?;
    /// let store = idem::postgres::PostgresStore::new(pool);
    /// # drop(store); Ok(()) }
    /// ```
    pub fn new(pool: PgPool) -> Self {
        Self::builder().build(pool)
    }

    /// Connects to `url` with the default settings, in the table `idempotency_records`.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), idem::store::ConnectError> {
    /// let store = idem::postgres::PostgresStore::connect("postgres://localhost/app").await?;
    /// # drop(store); Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// A [`ConnectError`] that names PostgreSQL and where it was looked for (never the
    /// password) when the URL is not one or the database cannot be reached.
    pub async fn connect(url: &str) -> Result<Self, ConnectError> {
        Self::builder().connect(url).await
    }

    /// A builder, to set the table name and the connection settings.
    pub fn builder() -> PostgresStoreBuilder {
        PostgresStoreBuilder {
            table: TableName::default(),
            lock_timeout: Self::DEFAULT_LOCK_TIMEOUT,
            statement_timeout: Self::DEFAULT_STATEMENT_TIMEOUT,
            acquire_timeout: Self::DEFAULT_ACQUIRE_TIMEOUT,
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
            test_before_acquire: true,
        }
    }

    /// The pool, for queries of the application's own.
    pub fn pool(&self) -> &PgPool {
        &self.shared.pool
    }

    /// The records table.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = idem::postgres::PostgresStore::builder()
    ///     .table("billing.idempotency_records")?
    ///     .connect("postgres://localhost/app")
    ///     .await?;
    /// assert_eq!(store.table().as_str(), "billing.idempotency_records");
    /// # Ok(()) }
    /// ```
    pub fn table(&self) -> &TableName {
        &self.shared.table
    }

    /// Creates the records table and its index if they do not exist (see [`migrate()`]).
    ///
    /// ```no_run
    /// # async fn run(store: idem::postgres::PostgresStore) -> Result<(), idem::store::StoreError> {
    /// store.migrate().await?;
    /// # Ok(()) }
    /// ```
    pub async fn migrate(&self) -> Result<(), StoreError> {
        migrate(&self.shared.pool, &self.shared.table).await
    }

    fn error(&self, error: sqlx::Error) -> StoreError {
        self::error(&self.shared.pool, error)
    }

    /// Runs the claim statement once; `None` when its snapshot was stale.
    async fn try_claim(&self, claim: &Claim<'_>) -> Result<Option<ClaimOutcome>, StoreError> {
        let row = self
            .shared
            .statements
            .claim(claim)
            .fetch_optional(&self.shared.pool)
            .await
            .map_err(|e| self.error(e))?;
        let Some(row) = row else {
            return Ok(None);
        };
        match read_claim(&row) {
            Ok(outcome) => Ok(outcome),
            Err(ReadError::Sql(e)) => Err(self.error(e)),
            Err(ReadError::Corrupt(e)) => Err(e),
            Err(ReadError::CorruptSteps(e)) => {
                // The claim took the key over before its steps were found unreadable. Its
                // lease ends at once, so that the record stays as it is, for whoever reads it
                // next (and gets the same error), rather than blocked for a lease.
                let _ = self
                    .shared
                    .statements
                    .suspend(claim.key, claim.token, None)
                    .execute(&self.shared.pool)
                    .await;
                Err(e)
            }
        }
    }
}

enum ReadError {
    Sql(sqlx::Error),
    Corrupt(StoreError),
    /// A claim that took over an operation whose recorded steps do not decode.
    CorruptSteps(StoreError),
}

impl From<sqlx::Error> for ReadError {
    fn from(error: sqlx::Error) -> Self {
        Self::Sql(error)
    }
}

/// The outcome of one run of the claim statement, from its row.
fn read_claim(row: &PgRow) -> Result<Option<ClaimOutcome>, ReadError> {
    if row.try_get::<bool, _>("claimed")? {
        let step_count: i32 = row.try_get("step_count")?;
        let suspensions: i32 = row.try_get("suspensions")?;
        if step_count == 0 && suspensions == 0 {
            return Ok(Some(ClaimOutcome::Claimed));
        }
        let steps: Option<Vec<u8>> = row.try_get("steps")?;
        let steps = decode_steps(steps.as_deref().unwrap_or_default())
            .map_err(|e| ReadError::CorruptSteps(StoreError::corrupt(e)))?;
        if steps.len() != usize::try_from(step_count).unwrap_or(usize::MAX) {
            return Err(ReadError::CorruptSteps(StoreError::corrupt(format!(
                "the record counts {step_count} steps and holds {}",
                steps.len()
            ))));
        }
        return Ok(Some(ClaimOutcome::Resumed(Progress {
            steps,
            suspensions: u32::try_from(suspensions).unwrap_or(0),
        })));
    }
    if row.try_get::<bool, _>("replaceable")? {
        // The snapshot showed a record this claim may replace, and the locked row was not
        // replaced: another claim changed it first.
        return Ok(None);
    }
    if !row.try_get::<bool, _>("same_fingerprint")? {
        let stored: Vec<u8> = row.try_get("fingerprint")?;
        return Ok(Some(ClaimOutcome::Mismatch {
            stored_algorithm: Fingerprint::from_bytes(&stored).map(|f| f.algorithm()),
        }));
    }
    let state: String = row.try_get("state")?;
    match state.as_str() {
        "in_flight" => Ok(Some(ClaimOutcome::InFlight)),
        "completed" => {
            let format: i16 = row.try_get("response_format")?;
            if format != RESPONSE_FORMAT {
                return Err(ReadError::Corrupt(StoreError::corrupt(format!(
                    "unknown response format {format}"
                ))));
            }
            let bytes: Vec<u8> = row.try_get("response")?;
            let response = StoredResponse::decode(&bytes)
                .map_err(|e| ReadError::Corrupt(StoreError::corrupt(e)))?;
            Ok(Some(ClaimOutcome::Completed(response)))
        }
        other => Err(ReadError::Corrupt(StoreError::corrupt(format!(
            "unknown record state {other:?}"
        )))),
    }
}

/// A database error as a store error: a pool that had no connection to give in time is a
/// timeout, anything else a backend failure. Neither says what happened to the statement.
fn error(pool: &PgPool, error: sqlx::Error) -> StoreError {
    match error {
        sqlx::Error::PoolTimedOut => StoreError::Timeout(pool.options().get_acquire_timeout()),
        other => StoreError::backend(other),
    }
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("table", &self.shared.table)
            .field("pool_size", &self.shared.pool.size())
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Store for PostgresStore {
    async fn claim(&self, claim: Claim<'_>) -> Result<ClaimOutcome, StoreError> {
        for _ in 0..CLAIM_ATTEMPTS {
            if let Some(outcome) = self.try_claim(&claim).await? {
                return Ok(outcome);
            }
        }
        Err(StoreError::backend(format!(
            "the claim raced with concurrent changes of its record {CLAIM_ATTEMPTS} times"
        )))
    }

    async fn complete(
        &self,
        key: &StoreKey,
        token: LeaseToken,
        response: &StoredResponse,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let done: bool = self
            .shared
            .statements
            .complete(key, token, response, ttl)
            .fetch_one(&self.shared.pool)
            .await
            .and_then(|row| row.try_get("done"))
            .map_err(|e| self.error(e))?;
        completed(done)
    }

    async fn release(&self, key: &StoreKey, token: LeaseToken) -> Result<(), StoreError> {
        let done = self
            .shared
            .statements
            .release(key, token)
            .execute(&self.shared.pool)
            .await
            .map_err(|e| self.error(e))?;
        fenced(done.rows_affected())
    }

    async fn renew(
        &self,
        key: &StoreKey,
        token: LeaseToken,
        lease: Duration,
    ) -> Result<(), StoreError> {
        let done = self
            .shared
            .statements
            .renew(key, token, lease)
            .execute(&self.shared.pool)
            .await
            .map_err(|e| self.error(e))?;
        fenced(done.rows_affected())
    }

    async fn begin(&self) -> Result<Box<dyn StoreTransaction>, StoreError> {
        let transaction = self.shared.pool.begin().await.map_err(|e| self.error(e))?;
        Ok(Box::new(PostgresTransaction::new(
            transaction,
            self.shared.pool.clone(),
            Arc::clone(&self.shared.statements),
        )))
    }

    /// Steps and the requests of resumable routes are columns of the record: every instance
    /// resumes, after a crash too.
    fn step_support(&self) -> StepSupport {
        StepSupport::Durable
    }

    async fn record_step(
        &self,
        key: &StoreKey,
        token: LeaseToken,
        index: usize,
        step: &RecordedStep,
    ) -> Result<(), StoreError> {
        let done: bool = self
            .shared
            .statements
            .record_step(key, token, index, step)
            .fetch_one(&self.shared.pool)
            .await
            .and_then(|row| row.try_get("done"))
            .map_err(|e| self.error(e))?;
        completed(done)
    }

    async fn suspend(
        &self,
        key: &StoreKey,
        token: LeaseToken,
        resume_in: Option<Duration>,
    ) -> Result<(), StoreError> {
        let done = self
            .shared
            .statements
            .suspend(key, token, resume_in)
            .execute(&self.shared.pool)
            .await
            .map_err(|e| self.error(e))?;
        fenced(done.rows_affected())
    }

    async fn due(&self, limit: usize, hold: Duration) -> Result<Vec<DueOperation>, StoreError> {
        let rows = self
            .shared
            .statements
            .due(limit, hold)
            .fetch_all(&self.shared.pool)
            .await
            .map_err(|e| self.error(e))?;
        rows.iter()
            .map(|row| {
                let key: Vec<u8> = row.try_get("key")?;
                let request: Vec<u8> = row.try_get("request")?;
                let suspensions: i32 = row.try_get("suspensions")?;
                Ok(DueOperation {
                    key: StoreKey::from_bytes(key.try_into().unwrap_or([0; 32])),
                    request: KeptRequest::decode(&request),
                    suspensions: u32::try_from(suspensions).unwrap_or(0),
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(|e| self.error(e))
    }

    async fn look_up(&self, key: &StoreKey) -> Result<Option<Held>, StoreError> {
        let row = self
            .shared
            .statements
            .look_up(key)
            .fetch_optional(&self.shared.pool)
            .await
            .map_err(|e| self.error(e))?;
        row.as_ref()
            .map(look_up::read_held)
            .transpose()
            .map_err(|e| match e {
                ReadError::Sql(e) => self.error(e),
                ReadError::Corrupt(e) | ReadError::CorruptSteps(e) => e,
            })
    }

    async fn remove(&self, key: &StoreKey) -> Result<Option<RecordState>, StoreError> {
        let row = self
            .shared
            .statements
            .remove(key)
            .fetch_optional(&self.shared.pool)
            .await
            .map_err(|e| self.error(e))?;
        let Some(row) = row else {
            return Ok(None);
        };
        let read = || -> Result<Option<RecordState>, sqlx::Error> {
            if !row.try_get::<bool, _>("live")? {
                return Ok(None);
            }
            let state: String = row.try_get("state")?;
            Ok(Some(match state.as_str() {
                "in_flight" => RecordState::InFlight,
                "completed" => RecordState::Completed,
                _ => RecordState::Unreadable,
            }))
        };
        read().map_err(|e| self.error(e))
    }
}

/// The answer of the completion statement: done, or fenced.
fn completed(done: bool) -> Result<(), StoreError> {
    if done {
        Ok(())
    } else {
        Err(StoreError::LeaseLost)
    }
}

fn fenced(rows: u64) -> Result<(), StoreError> {
    if rows == 1 {
        Ok(())
    } else {
        Err(StoreError::LeaseLost)
    }
}

/// Configures a [`PostgresStore`]: the table, and the settings of the pool that
/// [`connect`](Self::connect) builds.
///
/// ```no_run
/// use std::time::Duration;
/// use idem::postgres::PostgresStore;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let store = PostgresStore::builder()
///     .table("billing.idempotency_records")?
///     .lock_timeout(Duration::from_millis(500))
///     .statement_timeout(Duration::from_secs(10))
///     .acquire_timeout(Duration::from_secs(1))
///     .max_connections(20)
///     .connect("postgres://app@db.internal/app")
///     .await?;
/// # drop(store); Ok(()) }
/// ```
#[derive(Clone, Debug)]
#[must_use]
pub struct PostgresStoreBuilder {
    table: TableName,
    lock_timeout: Duration,
    statement_timeout: Duration,
    acquire_timeout: Duration,
    max_connections: u32,
    test_before_acquire: bool,
}

impl PostgresStoreBuilder {
    /// The records table: `table` or `schema.table`, plain lowercase identifiers
    /// (`idempotency_records` by default). See [`TableName`].
    pub fn table(mut self, name: &str) -> Result<Self, TableNameError> {
        self.table = TableName::new(name)?;
        Ok(self)
    }

    /// The records table, already checked.
    pub fn table_name(mut self, name: TableName) -> Self {
        self.table = name;
        self
    }

    /// How long a statement on the pool's connections waits for a row lock before it fails
    /// (`lock_timeout`; 2 s by default, zero for no limit). Applies to the handler's queries
    /// in its transaction as well.
    pub fn lock_timeout(mut self, timeout: Duration) -> Self {
        self.lock_timeout = timeout;
        self
    }

    /// How long a statement on the pool's connections may run (`statement_timeout`; 5 s by
    /// default, zero for no limit). Applies to the handler's queries in its transaction too.
    pub fn statement_timeout(mut self, timeout: Duration) -> Self {
        self.statement_timeout = timeout;
        self
    }

    /// How long a request waits for a free connection of the pool before it answers 503
    /// (2 s by default). Keep it under the runtime's store timeout (5 s by default).
    pub fn acquire_timeout(mut self, timeout: Duration) -> Self {
        self.acquire_timeout = timeout;
        self
    }

    /// The most connections the pool opens (10 by default). A transactional handler holds
    /// one for as long as it runs.
    pub fn max_connections(mut self, connections: u32) -> Self {
        self.max_connections = connections.max(1);
        self
    }

    /// Whether the pool pings a connection before each use (yes by default, as sqlx does).
    ///
    /// The ping is one more round trip on every store call. It lets the pool replace a
    /// connection that died while idle (the database restarted, a proxy dropped it) before a
    /// request uses it; without it, each such connection fails one request (503) and is then
    /// discarded. See [docs/postgres.md](https://github.com/idem-rs/idem/blob/main/docs/postgres.md) for what it costs.
    pub fn test_before_acquire(mut self, test: bool) -> Self {
        self.test_before_acquire = test;
        self
    }

    /// Connects to `url` and builds the store.
    ///
    /// # Errors
    ///
    /// A [`ConnectError`] that names PostgreSQL and where it was looked for (never the
    /// password) when the URL is not one or the database cannot be reached.
    pub async fn connect(self, url: &str) -> Result<PostgresStore, ConnectError> {
        let options: PgConnectOptions = url
            .parse()
            .map_err(|error| ConnectError::for_url(POSTGRESQL, url, error))?;
        self.connect_with(options).await
    }

    /// Connects with `options` (the settings of this builder are added to them) and builds
    /// the store. The first connection is opened now, so a wrong address fails here.
    ///
    /// # Errors
    ///
    /// A [`ConnectError`] that names PostgreSQL and where it was looked for when the database
    /// cannot be reached.
    pub async fn connect_with(
        self,
        options: PgConnectOptions,
    ) -> Result<PostgresStore, ConnectError> {
        // The host (or socket folder), port and database: never the user or the password.
        let at = format!(
            "{}:{}/{}",
            options.get_host(),
            options.get_port(),
            options.get_database().unwrap_or_default()
        );
        let options = options.options([
            ("lock_timeout", millis(self.lock_timeout)),
            ("statement_timeout", millis(self.statement_timeout)),
        ]);
        let pool = PgPoolOptions::new()
            .max_connections(self.max_connections)
            .acquire_timeout(self.acquire_timeout)
            .test_before_acquire(self.test_before_acquire)
            .connect_with(options)
            .await
            .map_err(|error| ConnectError::new(POSTGRESQL, at, error))?;
        Ok(self.build(pool))
    }

    /// Builds the store on a pool of your own, which keeps its settings.
    pub fn build(self, pool: PgPool) -> PostgresStore {
        PostgresStore {
            shared: Arc::new(Shared {
                statements: Arc::new(Statements::new(&self.table)),
                pool,
                table: self.table,
            }),
        }
    }
}

/// A duration as a PostgreSQL setting, in whole milliseconds (rounded up).
fn millis(duration: Duration) -> String {
    format!("{}ms", duration.as_nanos().div_ceil(1_000_000))
}
