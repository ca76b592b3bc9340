//! [`MySqlStore`]: durable records on MySQL or MariaDB, shared by every instance, and
//! completed in the same transaction as the handler's own writes (see docs/contract.md,
//! *Stores*).
//!
//! ```no_run
//! use std::time::Duration;
//! use axum::{Router, routing::post};
//! use idem::{Idempotency, IdempotencyLayer, Policy};
//! use idem::mysql::MySqlStore;
//!
//! # async fn create_payment() {}
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let store = MySqlStore::connect("mysql://app@db.internal/app").await?;
//! store.migrate().await?; // or run migrations/*.sql yourself
//! let sweeper = store.spawn_sweeper(Duration::from_secs(300));
//!
//! let idem = Idempotency::new(store);
//! let app: Router = Router::new()
//!     .route("/payments", post(create_payment))
//!     .layer(IdempotencyLayer::new(idem, Policy::new()));
//! # drop((app, sweeper)); Ok(()) }
//! ```
//!
//! MySQL 8.0 and MariaDB 10.6 or later (`SKIP LOCKED`), with InnoDB. The full guide, with
//! the statements and why, the isolation level, the differences between MySQL and MariaDB and
//! measured figures, is `docs/mysql.md` in the repository.
//!
//! # The table
//!
//! One row per store key, created by [`migrate`](MySqlStore::migrate) (or by the SQL files
//! in `migrations/`, the same text; see [`migration_files`]). The name is
//! `idempotency_records` unless set with [`MySqlStoreBuilder::table`]; it may name its
//! database.
//!
//! | column | type | |
//! | --- | --- | --- |
//! | `store_key` | `BINARY(32)` primary key | the 32-byte [`StoreKey`] |
//! | `fingerprint` | `VARBINARY(64)` | [`Fingerprint::to_bytes`](idem_core::fingerprint::Fingerprint::to_bytes) |
//! | `state` | `VARCHAR(9)`, ASCII | `in_flight` or `completed` |
//! | `lease_token`, `lease_expires_at` | `BINARY(16)`, `DATETIME(6)` | the holder of an in-flight record (the token stays once it is completed: the holder's repeated completion answers `Ok`) |
//! | `expires_at` | `DATETIME(6)`, indexed | when the record is forgotten |
//! | `response_status`, `response_format`, `response` | `SMALLINT UNSIGNED`, `SMALLINT`, `LONGBLOB` | the stored response |
//! | `created_at`, `updated_at` | `DATETIME(6)` | |
//!
//! Times are UTC to the microsecond, written and compared by the server
//! (`UTC_TIMESTAMP(6)`), so neither a session's `time_zone` nor the clocks of the instances
//! move a lease. Every column the store reads is binary or ASCII, so no character set
//! (`utf8mb3` or `utf8mb4`, the connection's or the table's) changes a byte of a record.
//!
//! # The claim
//!
//! A consistent read of the record, which locks nothing, answers every key that is held
//! (replay, 409, 422). A free key is claimed by a plain `INSERT`, which the primary key lets
//! one of any number of concurrent claims win (store rule 1); a record that may be taken over
//! (expired, or a lapsed lease with the same fingerprint) by an `UPDATE` of its primary key,
//! checked under the row's lock (rule 4). Each statement commits on its own, so a claim is
//! visible to every instance as soon as it returns (rule 2). A write that finds the key
//! changed since the read (a duplicate key, no row matched, a deadlock) reads again.
//!
//! Completion, renewal and release are single statements fenced by `store_key`,
//! `lease_token` and `state = 'in_flight'` (rule 5); zero rows answer
//! [`StoreError::LeaseLost`]. An operator's look-up is one `SELECT` of the row's state and
//! times (and the first bytes of its response, never the rest), its removal a `DELETE` of the
//! row under its lock, whatever holds it (rules 14 and 15).
//!
//! # Transactional mode
//!
//! [`Store::begin`] opens a transaction on the pool; the [`Tx`](idem_core::extract::Tx)
//! extractor hands its `sqlx::MySqlConnection` to the handler, beginning it
//! on first use. The runtime then completes the record inside it (the same fenced `UPDATE`)
//! and commits: the handler's rows and the record commit together, or neither does. If the
//! lease was taken over meanwhile, the update matches no row, the transaction rolls back and
//! the request answers 409. A failed handler (5xx, [`NoStore`](idem_core::replay::NoStore),
//! panic) rolls back and releases the key. A deadlock or a lock wait timeout at the completion
//! rolls everything back, known to have done nothing: the key is released and the request
//! answered 503.
//!
//! # Timeouts
//!
//! [`connect`](MySqlStore::connect) builds a pool whose sessions set
//! `innodb_lock_wait_timeout` (2 s) and a statement timeout (5 s: `max_statement_time` on
//! MariaDB, `max_execution_time` on MySQL, where it bounds only `SELECT`s), so no statement,
//! the handler's included, waits for a row lock for long, and whose acquire timeout (2 s)
//! makes an exhausted pool fail promptly. Change them on the [builder](MySqlStoreBuilder). A
//! pool of your own, given to [`MySqlStore::new`], keeps its own settings.
//!
//! # Failures
//!
//! Every database error is a [`StoreError`] other than `LeaseLost`, and the runtime answers
//! 503 Problem Details (or runs without a record, as the policy says). Nothing is guessed:
//! after a lost connection the pool reconnects on the next request.

mod claim;
mod errors;
mod look_up;
mod migrate;
mod packet;
mod session;
mod sql;
mod sweep;
mod table;
mod transaction;

use std::{fmt, sync::Arc, time::Duration};

use async_trait::async_trait;
use sqlx::{Connection, MySql, MySqlConnection, MySqlPool, Row, Transaction};

use self::{claim::CLAIM_ATTEMPTS, errors::store_error, packet::Packet, sql::Statements};
pub use self::{
    migrate::{migrate, migration_files, migration_sql},
    session::MySqlStoreBuilder,
    table::{TableName, TableNameError},
    transaction::MySqlTransaction,
};
/// The sweeper's pace and handle, shared by the stores that sweep ([`idem_core::store::sweep`]).
pub use idem_core::store::sweep::{SweepPace, SweepPaceError, SweeperHandle};
use idem_core::store::{
    Claim, ClaimOutcome, LeaseToken, Store, StoreError, StoreTransaction,
    held::{Held, RecordState},
    operation::{DueOperation, KeptRequest, RecordedStep, StepSupport},
};
use idem_core::{replay::StoredResponse, scope::StoreKey};

/// Idempotency records in a MySQL or MariaDB table. Cheap to clone; clones share the pool.
///
/// See the [module docs](self) for the table, the statements and transactional mode.
///
/// ```no_run
/// use idem::{Idempotency, mysql::MySqlStore};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let store = MySqlStore::connect("mysql://app@localhost/app").await?;
/// store.migrate().await?;
/// let idem = Idempotency::new(store.clone());
/// // The same pool serves the application's own queries.
/// let users: i64 = sqlx::query_scalar("SELECT count(*) FROM users")
///     .fetch_one(store.pool())
///     .await?;
/// # drop((idem, users)); Ok(()) }
/// ```
#[derive(Clone)]
pub struct MySqlStore {
    shared: Arc<Shared>,
}

/// What the store's clones share: the pool, the statements written for its table, and the
/// server's packet limit once it is known.
struct Shared {
    pool: MySqlPool,
    table: TableName,
    statements: Arc<Statements>,
    packet: Arc<Packet>,
}

impl MySqlStore {
    /// The `innodb_lock_wait_timeout` of [`connect`](Self::connect)'s sessions: 2 seconds.
    pub const DEFAULT_LOCK_WAIT_TIMEOUT: Duration = Duration::from_secs(2);
    /// The statement timeout of [`connect`](Self::connect)'s sessions: 5 seconds.
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
    /// let pool = sqlx::MySqlPool::connect("mysql://app@localhost/app").await?;
    /// let store = idem::mysql::MySqlStore::new(pool);
    /// # drop(store); Ok(()) }
    /// ```
    pub fn new(pool: MySqlPool) -> Self {
        Self::builder().build(pool)
    }

    /// Connects to `url` with the default settings, in the table `idempotency_records`.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), idem::store::ConnectError> {
    /// let store = idem::mysql::MySqlStore::connect("mysql://app@localhost/app").await?;
    /// # drop(store); Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// A [`ConnectError`](idem_core::store::ConnectError) that names MySQL and where it was
    /// looked for, never the password.
    pub async fn connect(url: &str) -> Result<Self, idem_core::store::ConnectError> {
        Self::builder().connect(url).await
    }

    /// A builder, to set the table name and the connection settings.
    pub fn builder() -> MySqlStoreBuilder {
        MySqlStoreBuilder::new()
    }

    pub(crate) fn from_parts(pool: MySqlPool, table: TableName) -> Self {
        Self {
            shared: Arc::new(Shared {
                statements: Arc::new(Statements::new(&table)),
                packet: Arc::default(),
                pool,
                table,
            }),
        }
    }

    /// The pool, for queries of the application's own.
    pub fn pool(&self) -> &MySqlPool {
        &self.shared.pool
    }

    /// The records table.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = idem::mysql::MySqlStore::builder()
    ///     .table("billing.idempotency_records")?
    ///     .connect("mysql://app@localhost/app")
    ///     .await?;
    /// assert_eq!(store.table().as_str(), "billing.idempotency_records");
    /// # Ok(()) }
    /// ```
    pub fn table(&self) -> &TableName {
        &self.shared.table
    }

    /// Creates the records table if it does not exist, and adds what it lacks of later
    /// migrations (see [`migrate()`]).
    ///
    /// ```no_run
    /// # async fn run(store: idem::mysql::MySqlStore) -> Result<(), idem::store::StoreError> {
    /// store.migrate().await?;
    /// # Ok(()) }
    /// ```
    pub async fn migrate(&self) -> Result<(), StoreError> {
        migrate(&self.shared.pool, &self.shared.table).await
    }

    pub(crate) fn error(&self, error: sqlx::Error) -> StoreError {
        store_error(&self.shared.pool, error)
    }

    /// Runs `statement`'s fenced write and answers whether it changed the record; when it did
    /// not, `check` says whether the holder's own earlier write had (its answer was lost).
    async fn fenced(
        &self,
        statement: sql::Statement,
        check: Option<sqlx::query::QueryScalar<'static, MySql, i64, sqlx::mysql::MySqlArguments>>,
    ) -> Result<(), StoreError> {
        let pool = &self.shared.pool;
        let done = statement.execute(pool).await.map_err(|e| self.error(e))?;
        if done.rows_affected() == 1 {
            return Ok(());
        }
        let Some(check) = check else {
            return Err(StoreError::LeaseLost);
        };
        match check.fetch_one(pool).await.map_err(|e| self.error(e))? {
            0 => Err(StoreError::LeaseLost),
            _ => Ok(()),
        }
    }
}

/// A transaction at READ COMMITTED on `conn`, for the statements that lock the rows they read
/// (the sweeper's, the resumer's, a removal's): at READ COMMITTED InnoDB locks the rows
/// found and no gaps between them, so no claim's insert waits for them.
pub(crate) async fn read_committed(
    conn: &mut MySqlConnection,
) -> Result<Transaction<'_, MySql>, sqlx::Error> {
    sqlx::raw_sql("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
        .execute(&mut *conn)
        .await?;
    conn.begin().await
}

impl fmt::Debug for MySqlStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MySqlStore")
            .field("table", &self.shared.table)
            .field("pool_size", &self.shared.pool.size())
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Store for MySqlStore {
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
        let statements = &self.shared.statements;
        let pool = &self.shared.pool;
        let kept = self.shared.packet.fit(pool, pool, response).await?;
        let update = statements.complete(key, token, &kept, ttl);
        self.fenced(update, Some(statements.completed(key, token)))
            .await
    }

    async fn release(&self, key: &StoreKey, token: LeaseToken) -> Result<(), StoreError> {
        self.fenced(self.shared.statements.release(key, token), None)
            .await
    }

    async fn renew(
        &self,
        key: &StoreKey,
        token: LeaseToken,
        lease: Duration,
    ) -> Result<(), StoreError> {
        self.fenced(self.shared.statements.renew(key, token, lease), None)
            .await
    }

    async fn begin(&self) -> Result<Box<dyn StoreTransaction>, StoreError> {
        let transaction = self.shared.pool.begin().await.map_err(|e| self.error(e))?;
        Ok(Box::new(MySqlTransaction::new(
            transaction,
            self.shared.pool.clone(),
            Arc::clone(&self.shared.statements),
            Arc::clone(&self.shared.packet),
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
        let statements = &self.shared.statements;
        let update = statements.record_step(key, token, index, step);
        self.fenced(update, Some(statements.step_recorded(key, token, index)))
            .await
    }

    async fn suspend(
        &self,
        key: &StoreKey,
        token: LeaseToken,
        resume_in: Option<Duration>,
    ) -> Result<(), StoreError> {
        let update = self.shared.statements.suspend(key, token, resume_in);
        self.fenced(update, None).await
    }

    async fn due(&self, limit: usize, hold: Duration) -> Result<Vec<DueOperation>, StoreError> {
        self.due_operations(limit, hold)
            .await
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
                claim::ReadError::Sql(e) => self.error(e),
                claim::ReadError::Corrupt(e) => e,
            })
    }

    async fn remove(&self, key: &StoreKey) -> Result<Option<RecordState>, StoreError> {
        self.remove_record(key).await.map_err(|e| self.error(e))
    }
}

impl MySqlStore {
    /// The due operations, chosen and deferred in one transaction at READ COMMITTED.
    async fn due_operations(
        &self,
        limit: usize,
        hold: Duration,
    ) -> Result<Vec<DueOperation>, sqlx::Error> {
        let statements = &self.shared.statements;
        let mut conn = self.shared.pool.acquire().await?;
        let mut transaction = read_committed(&mut conn).await?;
        let rows = statements.due(limit).fetch_all(&mut *transaction).await?;
        let mut keys = Vec::with_capacity(rows.len());
        let mut due = Vec::with_capacity(rows.len());
        for row in &rows {
            let key: Vec<u8> = row.try_get("store_key")?;
            let request: Vec<u8> = row.try_get("request")?;
            let suspensions: i32 = row.try_get("suspensions")?;
            due.push(DueOperation {
                key: StoreKey::from_bytes(key.clone().try_into().unwrap_or([0; 32])),
                request: KeptRequest::decode(&request),
                suspensions: u32::try_from(suspensions).unwrap_or(0),
            });
            keys.push(key);
        }
        if !keys.is_empty() {
            statements
                .defer(&keys, hold)
                .execute(&mut *transaction)
                .await?;
        }
        transaction.commit().await?;
        Ok(due)
    }

    /// Reads the record under its lock, then deletes it: one atomic step for every other call.
    async fn remove_record(&self, key: &StoreKey) -> Result<Option<RecordState>, sqlx::Error> {
        let statements = &self.shared.statements;
        let mut conn = self.shared.pool.acquire().await?;
        let mut transaction = read_committed(&mut conn).await?;
        let Some(row) = statements
            .removing(key)
            .fetch_optional(&mut *transaction)
            .await?
        else {
            transaction.rollback().await?;
            return Ok(None);
        };
        statements.remove(key).execute(&mut *transaction).await?;
        transaction.commit().await?;
        if !row.try_get::<bool, _>("live")? {
            return Ok(None);
        }
        let state: String = row.try_get("state")?;
        Ok(Some(match state.as_str() {
            "in_flight" => RecordState::InFlight,
            "completed" => RecordState::Completed,
            _ => RecordState::Unreadable,
        }))
    }
}
