//! Transfers whose clients give up, finished by the shop itself, on SQLite: the `shop` and
//! `bank` binaries as processes, on a file in a directory of the test's own, the shop killed
//! with SIGKILL at random moments and restarted, and no client retrying. The scenarios and
//! what must hold are those of `abandoned_transfers.rs`. SQLite needs no service: these always
//! run.

mod support;

use std::path::PathBuf;

use sqlx::{
    SqlitePool,
    sqlite::{SqliteConnectOptions, SqliteJournalMode},
};
use support::{Books, Row, abandoned_across_crashes, two_shops_resume_each_operation_once};

/// The shop's books and records in its SQLite file, read by a connection of the test's own.
struct SqliteBooks(SqlitePool);

impl Books for SqliteBooks {
    async fn rows(&self) -> Vec<Row> {
        let rows: Vec<(String, Option<String>)> =
            sqlx::query_as("SELECT id, bank_transfer FROM shop_transfers")
                .fetch_all(&self.0)
                .await
                .unwrap();
        rows.into_iter()
            .map(|(id, bank_transfer)| Row {
                id,
                bank_transfer: bank_transfer.unwrap_or_default(),
            })
            .collect()
    }

    async fn in_flight(&self) -> i64 {
        sqlx::query_scalar("SELECT count(*) FROM idempotency_records WHERE state = 'in_flight'")
            .fetch_one(&self.0)
            .await
            .unwrap()
    }
}

/// A directory of the test's own, removed when the test ends.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!(
            "idem-{}-{:016x}",
            module_path!(),
            rand::random::<u64>()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    /// The shop's file in it, as `IDEM_STORE` names it, and a pool that reads it (opened
    /// lazily: the shop creates the file).
    fn shop_db(&self) -> (String, SqliteBooks) {
        let file = self.0.join("shop.db");
        let options = SqliteConnectOptions::new()
            .filename(&file)
            .journal_mode(SqliteJournalMode::Wal);
        let pool = SqlitePool::connect_lazy_with(options);
        (format!("sqlite://{}", file.display()), SqliteBooks(pool))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// 100 transfers from clients that give up after a second, the shop killed with SIGKILL at
/// five random moments and restarted, and nobody retrying: within 60 s of the last restart
/// every transfer the bank made has exactly one ledger row, and every retry afterwards gets
/// 201 with that transfer.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn transfers_abandoned_across_crashes_are_finished_once_on_sqlite() {
    let scratch = Scratch::new();
    let (store, books) = scratch.shop_db();
    abandoned_across_crashes("sqlite-crashes", &store, books).await;
}

/// Two shops, two processes on one SQLite file, and transfers stopped while the bank was
/// away: each is resumed by one shop at a time, and finished once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_shops_on_one_sqlite_file_resume_each_operation_once() {
    let scratch = Scratch::new();
    let (store, books) = scratch.shop_db();
    two_shops_resume_each_operation_once("sqlite-two-shops", &store, books).await;
}
