//! [`SqliteStore`]: durable records in a SQLite file, with no server, completed in the same
//! transaction as the handler's own writes (see docs/contract.md, *Stores*).
//!
//! ```no_run
//! use std::time::Duration;
//! use axum::{Router, routing::post};
//! use idem::{Idempotency, IdempotencyLayer, Policy};
//! use idem::sqlite::SqliteStore;
//!
//! # async fn create_payment() {}
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let store = SqliteStore::connect("sqlite:///var/lib/app/app.db").await?; // created if missing
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
//! For a service of one machine: one process, or a few sharing the file, on a local disk
//! (never a network file system, whose locks SQLite cannot trust). The full guide, with the
//! statements and why, several processes on one file, sizing and when to move to PostgreSQL,
//! is `docs/sqlite.md` in the repository.
//!
//! On sqlx's SQLite driver, with SQLite built from source into the program (sqlx's
//! `sqlite-bundled`): the same version everywhere (3.42 or later is needed, for
//! `unixepoch('subsec')` and `STRICT` tables), nothing to install, and the same sqlx as the
//! PostgreSQL and MySQL stores, whose connections and transactions the `Tx` extractor hands
//! out in the same way. Only this crate turns on sqlx's `sqlite` feature, so a service
//! without it does not compile SQLite's C sources.
//!
//! # The table
//!
//! One row per store key, created by [`migrate`](SqliteStore::migrate) (or by the SQL files
//! in `migrations/`, the same text; see [`migration_files`]). The name is
//! `idempotency_records` unless set with [`SqliteStoreBuilder::table`]. A `STRICT` table:
//!
//! | column | type | |
//! | --- | --- | --- |
//! | `store_key` | `BLOB` primary key | the 32-byte [`StoreKey`] |
//! | `fingerprint` | `BLOB` | [`Fingerprint::to_bytes`](idem_core::fingerprint::Fingerprint::to_bytes) |
//! | `state` | `TEXT` | `in_flight` or `completed` |
//! | `lease_token`, `lease_expires_at` | `BLOB`, `INTEGER` | the holder of an in-flight record (the token stays once it is completed: the holder's repeated completion answers `Ok`) |
//! | `expires_at` | `INTEGER`, indexed | when the record is forgotten |
//! | `response_status`, `response_format`, `response` | `INTEGER`, `INTEGER`, `BLOB` | the stored response |
//! | `created_at`, `updated_at` | `INTEGER` | |
//!
//! Times are microseconds since the Unix epoch, read by each statement from SQLite's clock
//! (to the millisecond), the machine's, which every process on the file shares.
//!
//! # One writer at a time
//!
//! SQLite lets one connection of any process write to a file at a time; in WAL mode, readers
//! read beside the writer and never wait. The store's reads (a replay, a 409, a look-up) take
//! no lock. Its writes (the claim of a free key, the completion, renewal, release) are single
//! statements, each a transaction of its own that holds the write lock for as long as it runs,
//! and a write waits for the lock up to the busy timeout (2 s by default, see
//! [`SqliteStoreBuilder::busy_timeout`]); one that gives up did nothing, and the request
//! answers 503.
//!
//! # The claim
//!
//! A read of the record answers every key that is held (replay, 409, 422). A free key is
//! claimed by an `INSERT ... ON CONFLICT DO NOTHING`, which one of any number of concurrent
//! claims wins (store rule 1); a record that may be taken over (expired, or a lapsed lease
//! with the same fingerprint) by an `UPDATE` of its primary key, checked under the write lock
//! (rule 4). Each statement commits on its own, so a claim is visible to every process as soon
//! as it returns (rule 2). A write that finds the key changed since the read reads again.
//!
//! Completion, renewal and release are single statements fenced by `store_key`,
//! `lease_token` and `state = 'in_flight'` (rule 5); zero rows answer
//! [`StoreError::LeaseLost`]. An operator's look-up is one `SELECT` of the row's state and
//! times (and the first bytes of its response, never the rest), its removal one
//! `DELETE ... RETURNING`, whatever holds the row (rules 14 and 15).
//!
//! # Transactional mode
//!
//! [`Store::begin`] opens a `BEGIN IMMEDIATE` transaction on the pool; the
//! [`Tx`](idem_core::extract::Tx) extractor hands its `sqlx::SqliteConnection` to the handler,
//! beginning it on first use. The runtime then completes the record inside it (the same fenced
//! `UPDATE`) and commits: the handler's rows and the record commit together, or neither does.
//! The transaction holds the file's write lock from its first use to its end, so every other
//! writer waits for it: keep such handlers short. If the lease was taken over meanwhile, the
//! update matches no row, the transaction rolls back and the request answers 409. A failed
//! handler (5xx, [`NoStore`](idem_core::replay::NoStore), panic) rolls back and releases the
//! key.
//!
//! # Durability
//!
//! Every connection runs with `journal_mode = WAL` and `synchronous = FULL`: a commit, the
//! claim's included, is synced to the WAL file before it returns. A process killed at any
//! moment (SIGKILL) loses nothing it acknowledged, and neither does the machine losing power.
//! (`NORMAL` would keep what a killed process acknowledged too, since the WAL is in the
//! operating system's cache, but not what a power cut catches before the next checkpoint.)
//!
//! # Failures
//!
//! Every database error is a [`StoreError`] other than `LeaseLost`, and the runtime answers
//! 503 Problem Details (or runs without a record, as the policy says): a file locked past the
//! busy timeout, a full disk, a read-only file. A record that does not decode is
//! [`StoreError::Corrupt`], and left as it is.

mod claim;
mod errors;
mod look_up;
mod migrate;
mod session;
mod sql;
mod sweep;
mod table;
mod transaction;

use std::{fmt, sync::Arc, time::Duration};

use async_trait::async_trait;
use sqlx::{Row, SqlitePool};

use self::{claim::CLAIM_ATTEMPTS, errors::store_error, sql::Statements};
pub use self::{
    migrate::{migrate, migration_files, migration_sql},
    session::{SqliteStoreBuilder, leaves_no_transaction},
    table::{TableName, TableNameError},
    transaction::SqliteTransaction,
};
/// The sweeper's pace and handle, shared by the stores that sweep ([`idem_core::store::sweep`]).
pub use idem_core::store::sweep::{SweepPace, SweepPaceError, SweeperHandle};
use idem_core::store::{
    Claim, ClaimOutcome, LeaseToken, Store, StoreError, StoreTransaction,
    held::{Held, RecordState},
    operation::{DueOperation, KeptRequest, RecordedStep, StepSupport},
};
use idem_core::{replay::StoredResponse, scope::StoreKey};

/// Idempotency records in a SQLite table. Cheap to clone; clones share the pool.
///
/// See the [module docs](self) for the table, the statements and transactional mode.
///
/// ```no_run
/// use idem::{Idempotency, sqlite::SqliteStore};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let store = SqliteStore::connect("app.db").await?;
/// store.migrate().await?;
/// let idem = Idempotency::new(store.clone());
/// // The same pool serves the application's own queries.
/// let users: i64 = sqlx::query_scalar("SELECT count(*) FROM users")
///     .fetch_one(store.pool())
///     .await?;
/// # drop((idem, users)); Ok(()) }
/// ```
#[derive(Clone)]
pub struct SqliteStore {
    shared: Arc<Shared>,
}

/// What the store's clones share: the pool and the statements written for its table.
struct Shared {
    pool: SqlitePool,
    table: TableName,
    statements: Arc<Statements>,
}

impl SqliteStore {
    /// The busy timeout of [`connect`](Self::connect)'s connections: 2 seconds.
    pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(2);
    /// How long [`connect`](Self::connect)'s pool waits for a free connection: 2 seconds.
    pub const DEFAULT_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(2);
    /// The size of [`connect`](Self::connect)'s pool: 10 connections.
    pub const DEFAULT_MAX_CONNECTIONS: u32 = 10;

    /// A store on `pool`, in the table `idempotency_records`. The pool keeps its own settings:
    /// open it in WAL mode, with a busy timeout.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), sqlx::Error> {
    /// let pool = sqlx::SqlitePool::connect("sqlite://app.db?mode=rwc").await?;
    /// let store = idem::sqlite::SqliteStore::new(pool);
    /// # drop(store); Ok(()) }
    /// ```
    pub fn new(pool: SqlitePool) -> Self {
        Self::builder().build(pool)
    }

    /// Opens `url_or_path` (`sqlite:///var/lib/app/app.db` or a path) with the default
    /// settings, creating the file when it is missing, in the table `idempotency_records`.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), idem::store::ConnectError> {
    /// let store = idem::sqlite::SqliteStore::connect("sqlite:///var/lib/app/app.db").await?;
    /// # drop(store); Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// A [`ConnectError`](idem_core::store::ConnectError) that names SQLite and the file.
    pub async fn connect(url_or_path: &str) -> Result<Self, idem_core::store::ConnectError> {
        Self::builder().connect(url_or_path).await
    }

    /// A builder, to set the table name and the connection settings.
    pub fn builder() -> SqliteStoreBuilder {
        SqliteStoreBuilder::new()
    }

    pub(crate) fn from_parts(pool: SqlitePool, table: TableName) -> Self {
        Self {
            shared: Arc::new(Shared {
                statements: Arc::new(Statements::new(&table)),
                pool,
                table,
            }),
        }
    }

    /// The pool, for queries of the application's own.
    pub fn pool(&self) -> &SqlitePool {
        &self.shared.pool
    }

    /// The records table.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = idem::sqlite::SqliteStore::builder()
    ///     .table("billing_idempotency")?
    ///     .connect("app.db")
    ///     .await?;
    /// assert_eq!(store.table().as_str(), "billing_idempotency");
    /// # Ok(()) }
    /// ```
    pub fn table(&self) -> &TableName {
        &self.shared.table
    }

    /// Creates the records table if it does not exist, and adds what it lacks of later
    /// migrations (see [`migrate()`]).
    ///
    /// ```no_run
    /// # async fn run(store: idem::sqlite::SqliteStore) -> Result<(), idem::store::StoreError> {
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
        check: Option<sql::Count>,
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

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("table", &self.shared.table)
            .field("pool_size", &self.shared.pool.size())
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Store for SqliteStore {
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
        let update = statements.complete(key, token, response, ttl);
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
        let transaction = self
            .shared
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(|e| self.error(e))?;
        Ok(Box::new(SqliteTransaction::new(
            transaction,
            self.shared.pool.clone(),
            Arc::clone(&self.shared.statements),
        )))
    }

    /// Steps and the requests of resumable routes are columns of the record: every process
    /// on the file resumes, after a crash too.
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

impl SqliteStore {
    /// The due operations, chosen and deferred by one statement.
    async fn due_operations(
        &self,
        limit: usize,
        hold: Duration,
    ) -> Result<Vec<DueOperation>, sqlx::Error> {
        let rows = self
            .shared
            .statements
            .due(limit, hold)
            .fetch_all(&self.shared.pool)
            .await?;
        let mut due = Vec::with_capacity(rows.len());
        for row in &rows {
            let key: Vec<u8> = row.try_get("store_key")?;
            let request: Vec<u8> = row.try_get("request")?;
            let suspensions: i64 = row.try_get("suspensions")?;
            due.push(DueOperation {
                key: StoreKey::from_bytes(key.try_into().unwrap_or([0; 32])),
                request: KeptRequest::decode(&request),
                suspensions: u32::try_from(suspensions).unwrap_or(0),
            });
        }
        Ok(due)
    }

    /// Deletes the record and answers what it was: one statement, one atomic step for every
    /// other call.
    async fn remove_record(&self, key: &StoreKey) -> Result<Option<RecordState>, sqlx::Error> {
        let Some(row) = self
            .shared
            .statements
            .remove(key)
            .fetch_optional(&self.shared.pool)
            .await?
        else {
            return Ok(None);
        };
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
