//! Transfers whose clients give up, finished by the shop itself, on MySQL: the `shop` and
//! `bank` binaries as processes, on a MariaDB server of the test's own, the shop killed with
//! SIGKILL at random moments and restarted, and no client retrying. The scenarios and what
//! must hold are those of `abandoned_transfers.rs`.

mod support;

use idem_tests::mysql_server::MySqlServer;
use sqlx::MySqlPool;
use support::{Books, Row, abandoned_across_crashes, two_shops_resume_each_operation_once};

/// The shop's books in MySQL.
struct MySqlBooks(MySqlPool);

impl Books for MySqlBooks {
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

/// A MariaDB of the test's own, when the shared one is configured (CI) and MariaDB is
/// installed.
fn server() -> Option<MySqlServer> {
    if std::env::var("IDEM_TEST_MYSQL_URL").is_ok_and(|url| !url.is_empty()) {
        MySqlServer::start()
    } else {
        eprintln!("skipped: IDEM_TEST_MYSQL_URL is not set");
        None
    }
}

/// 100 transfers from clients that give up after a second, the shop killed with SIGKILL at
/// five random moments and restarted, and nobody retrying: within 60 s of the last restart
/// every transfer the bank made has exactly one ledger row.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn transfers_abandoned_across_crashes_are_finished_once_on_mysql() {
    let Some(server) = server() else {
        return;
    };
    let pool = MySqlPool::connect_lazy(&server.url()).unwrap();
    abandoned_across_crashes("mysql-crashes", &server.url(), MySqlBooks(pool)).await;
}

/// Two shops on one MySQL database, and transfers stopped while the bank was away: each is
/// resumed by one shop at a time, and finished once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_shops_on_one_mysql_database_resume_each_operation_once() {
    let Some(server) = server() else {
        return;
    };
    let pool = MySqlPool::connect_lazy(&server.url()).unwrap();
    two_shops_resume_each_operation_once("mysql-two-shops", &server.url(), MySqlBooks(pool)).await;
}
