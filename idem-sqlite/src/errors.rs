//! What a SQLite error says happened, by its extended result code.

use idem_core::store::StoreError;

/// `SQLITE_BUSY`: another connection (of this process or another) held the write lock for
/// longer than the busy timeout. The statement did nothing.
const BUSY: i32 = 5;
/// `SQLITE_LOCKED`: a conflict within one connection's shared cache. Did nothing either.
const LOCKED: i32 = 6;

/// The primary SQLite result code of `error`, if SQLite answered one.
fn primary_code(error: &sqlx::Error) -> Option<i32> {
    let code = error.as_database_error()?.code()?;
    code.parse::<i32>().ok().map(|code| code & 0xff)
}

/// Whether `error` is SQLite's refusal to wait any longer for the write lock: the statement,
/// and a transaction it was part of, did nothing.
pub(crate) fn busy(error: &sqlx::Error) -> bool {
    matches!(primary_code(error), Some(BUSY | LOCKED))
}

/// A database error as a store error: a pool that had no connection to give in time is a
/// timeout, anything else a backend failure. Neither says what happened to the statement.
pub(crate) fn store_error(pool: &sqlx::SqlitePool, error: sqlx::Error) -> StoreError {
    match error {
        sqlx::Error::PoolTimedOut => StoreError::Timeout(pool.options().get_acquire_timeout()),
        other => StoreError::backend(other),
    }
}
