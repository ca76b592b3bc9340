//! Transactional mode: the handler's writes and the record's completion commit together.

use std::{any::Any, fmt, sync::Arc, time::Duration};

use async_trait::async_trait;
use sqlx::{PgConnection, PgPool, Postgres, Row, Transaction};

use super::{error, sql::Statements};
use idem_core::{
    replay::StoredResponse,
    scope::StoreKey,
    store::{LeaseToken, StoreError, StoreTransaction, operation::RecordedStep},
};

/// The transaction [`PostgresStore`](super::PostgresStore) opens for one request
/// ([`Store::begin`](idem_core::store::Store::begin)). The runtime ends it; handlers write in
/// it through its connection, a [`PgConnection`], which the [`Tx`](idem_core::extract::Tx)
/// extractor and [`Steps::transaction`](idem_core::steps::Steps::transaction) hand out
/// (`tx.conn::<PgConnection>()`).
pub struct PostgresTransaction {
    transaction: Transaction<'static, Postgres>,
    pool: PgPool,
    statements: Arc<Statements>,
}

impl PostgresTransaction {
    pub(super) fn new(
        transaction: Transaction<'static, Postgres>,
        pool: PgPool,
        statements: Arc<Statements>,
    ) -> Self {
        Self {
            transaction,
            pool,
            statements,
        }
    }
}

impl fmt::Debug for PostgresTransaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresTransaction")
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl StoreTransaction for PostgresTransaction {
    async fn complete(
        self: Box<Self>,
        key: &StoreKey,
        token: LeaseToken,
        response: &StoredResponse,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let Self {
            mut transaction,
            pool,
            statements,
        } = *self;
        let completed = statements
            .complete(key, token, response, ttl)
            .fetch_one(&mut *transaction)
            .await
            .and_then(|row| row.try_get::<bool, _>("done"));
        match completed {
            Ok(true) => transaction.commit().await.map_err(|e| {
                if refused_commit(&e) {
                    StoreError::rolled_back(e)
                } else {
                    error(&pool, e)
                }
            }),
            Ok(false) => {
                // Fenced: the handler's writes must not outlive the lease they ran under. A
                // failed rollback ends the connection, which rolls back as well.
                let _ = transaction.rollback().await;
                Err(StoreError::LeaseLost)
            }
            Err(failure) if aborted(&failure) => {
                // A statement of the handler failed and it answered all the same (a 409 for a
                // unique violation, say): the transaction can only roll back, and nothing the
                // handler wrote survives. Its answer is still the operation's result, so the
                // record is completed on its own, fenced as ever.
                transaction.rollback().await.map_err(|e| error(&pool, e))?;
                let done = statements
                    .complete(key, token, response, ttl)
                    .fetch_one(&pool)
                    .await
                    .and_then(|row| row.try_get::<bool, _>("done"))
                    .map_err(|e| error(&pool, e))?;
                super::completed(done)
            }
            Err(failure) => match transaction.rollback().await {
                // The completion failed and the rollback went through: nothing committed.
                Ok(()) if failure.as_database_error().is_some() => {
                    Err(StoreError::rolled_back(failure))
                }
                _ => Err(error(&pool, failure)),
            },
        }
    }

    async fn record_step(
        self: Box<Self>,
        key: &StoreKey,
        token: LeaseToken,
        index: usize,
        step: &RecordedStep,
    ) -> Result<(), StoreError> {
        let Self {
            mut transaction,
            pool,
            statements,
        } = *self;
        let recorded = statements
            .record_step(key, token, index, step)
            .fetch_one(&mut *transaction)
            .await
            .and_then(|row| row.try_get::<bool, _>("done"));
        match recorded {
            Ok(true) => transaction.commit().await.map_err(|e| {
                if refused_commit(&e) {
                    StoreError::rolled_back(e)
                } else {
                    error(&pool, e)
                }
            }),
            Ok(false) => {
                // Fenced: the step's writes must not outlive the lease they ran under.
                let _ = transaction.rollback().await;
                Err(StoreError::LeaseLost)
            }
            Err(failure) => match transaction.rollback().await {
                // A statement of the step failed (the transaction is aborted), or the record
                // did: nothing committed.
                Ok(()) if failure.as_database_error().is_some() => {
                    Err(StoreError::rolled_back(failure))
                }
                _ => Err(error(&pool, failure)),
            },
        }
    }

    async fn commit(self: Box<Self>) -> Result<(), StoreError> {
        let Self {
            transaction, pool, ..
        } = *self;
        transaction.commit().await.map_err(|e| error(&pool, e))
    }

    async fn rollback(self: Box<Self>) -> Result<(), StoreError> {
        let Self {
            transaction, pool, ..
        } = *self;
        transaction.rollback().await.map_err(|e| error(&pool, e))
    }

    fn connection(&mut self) -> &mut (dyn Any + Send) {
        let connection: &mut PgConnection = &mut self.transaction;
        connection
    }
}

/// Whether `error` says the transaction is aborted (SQLSTATE 25P02): an earlier statement in
/// it failed, so it can only roll back.
/// Whether a failed `COMMIT` was refused by the server, which then rolled the transaction
/// back: SQLSTATE class 40 (serialization failure, deadlock) or 23 (a deferred constraint).
/// A lost connection leaves the outcome unknown instead.
fn refused_commit(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|error| error.code())
        .is_some_and(|code| code.starts_with("40") || code.starts_with("23"))
}

fn aborted(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|error| error.code())
        .is_some_and(|code| code == "25P02")
}
