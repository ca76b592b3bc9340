//! Where the shop keeps its payments, refunds and transfers: in process memory, in
//! PostgreSQL, MySQL or SQLite inside each request's transaction, or in PostgreSQL beside a
//! Redis store.
//!
//! With the PostgreSQL, MySQL or SQLite store (`IDEM_STORE=postgres://...`, `mysql://...`,
//! `sqlite://...`) every write goes through the
//! request's [`Tx`]: the runtime completes the idempotency record in that same transaction
//! and commits once, so a payment row exists exactly when its stored response does. With the
//! Redis store and `SHOP_DATABASE_URL`, the tables are in that database, shared by every
//! shop, and each write is a local step of its operation, idempotent by the operation
//! ([`DatabaseLedger`]). With the memory store, or Redis without `SHOP_DATABASE_URL`, the
//! shop's data lives in this process's memory, and a handler's `Tx` is never opened.
//!
//! Reads (`GET`) are not idempotent operations and use the pool directly.

mod database;
mod memory;
mod mysql;
mod postgres;
mod sqlite;

use axum::response::{IntoResponse, Response};
use idem::{
    extract::{Tx, TxError},
    steps::{StepError, Steps},
};
use serde::{Deserialize, Serialize};

pub use self::{
    database::{DatabaseLedger, KEY_LIFETIME},
    memory::MemoryLedger,
    mysql::MySqlLedger,
    postgres::PostgresLedger,
    sqlite::SqliteLedger,
};
use crate::{
    model::{Payment, PaymentReceipt, Refund, Transfer},
    problem::{ShopProblem, ShopProblemKind},
};

/// The shop's data, in one of two places.
#[derive(Clone, Debug)]
pub enum Ledger {
    /// In this process's memory.
    Memory(MemoryLedger),
    /// In PostgreSQL, written in each request's transaction.
    Postgres(PostgresLedger),
    /// In MySQL or MariaDB, written in each request's transaction.
    MySql(MySqlLedger),
    /// In SQLite, in the store's file, written in each request's transaction.
    Sqlite(SqliteLedger),
    /// In PostgreSQL beside the idempotency store, each write a step of its operation.
    Database(DatabaseLedger),
}

/// What a refund found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RefundOutcome {
    /// Applied; the payment as it is now.
    Refunded(Payment),
    /// The caller has no such payment.
    NotFound,
    /// The refund is larger than what is left; this much is.
    Exceeds {
        /// What may still be refunded.
        refundable: i64,
    },
}

/// A ledger call that failed.
#[derive(Debug)]
pub enum LedgerError {
    /// The request's transaction could not be begun (503, key released).
    Tx(TxError),
    /// A statement failed (500, key released).
    Database(sqlx::Error),
}

impl From<TxError> for LedgerError {
    fn from(error: TxError) -> Self {
        Self::Tx(error)
    }
}

impl From<sqlx::Error> for LedgerError {
    fn from(error: sqlx::Error) -> Self {
        Self::Database(error)
    }
}

impl IntoResponse for LedgerError {
    fn into_response(self) -> Response {
        match self {
            Self::Tx(error) => error.into_response(),
            Self::Database(error) => {
                tracing::error!(%error, "a ledger statement failed");
                ShopProblem::new(
                    ShopProblemKind::Internal,
                    "the shop's database failed; nothing was changed, retry with the same \
                     Idempotency-Key",
                )
                .into_response()
            }
        }
    }
}

/// A ledger write of a step that failed: the step's transaction rolled back, and the
/// operation resumes from it.
fn ledger_failed(error: sqlx::Error) -> StepError {
    StepError::retryable(LedgerError::Database(error))
}

impl Ledger {
    /// A new, empty ledger in memory.
    pub fn memory() -> Self {
        Self::Memory(MemoryLedger::default())
    }

    /// Where the data lives, for the start-up message.
    pub fn describe(&self) -> &'static str {
        match self {
            Self::Memory(_) => "in this process's memory",
            Self::Postgres(_) => "in PostgreSQL, in the idempotency record's transaction",
            Self::MySql(_) => "in MySQL, in the idempotency record's transaction",
            Self::Sqlite(_) => "in SQLite, in the idempotency record's file and transaction",
            Self::Database(_) => {
                "in PostgreSQL (SHOP_DATABASE_URL), shared by every shop; each write a step of \
                 its operation"
            }
        }
    }

    /// Records a new payment of `owner`.
    pub async fn insert_payment(
        &self,
        tx: &mut Tx,
        owner: &str,
        payment: &Payment,
    ) -> Result<(), LedgerError> {
        match self {
            Self::Memory(memory) => {
                memory.insert_payment(owner, payment);
                Ok(())
            }
            Self::Postgres(postgres) => postgres.insert_payment(tx, owner, payment).await,
            Self::MySql(mysql) => mysql.insert_payment(tx, owner, payment).await,
            Self::Sqlite(sqlite) => sqlite.insert_payment(tx, owner, payment).await,
            // No operation to find it by (a gRPC call): a row of its own.
            Self::Database(database) => {
                database.upsert_payment(&payment.id, owner, payment).await?;
                Ok(())
            }
        }
    }

    /// Records a new payment of `owner` as the step `ledger` of its operation, and answers
    /// the payment as recorded. In PostgreSQL beside Redis, the row is keyed by the step, so
    /// that a run of the operation after a crash between the row and its record answers the
    /// row of the first run, and writes no second payment. Elsewhere, the row is written in
    /// the request's transaction (PostgreSQL) or in memory, as [`insert_payment`] does.
    ///
    /// [`insert_payment`]: Self::insert_payment
    pub async fn record_payment(
        &self,
        tx: &mut Tx,
        steps: &mut Steps,
        owner: &str,
        payment: Payment,
    ) -> Result<Payment, crate::problem::ShopError> {
        let Self::Database(database) = self else {
            self.insert_payment(tx, owner, &payment).await?;
            return Ok(payment);
        };
        let operation = steps.key_for("ledger");
        let payment = steps
            .local("ledger", || async move {
                database
                    .upsert_payment(operation.as_str(), owner, &payment)
                    .await
                    .map_err(ledger_failed)
            })
            .await?;
        Ok(payment)
    }

    /// Records the receipt of one of `owner`'s payments.
    pub async fn insert_receipt(
        &self,
        tx: &mut Tx,
        owner: &str,
        receipt: &PaymentReceipt,
    ) -> Result<(), LedgerError> {
        match self {
            Self::Memory(memory) => {
                memory.insert_receipt(owner, receipt);
                Ok(())
            }
            Self::Postgres(postgres) => postgres.insert_receipt(tx, owner, receipt).await,
            Self::MySql(mysql) => mysql.insert_receipt(tx, owner, receipt).await,
            Self::Sqlite(sqlite) => sqlite.insert_receipt(tx, owner, receipt).await,
            Self::Database(database) => Ok(database.insert_receipt(owner, receipt).await?),
        }
    }

    /// The payment receipts of `owner`, oldest first.
    pub async fn receipts(&self, owner: &str) -> Result<Vec<PaymentReceipt>, LedgerError> {
        match self {
            Self::Memory(memory) => Ok(memory.receipts(owner)),
            Self::Postgres(postgres) => postgres.receipts(owner).await,
            Self::MySql(mysql) => mysql.receipts(owner).await,
            Self::Sqlite(sqlite) => sqlite.receipts(owner).await,
            Self::Database(database) => database.tables().receipts(owner).await,
        }
    }

    /// The payments of `owner`, oldest first.
    pub async fn payments(&self, owner: &str) -> Result<Vec<Payment>, LedgerError> {
        match self {
            Self::Memory(memory) => Ok(memory.payments(owner)),
            Self::Postgres(postgres) => postgres.payments(owner).await,
            Self::MySql(mysql) => mysql.payments(owner).await,
            Self::Sqlite(sqlite) => sqlite.payments(owner).await,
            Self::Database(database) => database.tables().payments(owner).await,
        }
    }

    /// The payment `id` if it belongs to `owner`.
    pub async fn payment(&self, owner: &str, id: &str) -> Result<Option<Payment>, LedgerError> {
        match self {
            Self::Memory(memory) => Ok(memory.payment(owner, id)),
            Self::Postgres(postgres) => postgres.payment(owner, id).await,
            Self::MySql(mysql) => mysql.payment(owner, id).await,
            Self::Sqlite(sqlite) => sqlite.payment(owner, id).await,
            Self::Database(database) => database.tables().payment(owner, id).await,
        }
    }

    /// Applies `refund` to its payment, if the payment is `owner`'s and has that much left.
    pub async fn refund(
        &self,
        tx: &mut Tx,
        owner: &str,
        refund: &Refund,
    ) -> Result<RefundOutcome, LedgerError> {
        match self {
            Self::Memory(memory) => Ok(memory.refund(owner, refund)),
            Self::Postgres(postgres) => postgres.refund(tx, owner, refund).await,
            Self::MySql(mysql) => mysql.refund(tx, owner, refund).await,
            Self::Sqlite(sqlite) => sqlite.refund(tx, owner, refund).await,
            // No operation to find it by: the refund's own.
            Self::Database(database) => Ok(database.refund(&refund.id, owner, refund).await?.0),
        }
    }

    /// Applies `refund` as the step `ledger` of its operation, and answers what it found with
    /// the refund as recorded. In PostgreSQL beside Redis, the refund's row is keyed by the
    /// step, so that a run of the operation after a crash between the row and its record
    /// answers the first run's refund, and refunds nothing twice. Elsewhere, as
    /// [`refund`](Self::refund).
    pub async fn record_refund(
        &self,
        tx: &mut Tx,
        steps: &mut Steps,
        owner: &str,
        refund: Refund,
    ) -> Result<(RefundOutcome, Refund), crate::problem::ShopError> {
        let Self::Database(database) = self else {
            let outcome = self.refund(tx, owner, &refund).await?;
            return Ok((outcome, refund));
        };
        let operation = steps.key_for("ledger");
        let recorded = steps
            .local("ledger", || async move {
                database
                    .refund(operation.as_str(), owner, &refund)
                    .await
                    .map_err(ledger_failed)
            })
            .await?;
        Ok(recorded)
    }

    /// Records a new transfer of `owner`, as the step `ledger` of its operation: a run that
    /// resumes the operation after this step gets the transfer it recorded, and writes nothing.
    ///
    /// In PostgreSQL, MySQL and SQLite the row is written in the step's own transaction, which
    /// commits it with the step's record: the row exists exactly when the step is recorded. In memory the row
    /// and the record are two writes; both go with the process. In PostgreSQL beside Redis
    /// they are two writes too, and the row is keyed by the step: a run of the operation after
    /// a crash between them answers the row of the first run, and writes no second one.
    pub async fn record_transfer(
        &self,
        steps: &mut Steps,
        owner: &str,
        transfer: Transfer,
    ) -> Result<Transfer, StepError> {
        match self {
            Self::Memory(memory) => {
                steps
                    .local("ledger", || async move {
                        memory.insert_transfer(owner, &transfer);
                        Ok(transfer)
                    })
                    .await
            }
            Self::Postgres(_) => {
                // The step's future may borrow its connection only: what it needs is moved in.
                let owner = owner.to_owned();
                steps
                    .transaction("ledger", |conn: &mut sqlx::PgConnection| {
                        Box::pin(async move {
                            PostgresLedger::insert_transfer(conn, &owner, &transfer)
                                .await
                                .map_err(ledger_failed)?;
                            Ok(transfer)
                        })
                    })
                    .await
            }
            Self::MySql(_) => {
                let owner = owner.to_owned();
                steps
                    .transaction("ledger", |conn: &mut sqlx::MySqlConnection| {
                        Box::pin(async move {
                            MySqlLedger::insert_transfer(conn, &owner, &transfer)
                                .await
                                .map_err(ledger_failed)?;
                            Ok(transfer)
                        })
                    })
                    .await
            }
            Self::Sqlite(_) => {
                let owner = owner.to_owned();
                steps
                    .transaction("ledger", |conn: &mut sqlx::SqliteConnection| {
                        Box::pin(async move {
                            SqliteLedger::insert_transfer(conn, &owner, &transfer)
                                .await
                                .map_err(ledger_failed)?;
                            Ok(transfer)
                        })
                    })
                    .await
            }
            Self::Database(database) => {
                let operation = steps.key_for("ledger");
                steps
                    .local("ledger", || async move {
                        database
                            .upsert_transfer(operation.as_str(), owner, &transfer)
                            .await
                            .map_err(ledger_failed)
                    })
                    .await
            }
        }
    }

    /// The transfers of `owner`, oldest first.
    pub async fn transfers(&self, owner: &str) -> Result<Vec<Transfer>, LedgerError> {
        match self {
            Self::Memory(memory) => Ok(memory.transfers(owner)),
            Self::Postgres(postgres) => postgres.transfers(owner).await,
            Self::MySql(mysql) => mysql.transfers(owner).await,
            Self::Sqlite(sqlite) => sqlite.transfers(owner).await,
            Self::Database(database) => database.tables().transfers(owner).await,
        }
    }

    /// Marks the transfer `id` settled (whoever owns it: the bank is calling), and answers
    /// it as it is now, or `None` if there is no such transfer.
    pub async fn settle_transfer(
        &self,
        tx: &mut Tx,
        id: &str,
    ) -> Result<Option<Transfer>, LedgerError> {
        match self {
            Self::Memory(memory) => Ok(memory.settle_transfer(id)),
            Self::Postgres(postgres) => postgres.settle_transfer(tx, id).await,
            Self::MySql(mysql) => mysql.settle_transfer(tx, id).await,
            Self::Sqlite(sqlite) => sqlite.settle_transfer(tx, id).await,
            Self::Database(database) => Ok(database.settle_transfer(id).await?),
        }
    }
}
