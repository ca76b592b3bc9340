//! The records table: its DDL, and the function that creates and upgrades it.
//!
//! The SQL is in `idem-mysql/migrations/`, one file per migration in the order they run,
//! written for the default table name: `001_idempotency_records.sql` creates the table,
//! `002_steps.sql` adds what operations of several steps keep. [`migration_files`] renders the
//! same text for any table name, and [`migrate`] runs what a table lacks of it. A test keeps
//! the files and the function identical.
//!
//! MySQL has no `ADD COLUMN IF NOT EXISTS` (MariaDB has), and its DDL is not transactional:
//! each statement commits on its own. So the files are plain DDL, each to run once (as
//! sqlx-cli, Flyway or Liquibase run them), and [`migrate`] asks `information_schema` which of
//! their statements a table still needs. Every statement can run while the service serves:
//! `ADD COLUMN ... ALGORITHM=INSTANT` changes only the data dictionary (MySQL 8.0.12 and
//! MariaDB 10.3 or later; an older server refuses it rather than copy the table), and the
//! index is built `ALGORITHM=INPLACE, LOCK=NONE`, with claims and completions going on.

use sqlx::{AssertSqlSafe, Executor, MySqlConnection, MySqlPool};

use super::{errors::store_error as error, table::TableName};
use idem_core::store::StoreError;

/// `001_idempotency_records.sql`.
const CREATE_TABLE: &str = "\
-- idem: the table of idempotency records kept by MySqlStore (MySQL 8.0, MariaDB 10.6 or later).
--
-- One row per store key. A row is 'in_flight' (claimed, under a lease) or 'completed' (the
-- stored response). A row whose expires_at has passed counts as absent: a claim replaces it,
-- and the sweeper (MySqlStore::sweep) deletes it. Every column the store reads is binary or
-- ASCII, so neither the connection's character set nor the table's changes a byte of a
-- record; every time is UTC, written and compared by the server (UTC_TIMESTAMP(6)), so
-- neither time_zone nor daylight saving moves a lease.
CREATE TABLE IF NOT EXISTS {table} (
    -- SHA-256 over scope, principal, method, route and Idempotency-Key (StoreKey).
    store_key        BINARY(32)    NOT NULL,
    -- The request fingerprint: one algorithm tag byte, then the SHA-256 digest.
    fingerprint      VARBINARY(64) NOT NULL,
    state            VARCHAR(9) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    -- The holder of an in-flight record: a random 128-bit token, and when its lease lapses.
    lease_token      BINARY(16),
    lease_expires_at DATETIME(6),
    -- When the record is forgotten: max(ttl, lease) after the claim or the last renewal
    -- while in flight, ttl after the completion.
    expires_at       DATETIME(6)   NOT NULL,
    -- The stored response: StoredResponse::as_bytes, in format response_format; its status
    -- code is repeated in response_status for queries of your own.
    response_status  SMALLINT UNSIGNED,
    response_format  SMALLINT,
    response         LONGBLOB,
    created_at       DATETIME(6)   NOT NULL,
    updated_at       DATETIME(6)   NOT NULL,
    PRIMARY KEY (store_key),
    -- The sweeper deletes the oldest expired records first.
    KEY expires_at_idx (expires_at),
    CHECK (state IN ('in_flight', 'completed')),
    CHECK (state <> 'in_flight' OR (lease_token IS NOT NULL AND lease_expires_at IS NOT NULL)),
    CHECK (state <> 'completed'
           OR (response IS NOT NULL AND response_format IS NOT NULL AND response_status IS NOT NULL))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
";

/// The first statement of `002_steps.sql`: the columns.
const STEPS_COLUMNS: &str = "\
ALTER TABLE {table}
    ADD COLUMN steps           LONGBLOB,
    ADD COLUMN step_count      INT    NOT NULL DEFAULT 0,
    ADD COLUMN suspensions     INT    NOT NULL DEFAULT 0,
    ADD COLUMN request         LONGBLOB,
    ADD COLUMN resume_after_us BIGINT,
    ADD COLUMN resume_at       DATETIME(6),
    ALGORITHM = INSTANT;
";

/// The second statement of `002_steps.sql`: the resumer's index.
const RESUME_INDEX: &str = "\
ALTER TABLE {table} ADD INDEX resume_at_idx (resume_at), ALGORITHM = INPLACE, LOCK = NONE;
";

/// The comment that opens `002_steps.sql`.
const STEPS_HEADER: &str = "\
-- idem: what operations of several steps keep (docs/steps.md).
--
-- steps holds the output of each step that ended, in order (RecordedStep::encode's bytes, one
-- after another), step_count how many; suspensions counts the times the operation stopped
-- before completing. A route the service resumes itself keeps its request (KeptRequest::encode)
-- and resume_after_us (microseconds) with the claim; resume_at is when the operation is due
-- for resumption if nobody holds it by then. Completion clears all but suspensions.
--
-- Both statements run while the service serves: the columns change only the data dictionary,
-- and the index is built with claims and completions going on.
";

/// What tells that a statement of a migration has run on a table.
#[derive(Clone, Copy, Debug)]
enum Applied {
    /// `CREATE TABLE IF NOT EXISTS`: runs every time, and changes nothing the second time.
    Always,
    /// The table has this column.
    Column(&'static str),
    /// The table has this index.
    Index(&'static str),
}

/// Each migration: the comment that opens its file, and its statements, each with what tells
/// that it ran.
const MIGRATIONS: [(&str, &[(&str, Applied)]); 2] = [
    ("", &[(CREATE_TABLE, Applied::Always)]),
    (
        STEPS_HEADER,
        &[
            (STEPS_COLUMNS, Applied::Column("steps")),
            (RESUME_INDEX, Applied::Index("resume_at_idx")),
        ],
    ),
];

fn render(template: &str, table: &TableName) -> String {
    template.replace("{table}", &table.quoted())
}

/// The DDL of every migration for `table`, in the order they run: for the default name, the
/// text of the files in `migrations/`, one after another.
///
/// ```
/// use idem::mysql::{TableName, migration_sql};
///
/// let sql = migration_sql(&TableName::new("billing.idempotency")?);
/// assert!(sql.contains("CREATE TABLE IF NOT EXISTS `billing`.`idempotency`"));
/// # Ok::<(), idem::mysql::TableNameError>(())
/// ```
pub fn migration_sql(table: &TableName) -> String {
    migration_files(table).concat()
}

/// Each migration's DDL for `table`, in the order they run: the text of
/// `migrations/001_idempotency_records.sql`, then of `002_steps.sql`, for the default name.
/// Each file is to run once, as migration tools run them.
///
/// ```
/// use idem::mysql::{TableName, migration_files};
///
/// let [create, steps] = migration_files(&TableName::default());
/// assert!(create.contains("CREATE TABLE IF NOT EXISTS `idempotency_records`"));
/// assert!(steps.contains("ADD COLUMN steps"));
/// ```
pub fn migration_files(table: &TableName) -> [String; 2] {
    MIGRATIONS.map(|(header, statements)| {
        let body: String = statements
            .iter()
            .map(|(template, _)| render(template, table))
            .collect::<Vec<_>>()
            .join("\n");
        if header.is_empty() {
            body
        } else {
            format!("{header}{body}")
        }
    })
}

/// Creates the records table `table`, and adds what it lacks of later migrations.
///
/// It holds a named lock (`GET_LOCK`) while it runs, so instances that start together and all
/// migrate do not trip over each other, and runs only the statements whose effect the table
/// lacks (`information_schema` says), so running it again changes nothing. The database of a
/// qualified name must exist. A table that is not InnoDB (a server that substituted another
/// engine) is refused: the store needs InnoDB's transactions and row locks.
///
/// ```no_run
/// use idem::mysql::{TableName, migrate};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let pool = sqlx::MySqlPool::connect("mysql://app@localhost/app").await?;
/// migrate(&pool, &TableName::default()).await?;
/// # Ok(()) }
/// ```
pub async fn migrate(pool: &MySqlPool, table: &TableName) -> Result<(), StoreError> {
    let mut conn = pool.acquire().await.map_err(|e| error(pool, e))?;
    let lock = format!("idem migrate {table}");
    let locked: Option<i64> = sqlx::query_scalar("SELECT GET_LOCK(?, 60)")
        .bind(&lock)
        .fetch_one(&mut *conn)
        .await
        .map_err(|e| error(pool, e))?;
    if locked != Some(1) {
        return Err(StoreError::backend(format!(
            "another instance held the lock `{lock}` for a minute"
        )));
    }
    let migrated = run_migrations(&mut conn, table).await;
    let released = sqlx::query("SELECT RELEASE_LOCK(?)")
        .bind(&lock)
        .execute(&mut *conn)
        .await;
    migrated.map_err(|e| error(pool, e))?;
    released.map_err(|e| error(pool, e))?;
    check_engine(&mut conn, table).await
}

async fn run_migrations(conn: &mut MySqlConnection, table: &TableName) -> Result<(), sqlx::Error> {
    for (_, statements) in MIGRATIONS {
        for (template, applied) in statements {
            let needed = match applied {
                Applied::Always => true,
                Applied::Column(column) => !has(conn, table, COLUMN_EXISTS, column).await?,
                Applied::Index(index) => !has(conn, table, INDEX_EXISTS, index).await?,
            };
            if needed {
                // The name was checked by `TableName::new`: plain identifiers, quoted.
                conn.execute(AssertSqlSafe(render(template, table))).await?;
            }
        }
    }
    Ok(())
}

const COLUMN_EXISTS: &str = "SELECT count(*) FROM information_schema.columns \
    WHERE table_schema = coalesce(?, DATABASE()) AND table_name = ? AND column_name = ?";
const INDEX_EXISTS: &str = "SELECT count(*) FROM information_schema.statistics \
    WHERE table_schema = coalesce(?, DATABASE()) AND table_name = ? AND index_name = ?";

/// Whether `table` has the column or index `name`, as `query` asks.
async fn has(
    conn: &mut MySqlConnection,
    table: &TableName,
    query: &'static str,
    name: &str,
) -> Result<bool, sqlx::Error> {
    let count: i64 = sqlx::query_scalar(query)
        .bind(table.database())
        .bind(table.table())
        .bind(name)
        .fetch_one(&mut *conn)
        .await?;
    Ok(count > 0)
}

/// Refuses a table that is not InnoDB.
async fn check_engine(conn: &mut MySqlConnection, table: &TableName) -> Result<(), StoreError> {
    let engine: Option<String> = sqlx::query_scalar(
        "SELECT engine FROM information_schema.tables \
         WHERE table_schema = coalesce(?, DATABASE()) AND table_name = ?",
    )
    .bind(table.database())
    .bind(table.table())
    .fetch_optional(&mut *conn)
    .await
    .map_err(StoreError::backend)?
    .flatten();
    match engine.as_deref() {
        Some(engine) if engine.eq_ignore_ascii_case("InnoDB") => Ok(()),
        other => Err(StoreError::backend(format!(
            "the table {table} is {}, not InnoDB: the store needs InnoDB's transactions and row \
             locks",
            other.unwrap_or("missing")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sql_files_are_the_migrations_for_the_default_name() {
        let files = [
            include_str!("../migrations/001_idempotency_records.sql"),
            include_str!("../migrations/002_steps.sql"),
        ];
        assert_eq!(migration_files(&TableName::default()), files);
        assert_eq!(migration_sql(&TableName::default()), files.concat());
    }

    #[test]
    fn a_qualified_name_is_quoted_everywhere() {
        let sql = migration_sql(&TableName::new("idem.records").unwrap());
        assert!(sql.contains("CREATE TABLE IF NOT EXISTS `idem`.`records` ("));
        assert!(sql.contains("ALTER TABLE `idem`.`records` ADD INDEX resume_at_idx"));
        assert!(!sql.contains('{'));
    }
}
