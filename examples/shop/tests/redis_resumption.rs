//! Transfers whose clients give up, on Redis, finished by whichever shop finds them due: the
//! `shop` and `bank` binaries as processes, each shop's records on a Redis (one server, or a
//! Cluster) and its books in a PostgreSQL (`SHOP_DATABASE_URL`) of the test's own, shops
//! killed with SIGKILL, the bank taken away, a Cluster failed over, and no client retrying.
//!
//! What must hold, as in `abandoned_transfers.rs`: within 60 s of the last restart, every
//! transfer the bank made has exactly one ledger row and every row its bank transfer; the bank
//! never sees one operation's order twice at once (it would answer the second 409, and log a
//! conflict); a client that then retries gets 201 with that transfer.

mod support;

use std::collections::HashMap;

use idem_tests::{
    free_port, postgres_server::PostgresServer, redis_cluster::RedisCluster, redis_fixture,
    redis_server::RedisServer,
};

use self::support::{
    Books, Operation, Process, Row, abandon_all, bank, bank_statement, books_agree, log_path,
    postgres_rows, resumptions, send_through_crashes, settle_then_retry, settles, shop,
    until_suspended,
};

/// The shops' key prefix, their binary's default.
const PREFIX: &str = "idem:";

/// The shop's books in PostgreSQL, and its records in flight on Redis.
struct RedisBooks {
    pool: sqlx::PgPool,
    redis: String,
}

impl Books for RedisBooks {
    async fn rows(&self) -> Vec<Row> {
        postgres_rows(&self.pool).await
    }

    async fn in_flight(&self) -> i64 {
        let open = redis_fixture::in_flight(&self.redis, PREFIX).await;
        i64::try_from(open).expect("a count")
    }
}

/// 100 transfers from clients that give up after a second, the shop (records on Redis, books
/// in PostgreSQL) killed with SIGKILL at five random moments and restarted, and nobody
/// retrying: the shop finishes every transfer the bank made, once, and leaves nothing in
/// flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn transfers_abandoned_across_crashes_on_redis_are_finished_once() {
    let (Some(redis), Some(postgres)) = (RedisServer::start(&[]).await, PostgresServer::start())
    else {
        return;
    };
    let test = "redis-crashes";
    let bank = bank(free_port(), 300, log_path(test, "bank")).await;
    let books = postgres.url();
    let mut shop = shop(
        free_port(),
        &redis.url(),
        &bank.url,
        &[("SHOP_DATABASE_URL", &books)],
        log_path(test, "shop"),
    )
    .await;
    let operations: Vec<Operation> = (0..100).map(Operation::new).collect();
    send_through_crashes(&operations, &mut shop, 5).await;
    let pool = sqlx::PgPool::connect(&books).await.unwrap();
    let books = RedisBooks {
        pool,
        redis: redis.url(),
    };
    settle_then_retry(&shop, &bank, &operations, &books).await;
}

/// `count` shops on the Redis at `store`, their books in the PostgreSQL at `books`, the bank
/// at `bank_url`; `extra` more settings each.
async fn shops(
    test: &str,
    count: usize,
    store: &str,
    books: &str,
    bank_url: &str,
    extra: &[(&'static str, &str)],
) -> Vec<Process> {
    let mut vars = vec![("SHOP_DATABASE_URL", books)];
    vars.extend_from_slice(extra);
    let mut started = Vec::new();
    for n in 0..count {
        let log = log_path(test, &format!("shop-{n}"));
        started.push(shop(free_port(), store, bank_url, &vars, log).await);
    }
    started
}

/// Transfers stopped while the bank was away, with two shops on one Redis: each is resumed
/// by one shop at a time (the bank never saw two runs of one operation together), and
/// finished once, in the books both shops share.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_shops_on_one_redis_resume_each_operation_once() {
    let (Some(redis), Some(postgres)) = (RedisServer::start(&[]).await, PostgresServer::start())
    else {
        return;
    };
    let test = "redis-two-shops";
    let bank_port = free_port();
    let bank_url = format!("http://127.0.0.1:{bank_port}");
    let extra = [("SHOP_BANK_DEADLINE_MS", "1500")];
    let shops = shops(test, 2, &redis.url(), &postgres.url(), &bank_url, &extra).await;
    let urls: Vec<&str> = shops.iter().map(|shop| shop.url.as_str()).collect();
    let operations: Vec<Operation> = (0..20).map(Operation::new).collect();
    abandon_all(&operations, &urls).await;
    until_suspended(&shops, operations.len()).await;
    let bank = bank(bank_port, 50, log_path(test, "bank")).await;
    let pool = sqlx::PgPool::connect(&postgres.url()).await.unwrap();
    settles("the books of two shops", || async {
        let statement = bank_statement(&bank.url).await;
        books_agree(&statement, &postgres_rows(&pool).await, &operations)?;
        let open = redis_fixture::in_flight(&redis.url(), PREFIX).await;
        match (statement.len(), open) {
            (20, 0) => Ok(()),
            (made, open) => Err(format!("{made} of 20 made, {open} in flight")),
        }
    })
    .await;
    assert_no_order_twice_at_once(&bank);
    assert_every_operation_resumed(&shops, operations.len());
}

/// Every one of `count` operations was resumed by one of `shops` at least once (the bank
/// away, an operation may stop and be resumed again).
fn assert_every_operation_resumed(shops: &[Process], count: usize) {
    let mut resumed: HashMap<String, usize> = HashMap::new();
    for shop in shops {
        for (key, runs) in resumptions(&shop.log_text()) {
            *resumed.entry(key).or_default() += runs;
        }
    }
    eprintln!(
        "{} operations resumed, {} runs of the resumers",
        resumed.len(),
        resumed.values().sum::<usize>()
    );
    assert_eq!(
        resumed.len(),
        count,
        "every operation was resumed by a shop"
    );
}

/// Three shops on one Redis, each killed with SIGKILL while its transfers wait for the bank,
/// and started again: every operation they left is resumed once, by one of them, and the
/// books agree with the bank.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_shops_killed_at_once_resume_each_operation_once() {
    let (Some(redis), Some(postgres)) = (RedisServer::start(&[]).await, PostgresServer::start())
    else {
        return;
    };
    let test = "redis-three-shops";
    // The bank takes 2 s a transfer: the shops die while it works on theirs.
    let bank = bank(free_port(), 2000, log_path(test, "bank")).await;
    let mut shops = shops(test, 3, &redis.url(), &postgres.url(), &bank.url, &[]).await;
    let urls: Vec<String> = shops.iter().map(|shop| shop.url.clone()).collect();
    let operations: Vec<Operation> = (0..30).map(Operation::new).collect();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    abandon_all(&operations, &urls).await;
    for shop in &mut shops {
        shop.kill().await;
    }
    for shop in &mut shops {
        shop.restart().await;
    }
    let pool = sqlx::PgPool::connect(&postgres.url()).await.unwrap();
    settles("the books of three shops after their crash", || async {
        let statement = bank_statement(&bank.url).await;
        books_agree(&statement, &postgres_rows(&pool).await, &operations)?;
        match redis_fixture::in_flight(&redis.url(), PREFIX).await {
            0 => Ok(()),
            open => Err(format!("{open} operations are still in flight")),
        }
    })
    .await;
    assert_no_order_twice_at_once(&bank);
    let mut runs: HashMap<String, usize> = HashMap::new();
    for shop in &shops {
        for (key, count) in resumptions(&shop.log_text()) {
            *runs.entry(key).or_default() += count;
        }
    }
    assert!(!runs.is_empty(), "the shops resumed what they left");
    if let Some((key, count)) = runs.iter().find(|(_, count)| **count > 1) {
        panic!("the operation {key} was resumed {count} times");
    }
    let made = bank_statement(&bank.url).await.len();
    eprintln!(
        "{} operations resumed once each, {made} transfers made",
        runs.len()
    );
    assert!(
        runs.len() <= made,
        "{} resumed, {made} made: every resumption finished its transfer",
        runs.len()
    );
}

/// Two shops on a Redis Cluster, transfers stopped while the bank was away, and the primary
/// that holds the due index failed over to its replica meanwhile: each operation is resumed
/// by one shop at a time, and finished once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn shops_on_a_cluster_resume_each_operation_once_through_a_failover() {
    let (Some(cluster), Some(postgres)) = (RedisCluster::start().await, PostgresServer::start())
    else {
        return;
    };
    let test = "cluster-failover";
    let nodes: Vec<String> = cluster
        .seeds()
        .iter()
        .map(|seed| seed.trim_start_matches("redis://").to_owned())
        .collect();
    let store = format!("redis+cluster://{}", nodes.join(","));
    let bank_port = free_port();
    let bank_url = format!("http://127.0.0.1:{bank_port}");
    let extra = [("SHOP_BANK_DEADLINE_MS", "1500")];
    let shops = shops(test, 2, &store, &postgres.url(), &bank_url, &extra).await;
    let urls: Vec<&str> = shops.iter().map(|shop| shop.url.as_str()).collect();
    let operations: Vec<Operation> = (0..20).map(Operation::new).collect();
    abandon_all(&operations, &urls).await;
    // While the operations wait for the bank, resumed and stopped again and again, the due
    // index's primary hands over to its replica.
    let index = cluster.slot_of(&format!("{PREFIX}due")).await;
    let primary = cluster.primary_of(index).await;
    cluster.fail_over(cluster.replica_of(primary).await).await;
    until_suspended(&shops, operations.len()).await;
    let bank = bank(bank_port, 50, log_path(test, "bank")).await;
    let pool = sqlx::PgPool::connect(&postgres.url()).await.unwrap();
    settles("the books of two shops on a cluster", || async {
        let statement = bank_statement(&bank.url).await;
        books_agree(&statement, &postgres_rows(&pool).await, &operations)?;
        match statement.len() {
            20 => Ok(()),
            made => Err(format!("the bank made {made} of the 20 transfers")),
        }
    })
    .await;
    assert_no_order_twice_at_once(&bank);
    assert_every_operation_resumed(&shops, operations.len());
    for operation in &operations {
        let transfer = operation.retry(urls[0]).await;
        assert!(
            transfer["bankTransfer"]
                .as_str()
                .is_some_and(|id| id.starts_with("bt_"))
        );
    }
    assert_eq!(
        bank_statement(&bank.url).await.len(),
        20,
        "retries moved nothing more"
    );
}

/// Two runs of one operation at once would send the bank one order twice at once, which it
/// answers 409 and logs as a conflict.
fn assert_no_order_twice_at_once(bank: &Process) {
    let log = bank.log_text();
    assert!(
        !log.contains("outcome=\"conflict\""),
        "the bank saw one operation's order twice at once: {log}"
    );
}
