//! The ledger in PostgreSQL: every write in the request's transaction ([`Tx`]), so it commits
//! with the idempotency record or not at all.

use idem::extract::Tx;
use sqlx::{PgConnection, PgPool, Postgres, postgres::PgRow};

use super::{LedgerError, RefundOutcome};
use crate::model::{Payment, PaymentReceipt, Refund, Transfer};

/// The shop's tables. `seq` keeps the order in which rows were written.
pub(super) const MIGRATION: &str = r#"
CREATE TABLE IF NOT EXISTS shop_payments (
    seq             bigint GENERATED ALWAYS AS IDENTITY,
    id              text   PRIMARY KEY,
    owner           text   NOT NULL,
    amount          bigint NOT NULL CHECK (amount > 0),
    currency        text   NOT NULL,
    status          text   NOT NULL,
    amount_refunded bigint NOT NULL DEFAULT 0 CHECK (amount_refunded BETWEEN 0 AND amount),
    created         bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS shop_payments_owner_idx ON shop_payments (owner, seq);
CREATE TABLE IF NOT EXISTS shop_refunds (
    id      text   PRIMARY KEY,
    payment text   NOT NULL REFERENCES shop_payments (id),
    amount  bigint NOT NULL CHECK (amount > 0),
    status  text   NOT NULL,
    created bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS shop_transfers (
    seq        bigint GENERATED ALWAYS AS IDENTITY,
    id         text   PRIMARY KEY,
    owner      text   NOT NULL,
    amount     bigint NOT NULL CHECK (amount > 0),
    currency   text   NOT NULL,
    to_account text   NOT NULL,
    status     text   NOT NULL,
    created    bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS shop_transfers_owner_idx ON shop_transfers (owner, seq);
-- The bank's id of the money it moved. (Added after the table: a shop of the version before
-- gets the column at start.)
ALTER TABLE shop_transfers ADD COLUMN IF NOT EXISTS bank_transfer text;
CREATE TABLE IF NOT EXISTS shop_receipts (
    seq        bigint GENERATED ALWAYS AS IDENTITY,
    id         text   PRIMARY KEY,
    owner      text   NOT NULL,
    payment_id text   NOT NULL,
    amount     bigint NOT NULL,
    currency   text   NOT NULL,
    created    bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS shop_receipts_owner_idx ON shop_receipts (owner, seq);
"#;

const PAYMENT_COLUMNS: &str = "id, amount, currency, status, amount_refunded, created";
const TRANSFER_COLUMNS: &str =
    "id, amount, currency, to_account, status, coalesce(bank_transfer, ''), created";

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
pub struct PostgresLedger {
    pool: PgPool,
}

impl PostgresLedger {
    /// Creates the shop's tables if they do not exist, and answers the ledger on `pool`.
    /// Instances that start together serialize on an advisory lock.
    pub async fn migrate(pool: &PgPool) -> Result<Self, sqlx::Error> {
        let mut transaction = pool.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext('shop ledger migration'))")
            .execute(&mut *transaction)
            .await?;
        sqlx::raw_sql(MIGRATION).execute(&mut *transaction).await?;
        transaction.commit().await?;
        Ok(Self { pool: pool.clone() })
    }

    /// The pool the ledger reads from.
    pub fn pool(&self) -> &PgPool {
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
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&payment.id)
        .bind(owner)
        .bind(payment.amount)
        .bind(&payment.currency)
        .bind(&payment.status)
        .bind(payment.amount_refunded)
        .bind(payment.created)
        .execute(tx.conn::<PgConnection>().await?)
        .await?;
        Ok(())
    }

    pub(super) async fn insert_receipt(
        &self,
        tx: &mut Tx,
        owner: &str,
        receipt: &PaymentReceipt,
    ) -> Result<(), LedgerError> {
        let conn = tx.conn::<PgConnection>().await?;
        Ok(Self::insert_receipt_on(conn, owner, receipt).await?)
    }

    /// Writes a receipt on `conn`.
    pub(super) async fn insert_receipt_on(
        conn: &mut PgConnection,
        owner: &str,
        receipt: &PaymentReceipt,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(
            "INSERT INTO shop_receipts (id, owner, payment_id, amount, currency, created) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&receipt.id)
        .bind(owner)
        .bind(&receipt.payment_id)
        .bind(receipt.amount)
        .bind(&receipt.currency)
        .bind(receipt.created)
        .execute(conn)
        .await?;
        Ok(())
    }

    pub(super) async fn receipts(&self, owner: &str) -> Result<Vec<PaymentReceipt>, LedgerError> {
        let sql = "SELECT id, payment_id, amount, currency, created FROM shop_receipts \
                   WHERE owner = $1 ORDER BY seq"
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
            format!("SELECT {PAYMENT_COLUMNS} FROM shop_payments WHERE owner = $1 ORDER BY seq");
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
        let sql =
            format!("SELECT {PAYMENT_COLUMNS} FROM shop_payments WHERE owner = $1 AND id = $2");
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
        let conn = tx.conn::<PgConnection>().await?;
        Ok(Self::apply_refund(conn, owner, refund).await?)
    }

    /// Applies `refund` on `conn`, a transaction of the caller's: the payment's refunded
    /// amount and the refund's row.
    pub(super) async fn apply_refund(
        conn: &mut PgConnection,
        owner: &str,
        refund: &Refund,
    ) -> Result<RefundOutcome, sqlx::Error> {
        // One conditional update: two refunds of one payment at once cannot both pass the
        // check (the row lock orders them, and the second sees the first's amount).
        let sql = format!(
            "UPDATE shop_payments SET amount_refunded = amount_refunded + $3 \
             WHERE id = $1 AND owner = $2 AND amount_refunded + $3 <= amount \
             RETURNING {PAYMENT_COLUMNS}"
        );
        let updated = query_rows::<PaymentRow>(sql)
            .bind(&refund.payment)
            .bind(owner)
            .bind(refund.amount)
            .fetch_optional(&mut *conn)
            .await?;
        let Some(updated) = updated else {
            let refundable: Option<i64> = sqlx::query_scalar(
                "SELECT amount - amount_refunded FROM shop_payments WHERE id = $1 AND owner = $2",
            )
            .bind(&refund.payment)
            .bind(owner)
            .fetch_optional(&mut *conn)
            .await?;
            return Ok(match refundable {
                Some(refundable) => RefundOutcome::Exceeds { refundable },
                None => RefundOutcome::NotFound,
            });
        };
        sqlx::query(
            "INSERT INTO shop_refunds (id, payment, amount, status, created) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&refund.id)
        .bind(&refund.payment)
        .bind(refund.amount)
        .bind(&refund.status)
        .bind(refund.created)
        .execute(conn)
        .await?;
        Ok(RefundOutcome::Refunded(payment(updated)))
    }

    /// The payment `id` if it belongs to `owner`, read on `conn`.
    pub(super) async fn payment_on(
        conn: &mut PgConnection,
        owner: &str,
        id: &str,
    ) -> Result<Option<Payment>, sqlx::Error> {
        let sql =
            format!("SELECT {PAYMENT_COLUMNS} FROM shop_payments WHERE owner = $1 AND id = $2");
        let row = query_rows::<PaymentRow>(sql)
            .bind(owner)
            .bind(id)
            .fetch_optional(conn)
            .await?;
        Ok(row.map(payment))
    }

    /// Writes a transfer on `conn`: a step's own transaction, which commits the row with the
    /// step's record.
    pub(super) async fn insert_transfer(
        conn: &mut PgConnection,
        owner: &str,
        transfer: &Transfer,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(
            "INSERT INTO shop_transfers \
             (id, owner, amount, currency, to_account, status, bank_transfer, created) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
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
            format!("SELECT {TRANSFER_COLUMNS} FROM shop_transfers WHERE owner = $1 ORDER BY seq");
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
        let conn = tx.conn::<PgConnection>().await?;
        Ok(Self::settle_transfer_on(conn, id).await?)
    }

    /// Marks the transfer `id` settled on `conn`: a second time changes nothing.
    pub(super) async fn settle_transfer_on(
        conn: &mut PgConnection,
        id: &str,
    ) -> Result<Option<Transfer>, sqlx::Error> {
        let sql = format!(
            "UPDATE shop_transfers SET status = 'settled' WHERE id = $1 RETURNING {TRANSFER_COLUMNS}"
        );
        let row = query_rows::<TransferRow>(sql)
            .bind(id)
            .fetch_optional(conn)
            .await?;
        Ok(row.map(transfer))
    }
}

/// A query whose text is built from the constant column lists above, never from input.
fn query_rows<'q, T>(
    sql: String,
) -> sqlx::query::QueryAs<'q, Postgres, T, sqlx::postgres::PgArguments>
where
    T: for<'r> sqlx::FromRow<'r, PgRow>,
{
    sqlx::query_as(sqlx::AssertSqlSafe(sql))
}
