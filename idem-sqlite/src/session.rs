//! [`SqliteStoreBuilder`]: the table, and the connection settings of
//! [`SqliteStore::connect`].
//!
//! Every connection of the pool opens the file in WAL mode, with `synchronous = FULL` and the
//! builder's busy timeout: readers never wait for the writer, a commit is on disk when it
//! returns, and a writer waits for the write lock at most that long before it answers
//! `SQLITE_BUSY` (a 503).

use std::{str::FromStr, time::Duration};

use sqlx::{
    Connection, SqliteConnection, SqlitePool,
    sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous},
};

use idem_core::store::ConnectError;

use super::{SqliteStore, TableName, TableNameError};

/// The store's name in a [`ConnectError`].
const SQLITE: &str = "SQLite";

/// Configures a [`SqliteStore`]: the table, and the settings of the pool that
/// [`connect`](Self::connect) builds.
///
/// ```no_run
/// use std::time::Duration;
/// use idem::sqlite::SqliteStore;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let store = SqliteStore::builder()
///     .table("idempotency_records")?
///     .busy_timeout(Duration::from_secs(1))
///     .acquire_timeout(Duration::from_secs(1))
///     .max_connections(4)
///     .connect("/var/lib/app/app.db")
///     .await?;
/// # drop(store); Ok(()) }
/// ```
#[derive(Clone, Debug)]
#[must_use]
pub struct SqliteStoreBuilder {
    table: TableName,
    busy_timeout: Duration,
    acquire_timeout: Duration,
    max_connections: u32,
}

impl SqliteStoreBuilder {
    pub(crate) fn new() -> Self {
        Self {
            table: TableName::default(),
            busy_timeout: SqliteStore::DEFAULT_BUSY_TIMEOUT,
            acquire_timeout: SqliteStore::DEFAULT_ACQUIRE_TIMEOUT,
            max_connections: SqliteStore::DEFAULT_MAX_CONNECTIONS,
        }
    }

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

    /// How long a write waits for the file's write lock, which one connection of any process
    /// holds at a time, before it fails with `SQLITE_BUSY` (2 s by default). The claim,
    /// completion and every other write of the store, and a transactional handler's
    /// `BEGIN IMMEDIATE`, wait this long at most; a write that gives up did nothing, and the
    /// request answers 503. Keep it under the runtime's store timeout (5 s by default).
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// How long a request waits for a free connection of the pool before it answers 503
    /// (2 s by default).
    pub fn acquire_timeout(mut self, timeout: Duration) -> Self {
        self.acquire_timeout = timeout;
        self
    }

    /// The most connections the pool opens (10 by default). Reads run side by side, one per
    /// connection; writes take turns whatever the number. A transactional handler holds one
    /// connection, and the write lock, for as long as it runs.
    pub fn max_connections(mut self, connections: u32) -> Self {
        self.max_connections = connections.max(1);
        self
    }

    /// Opens the database `url_or_path` (`sqlite:///var/lib/app/app.db`, `sqlite://app.db`
    /// or a plain path), creating the file when it is missing, and builds the store.
    ///
    /// # Errors
    ///
    /// A [`ConnectError`] that names SQLite and the file when the URL is not one, or the file
    /// cannot be opened or created (a missing directory, no permission).
    pub async fn connect(self, url_or_path: &str) -> Result<SqliteStore, ConnectError> {
        let options = if url_or_path.starts_with("sqlite:") {
            SqliteConnectOptions::from_str(url_or_path)
                .map_err(|error| ConnectError::for_url(SQLITE, url_or_path, error))?
        } else {
            SqliteConnectOptions::new().filename(url_or_path)
        };
        self.connect_with(options.create_if_missing(true)).await
    }

    /// Opens the database with `options`, and this builder's journal mode (WAL),
    /// synchronous level (FULL) and busy timeout, and builds the store. The first connection
    /// is opened now, so a file that cannot be opened fails here.
    ///
    /// # Errors
    ///
    /// A [`ConnectError`] that names SQLite and the file when it cannot be opened.
    pub async fn connect_with(
        self,
        options: SqliteConnectOptions,
    ) -> Result<SqliteStore, ConnectError> {
        let at = options.get_filename().display().to_string();
        let options = options
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(self.busy_timeout);
        let pool = SqlitePoolOptions::new()
            .max_connections(self.max_connections)
            .acquire_timeout(self.acquire_timeout)
            .after_release(|connection, _| Box::pin(leaves_no_transaction(connection)))
            .connect_with(options)
            .await
            .map_err(|error| ConnectError::new(SQLITE, at, error))?;
        Ok(self.build(pool))
    }

    /// Builds the store on a pool of your own, which keeps its settings: open it in WAL mode
    /// with a busy timeout (see [`SqliteStore`]'s docs for why), and give it
    /// [`leaves_no_transaction`] as its `after_release`, as
    /// [`connect_with`](Self::connect_with) does.
    pub fn build(self, pool: SqlitePool) -> SqliteStore {
        SqliteStore::from_parts(pool, self.table)
    }
}

/// Whether a connection given back to the pool may serve again: `false` (the pool closes it,
/// and SQLite ends whatever it held) when it is still counted in a transaction.
///
/// A `COMMIT` or a statement that fails with `SQLITE_FULL` or an I/O error ends SQLite's
/// transaction on its own; the `ROLLBACK` that follows then fails ("no transaction is
/// active"), and sqlx keeps counting the connection in a transaction. Every `BEGIN
/// IMMEDIATE` on it would fail after that, so a full disk would leave the store refusing
/// writes after the disk had room again. The ping first lets a rollback that a dropped
/// transaction queued finish, so that a healthy connection is never closed for it.
///
/// ```no_run
/// use idem::sqlite::{SqliteStore, leaves_no_transaction};
/// use sqlx::sqlite::SqlitePoolOptions;
///
/// # async fn run() -> Result<(), sqlx::Error> {
/// let pool = SqlitePoolOptions::new()
///     .after_release(|connection, _| Box::pin(leaves_no_transaction(connection)))
///     .connect("sqlite://app.db")
///     .await?;
/// let store = SqliteStore::builder().build(pool);
/// # drop(store); Ok(()) }
/// ```
///
/// # Errors
///
/// The connection's own, when it does not answer: the pool closes it too.
pub async fn leaves_no_transaction(connection: &mut SqliteConnection) -> Result<bool, sqlx::Error> {
    connection.ping().await?;
    Ok(!connection.is_in_transaction())
}
