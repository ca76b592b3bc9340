//! Transactional mode: the handler's writes and the record's completion commit together.

use std::{any::Any, fmt, sync::Arc, time::Duration};

use async_trait::async_trait;
use sqlx::{MySql, MySqlConnection, MySqlPool, Transaction};

use super::{
    errors::{refused_commit, store_error},
    packet::Packet,
    sql::Statements,
};
use idem_core::{
    replay::StoredResponse,
    scope::StoreKey,
    store::{LeaseToken, StoreError, StoreTransaction, operation::RecordedStep},
};

/// The transaction [`MySqlStore`](super::MySqlStore) opens for one request
/// ([`Store::begin`](idem_core::store::Store::begin)). The runtime ends it; handlers write in
/// it through its connection, a [`MySqlConnection`], which the [`Tx`](idem_core::extract::Tx)
/// extractor and [`Steps::transaction`](idem_core::steps::Steps::transaction) hand out
/// (`tx.conn::<MySqlConnection>()`).
pub struct MySqlTransaction {
    transaction: Transaction<'static, MySql>,
    pool: MySqlPool,
    statements: Arc<Statements>,
    packet: Arc<Packet>,
}

impl MySqlTransaction {
    pub(super) fn new(
        transaction: Transaction<'static, MySql>,
        pool: MySqlPool,
        statements: Arc<Statements>,
        packet: Arc<Packet>,
    ) -> Self {
        Self {
            transaction,
            pool,
            statements,
            packet,
        }
    }
}

impl fmt::Debug for MySqlTransaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MySqlTransaction").finish_non_exhaustive()
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

impl MySqlTransaction {
    /// Commits after a fenced write, or rolls back: the handler's writes never outlive the
    /// lease they ran under, nor a write of the record that failed.
    async fn finish(self, written: Written) -> Result<(), StoreError> {
        let Self {
            transaction, pool, ..
        } = self;
        match written {
            Written::Done => transaction.commit().await.map_err(|e| {
                if refused_commit(&e) {
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
            // A deadlock rolled the whole transaction back already; a lock wait timeout, a
            // statement timeout or a packet too large rolled the statement back, and the
            // rollback ends the rest. Either way nothing committed: the outcome is known.
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
impl StoreTransaction for MySqlTransaction {
    async fn complete(
        mut self: Box<Self>,
        key: &StoreKey,
        token: LeaseToken,
        response: &StoredResponse,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let packet = Arc::clone(&self.packet);
        let fitted = packet
            .fit(&mut *self.transaction, &self.pool, response)
            .await;
        let kept = match fitted {
            Ok(kept) => kept,
            Err(error) => {
                let _ = self.transaction.rollback().await;
                return Err(error);
            }
        };
        let updated = self
            .statements
            .complete(key, token, &kept, ttl)
            .execute(&mut *self.transaction)
            .await;
        let written = match updated {
            Ok(done) if done.rows_affected() == 1 => Written::Done,
            Ok(_) => Written::Fenced,
            Err(failure) => Written::Failed(failure),
        };
        self.finish(written).await
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
        let written = match recorded {
            Ok(done) if done.rows_affected() == 1 => Written::Done,
            Ok(_) => Written::Fenced,
            Err(failure) => Written::Failed(failure),
        };
        self.finish(written).await
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
        let connection: &mut MySqlConnection = &mut self.transaction;
        connection
    }
}
