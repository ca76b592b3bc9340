//! One shop cut off from its store while the other keeps serving the same keys: the `shop` and
//! `bank` binaries as processes, two shops on one store of the test's own, the first shop's
//! connections to it through a [`Partition`] the test cuts for twice the transfers' lease.
//! The store is Redis, with the books in a PostgreSQL beside it that both shops reach, or
//! PostgreSQL, records and books in one database, which the cut takes from the first shop
//! whole.
//!
//! In the first two tests the cut comes while every transfer of the cut-off shop is at the bank: the bank answers it,
//! and the shop can neither record the bank's answer nor renew its lease. Once the lease
//! lapses, the other shop finds the transfers due and finishes them (the bank answers the
//! order it already made, under the step's key). When the cut heals, what the cut-off shop
//! sent meanwhile reaches the store late and is fenced. What must hold: no ledger row twice,
//! no bank transfer twice, every operation finished, and every client's retry, to the shop that
//! was cut off, 201 with the books' transfer.

mod support;

use std::time::Duration;

use idem_tests::{
    free_port, partition::Partition, postgres_server::PostgresServer, redis_fixture,
    redis_server::RedisServer,
};

use self::support::{
    Books, Operation, PostgresBooks, Process, Row, abandon_all, bank, bank_statement, books_agree,
    log_path, postgres_rows, settle_then_retry, settles, shop,
};

/// The shops' Redis key prefix, their binary's default.
const PREFIX: &str = "idem:";
/// The lease of the shop's transfers (`examples/shop/src/transfers.rs`).
const LEASE: Duration = Duration::from_secs(15);
/// How long the bank takes per transfer: the cut comes while every transfer is there.
const BANK_DELAY_MS: u64 = 2000;
/// How long the cut-off shop waits between the bank's answer and the ledger step, in the cut
/// between the steps: longer than the lease less its margin (a third of it).
const LEDGER_DELAY: Duration = Duration::from_secs(20);

/// The shops' books in PostgreSQL, and their records in flight on Redis.
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_shop_cut_off_from_redis_past_its_lease_leaves_its_transfers_to_the_other_once() {
    let (Some(redis), Some(postgres)) = (RedisServer::start(&[]).await, PostgresServer::start())
    else {
        return;
    };
    let partition = Partition::start(redis.port()).await;
    let books = RedisBooks {
        pool: sqlx::PgPool::connect(&postgres.url()).await.unwrap(),
        redis: redis.url(),
    };
    let store = Stores {
        direct: redis.url(),
        through_partition: format!("redis://127.0.0.1:{}", partition.port()),
        books: Some(postgres.url()),
    };
    cut_off_past_the_lease("redis-partition", &store, &partition, &books).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_shop_cut_off_from_postgres_past_its_lease_leaves_its_transfers_to_the_other_once() {
    let Some(postgres) = PostgresServer::start() else {
        return;
    };
    let partition = Partition::start(postgres.port()).await;
    let books = PostgresBooks(sqlx::PgPool::connect(&postgres.url()).await.unwrap());
    let store = Stores {
        direct: postgres.url(),
        through_partition: postgres.url().replace(
            &format!(":{}/", postgres.port()),
            &format!(":{}/", partition.port()),
        ),
        books: None,
    };
    cut_off_past_the_lease("postgres-partition", &store, &partition, &books).await;
}

/// The cut between the steps, for twice the lease: the bank answers at once, and the cut-off
/// shop waits [`LEDGER_DELAY`] before its ledger step, a window the test cuts it off in once
/// the bank has made every transfer. When the wait ends, its lease has not been confirmed for
/// longer than the lease less the margin: the ledger step does not start (the operation is
/// left to whoever holds it next), while the other shop takes the transfers over and writes
/// each row once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_shop_cut_off_from_redis_between_its_steps_does_not_start_the_ledger_step() {
    let (Some(redis), Some(postgres)) = (RedisServer::start(&[]).await, PostgresServer::start())
    else {
        return;
    };
    let partition = Partition::start(redis.port()).await;
    let books = RedisBooks {
        pool: sqlx::PgPool::connect(&postgres.url()).await.unwrap(),
        redis: redis.url(),
    };
    let test = "redis-partition-between-steps";
    let bank = bank(free_port(), 100, log_path(test, "bank")).await;
    let books_url = postgres.url();
    let delay = LEDGER_DELAY.as_millis().to_string();
    let cut_off = shop(
        free_port(),
        &format!("redis://127.0.0.1:{}", partition.port()),
        &bank.url,
        &[
            ("SHOP_DATABASE_URL", books_url.as_str()),
            ("SHOP_LEDGER_DELAY_MS", delay.as_str()),
        ],
        log_path(test, "cut-off"),
    )
    .await;
    let other = shop(
        free_port(),
        &redis.url(),
        &bank.url,
        &[("SHOP_DATABASE_URL", books_url.as_str())],
        log_path(test, "other"),
    )
    .await;
    let operations: Vec<Operation> = (0..20).map(Operation::new).collect();

    abandon_all(&operations, &[&cut_off.url]).await;
    settles("the bank makes every transfer", || async {
        match bank_statement(&bank.url).await.len() {
            20 => Ok(()),
            made => Err(format!("{made} of 20 made")),
        }
    })
    .await;
    // The shop records each answer as it comes: a moment later, the steps are on record.
    tokio::time::sleep(Duration::from_secs(1)).await;
    partition.cut();
    let cut_at = tokio::time::Instant::now();
    the_other_shop_finishes(&bank, &books, &operations, &other).await;
    // The cut-off shop's wait ends after its lease is in doubt: its ledger steps did not start.
    tokio::time::sleep_until(cut_at + LEDGER_DELAY + Duration::from_secs(1)).await;
    assert!(
        cut_off.log_text().contains("a step did not start"),
        "the cut-off shop's ledger steps did not start on a lease in doubt: {}",
        cut_off.log_text()
    );
    tokio::time::sleep_until(cut_at + LEASE * 2).await;
    partition.heal();

    settle_then_retry(&cut_off, &bank, &operations, &books).await;
    assert_eq!(
        books.rows().await.len(),
        operations.len(),
        "one ledger row per transfer"
    );
}

/// How the two shops reach their store.
struct Stores {
    /// The other shop's way.
    direct: String,
    /// The cut-off shop's way, through the partition.
    through_partition: String,
    /// Where both keep their books, when not with the records.
    books: Option<String>,
}

/// The scenario of the [module docs](self).
async fn cut_off_past_the_lease(
    test: &str,
    store: &Stores,
    partition: &Partition,
    books: &impl Books,
) {
    let bank = bank(free_port(), BANK_DELAY_MS, log_path(test, "bank")).await;
    let vars: Vec<(&'static str, &str)> = store
        .books
        .iter()
        .map(|books| ("SHOP_DATABASE_URL", books.as_str()))
        .collect();
    let cut_off = shop(
        free_port(),
        &store.through_partition,
        &bank.url,
        &vars,
        log_path(test, "cut-off"),
    )
    .await;
    let other = shop(
        free_port(),
        &store.direct,
        &bank.url,
        &vars,
        log_path(test, "other"),
    )
    .await;
    let operations: Vec<Operation> = (0..20).map(Operation::new).collect();

    // Each client gives up after a second, while its transfer is at the bank.
    abandon_all(&operations, &[&cut_off.url]).await;
    partition.cut();
    let cut_at = tokio::time::Instant::now();
    the_other_shop_finishes(&bank, books, &operations, &other).await;
    tokio::time::sleep_until(cut_at + LEASE * 2).await;
    partition.heal();

    // What the cut-off shop held reaches the store now, and changes nothing.
    settle_then_retry(&cut_off, &bank, &operations, books).await;
    assert_eq!(
        books.rows().await.len(),
        operations.len(),
        "one ledger row per transfer"
    );
}

/// Waits until the other shop has finished every transfer the cut-off shop held, each one bank
/// transfer and one ledger row, with nothing left in flight, and checks that it resumed them.
async fn the_other_shop_finishes(
    bank: &Process,
    books: &impl Books,
    operations: &[Operation],
    other: &Process,
) {
    settles(
        "the other shop finishes the cut-off shop's transfers",
        || async {
            let statement = bank_statement(&bank.url).await;
            books_agree(&statement, &books.rows().await, operations)?;
            match (statement.len(), books.in_flight().await) {
                (20, 0) => Ok(()),
                (made, open) => Err(format!("{made} of 20 made, {open} in flight")),
            }
        },
    )
    .await;
    assert!(
        other
            .log_text()
            .contains("resumed an operation its client abandoned"),
        "the other shop resumed them: {}",
        other.log_text()
    );
}
