//! The ledger in PostgreSQL beside a store of its own (Redis, with `SHOP_DATABASE_URL`): the
//! tables every shop shares, written on the pool, each write idempotent by its operation.
//!
//! With the idempotency records in Redis, a payment's row and its record are two writes, in
//! two systems: a shop that dies between them leaves the row, and the run that takes the
//! operation over writes it again. So each write here is a local step of its operation
//! ([`Steps::local`](idem::steps::Steps::local)), and its row carries the key of that step
//! ([`Steps::key_for`](idem::steps::Steps::key_for), derived from the operation's record), in
//! a column with a unique index: a step run twice finds the row of its first run, and
//! answers it, rather than writing a second one.
//!
//! A row keeps its operation's key for [`KEY_LIFETIME`]: a client that reuses an
//! `Idempotency-Key` after its record expired starts a new operation under the same derived
//! key, and the old row gives the key up to the new one.

use std::time::Duration;

use sqlx::{PgPool, Postgres, Transaction};

use super::{PostgresLedger, RefundOutcome};
use crate::model::{Payment, PaymentReceipt, Refund, Transfer, now};

/// How long a row answers for its operation's key: a day, the TTL of the shop's routes and of
/// the bank's, so that an operation's ledger row and its bank transfer belong to its key for
/// as long as each other. Past it, the key is another operation's.
pub const KEY_LIFETIME: Duration = Duration::from_secs(24 * 60 * 60);

/// The operation keys, added to the shop's tables (`ledger::postgres`'s), which a shop on the
/// PostgreSQL store leaves empty. Only once: `ALTER TABLE` and `CREATE INDEX` lock a table
/// even when there is nothing to do, and a shop that starts beside others writing their
/// books would then deadlock with them.
const MIGRATION: &str = r#"
DO $$
DECLARE
    books text;
BEGIN
    FOREACH books IN ARRAY ARRAY['shop_payments', 'shop_refunds', 'shop_transfers'] LOOP
        IF NOT EXISTS (
            SELECT FROM pg_attribute
            WHERE attrelid = to_regclass(books) AND attname = 'operation' AND NOT attisdropped
        ) THEN
            EXECUTE format('ALTER TABLE %I ADD COLUMN operation text', books);
            EXECUTE format('CREATE UNIQUE INDEX %I ON %I (operation)', books || '_operation_idx', books);
        END IF;
    END LOOP;
END
$$;
"#;

/// Frees the key of a row older than [`KEY_LIFETIME`], per table; `$1` the key, `$2` the
/// oldest `created` that still answers for it.
const FREE_PAYMENT: &str =
    "UPDATE shop_payments SET operation = NULL WHERE operation = $1 AND created < $2";
const FREE_REFUND: &str =
    "UPDATE shop_refunds SET operation = NULL WHERE operation = $1 AND created < $2";
const FREE_TRANSFER: &str =
    "UPDATE shop_transfers SET operation = NULL WHERE operation = $1 AND created < $2";

/// The shop's tables in a database of their own, beside the idempotency store. Reads are
/// [`PostgresLedger`]'s.
#[derive(Clone, Debug)]
pub struct DatabaseLedger {
    tables: PostgresLedger,
}

impl DatabaseLedger {
    /// Creates the shop's tables and their operation keys if they do not exist, and answers
    /// the ledger on `pool`. Instances that start together serialize on an advisory lock.
    pub async fn migrate(pool: &PgPool) -> Result<Self, sqlx::Error> {
        let tables = PostgresLedger::migrate(pool).await?;
        let mut transaction = pool.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext('shop ledger migration'))")
            .execute(&mut *transaction)
            .await?;
        sqlx::raw_sql(MIGRATION).execute(&mut *transaction).await?;
        transaction.commit().await?;
        Ok(Self { tables })
    }

    /// The tables, for reads.
    pub(super) fn tables(&self) -> &PostgresLedger {
        &self.tables
    }

    fn pool(&self) -> &PgPool {
        self.tables.pool()
    }

    /// Writes `payment` of `owner` for the operation whose step key is `operation`, and
    /// answers the row: this one, or the one an earlier run of the operation wrote.
    pub async fn upsert_payment(
        &self,
        operation: &str,
        owner: &str,
        payment: &Payment,
    ) -> Result<Payment, sqlx::Error> {
        let mut tx = self.freeing(FREE_PAYMENT, operation).await?;
        let row: (String, i64, String, String, i64, i64) = sqlx::query_as(
            "INSERT INTO shop_payments \
             (id, owner, amount, currency, status, amount_refunded, created, operation) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
             ON CONFLICT (operation) DO UPDATE SET operation = excluded.operation \
             RETURNING id, amount, currency, status, amount_refunded, created",
        )
        .bind(&payment.id)
        .bind(owner)
        .bind(payment.amount)
        .bind(&payment.currency)
        .bind(&payment.status)
        .bind(payment.amount_refunded)
        .bind(payment.created)
        .bind(operation)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        let (id, amount, currency, status, amount_refunded, created) = row;
        Ok(Payment {
            id,
            amount,
            currency,
            status,
            amount_refunded,
            created,
        })
    }

    /// Writes `transfer` of `owner` for the operation whose step key is `operation`, and
    /// answers the row: this one, or the one an earlier run of the operation wrote.
    pub async fn upsert_transfer(
        &self,
        operation: &str,
        owner: &str,
        transfer: &Transfer,
    ) -> Result<Transfer, sqlx::Error> {
        let mut tx = self.freeing(FREE_TRANSFER, operation).await?;
        let (id, status, created): (String, String, i64) = sqlx::query_as(
            "INSERT INTO shop_transfers \
             (id, owner, amount, currency, to_account, status, bank_transfer, created, operation) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
             ON CONFLICT (operation) DO UPDATE SET operation = excluded.operation \
             RETURNING id, status, created",
        )
        .bind(&transfer.id)
        .bind(owner)
        .bind(transfer.amount)
        .bind(&transfer.currency)
        .bind(&transfer.to_account)
        .bind(&transfer.status)
        .bind(&transfer.bank_transfer)
        .bind(transfer.created)
        .bind(operation)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        // The rest is the operation's own (its request, and its bank step's answer).
        Ok(Transfer {
            id,
            status,
            created,
            ..transfer.clone()
        })
    }

    /// Applies `refund` of `owner`'s payment for the operation whose step key is
    /// `operation`, in one transaction: the payment's refunded amount and the refund's row,
    /// once. A run that finds the operation's row answers that refund, and the payment as it
    /// is now.
    pub async fn refund(
        &self,
        operation: &str,
        owner: &str,
        refund: &Refund,
    ) -> Result<(RefundOutcome, Refund), sqlx::Error> {
        let mut tx = self.freeing(FREE_REFUND, operation).await?;
        let earlier: Option<(String, i64, String, i64)> = sqlx::query_as(
            "SELECT id, amount, status, created FROM shop_refunds WHERE operation = $1",
        )
        .bind(operation)
        .fetch_optional(&mut *tx)
        .await?;
        if let Some((id, amount, status, created)) = earlier {
            let payment = PostgresLedger::payment_on(&mut tx, owner, &refund.payment).await?;
            tx.commit().await?;
            let outcome = payment.map_or(RefundOutcome::NotFound, RefundOutcome::Refunded);
            let refund = Refund {
                id,
                amount,
                status,
                created,
                ..refund.clone()
            };
            return Ok((outcome, refund));
        }
        let outcome = PostgresLedger::apply_refund(&mut tx, owner, refund).await?;
        if let RefundOutcome::Refunded(_) = outcome {
            sqlx::query("UPDATE shop_refunds SET operation = $2 WHERE id = $1")
                .bind(&refund.id)
                .bind(operation)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok((outcome, refund.clone()))
    }

    /// Writes a receipt (the receipts consumer's, whose redelivery after a crash between the
    /// row and its record writes a second copy: a receipt is a courtesy, not money).
    pub(super) async fn insert_receipt(
        &self,
        owner: &str,
        receipt: &PaymentReceipt,
    ) -> Result<(), sqlx::Error> {
        let mut conn = self.pool().acquire().await?;
        PostgresLedger::insert_receipt_on(&mut conn, owner, receipt).await
    }

    /// Marks the transfer `id` settled: a second time changes nothing.
    pub(super) async fn settle_transfer(&self, id: &str) -> Result<Option<Transfer>, sqlx::Error> {
        let mut conn = self.pool().acquire().await?;
        PostgresLedger::settle_transfer_on(&mut conn, id).await
    }

    /// A transaction in which a row of `operation` older than [`KEY_LIFETIME`] (an earlier
    /// operation under a reused key) has given the key up, by `free`.
    async fn freeing(
        &self,
        free: &'static str,
        operation: &str,
    ) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
        let mut tx = self.pool().begin().await?;
        let oldest = now() - i64::try_from(KEY_LIFETIME.as_secs()).unwrap_or(i64::MAX);
        sqlx::query(free)
            .bind(operation)
            .bind(oldest)
            .execute(&mut *tx)
            .await?;
        Ok(tx)
    }
}
