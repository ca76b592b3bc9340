//! The records table: its DDL, and the function that creates it.
//!
//! The SQL is in `idem-postgres/migrations/`, one file per migration in the order they
//! run, written for the default table name: `001_idempotency_records.sql` creates the table,
//! `002_steps.sql` adds what operations of several steps keep, `003_autovacuum.sql` tunes
//! autovacuum to the table's churn. [`migration_sql`] renders the same text for any table
//! name, and [`migrate`] runs it. A test keeps the files and the function identical.
//!
//! Every migration can run while the service serves: `ADD COLUMN` of a nullable column or of
//! one with a constant default changes only the catalog (PostgreSQL 11 and later), and setting
//! autovacuum's storage parameters takes a `SHARE UPDATE EXCLUSIVE` lock, which reads and
//! writes of rows do not conflict with. Each statement says `IF NOT EXISTS`, and the third
//! sets nothing on a table that has autovacuum settings already, so running them again
//! changes nothing.

use sqlx::{AssertSqlSafe, PgPool};

use super::{error, table::TableName};
use idem_core::store::StoreError;

/// The DDL of each migration, in order, with `{table}` and the index names in place of the
/// names.
const TEMPLATES: [&str; 3] = [CREATE_TABLE, STEPS, AUTOVACUUM];

/// `001_idempotency_records.sql`.
const CREATE_TABLE: &str = "\
-- idem: the table of idempotency records kept by PostgresStore.
--
-- One row per store key. A row is 'in_flight' (claimed, under a lease) or 'completed' (the
-- stored response). A row whose expires_at has passed counts as absent: a claim replaces it,
-- and the sweeper (PostgresStore::sweep) deletes it.
CREATE TABLE IF NOT EXISTS {table} (
    -- SHA-256 over scope, principal, method, route and Idempotency-Key (StoreKey).
    key              bytea       NOT NULL PRIMARY KEY CHECK (octet_length(key) = 32),
    -- The request fingerprint: one algorithm tag byte, then the SHA-256 digest.
    fingerprint      bytea       NOT NULL,
    state            text        NOT NULL CHECK (state IN ('in_flight', 'completed')),
    -- The holder of an in-flight record: a random 128-bit token, and when its lease lapses.
    lease_token      bytea       CHECK (octet_length(lease_token) = 16),
    lease_expires_at timestamptz,
    -- When the record is forgotten: max(ttl, lease) after the claim or the last renewal
    -- while in flight, ttl after the completion.
    expires_at       timestamptz NOT NULL,
    -- The stored response: StoredResponse::encode's bytes, in format response_format; its
    -- status code is repeated in response_status for queries of your own.
    response_status  smallint,
    response_format  smallint,
    response         bytea,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    CONSTRAINT in_flight_has_lease CHECK (
        state <> 'in_flight' OR (lease_token IS NOT NULL AND lease_expires_at IS NOT NULL)),
    CONSTRAINT completed_has_response CHECK (
        state <> 'completed'
        OR (response IS NOT NULL AND response_format IS NOT NULL AND response_status IS NOT NULL))
);

-- The sweeper deletes the oldest expired records first.
CREATE INDEX IF NOT EXISTS {expires_at_idx} ON {table} (expires_at);
";

/// `002_steps.sql`.
const STEPS: &str = "\
-- idem: what operations of several steps keep (docs/steps.md).
--
-- steps holds the output of each step that ended, in order (RecordedStep::encode's bytes, one
-- after another), step_count how many; suspensions counts the times the operation stopped
-- before completing. A route the service resumes itself keeps its request (KeptRequest::encode)
-- and resume_after with the claim; resume_at is when the operation is due for resumption if
-- nobody holds it by then. Completion clears all but suspensions.
ALTER TABLE {table}
    ADD COLUMN IF NOT EXISTS steps        bytea,
    ADD COLUMN IF NOT EXISTS step_count   integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS suspensions  integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS request      bytea,
    ADD COLUMN IF NOT EXISTS resume_after interval,
    ADD COLUMN IF NOT EXISTS resume_at    timestamptz;

-- The resumer reads the operations due first; only resumable ones are in this index.
CREATE INDEX IF NOT EXISTS {resume_at_idx} ON {table} (resume_at) WHERE resume_at IS NOT NULL;
";

/// `003_autovacuum.sql`.
const AUTOVACUUM: &str = "\
-- idem: autovacuum at the pace of the table's churn (docs/postgres.md, The sweeper).
--
-- Every keyed request leaves two dead row versions behind: its completion's UPDATE (never a
-- HOT update, as it changes the indexed expires_at) and the sweeper's DELETE once it expired.
-- With PostgreSQL's default scale factor (0.2), autovacuum waits for dead rows worth a fifth
-- of the table: on a table of 30 days of records, three days of churn whose space nothing
-- reuses meanwhile. At 0.02 it comes after a fiftieth (about seven hours of a 30-day window),
-- each vacuum has a tenth of the dead rows to clear, and new records fill the space of swept
-- ones: the table stays within a few percent of its live records.
--
-- Setting these takes a SHARE UPDATE EXCLUSIVE lock, which claims, completions and sweeps do
-- not conflict with. A table that has autovacuum settings of its own keeps them.
DO $$
BEGIN
    IF NOT EXISTS (
        SELECT FROM pg_class, unnest(reloptions) AS option
        WHERE pg_class.oid = '{table}'::regclass AND option LIKE 'autovacuum%'
    ) THEN
        ALTER TABLE {table} SET (
            autovacuum_vacuum_scale_factor = 0.02,
            autovacuum_vacuum_threshold = 1000);
    END IF;
END
$$;
";

/// The DDL that creates the records table `table` and its indexes, as [`migrate`] runs it:
/// every migration, in order.
///
/// For the default name it is the text of the files in `migrations/`, one after
/// another, for those who run their migrations with another tool
/// ([`migration_files`] gives them one by one).
///
/// ```
/// use idem::postgres::{TableName, migration_sql};
///
/// let sql = migration_sql(&TableName::new("billing.idempotency")?);
/// assert!(sql.contains(r#"CREATE TABLE IF NOT EXISTS "billing"."idempotency""#));
/// # Ok::<(), idem::postgres::TableNameError>(())
/// ```
pub fn migration_sql(table: &TableName) -> String {
    migration_files(table).concat()
}

/// Each migration's DDL for `table`, in the order they run: the text of
/// `migrations/001_idempotency_records.sql`, then of `002_steps.sql` and
/// `003_autovacuum.sql`, for the default name.
///
/// ```
/// use idem::postgres::{TableName, migration_files};
///
/// let [create, steps, autovacuum] = migration_files(&TableName::default());
/// assert!(create.contains("CREATE TABLE IF NOT EXISTS"));
/// assert!(steps.contains("ADD COLUMN IF NOT EXISTS steps"));
/// assert!(autovacuum.contains("autovacuum_vacuum_scale_factor = 0.02"));
/// ```
pub fn migration_files(table: &TableName) -> [String; 3] {
    TEMPLATES.map(|template| {
        // `{table}` last: a rendered name never contains a placeholder, and the order keeps
        // it so.
        template
            .replace("{expires_at_idx}", &table.derived("expires_at_idx"))
            .replace("{resume_at_idx}", &table.derived("resume_at_idx"))
            .replace("{table}", &table.quoted())
    })
}

/// Creates the records table `table` and its index, if they do not exist.
///
/// It runs [`migration_sql`] in one transaction, under an advisory lock, so instances that
/// start together and all migrate do not trip over each other. The schema of a qualified name
/// must exist. Running it again changes nothing.
///
/// ```no_run
/// use idem::postgres::{TableName, migrate};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let pool = sqlx::PgPool::connect("postgres://localhost/app").await?;
/// migrate(&pool, &TableName::default()).await?;
/// # Ok(()) }
/// ```
pub async fn migrate(pool: &PgPool, table: &TableName) -> Result<(), StoreError> {
    let mut transaction = pool.begin().await.map_err(|e| error(pool, e))?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
        .bind(format!("idem migrate {table}"))
        .execute(&mut *transaction)
        .await
        .map_err(|e| error(pool, e))?;
    // The name was checked by `TableName::new`: plain identifiers, quoted.
    sqlx::raw_sql(AssertSqlSafe(migration_sql(table)))
        .execute(&mut *transaction)
        .await
        .map_err(|e| error(pool, e))?;
    transaction.commit().await.map_err(|e| error(pool, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sql_files_are_the_migrations_for_the_default_name() {
        let files = [
            include_str!("../migrations/001_idempotency_records.sql"),
            include_str!("../migrations/002_steps.sql"),
            include_str!("../migrations/003_autovacuum.sql"),
        ];
        assert_eq!(migration_files(&TableName::default()), files);
        assert_eq!(migration_sql(&TableName::default()), files.concat());
    }

    #[test]
    fn a_qualified_name_quotes_the_table_and_keeps_the_index_in_its_schema() {
        let sql = migration_sql(&TableName::new("idem.records").unwrap());
        assert!(sql.contains("CREATE TABLE IF NOT EXISTS \"idem\".\"records\" ("));
        assert!(sql.contains(
            "CREATE INDEX IF NOT EXISTS \"records_expires_at_idx\" ON \"idem\".\"records\" (expires_at);"
        ));
        assert!(!sql.contains('{'));
    }
}
