//! The records table: its DDL, and the function that creates and upgrades it.
//!
//! The SQL is in `idem-sqlite/migrations/`, one file per migration in the order they run,
//! written for the default table name: `001_idempotency_records.sql` creates the table,
//! `002_steps.sql` adds what operations of several steps keep. [`migration_files`] renders the
//! same text for any table name, and [`migrate`] runs what a table lacks of it. A test keeps
//! the files and the function identical.
//!
//! SQLite's DDL is transactional, and has no `ADD COLUMN IF NOT EXISTS`: [`migrate`] runs in
//! one `BEGIN IMMEDIATE` transaction, asks `pragma_table_info` which columns the table has,
//! and adds the others, so that it runs once however many processes start together, and a
//! file in use is upgraded in place: `ADD COLUMN` changes only the schema (no row is
//! rewritten), the index is built in the same short transaction, and the other connections
//! see the new schema at their next statement.

use sqlx::{AssertSqlSafe, Connection, Executor, SqliteConnection, SqlitePool};

use super::{errors::store_error as error, table::TableName};
use idem_core::store::StoreError;

/// `001_idempotency_records.sql`.
const CREATE_TABLE: &str = "\
-- idem: the table of idempotency records kept by SqliteStore (SQLite 3.42 or later).
--
-- One row per store key. A row is 'in_flight' (claimed, under a lease) or 'completed' (the
-- stored response). A row whose expires_at has passed counts as absent: a claim replaces it,
-- and the sweeper (SqliteStore::sweep) deletes it. Times are microseconds since the Unix
-- epoch, UTC, read from SQLite's clock by every statement. STRICT: a value of another type
-- is refused rather than stored.
CREATE TABLE IF NOT EXISTS {table} (
    -- SHA-256 over scope, principal, method, route and Idempotency-Key (StoreKey): 32 bytes.
    store_key        BLOB    NOT NULL PRIMARY KEY,
    -- The request fingerprint: one algorithm tag byte, then the SHA-256 digest.
    fingerprint      BLOB    NOT NULL,
    state            TEXT    NOT NULL CHECK (state IN ('in_flight', 'completed')),
    -- The holder of an in-flight record: a random 128-bit token, and when its lease lapses.
    lease_token      BLOB,
    lease_expires_at INTEGER,
    -- When the record is forgotten: max(ttl, lease) after the claim or the last renewal
    -- while in flight, ttl after the completion.
    expires_at       INTEGER NOT NULL,
    -- The stored response: StoredResponse::as_bytes, in format response_format; its status
    -- code is repeated in response_status for queries of your own.
    response_status  INTEGER,
    response_format  INTEGER,
    response         BLOB,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    CHECK (state <> 'in_flight' OR (lease_token IS NOT NULL AND lease_expires_at IS NOT NULL)),
    CHECK (state <> 'completed'
           OR (response IS NOT NULL AND response_format IS NOT NULL AND response_status IS NOT NULL))
) STRICT;

-- The sweeper deletes the oldest expired records first.
CREATE INDEX IF NOT EXISTS {index:expires_at} ON {bare} (expires_at);
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
-- Run it in one transaction (BEGIN IMMEDIATE ... COMMIT) while the service serves: each
-- ADD COLUMN changes only the schema, and the index is built from the table as it is.
";

/// The columns of `002_steps.sql`, one `ADD COLUMN` each (SQLite adds one per statement).
const STEPS_COLUMNS: [(&str, &str); 6] = [
    ("steps", "BLOB"),
    ("step_count", "INTEGER NOT NULL DEFAULT 0"),
    ("suspensions", "INTEGER NOT NULL DEFAULT 0"),
    ("request", "BLOB"),
    ("resume_after_us", "INTEGER"),
    ("resume_at", "INTEGER"),
];

/// The resumer's index, the last statement of `002_steps.sql`.
const RESUME_INDEX: &str = "CREATE INDEX IF NOT EXISTS {index:resume_at} ON {bare} (resume_at);\n";

fn render(template: &str, table: &TableName) -> String {
    template
        .replace("{table}", &table.quoted())
        .replace("{bare}", &format!("\"{}\"", table.table()))
        .replace("{index:expires_at}", &table.quoted_index("expires_at"))
        .replace("{index:resume_at}", &table.quoted_index("resume_at"))
}

fn add_column(table: &TableName, (column, definition): (&str, &str)) -> String {
    format!(
        "ALTER TABLE {} ADD COLUMN {column} {definition};\n",
        table.quoted()
    )
}

/// The DDL of every migration for `table`, in the order they run: for the default name, the
/// text of the files in `migrations/`, one after another.
///
/// ```
/// use idem::sqlite::{TableName, migration_sql};
///
/// let sql = migration_sql(&TableName::new("main.idempotency")?);
/// assert!(sql.contains("CREATE TABLE IF NOT EXISTS \"main\".\"idempotency\""));
/// # Ok::<(), idem::sqlite::TableNameError>(())
/// ```
pub fn migration_sql(table: &TableName) -> String {
    migration_files(table).concat()
}

/// Each migration's DDL for `table`, in the order they run: the text of
/// `migrations/001_idempotency_records.sql`, then of `002_steps.sql`, for the default name.
/// Each file is to run once, as migration tools run them.
///
/// ```
/// use idem::sqlite::{TableName, migration_files};
///
/// let [create, steps] = migration_files(&TableName::default());
/// assert!(create.contains("CREATE TABLE IF NOT EXISTS \"idempotency_records\""));
/// assert!(steps.contains("ADD COLUMN steps"));
/// ```
pub fn migration_files(table: &TableName) -> [String; 2] {
    let columns: String = STEPS_COLUMNS
        .iter()
        .map(|column| add_column(table, *column))
        .collect();
    [
        render(CREATE_TABLE, table),
        format!("{STEPS_HEADER}{columns}{}", render(RESUME_INDEX, table)),
    ]
}

/// Creates the records table `table`, and adds what it lacks of later migrations.
///
/// One `BEGIN IMMEDIATE` transaction: processes that start together and all migrate run one
/// after another (each waits for the write lock, up to the busy timeout), and the second
/// finds nothing to do. A file in use is upgraded in place: each `ADD COLUMN` changes only
/// the schema, and the other connections see it at their next statement.
///
/// ```no_run
/// use idem::sqlite::{TableName, migrate};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let pool = sqlx::SqlitePool::connect("sqlite://app.db?mode=rwc").await?;
/// migrate(&pool, &TableName::default()).await?;
/// # Ok(()) }
/// ```
pub async fn migrate(pool: &SqlitePool, table: &TableName) -> Result<(), StoreError> {
    let mut conn = pool.acquire().await.map_err(|e| error(pool, e))?;
    run_migrations(&mut conn, table)
        .await
        .map_err(|e| error(pool, e))
}

async fn run_migrations(conn: &mut SqliteConnection, table: &TableName) -> Result<(), sqlx::Error> {
    let mut transaction = conn.begin_with("BEGIN IMMEDIATE").await?;
    // The name was checked by `TableName::new`: plain identifiers, quoted.
    transaction
        .execute(AssertSqlSafe(render(CREATE_TABLE, table)))
        .await?;
    let present: Vec<String> = sqlx::query_scalar("SELECT name FROM pragma_table_info(?1, ?2)")
        .bind(table.table())
        .bind(table.schema().unwrap_or("main"))
        .fetch_all(&mut *transaction)
        .await?;
    for column in STEPS_COLUMNS {
        if !present.iter().any(|name| name == column.0) {
            transaction
                .execute(AssertSqlSafe(add_column(table, column)))
                .await?;
        }
    }
    transaction
        .execute(AssertSqlSafe(render(RESUME_INDEX, table)))
        .await?;
    transaction.commit().await
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
        assert!(sql.contains("CREATE TABLE IF NOT EXISTS \"idem\".\"records\" ("));
        assert!(
            sql.contains(
                "CREATE INDEX IF NOT EXISTS \"idem\".\"records_resume_at\" ON \"records\""
            )
        );
        assert!(sql.contains("ALTER TABLE \"idem\".\"records\" ADD COLUMN request BLOB;"));
        assert!(!sql.contains('{'));
    }
}
