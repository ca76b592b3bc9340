//! Transactional mode: the handler's writes and the record's completion commit together.
//!
//! The transaction begins with `BEGIN IMMEDIATE`, which takes the file's write lock at once
//! (waiting up to the busy timeout for it). A plain `BEGIN` would take it at the handler's
//! first write, and fail at once with `SQLITE_BUSY` if another connection wrote in between,
//! whatever the busy timeout: the snapshot the handler read would be stale.

use std::{any::Any, fmt, sync::Arc, time::Duration};

use async_trait::async_trait;
use sqlx::{Sqlite, SqliteConnection, SqlitePool, Transaction};

use super::{
    errors::{busy, store_error},
    sql::Statements,
};
use idem_core::{
    replay::StoredResponse,
    scope::StoreKey,
    store::{LeaseToken, StoreError, StoreTransaction, operation::RecordedStep},
};

/// The transaction [`SqliteStore`](super::SqliteStore) opens for one request
/// ([`Store::begin`](idem_core::store::Store::begin)). The runtime ends it; handlers write in
/// it through its connection, a [`SqliteConnection`], which the [`Tx`](idem_core::extract::Tx)
/// extractor and [`Steps::transaction`](idem_core::steps::Steps::transaction) hand out
/// (`tx.conn::<SqliteConnection>()`).
pub struct SqliteTransaction {
    transaction: Transaction<'static, Sqlite>,
    pool: SqlitePool,
    statements: Arc<Statements>,
}

impl SqliteTransaction {
    pub(super) fn new(
        transaction: Transaction<'static, Sqlite>,
        pool: SqlitePool,
        statements: Arc<Statements>,
    ) -> Self {
        Self {
            transaction,
            pool,
            statements,
        }
    }
}

impl fmt::Debug for SqliteTransaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteTransaction").finish_non_exhaustive()
    }
}

/// How a fenced write inside the transaction went.
enum Written {
    /// It changed the record: commit.
    Done,
    /// The record is not this holder's: roll back.
    Fenced,
    /// The statement failed.
    Failed(sqlx::Error),
}

impl From<Result<sqlx::sqlite::SqliteQueryResult, sqlx::Error>> for Written {
    fn from(result: Result<sqlx::sqlite::SqliteQueryResult, sqlx::Error>) -> Self {
        match result {
            Ok(done) if done.rows_affected() == 1 => Self::Done,
            Ok(_) => Self::Fenced,
            Err(failure) => Self::Failed(failure),
        }
    }
}

impl SqliteTransaction {
    /// Commits after a fenced write, or rolls back: the handler's writes never outlive the
    /// lease they ran under, nor a write of the record that failed.
    async fn finish(self, written: Written) -> Result<(), StoreError> {
        let Self {
            transaction, pool, ..
        } = self;
        match written {
            // A commit refused as busy did nothing; any other failure of a commit (a disk
            // that failed as the WAL was synced) leaves the outcome unknown.
            Written::Done => transaction.commit().await.map_err(|e| {
                if busy(&e) {
                    StoreError::rolled_back(e)
                } else {
                    store_error(&pool, e)
                }
            }),
            Written::Fenced => {
                // A failed rollback ends the connection, which rolls back as well.
                let _ = transaction.rollback().await;
                Err(StoreError::LeaseLost)
            }
            // A failed statement undid its own changes (SQLite rolled the whole transaction
            // back for some errors, a full disk among them), and the rollback ends the rest:
            // nothing committed, the outcome is known.
            Written::Failed(failure) => match transaction.rollback().await {
                Ok(()) if failure.as_database_error().is_some() => {
                    Err(StoreError::rolled_back(failure))
                }
                _ => Err(store_error(&pool, failure)),
            },
        }
    }
}

#[async_trait]
impl StoreTransaction for SqliteTransaction {
    async fn complete(
        mut self: Box<Self>,
        key: &StoreKey,
        token: LeaseToken,
        response: &StoredResponse,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let updated = self
            .statements
            .complete(key, token, response, ttl)
            .execute(&mut *self.transaction)
            .await;
        self.finish(updated.into()).await
    }

    async fn record_step(
        mut self: Box<Self>,
        key: &StoreKey,
        token: LeaseToken,
        index: usize,
        step: &RecordedStep,
    ) -> Result<(), StoreError> {
        let recorded = self
            .statements
            .record_step(key, token, index, step)
            .execute(&mut *self.transaction)
            .await;
        self.finish(recorded.into()).await
    }

    async fn commit(self: Box<Self>) -> Result<(), StoreError> {
        let Self {
            transaction, pool, ..
        } = *self;
        transaction
            .commit()
            .await
            .map_err(|e| store_error(&pool, e))
    }

    async fn rollback(self: Box<Self>) -> Result<(), StoreError> {
        let Self {
            transaction, pool, ..
        } = *self;
        transaction
            .rollback()
            .await
            .map_err(|e| store_error(&pool, e))
    }

    fn connection(&mut self) -> &mut (dyn Any + Send) {
        let connection: &mut SqliteConnection = &mut self.transaction;
        connection
    }
}
