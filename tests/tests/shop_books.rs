//! The shop on Redis with its books in PostgreSQL (`IDEM_STORE=redis://...` and
//! `SHOP_DATABASE_URL`): every shop on the Redis shares the books, and each write of the
//! books is idempotent by its operation, so that a step run twice writes one row.
//!
//! Needs `IDEM_TEST_REDIS_URL` and `IDEM_TEST_DATABASE_URL`; skipped, saying so, without them.
//! The shops write the shop's tables in the test database, for users of their own.

use std::time::Duration;

use idem_tests::shop_fixture::{TestShop, payment, settings, transfer, user};
use idem_tests::{key, postgres_fixture, redis_fixture};
use serde_json::{Value, json};
use shop::{
    Backend, Settings,
    backend::StoreChoice,
    ledger::{DatabaseLedger, KEY_LIFETIME, RefundOutcome},
    model::{Payment, Refund, Transfer, new_id, now},
};

/// The store `IDEM_STORE=<the test Redis>` and `SHOP_DATABASE_URL=<the test database>` name.
fn redis_with_books(test: &str) -> Option<(StoreChoice, String)> {
    let redis = redis_fixture::redis_url()?;
    let books = postgres_fixture::database_url(test)?;
    let mut store: StoreChoice = redis.parse().expect("a redis:// URL");
    let StoreChoice::Redis(choice) = &mut store else {
        panic!("{store} is not Redis");
    };
    choice.books = Some(books.clone());
    Some((store, books))
}

/// Two shops on one Redis share their books: what one writes, the other lists, refunds and
/// replays, and each operation is one row.
#[cfg_attr(
    not(all(idem_test_redis, idem_test_postgres)),
    ignore = "IDEM_TEST_REDIS_URL or IDEM_TEST_DATABASE_URL is not set"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_shops_on_redis_share_their_books_in_postgresql() {
    let Some((store, _)) = redis_with_books("two_shops_on_redis_share_their_books_in_postgresql")
    else {
        return;
    };
    let settings = Settings {
        transfer_delay: Duration::from_millis(50),
        ..settings()
    };
    let one = TestShop::on(Backend::open(&store).await.unwrap(), settings.clone()).await;
    let two = TestShop::on(Backend::open(&store).await.unwrap(), settings).await;
    let alice = user();
    let paid = one.api.pay(&alice, &key(), &payment(9800)).await;
    paid.created();
    let paid: Value = serde_json::from_slice(&paid.body).unwrap();
    assert_eq!(
        two.api.payments(&alice).await,
        std::slice::from_ref(&paid),
        "one row, seen by both"
    );
    let refund_key = key();
    let refund = |api: &idem_tests::shop_fixture::Api| {
        let request = api
            .post(
                &format!("/payments/{}/refunds", paid["id"].as_str().unwrap()),
                Some(&alice),
                Some(&refund_key),
            )
            .json(&json!({ "amount": 1200 }));
        idem_tests::Answer::of(request)
    };
    let refunded = refund(&two.api).await;
    refunded.created();
    let again = refund(&one.api).await;
    assert!(again.replayed(), "{again:?}");
    assert_eq!(again.body, refunded.body);
    let payments = one.api.payments(&alice).await;
    assert_eq!(payments[0]["amountRefunded"], 1200, "refunded once");
    let sent = two.api.transfer(&alice, &key(), &transfer(50_000)).await;
    sent.created();
    let sent: Value = serde_json::from_slice(&sent.body).unwrap();
    assert_eq!(one.api.transfers(&alice).await, [sent]);
}

/// The ledger's writes, run twice for one operation (a process that died between a row and
/// its step's record, and the run that took the operation over): one row, and both runs
/// answer it. A row older than a key lives gives its key up to a new operation.
#[cfg_attr(not(idem_test_postgres), ignore = "IDEM_TEST_DATABASE_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_write_run_twice_for_one_operation_writes_one_row() {
    let test = "a_ledger_write_run_twice_for_one_operation_writes_one_row";
    let Some(url) = postgres_fixture::database_url(test) else {
        return;
    };
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let ledger = DatabaseLedger::migrate(&pool).await.unwrap();
    let (alice, operation) = (user(), format!("idem-step:{}:ledger", key()));
    let pay = || Payment {
        id: new_id("pay"),
        amount: 9800,
        currency: "JPY".into(),
        status: "succeeded".into(),
        amount_refunded: 0,
        created: now(),
    };
    let first = ledger
        .upsert_payment(&operation, &alice, &pay())
        .await
        .unwrap();
    let second = ledger
        .upsert_payment(&operation, &alice, &pay())
        .await
        .unwrap();
    assert_eq!(second, first, "the second run answers the first run's row");
    let count = |table: &'static str| {
        let (pool, alice) = (pool.clone(), alice.clone());
        async move {
            let sql = format!("SELECT count(*) FROM {table} WHERE owner = $1");
            let count: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                .bind(alice)
                .fetch_one(&pool)
                .await
                .unwrap();
            count
        }
    };
    assert_eq!(count("shop_payments").await, 1);

    let refunding = format!("idem-step:{}:ledger", key());
    let refund = || Refund {
        id: new_id("re"),
        payment: first.id.clone(),
        amount: 1200,
        status: "succeeded".into(),
        created: now(),
    };
    let (once, refunded) = ledger.refund(&refunding, &alice, &refund()).await.unwrap();
    let (twice, again) = ledger.refund(&refunding, &alice, &refund()).await.unwrap();
    assert_eq!(again, refunded, "the first run's refund");
    let RefundOutcome::Refunded(payment) = twice else {
        panic!("{twice:?}");
    };
    assert_eq!(payment.amount_refunded, 1200, "refunded once: {once:?}");

    let moving = format!("idem-step:{}:ledger", key());
    let send = || Transfer {
        id: new_id("tr"),
        amount: 50_000,
        currency: "JPY".into(),
        to_account: "0000000".into(),
        status: "pending".into(),
        bank_transfer: "bt_1".into(),
        created: now(),
    };
    let sent = ledger
        .upsert_transfer(&moving, &alice, &send())
        .await
        .unwrap();
    assert_eq!(
        ledger
            .upsert_transfer(&moving, &alice, &send())
            .await
            .unwrap(),
        sent
    );
    assert_eq!(count("shop_transfers").await, 1);
    // A day later the key is another operation's: its row is a new one.
    let aged = now() - i64::try_from(KEY_LIFETIME.as_secs()).unwrap() - 1;
    sqlx::query("UPDATE shop_transfers SET created = $1 WHERE id = $2")
        .bind(aged)
        .bind(&sent.id)
        .execute(&pool)
        .await
        .unwrap();
    let later = ledger
        .upsert_transfer(&moving, &alice, &send())
        .await
        .unwrap();
    assert_ne!(later.id, sent.id);
    assert_eq!(count("shop_transfers").await, 2);
}
