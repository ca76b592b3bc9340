//! Transfers whose clients give up, finished by the shop itself: the `shop` and `bank`
//! binaries as processes, on a PostgreSQL or a Redis server of the test's own, the shop
//! killed with SIGKILL, the bank taken away and brought back, and no client retrying.
//!
//! What must hold once the shop has had its time (60 s at most after its last restart): every
//! transfer the bank made has exactly one ledger row, every ledger row has its bank transfer,
//! and the bank moved each operation's money once (one bank transfer per operation, under the
//! key of the operation's bank step). A client that then retries gets 201 with that transfer.
//! The same scenarios on MySQL are `abandoned_transfers_mysql.rs`.

mod support;

use std::time::Duration;

use idem_tests::{free_port, postgres_server::PostgresServer, redis_server::RedisServer};
use support::{
    Operation, PostgresBooks, abandon_all, abandoned_across_crashes, api_rows, bank,
    bank_statement, books_agree, log_path, settles, shop, two_shops_resume_each_operation_once,
};

/// 100 transfers from clients that give up after a second, the shop killed with SIGKILL at
/// five random moments and restarted, and nobody retrying: the shop, on PostgreSQL, finishes
/// every transfer the bank made, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn transfers_abandoned_across_crashes_are_finished_once() {
    let Some(postgres) = PostgresServer::start() else {
        return;
    };
    let pool = sqlx::PgPool::connect_lazy(&postgres.url()).unwrap();
    abandoned_across_crashes("crashes", &postgres.url(), PostgresBooks(pool)).await;
}

/// On Redis, with the shop up and the bank away for a while: every transfer stops at the
/// bank step, and once the bank is back the process that stopped them finishes each, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn transfers_the_bank_did_not_confirm_are_finished_once_it_is_back() {
    let Some(redis) = RedisServer::start(&[]).await else {
        return;
    };
    let test = "bank-away";
    let bank_port = free_port();
    let bank_url = format!("http://127.0.0.1:{bank_port}");
    let shop = shop(
        free_port(),
        &redis.url(),
        &bank_url,
        &[("SHOP_BANK_DEADLINE_MS", "500")],
        log_path(test, "shop"),
    )
    .await;
    let operations: Vec<Operation> = (0..20).map(Operation::new).collect();
    abandon_all(&operations, &[&shop.url]).await;
    // The bank is away for a while: each transfer stops and is resumed, and stops again.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let bank = bank(bank_port, 50, log_path(test, "bank")).await;
    settles("the books once the bank is back", || async {
        let statement = bank_statement(&bank.url).await;
        books_agree(
            &statement,
            &api_rows(&shop.url, &operations).await,
            &operations,
        )?;
        match statement.len() {
            20 => Ok(()),
            made => Err(format!("the bank made {made} of the 20 transfers")),
        }
    })
    .await;
    let log = shop.log_text();
    assert!(
        log.contains("outcome=\"suspended\""),
        "the transfers were stopped while the bank was away: {log}"
    );
    for operation in &operations {
        let transfer = operation.retry(&shop.url).await;
        assert!(
            transfer["bankTransfer"]
                .as_str()
                .unwrap()
                .starts_with("bt_")
        );
    }
    let statement = bank_statement(&bank.url).await;
    assert_eq!(statement.len(), 20, "the retries moved nothing more");
    books_agree(
        &statement,
        &api_rows(&shop.url, &operations).await,
        &operations,
    )
    .unwrap();
}

/// Two shops on one PostgreSQL, and transfers stopped while the bank was away: each is
/// resumed by one shop at a time, never by both at once (the bank never saw two runs of one
/// operation together), and finished once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_shops_on_one_database_resume_each_operation_once() {
    let Some(postgres) = PostgresServer::start() else {
        return;
    };
    let pool = sqlx::PgPool::connect_lazy(&postgres.url()).unwrap();
    two_shops_resume_each_operation_once("two-shops", &postgres.url(), PostgresBooks(pool)).await;
}
