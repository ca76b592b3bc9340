//! The shop on PostgreSQL (`IDEM_STORE=postgres://...`), over real HTTP: its rows commit in
//! the idempotency record's transaction, every endpoint works on its tables, and a
//! restarted shop replays what it answered before. Skipped, saying so, when
//! `IDEM_TEST_DATABASE_URL` is unset.

use idem::postgres::PostgresStore;
use idem_tests::{
    Answer, key,
    shop_fixture::{Api, Server, TestShop, payment, settings, transfer, user},
};
use reqwest::StatusCode;
use serde_json::json;
use shop::{Backend, Settings, Shop, backend::StoreChoice};
use sqlx::{AssertSqlSafe, PgPool};

/// Deletes the rows of `users` from the shop's tables (records expire on their own).
async fn forget(pool: &PgPool, users: &[&str]) {
    let users: Vec<String> = users.iter().map(|user| user.to_string()).collect();
    sqlx::query(
        "DELETE FROM shop_refunds WHERE payment IN \
         (SELECT id FROM shop_payments WHERE owner = ANY($1))",
    )
    .bind(&users)
    .execute(pool)
    .await
    .unwrap();
    for table in ["shop_payments", "shop_transfers"] {
        sqlx::query(AssertSqlSafe(format!(
            "DELETE FROM {table} WHERE owner = ANY($1)"
        )))
        .bind(&users)
        .execute(pool)
        .await
        .unwrap();
    }
}

/// The transaction id that wrote the current version of the row `sql` selects (with `id` as
/// its parameter, if it has one).
async fn writer(pool: &PgPool, sql: &str, id: Option<&str>) -> String {
    let mut query = sqlx::query_scalar(AssertSqlSafe(sql.to_owned()));
    if let Some(id) = id {
        query = query.bind(id.to_owned());
    }
    query.fetch_one(pool).await.unwrap()
}

/// A payment row and its idempotency record are written by one transaction: the current
/// versions of both rows carry the same transaction id (`xmin`). So do a refund's rows and
/// its record.
#[cfg_attr(not(idem_test_postgres), ignore = "IDEM_TEST_DATABASE_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payment_and_its_record_commit_in_one_transaction() {
    let test = "a_payment_and_its_record_commit_in_one_transaction";
    let Some(url) = idem_tests::postgres_fixture::database_url(test) else {
        return;
    };
    let admin = idem_tests::postgres_fixture::admin_pool(&url).await;
    let records = idem_tests::postgres_fixture::fresh_name(&admin, "r").await;
    let store = PostgresStore::builder()
        .table(&records)
        .unwrap()
        .connect(&url)
        .await
        .unwrap();
    let backend = Backend::postgres(store).await.unwrap();
    let shop = TestShop::on(backend, settings()).await;
    let alice = user();

    let key = key();
    let paid = shop.api.pay(&alice, &key, &payment(9800)).await.created();
    let id = paid["id"].as_str().unwrap();
    let latest_record = format!(
        "SELECT xmin::text FROM {records} WHERE state = 'completed' \
         ORDER BY updated_at DESC LIMIT 1"
    );
    let payment_writer = "SELECT xmin::text FROM shop_payments WHERE id = $1";
    let payment_record = writer(&admin, &latest_record, None).await;
    assert_eq!(
        writer(&admin, payment_writer, Some(id)).await,
        payment_record
    );

    let again = shop.api.pay(&alice, &key, &payment(9800)).await;
    assert!(again.replayed());
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM shop_payments WHERE owner = $1")
        .bind(&alice)
        .fetch_one(&admin)
        .await
        .unwrap();
    assert_eq!(rows, 1);

    let refund = Answer::of(
        shop.api
            .post(
                &format!("/payments/{id}/refunds"),
                Some(&alice),
                Some(&idem_tests::key()),
            )
            .json(&json!({ "amount": 1200 })),
    )
    .await
    .created();
    let refund_id = refund["id"].as_str().unwrap();
    let refund_record = writer(&admin, &latest_record, None).await;
    assert_ne!(refund_record, payment_record, "a transaction of its own");
    assert_eq!(
        writer(&admin, payment_writer, Some(id)).await,
        refund_record,
        "the payment's new amountRefunded"
    );
    let refund_writer = "SELECT xmin::text FROM shop_refunds WHERE id = $1";
    assert_eq!(
        writer(&admin, refund_writer, Some(refund_id)).await,
        refund_record
    );

    forget(&admin, &[&alice]).await;
    drop(shop);
    idem_tests::postgres_fixture::drop_table(&admin, &records).await;
}

/// Every endpoint on the PostgreSQL tables: payments, reads, refunds, receipts, transfers and
/// the bank's webhook.
#[cfg_attr(not(idem_test_postgres), ignore = "IDEM_TEST_DATABASE_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_endpoint_works_on_postgres() {
    let Some(url) = idem_tests::postgres_fixture::database_url("every_endpoint_works_on_postgres")
    else {
        return;
    };
    let store: StoreChoice = url.parse().unwrap();
    let backend = Backend::open(&store)
        .await
        .expect("the test database answers");
    let shop::ledger::Ledger::Postgres(ledger) = &backend.ledger else {
        panic!("postgres:// keeps the shop's data in PostgreSQL");
    };
    let admin = ledger.pool().clone();
    let test = TestShop::on(backend, settings()).await;
    let (alice, bob) = (user(), user());
    let api = &test.api;

    let first = api.pay(&alice, &key(), &payment(9800)).await.created();
    let second = api.pay(&alice, &key(), &payment(1200)).await.created();
    assert_eq!(api.payments(&alice).await, [first.clone(), second]);
    assert!(api.payments(&bob).await.is_empty());
    let id = first["id"].as_str().unwrap();
    let path = format!("/payments/{id}");
    assert_eq!(Answer::of(api.get(&path, &alice)).await.json(), first);
    Answer::of(api.get(&path, &bob))
        .await
        .problem(StatusCode::NOT_FOUND, "payment-not-found");

    let refund = |user: &str, amount: i64| {
        Answer::of(
            api.post(&format!("{path}/refunds"), Some(user), Some(&key()))
                .json(&json!({ "amount": amount })),
        )
    };
    refund(&alice, 9000).await.created();
    refund(&alice, 801)
        .await
        .problem(StatusCode::BAD_REQUEST, "refund-exceeds-payment");
    refund(&bob, 1)
        .await
        .problem(StatusCode::NOT_FOUND, "payment-not-found");
    assert_eq!(
        Answer::of(api.get(&path, &alice)).await.json()["amountRefunded"],
        9000
    );
    let receipt = Answer::of(api.post(&format!("{path}/receipt"), Some(&alice), None)).await;
    assert_eq!(receipt.status, 202, "{receipt:?}");

    let sent = api
        .transfer(&alice, &key(), &transfer(50_000))
        .await
        .created();
    assert_eq!(api.transfers(&alice).await, std::slice::from_ref(&sent));
    let event = format!(
        r#"{{"type":"transfer.settled","transfer":"{}"}}"#,
        sent["id"].as_str().unwrap()
    );
    let signature = test.shop.bank().sign(event.as_bytes());
    let settled = Answer::of(
        api.http
            .post(api.url("/webhooks/bank"))
            .header("content-type", "application/json")
            .header("idempotency-key", format!("\"evt_{}\"", &key()[..8]))
            .header("bank-signature", signature)
            .body(event),
    )
    .await;
    assert_eq!(settled.json()["status"], "settled", "{settled:?}");
    assert_eq!(api.transfers(&alice).await[0]["status"], "settled");

    forget(&admin, &[&alice, &bob]).await;
}

/// Records and rows are durable: a shop stopped after the first request (server, runtime and
/// pool gone) and started afresh on the same database replays the first answer, and its
/// payment is still there, once.
#[cfg_attr(not(idem_test_postgres), ignore = "IDEM_TEST_DATABASE_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_postgres_shop_replays_what_it_answered_before() {
    let test = "a_restarted_postgres_shop_replays_what_it_answered_before";
    let Some(url) = idem_tests::postgres_fixture::database_url(test) else {
        return;
    };
    let store: StoreChoice = url.parse().unwrap();
    let (alice, key) = (user(), key());

    let before = Backend::open(&store).await.unwrap();
    let shop = Shop::new(before.ledger.clone(), Settings::default());
    let server = Server::start(shop::app(shop, before.idem.clone()), before.idem.clone()).await;
    let first = Api::new(&server).pay(&alice, &key, &payment(9800)).await;
    let paid = first.created();
    server.stop().await;
    before.close().await;

    let after = Backend::open(&store).await.unwrap();
    let shop::ledger::Ledger::Postgres(ledger) = &after.ledger else {
        panic!("postgres:// keeps the shop's data in PostgreSQL");
    };
    let admin = ledger.pool().clone();
    let shop = Shop::new(after.ledger.clone(), Settings::default());
    let server = Server::start(shop::app(shop, after.idem.clone()), after.idem.clone()).await;
    let api = Api::new(&server);
    let again = api.pay(&alice, &key, &payment(9800)).await;
    assert!(again.replayed(), "{again:?}");
    assert_eq!(again.body, first.body);
    assert_eq!(api.payments(&alice).await, [paid]);

    forget(&admin, &[&alice]).await;
    server.stop().await;
    after.close().await;
}
