//! What a MySQL error says happened, by its error number.
//!
//! sqlx reports a MySQL error with its SQLSTATE and its number; the SQLSTATE is too coarse
//! (`HY000` covers a lock wait timeout and a hundred unrelated errors), so the store decides by
//! the number, which MySQL and MariaDB share for every error below.

use sqlx::mysql::MySqlDatabaseError;

use idem_core::store::StoreError;

/// `ER_DUP_ENTRY`: an insert met the key of another row.
pub(crate) const DUPLICATE_KEY: u16 = 1062;
/// `ER_LOCK_DEADLOCK`: InnoDB chose this transaction as a deadlock's victim and rolled the
/// whole transaction back (also a certification failure on Galera and Group Replication).
pub(crate) const DEADLOCK: u16 = 1213;
/// `ER_ERROR_DURING_COMMIT`: the storage engine refused the commit.
const ERROR_DURING_COMMIT: u16 = 1180;

/// The MySQL error number of `error`, if the server answered one.
pub(crate) fn number(error: &sqlx::Error) -> Option<u16> {
    error
        .as_database_error()
        .and_then(|error| error.try_downcast_ref::<MySqlDatabaseError>())
        .map(MySqlDatabaseError::number)
}

/// Whether `error` says the statement did nothing and may simply run again: a duplicate key
/// (another claim inserted the record first) or a deadlock (InnoDB rolled this statement's
/// transaction back).
pub(crate) fn lost_a_race(error: &sqlx::Error) -> bool {
    matches!(number(error), Some(DUPLICATE_KEY | DEADLOCK))
}

/// Whether a failed `COMMIT` was refused by the server, which then rolled the transaction
/// back: a deadlock or certification failure, or the engine's refusal. A lost connection
/// leaves the outcome unknown instead.
pub(crate) fn refused_commit(error: &sqlx::Error) -> bool {
    matches!(number(error), Some(DEADLOCK | ERROR_DURING_COMMIT))
}

/// A database error as a store error: a pool that had no connection to give in time is a
/// timeout, anything else a backend failure. Neither says what happened to the statement.
pub(crate) fn store_error(pool: &sqlx::MySqlPool, error: sqlx::Error) -> StoreError {
    match error {
        sqlx::Error::PoolTimedOut => StoreError::Timeout(pool.options().get_acquire_timeout()),
        other => StoreError::backend(other),
    }
}
