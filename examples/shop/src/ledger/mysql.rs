//! The ledger in MySQL or MariaDB: every write in the request's transaction ([`Tx`]), so it
//! commits with the idempotency record or not at all.
//!
//! MySQL has no `RETURNING`: a write that answers the row it changed reads it back in the same
//! transaction, where the row is locked by that write and the read sees it as written.

use idem::extract::Tx;
use sqlx::{MySql, MySqlConnection, MySqlPool, mysql::MySqlRow};

use super::{LedgerError, RefundOutcome};
use crate::model::{Payment, PaymentReceipt, Refund, Transfer};

/// The shop's tables, in InnoDB (transactions) and utf8mb4 (any character a client sends).
/// `seq` keeps the order in which rows were written.
pub(super) const MIGRATION: &str = r#"
CREATE TABLE IF NOT EXISTS shop_payments (
    seq             BIGINT       NOT NULL AUTO_INCREMENT UNIQUE,
    id              VARCHAR(64)  NOT NULL PRIMARY KEY,
    owner           VARCHAR(255) NOT NULL,
    amount          BIGINT       NOT NULL,
    currency        VARCHAR(16)  NOT NULL,
    status          VARCHAR(32)  NOT NULL,
    amount_refunded BIGINT       NOT NULL DEFAULT 0,
    created         BIGINT       NOT NULL,
    KEY shop_payments_owner_idx (owner, seq),
    CHECK (amount > 0),
    CHECK (amount_refunded BETWEEN 0 AND amount)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
CREATE TABLE IF NOT EXISTS shop_refunds (
    id      VARCHAR(64) NOT NULL PRIMARY KEY,
    payment VARCHAR(64) NOT NULL,
    amount  BIGINT      NOT NULL,
    status  VARCHAR(32) NOT NULL,
    created BIGINT      NOT NULL,
    FOREIGN KEY (payment) REFERENCES shop_payments (id),
    CHECK (amount > 0)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
CREATE TABLE IF NOT EXISTS shop_transfers (
    seq           BIGINT       NOT NULL AUTO_INCREMENT UNIQUE,
    id            VARCHAR(64)  NOT NULL PRIMARY KEY,
    owner         VARCHAR(255) NOT NULL,
    amount        BIGINT       NOT NULL,
    currency      VARCHAR(16)  NOT NULL,
    to_account    VARCHAR(64)  NOT NULL,
    status        VARCHAR(32)  NOT NULL,
    bank_transfer VARCHAR(64),
    created       BIGINT       NOT NULL,
    KEY shop_transfers_owner_idx (owner, seq),
    CHECK (amount > 0)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
CREATE TABLE IF NOT EXISTS shop_receipts (
    seq        BIGINT       NOT NULL AUTO_INCREMENT UNIQUE,
    id         VARCHAR(64)  NOT NULL PRIMARY KEY,
    owner      VARCHAR(255) NOT NULL,
    payment_id VARCHAR(64)  NOT NULL,
    amount     BIGINT       NOT NULL,
    currency   VARCHAR(16)  NOT NULL,
    created    BIGINT       NOT NULL,
    KEY shop_receipts_owner_idx (owner, seq)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
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

/// The shop's tables on a pool (the idempotency store's own).
#[derive(Clone, Debug)]
pub struct MySqlLedger {
    pool: MySqlPool,
}

impl MySqlLedger {
    /// Creates the shop's tables if they do not exist, and answers the ledger on `pool`.
    /// Instances that start together serialize on a named lock.
    pub async fn migrate(pool: &MySqlPool) -> Result<Self, sqlx::Error> {
        let mut conn = pool.acquire().await?;
        sqlx::query("SELECT GET_LOCK('shop ledger migration', 60)")
            .execute(&mut *conn)
            .await?;
        let migrated = sqlx::raw_sql(MIGRATION).execute(&mut *conn).await;
        sqlx::query("SELECT RELEASE_LOCK('shop ledger migration')")
            .execute(&mut *conn)
            .await?;
        migrated?;
        Ok(Self { pool: pool.clone() })
    }

    /// The pool the ledger reads from.
    pub fn pool(&self) -> &MySqlPool {
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
        .execute(tx.conn::<MySqlConnection>().await?)
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
        .execute(tx.conn::<MySqlConnection>().await?)
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
        // One conditional update: two refunds of one payment at once cannot both pass the
        // check (the row lock orders them, and an UPDATE reads the latest committed row, not
        // the transaction's snapshot). Then the row as this transaction left it.
        let updated = sqlx::query(
            "UPDATE shop_payments SET amount_refunded = amount_refunded + ? \
             WHERE id = ? AND owner = ? AND amount_refunded + ? <= amount",
        )
        .bind(refund.amount)
        .bind(&refund.payment)
        .bind(owner)
        .bind(refund.amount)
        .execute(tx.conn::<MySqlConnection>().await?)
        .await?
        .rows_affected();
        if updated == 0 {
            let refundable: Option<i64> = sqlx::query_scalar(
                "SELECT amount - amount_refunded FROM shop_payments WHERE id = ? AND owner = ?",
            )
            .bind(&refund.payment)
            .bind(owner)
            .fetch_optional(tx.conn::<MySqlConnection>().await?)
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
        .execute(tx.conn::<MySqlConnection>().await?)
        .await?;
        let sql = format!("SELECT {PAYMENT_COLUMNS} FROM shop_payments WHERE id = ?");
        let row = query_rows::<PaymentRow>(sql)
            .bind(&refund.payment)
            .fetch_one(tx.conn::<MySqlConnection>().await?)
            .await?;
        Ok(RefundOutcome::Refunded(payment(row)))
    }

    /// Writes a transfer on `conn`: a step's own transaction, which commits the row with the
    /// step's record.
    pub(super) async fn insert_transfer(
        conn: &mut MySqlConnection,
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
        let updated = sqlx::query("UPDATE shop_transfers SET status = 'settled' WHERE id = ?")
            .bind(id)
            .execute(tx.conn::<MySqlConnection>().await?)
            .await?
            .rows_affected();
        if updated == 0 {
            return Ok(None);
        }
        let sql = format!("SELECT {TRANSFER_COLUMNS} FROM shop_transfers WHERE id = ?");
        let row = query_rows::<TransferRow>(sql)
            .bind(id)
            .fetch_one(tx.conn::<MySqlConnection>().await?)
            .await?;
        Ok(Some(transfer(row)))
    }
}

/// A query whose text is built from the constant column lists above, never from input.
fn query_rows<'q, T>(sql: String) -> sqlx::query::QueryAs<'q, MySql, T, sqlx::mysql::MySqlArguments>
where
    T: for<'r> sqlx::FromRow<'r, MySqlRow>,
{
    sqlx::query_as(sqlx::AssertSqlSafe(sql))
}
