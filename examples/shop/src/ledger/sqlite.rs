//! The ledger in SQLite, in the idempotency store's file: every write in the request's
//! transaction ([`Tx`]), so it commits with the idempotency record or not at all.
//!
//! The request's transaction holds the file's write lock (`BEGIN IMMEDIATE`) from the
//! handler's first write, so a write that answers the row it changed reads it back with
//! `RETURNING`, and no other writer comes in between.

use idem::extract::Tx;
use sqlx::{Sqlite, SqliteConnection, SqlitePool, sqlite::SqliteRow};

use super::{LedgerError, RefundOutcome};
use crate::model::{Payment, PaymentReceipt, Refund, Transfer};

/// The shop's tables, `STRICT` (a value of another type is refused). `seq`, the rowid, keeps
/// the order in which rows were written.
pub(super) const MIGRATION: &str = r#"
CREATE TABLE IF NOT EXISTS shop_payments (
    seq             INTEGER PRIMARY KEY,
    id              TEXT    NOT NULL UNIQUE,
    owner           TEXT    NOT NULL,
    amount          INTEGER NOT NULL CHECK (amount > 0),
    currency        TEXT    NOT NULL,
    status          TEXT    NOT NULL,
    amount_refunded INTEGER NOT NULL DEFAULT 0,
    created         INTEGER NOT NULL,
    CHECK (amount_refunded BETWEEN 0 AND amount)
) STRICT;
CREATE INDEX IF NOT EXISTS shop_payments_owner_idx ON shop_payments (owner, seq);
CREATE TABLE IF NOT EXISTS shop_refunds (
    id      TEXT    NOT NULL PRIMARY KEY,
    payment TEXT    NOT NULL REFERENCES shop_payments (id),
    amount  INTEGER NOT NULL CHECK (amount > 0),
    status  TEXT    NOT NULL,
    created INTEGER NOT NULL
) STRICT;
CREATE TABLE IF NOT EXISTS shop_transfers (
    seq           INTEGER PRIMARY KEY,
    id            TEXT    NOT NULL UNIQUE,
    owner         TEXT    NOT NULL,
    amount        INTEGER NOT NULL CHECK (amount > 0),
    currency      TEXT    NOT NULL,
    to_account    TEXT    NOT NULL,
    status        TEXT    NOT NULL,
    bank_transfer TEXT,
    created       INTEGER NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS shop_transfers_owner_idx ON shop_transfers (owner, seq);
CREATE TABLE IF NOT EXISTS shop_receipts (
    seq        INTEGER PRIMARY KEY,
    id         TEXT    NOT NULL UNIQUE,
    owner      TEXT    NOT NULL,
    payment_id TEXT    NOT NULL,
    amount     INTEGER NOT NULL,
    currency   TEXT    NOT NULL,
    created    INTEGER NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS shop_receipts_owner_idx ON shop_receipts (owner, seq);
"#;

const PAYMENT_COLUMNS: &str = "id, amount, currency, status, amount_refunded, created";
const TRANSFER_COLUMNS: &str =
    "id, amount, currency, to_account, status, COALESCE(bank_transfer, ''), created";

type PaymentRow = (String, i64, String, String, i64, i64);
type TransferRow = (String, i64, String, String, String, String, i64);

fn payment((id, amount, currency, status, amount_refunded, created): PaymentRow) -> Payment {
    Payment {
        id,
        amount,
        currency,
        status,
        amount_refunded,
        created,
    }
}

fn transfer(
    (id, amount, currency, to_account, status, bank_transfer, created): TransferRow,
) -> Transfer {
    Transfer {
        id,
        amount,
        currency,
        to_account,
        bank_transfer,
        status,
        created,
    }
}

/// The shop's tables in the store's file (its pool).
#[derive(Clone, Debug)]
pub struct SqliteLedger {
    pool: SqlitePool,
}

impl SqliteLedger {
    /// Creates the shop's tables if they do not exist, and answers the ledger on `pool`. One
    /// transaction: processes that start together on one file take turns.
    pub async fn migrate(pool: &SqlitePool) -> Result<Self, sqlx::Error> {
        let mut conn = pool.acquire().await?;
        let mut transaction = sqlx::Connection::begin_with(&mut *conn, "BEGIN IMMEDIATE").await?;
        sqlx::raw_sql(MIGRATION).execute(&mut *transaction).await?;
        transaction.commit().await?;
        Ok(Self { pool: pool.clone() })
    }

    /// The pool the ledger reads from.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    pub(super) async fn insert_payment(
        &self,
        tx: &mut Tx,
        owner: &str,
        payment: &Payment,
    ) -> Result<(), LedgerError> {
        sqlx::query(
            "INSERT INTO shop_payments (id, owner, amount, currency, status, amount_refunded, created) \
             VALUES (?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&payment.id)
        .bind(owner)
        .bind(payment.amount)
        .bind(&payment.currency)
        .bind(&payment.status)
        .bind(payment.amount_refunded)
        .bind(payment.created)
        .execute(tx.conn::<SqliteConnection>().await?)
        .await?;
        Ok(())
    }

    pub(super) async fn insert_receipt(
        &self,
        tx: &mut Tx,
        owner: &str,
        receipt: &PaymentReceipt,
    ) -> Result<(), LedgerError> {
        sqlx::query(
            "INSERT INTO shop_receipts (id, owner, payment_id, amount, currency, created) \
             VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(&receipt.id)
        .bind(owner)
        .bind(&receipt.payment_id)
        .bind(receipt.amount)
        .bind(&receipt.currency)
        .bind(receipt.created)
        .execute(tx.conn::<SqliteConnection>().await?)
        .await?;
        Ok(())
    }

    pub(super) async fn receipts(&self, owner: &str) -> Result<Vec<PaymentReceipt>, LedgerError> {
        let sql = "SELECT id, payment_id, amount, currency, created FROM shop_receipts \
                   WHERE owner = ? ORDER BY seq"
            .to_owned();
        let rows = query_rows::<(String, String, i64, String, i64)>(sql)
            .bind(owner)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows
            .into_iter()
            .map(
                |(id, payment_id, amount, currency, created)| PaymentReceipt {
                    id,
                    payment_id,
                    amount,
                    currency,
                    created,
                },
            )
            .collect())
    }

    pub(super) async fn payments(&self, owner: &str) -> Result<Vec<Payment>, LedgerError> {
        let sql =
            format!("SELECT {PAYMENT_COLUMNS} FROM shop_payments WHERE owner = ? ORDER BY seq");
        let rows = query_rows::<PaymentRow>(sql)
            .bind(owner)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().map(payment).collect())
    }

    pub(super) async fn payment(
        &self,
        owner: &str,
        id: &str,
    ) -> Result<Option<Payment>, LedgerError> {
        let sql = format!("SELECT {PAYMENT_COLUMNS} FROM shop_payments WHERE owner = ? AND id = ?");
        let row = query_rows::<PaymentRow>(sql)
            .bind(owner)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(payment))
    }

    pub(super) async fn refund(
        &self,
        tx: &mut Tx,
        owner: &str,
        refund: &Refund,
    ) -> Result<RefundOutcome, LedgerError> {
        // One conditional update, under the file's write lock, which the transaction holds:
        // two refunds of one payment take turns, and the second sees the first.
        let updated = sqlx::query(
            "UPDATE shop_payments SET amount_refunded = amount_refunded + ? \
             WHERE id = ? AND owner = ? AND amount_refunded + ? <= amount",
        )
        .bind(refund.amount)
        .bind(&refund.payment)
        .bind(owner)
        .bind(refund.amount)
        .execute(tx.conn::<SqliteConnection>().await?)
        .await?
        .rows_affected();
        if updated == 0 {
            let refundable: Option<i64> = sqlx::query_scalar(
                "SELECT amount - amount_refunded FROM shop_payments WHERE id = ? AND owner = ?",
            )
            .bind(&refund.payment)
            .bind(owner)
            .fetch_optional(tx.conn::<SqliteConnection>().await?)
            .await?;
            return Ok(match refundable {
                Some(refundable) => RefundOutcome::Exceeds { refundable },
                None => RefundOutcome::NotFound,
            });
        }
        sqlx::query(
            "INSERT INTO shop_refunds (id, payment, amount, status, created) VALUES (?, ?, ?, ?, ?)",
        )
        .bind(&refund.id)
        .bind(&refund.payment)
        .bind(refund.amount)
        .bind(&refund.status)
        .bind(refund.created)
        .execute(tx.conn::<SqliteConnection>().await?)
        .await?;
        let sql = format!("SELECT {PAYMENT_COLUMNS} FROM shop_payments WHERE id = ?");
        let row = query_rows::<PaymentRow>(sql)
            .bind(&refund.payment)
            .fetch_one(tx.conn::<SqliteConnection>().await?)
            .await?;
        Ok(RefundOutcome::Refunded(payment(row)))
    }

    /// Writes a transfer on `conn`: a step's own transaction, which commits the row with the
    /// step's record.
    pub(super) async fn insert_transfer(
        conn: &mut SqliteConnection,
        owner: &str,
        transfer: &Transfer,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(
            "INSERT INTO shop_transfers \
             (id, owner, amount, currency, to_account, status, bank_transfer, created) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&transfer.id)
        .bind(owner)
        .bind(transfer.amount)
        .bind(&transfer.currency)
        .bind(&transfer.to_account)
        .bind(&transfer.status)
        .bind(&transfer.bank_transfer)
        .bind(transfer.created)
        .execute(conn)
        .await?;
        Ok(())
    }

    pub(super) async fn transfers(&self, owner: &str) -> Result<Vec<Transfer>, LedgerError> {
        let sql =
            format!("SELECT {TRANSFER_COLUMNS} FROM shop_transfers WHERE owner = ? ORDER BY seq");
        let rows = query_rows::<TransferRow>(sql)
            .bind(owner)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().map(transfer).collect())
    }

    pub(super) async fn settle_transfer(
        &self,
        tx: &mut Tx,
        id: &str,
    ) -> Result<Option<Transfer>, LedgerError> {
        let sql = format!(
            "UPDATE shop_transfers SET status = 'settled' WHERE id = ? RETURNING {TRANSFER_COLUMNS}"
        );
        let row = query_rows::<TransferRow>(sql)
            .bind(id)
            .fetch_optional(tx.conn::<SqliteConnection>().await?)
            .await?;
        Ok(row.map(transfer))
    }
}

/// A query whose text is built from the constant column lists above, never from input.
fn query_rows<'q, T>(
    sql: String,
) -> sqlx::query::QueryAs<'q, Sqlite, T, sqlx::sqlite::SqliteArguments>
where
    T: for<'r> sqlx::FromRow<'r, SqliteRow>,
{
    sqlx::query_as(sqlx::AssertSqlSafe(sql))
}
