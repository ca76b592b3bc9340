//! [`MySqlStoreBuilder`]: the table, and the pool and session settings of
//! [`MySqlStore::connect`].
//!
//! Each new connection of the pool sets, in one statement, the InnoDB lock wait timeout and a
//! statement timeout. The two servers name the latter differently: MariaDB's
//! `max_statement_time` (seconds, any statement) and MySQL's `max_execution_time`
//! (milliseconds, `SELECT` only), so the connection first asks which server it is.

use std::time::Duration;

use sqlx::{
    AssertSqlSafe, Executor, MySqlConnection, MySqlPool,
    mysql::{MySqlConnectOptions, MySqlPoolOptions},
};

use idem_core::store::ConnectError;

use super::{MySqlStore, TableName, TableNameError};

/// The store's name in a [`ConnectError`].
const MYSQL: &str = "MySQL";
/// Configures a [`MySqlStore`]: the table, and the settings of the pool that
/// [`connect`](Self::connect) builds.
///
/// ```no_run
/// use std::time::Duration;
/// use idem::mysql::MySqlStore;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let store = MySqlStore::builder()
///     .table("billing.idempotency_records")?
///     .lock_wait_timeout(Duration::from_secs(1))
///     .statement_timeout(Duration::from_secs(10))
///     .acquire_timeout(Duration::from_secs(1))
///     .max_connections(20)
///     .connect("mysql://app@db.internal/app")
///     .await?;
/// # drop(store); Ok(()) }
/// ```
#[derive(Clone, Debug)]
#[must_use]
pub struct MySqlStoreBuilder {
    table: TableName,
    lock_wait_timeout: Duration,
    statement_timeout: Duration,
    acquire_timeout: Duration,
    max_connections: u32,
    test_before_acquire: bool,
}

impl MySqlStoreBuilder {
    pub(crate) fn new() -> Self {
        Self {
            table: TableName::default(),
            lock_wait_timeout: MySqlStore::DEFAULT_LOCK_WAIT_TIMEOUT,
            statement_timeout: MySqlStore::DEFAULT_STATEMENT_TIMEOUT,
            acquire_timeout: MySqlStore::DEFAULT_ACQUIRE_TIMEOUT,
            max_connections: MySqlStore::DEFAULT_MAX_CONNECTIONS,
            test_before_acquire: true,
        }
    }

    /// The records table: `table` or `database.table`, plain lowercase identifiers
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
    /// (`innodb_lock_wait_timeout`, in whole seconds, rounded up, at least 1; 2 s by
    /// default). Applies to the handler's queries in its transaction as well.
    pub fn lock_wait_timeout(mut self, timeout: Duration) -> Self {
        self.lock_wait_timeout = timeout;
        self
    }

    /// How long a statement on the pool's connections may run (5 s by default, zero for no
    /// limit): MariaDB's `max_statement_time`, which bounds every statement, or MySQL's
    /// `max_execution_time`, which bounds `SELECT`s only. Applies to the handler's queries in
    /// its transaction too.
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
    /// connection that died while idle (the server restarted, `wait_timeout` closed it, a
    /// proxy dropped it) before a request uses it; without it, each such connection fails one
    /// request (503) and is then discarded.
    pub fn test_before_acquire(mut self, test: bool) -> Self {
        self.test_before_acquire = test;
        self
    }

    /// Connects to `url` and builds the store.
    ///
    /// # Errors
    ///
    /// A [`ConnectError`] that names MySQL and where it was looked for (never the password)
    /// when the URL is not one or the database cannot be reached.
    pub async fn connect(self, url: &str) -> Result<MySqlStore, ConnectError> {
        let options: MySqlConnectOptions = url
            .parse()
            .map_err(|error| ConnectError::for_url(MYSQL, url, error))?;
        self.connect_with(options).await
    }

    /// Connects with `options` and builds the store; each connection also sets this
    /// builder's timeouts. The first connection is opened now, so a wrong address fails here.
    ///
    /// # Errors
    ///
    /// A [`ConnectError`] that names MySQL and where it was looked for when the database
    /// cannot be reached.
    pub async fn connect_with(
        self,
        options: MySqlConnectOptions,
    ) -> Result<MySqlStore, ConnectError> {
        // The host (or socket), port and database: never the user or the password.
        let at = format!(
            "{}:{}/{}",
            options.get_host(),
            options.get_port(),
            options.get_database().unwrap_or_default()
        );
        let timeouts = (self.lock_wait_timeout, self.statement_timeout);
        let pool = MySqlPoolOptions::new()
            .max_connections(self.max_connections)
            .acquire_timeout(self.acquire_timeout)
            .test_before_acquire(self.test_before_acquire)
            .after_connect(move |conn, _| Box::pin(set_timeouts(conn, timeouts)))
            .connect_with(options)
            .await
            .map_err(|error| ConnectError::new(MYSQL, at, error))?;
        Ok(self.build(pool))
    }

    /// Builds the store on a pool of your own, which keeps its settings.
    pub fn build(self, pool: MySqlPool) -> MySqlStore {
        MySqlStore::from_parts(pool, self.table)
    }
}

/// Sets the session's lock wait and statement timeouts, in the server's own terms.
async fn set_timeouts(
    conn: &mut MySqlConnection,
    (lock_wait, statement): (Duration, Duration),
) -> Result<(), sqlx::Error> {
    let mariadb: bool = sqlx::query_scalar("SELECT VERSION() LIKE '%MariaDB%'")
        .fetch_one(&mut *conn)
        .await?;
    let lock_wait = lock_wait.as_nanos().div_ceil(1_000_000_000).max(1);
    let statement = if mariadb {
        format!("max_statement_time = {:.3}", statement.as_secs_f64())
    } else {
        format!(
            "max_execution_time = {}",
            statement.as_nanos().div_ceil(1_000_000)
        )
    };
    // Numbers only: nothing from input.
    let set = format!("SET SESSION innodb_lock_wait_timeout = {lock_wait}, {statement}");
    conn.execute(AssertSqlSafe(set)).await?;
    Ok(())
}
