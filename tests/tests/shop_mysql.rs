//! The shop on MySQL or MariaDB (`IDEM_STORE=mysql://...`), over real HTTP: the seven cases
//! of docs/contract.md, a payment's row committed by its record's completion, every endpoint
//! on the shop's tables, two shops on one database, and a restarted shop. Skipped, saying so,
//! when `IDEM_TEST_MYSQL_URL` is unset.
//!
//! The shops use the tables the binary uses (`shop_payments`, `shop_refunds`,
//! `shop_transfers`, `shop_receipts`), with users of each test's own whose rows are deleted at
//! its end; their records are in tables of each test's own.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use axum::{
    Extension, Json, Router,
    extract::State,
    http::{Method, StatusCode},
    routing::post,
};
use idem::{
    Idempotency, IdempotencyKey, Principal, Scope, StoreKey, idempotent, mysql::MySqlStore,
};
use idem_tests::{
    Answer, eventually, key,
    mysql_fixture::{admin_pool, drop_table, fresh_name, mysql_url},
    shop_fixture::{Api, Server, TestShop, honour_retry_after, payment, settings, transfer, user},
};
use serde_json::{Value, json};
use shop::{Backend, Settings};
use sqlx::{AssertSqlSafe, Executor, MySqlPool};
use tokio::task::JoinSet;

/// A shop on the test database, its records in a table of its own.
struct MySqlShop {
    admin: MySqlPool,
    records: String,
    url: String,
}

impl MySqlShop {
    async fn new(test: &str) -> Option<Self> {
        let url = mysql_url(test)?;
        let admin = admin_pool(&url).await;
        let records = fresh_name(&admin, "r").await;
        Some(Self {
            admin,
            records,
            url,
        })
    }

    /// A store on the records table, as `MySqlStore::connect` builds it, with a lock wait long
    /// enough for the tests that hold a record's row.
    async fn store(&self) -> MySqlStore {
        MySqlStore::builder()
            .table(&self.records)
            .unwrap()
            .lock_wait_timeout(Duration::from_secs(20))
            .connect(&self.url)
            .await
            .unwrap()
    }

    /// The shop, served, on this database.
    async fn serve(&self, settings: Settings) -> TestShop {
        let backend = Backend::mysql(self.store().await)
            .await
            .expect("the test database answers");
        TestShop::on(backend, settings).await
    }

    /// Deletes the rows of `users` from the shop's tables, and the records table.
    async fn forget(self, users: &[&str]) {
        for user in users {
            let refunds = "DELETE FROM shop_refunds WHERE payment IN \
                           (SELECT id FROM shop_payments WHERE owner = ?)";
            for sql in [
                refunds,
                "DELETE FROM shop_payments WHERE owner = ?",
                "DELETE FROM shop_transfers WHERE owner = ?",
                "DELETE FROM shop_receipts WHERE owner = ?",
            ] {
                sqlx::query(sql)
                    .bind(*user)
                    .execute(&self.admin)
                    .await
                    .unwrap();
            }
        }
        drop_table(&self.admin, &self.records).await;
    }

    async fn payment_rows(&self, user: &str) -> i64 {
        sqlx::query_scalar("SELECT count(*) FROM shop_payments WHERE owner = ?")
            .bind(user)
            .fetch_one(&self.admin)
            .await
            .unwrap()
    }

    async fn record_state(&self, key: &StoreKey) -> Option<String> {
        let sql = format!("SELECT state FROM {} WHERE store_key = ?", self.records);
        sqlx::query_scalar(AssertSqlSafe(sql))
            .bind(key.as_bytes().to_vec())
            .fetch_optional(&self.admin)
            .await
            .unwrap()
    }
}

/// The store key of a payment of `user` under `key`.
fn payment_key(user: &str, key: &str) -> StoreKey {
    StoreKey::new(
        &Scope::User,
        Some(&Principal::new(user)),
        &Method::POST,
        "/payments",
        &IdempotencyKey::new(key).unwrap(),
    )
}

/// Case 1: the same key and body twice: 201 twice, the second replayed, one payment row.
#[cfg_attr(not(idem_test_mysql), ignore = "IDEM_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_1_same_key_same_body_twice_is_one_payment() {
    let Some(db) = MySqlShop::new("case_1_same_key_same_body_twice_is_one_payment").await else {
        return;
    };
    let test = db.serve(settings()).await;
    let (alice, key) = (user(), key());
    let first = test.api.pay(&alice, &key, &payment(9800)).await;
    let created = first.created();
    assert!(!first.replayed());
    let second = test.api.pay(&alice, &key, &payment(9800)).await;
    assert_eq!(second.status, 201);
    assert!(second.replayed());
    assert_eq!(second.body, first.body);
    assert_eq!(second.header("location"), first.header("location"));
    assert_eq!(test.api.payments(&alice).await, [created]);
    assert_eq!(db.payment_rows(&alice).await, 1);
    db.forget(&[&alice]).await;
}

/// Case 2: the same key with another body: 422, and no new payment.
#[cfg_attr(not(idem_test_mysql), ignore = "IDEM_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_2_same_key_different_body_is_422_and_no_new_payment() {
    let Some(db) = MySqlShop::new("case_2_same_key_different_body_is_422").await else {
        return;
    };
    let test = db.serve(settings()).await;
    let (alice, key) = (user(), key());
    let first = test.api.pay(&alice, &key, &payment(9800)).await.created();
    let reused = test.api.pay(&alice, &key, &payment(1200)).await;
    reused.refusal(StatusCode::UNPROCESSABLE_ENTITY, "key-reused");
    assert_eq!(test.api.payments(&alice).await, [first]);
    assert_eq!(db.payment_rows(&alice).await, 1);
    db.forget(&[&alice]).await;
}

/// Case 3: the same key while the first is in flight: 409 with `Retry-After`; the client
/// waits that long and gets the first result. One transfer.
#[cfg_attr(not(idem_test_mysql), ignore = "IDEM_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_3_same_key_in_flight_is_409_then_the_retry_gets_the_result() {
    let Some(db) = MySqlShop::new("case_3_same_key_in_flight_is_409").await else {
        return;
    };
    let test = db
        .serve(Settings {
            transfer_delay: Duration::from_millis(1500),
            ..settings()
        })
        .await;
    let (alice, key) = (user(), key());
    let first = {
        let (api, alice, key) = (test.api.clone(), alice.clone(), key.clone());
        tokio::spawn(async move { api.transfer(&alice, &key, &transfer(50_000)).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second = test.api.transfer(&alice, &key, &transfer(50_000)).await;
    let first = first.await.unwrap();
    // Whichever of the two claimed the key first ran; the other was refused.
    let (ran, refused) = if first.status == 201 {
        (first, second)
    } else {
        (second, first)
    };
    let created = ran.created();
    refused.refusal(StatusCode::CONFLICT, "request-in-flight");
    honour_retry_after(&refused).await;
    let retried = test.api.transfer(&alice, &key, &transfer(50_000)).await;
    assert!(retried.replayed(), "{retried:?}");
    assert_eq!(retried.body, ran.body);
    assert_eq!(test.api.transfers(&alice).await, [created], "one transfer");
    db.forget(&[&alice]).await;
}

/// Case 4: no key: 400, and nothing is created.
#[cfg_attr(not(idem_test_mysql), ignore = "IDEM_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_4_no_key_is_400() {
    let Some(db) = MySqlShop::new("case_4_no_key_is_400").await else {
        return;
    };
    let test = db.serve(settings()).await;
    let alice = user();
    for (path, body) in [
        ("/payments", payment(9800)),
        ("/transfers", transfer(50_000)),
    ] {
        let answer = Answer::of(test.api.post(path, Some(&alice), None).json(&body)).await;
        answer.refusal(StatusCode::BAD_REQUEST, "key-missing");
    }
    assert!(test.api.payments(&alice).await.is_empty());
    assert!(test.api.transfers(&alice).await.is_empty());
    db.forget(&[&alice]).await;
}

/// Case 5: the first request times out on the client; its retries, honouring 409 and
/// `Retry-After`, get the first request's result, and there is one transfer.
#[cfg_attr(not(idem_test_mysql), ignore = "IDEM_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_5_client_timeout_then_retries_get_the_first_result() {
    let Some(db) = MySqlShop::new("case_5_client_timeout_then_retries").await else {
        return;
    };
    let delay = Duration::from_millis(2000);
    let test = db
        .serve(Settings {
            transfer_delay: delay,
            ..settings()
        })
        .await;
    let (alice, key) = (user(), key());
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let started = Instant::now();
    let timed_out = impatient
        .post(test.api.url("/transfers"))
        .bearer_auth(&alice)
        .header("idempotency-key", &key)
        .json(&transfer(50_000))
        .send()
        .await
        .unwrap_err();
    assert!(timed_out.is_timeout(), "{timed_out}");
    let mut conflicts = 0;
    let answer = loop {
        let answer = test.api.transfer(&alice, &key, &transfer(50_000)).await;
        if answer.status != 409 {
            break answer;
        }
        answer.refusal(StatusCode::CONFLICT, "request-in-flight");
        conflicts += 1;
        assert!(conflicts <= 10, "the first transfer never finished");
        honour_retry_after(&answer).await;
    };
    let created = answer.created();
    assert!(answer.replayed(), "the first request's result: {answer:?}");
    assert!(conflicts >= 1 && started.elapsed() >= delay);
    assert_eq!(test.api.transfers(&alice).await, [created], "one transfer");
    db.forget(&[&alice]).await;
}

/// How many times the test handlers ran.
#[derive(Clone, Default)]
struct Runs(Arc<AtomicUsize>);

impl Runs {
    fn next(&self) -> usize {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }

    fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// Remembered for 300 ms only, so that the test can outlive it.
#[idempotent(scope = "global", ttl = "300ms", lease = "300ms")]
async fn short_lived(
    State(runs): State<Runs>,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let run = runs.next();
    (
        StatusCode::CREATED,
        Json(json!({ "run": run, "body": body })),
    )
}

/// Answers 500 on its first run, 201 after; by default the 500 releases the key.
#[idempotent(scope = "global")]
async fn fails_once(State(runs): State<Runs>, Json(_): Json<Value>) -> (StatusCode, Json<Value>) {
    match runs.next() {
        1 => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({ "error": "the ledger was locked" })),
        ),
        run => (StatusCode::CREATED, Json(json!({ "run": run }))),
    }
}

/// Cases 6 and 7 on MySQL, with routes of the test's own: a key after its TTL (300 ms,
/// measured by the server's clock to the microsecond) is a new request; a 500 releases the
/// key, and the retry runs again and is stored.
#[cfg_attr(not(idem_test_mysql), ignore = "IDEM_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cases_6_and_7_after_the_ttl_and_after_a_500_the_key_runs_again() {
    let Some(db) = MySqlShop::new("cases_6_and_7").await else {
        return;
    };
    let store = db.store().await;
    store.migrate().await.unwrap();
    let idem = Idempotency::new(store);
    let (short, failing) = (Runs::default(), Runs::default());
    let router = Router::new()
        .route("/orders", post(short_lived))
        .with_state(short.clone())
        .merge(
            Router::new()
                .route("/failing", post(fails_once))
                .with_state(failing.clone()),
        )
        .layer(Extension(idem.clone()));
    let server = Server::start(router, idem).await;
    let api = Api::new(&server);
    let call = |path: &'static str, key: String| {
        let api = api.clone();
        async move { Answer::of(api.post(path, None, Some(&key)).json(&json!({ "n": 1 }))).await }
    };

    let key = key();
    let first = call("/orders", key.clone()).await;
    assert_eq!(first.json()["run"], 1);
    let within = call("/orders", key.clone()).await;
    assert!(within.replayed(), "within the TTL: the first answer");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = call("/orders", key).await;
    assert!(!after.replayed(), "after the TTL: a new request");
    assert_eq!(after.json()["run"], 2);
    assert_eq!(short.count(), 2);

    let key = idem_tests::key();
    assert_eq!(call("/failing", key.clone()).await.status, 500);
    let retried = call("/failing", key.clone()).await;
    assert!(!retried.replayed(), "the 500 released the key");
    assert_eq!(retried.created()["run"], 2);
    assert!(
        call("/failing", key).await.replayed(),
        "its success is stored"
    );
    assert_eq!(failing.count(), 2);
    db.forget(&[]).await;
}

/// A payment's row and its record commit together: while the record's completion waits for a
/// lock the test holds on the record's row, the payment row is written and invisible, and the
/// record is in flight; once the lock goes, both are there.
#[cfg_attr(not(idem_test_mysql), ignore = "IDEM_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payment_row_commits_with_its_record() {
    let Some(db) = MySqlShop::new("a_payment_row_commits_with_its_record").await else {
        return;
    };
    let test = db
        .serve(Settings {
            payment_delay: Duration::from_millis(1500),
            ..settings()
        })
        .await;
    let (alice, key) = (user(), key());
    let paying = {
        let (api, alice, key) = (test.api.clone(), alice.clone(), key.clone());
        tokio::spawn(async move { api.pay(&alice, &key, &payment(9800)).await })
    };
    let record = payment_key(&alice, &key);
    assert!(
        eventually(Duration::from_secs(10), async || db
            .record_state(&record)
            .await
            .is_some())
        .await
    );
    // The handler waits for the card network: lock its record before it completes, and wait
    // until the completion's UPDATE waits for that lock.
    let mut lock = db.admin.acquire().await.unwrap();
    lock.execute("START TRANSACTION").await.unwrap();
    let sql = format!(
        "SELECT state FROM {} WHERE store_key = ? FOR UPDATE",
        db.records
    );
    let state: String = sqlx::query_scalar(AssertSqlSafe(sql))
        .bind(record.as_bytes().to_vec())
        .fetch_one(&mut *lock)
        .await
        .unwrap();
    assert_eq!(state, "in_flight");
    let (database, table) = db.records.split_once('.').unwrap();
    let (admin, quoted) = (db.admin.clone(), format!("`{database}`.`{table}`"));
    let completion_waits = async || {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM information_schema.processlist \
             WHERE info LIKE CONCAT('UPDATE ', ?, '%state = ''completed''%')",
        )
        .bind(&quoted)
        .fetch_one(&admin)
        .await
        .unwrap();
        waiting > 0
    };
    assert!(eventually(Duration::from_secs(20), completion_waits).await);
    assert_eq!(db.payment_rows(&alice).await, 0, "written, not committed");
    assert_eq!(db.record_state(&record).await.as_deref(), Some("in_flight"));
    lock.execute("ROLLBACK").await.unwrap();

    let paid = paying.await.unwrap().created();
    assert_eq!(db.payment_rows(&alice).await, 1);
    assert_eq!(db.record_state(&record).await.as_deref(), Some("completed"));
    assert_eq!(test.api.payments(&alice).await, [paid]);
    db.forget(&[&alice]).await;
}

/// Every endpoint on the MySQL tables: payments, reads, refunds, receipts, transfers and the
/// bank's webhook.
#[cfg_attr(not(idem_test_mysql), ignore = "IDEM_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_endpoint_works_on_mysql() {
    let Some(db) = MySqlShop::new("every_endpoint_works_on_mysql").await else {
        return;
    };
    let test = db.serve(settings()).await;
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
    let refunded = refund(&alice, 9000).await.created();
    assert_eq!(refunded["amount"], 9000, "{refunded}");
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
    db.forget(&[&alice, &bob]).await;
}

/// Two shops on one database, each its own pool and port: payments and transfers sent to
/// both at once, each key four times, run once each.
#[cfg_attr(not(idem_test_mysql), ignore = "IDEM_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_shops_on_one_database_never_run_an_operation_twice() {
    let Some(db) = MySqlShop::new("two_shops_on_one_database").await else {
        return;
    };
    let settings = Settings {
        transfer_delay: Duration::from_millis(300),
        ..settings()
    };
    let (one, two) = (db.serve(settings.clone()).await, db.serve(settings).await);
    let alice = user();
    let keys: Vec<(String, bool)> = (0..20).map(|n| (key(), n % 2 == 0)).collect();
    let mut sent = JoinSet::new();
    for (key, is_payment) in &keys {
        for api in [&one.api, &two.api, &one.api, &two.api] {
            let (api, alice, key, is_payment) =
                (api.clone(), alice.clone(), key.clone(), *is_payment);
            sent.spawn(async move {
                if is_payment {
                    api.pay(&alice, &key, &payment(9800)).await
                } else {
                    api.transfer(&alice, &key, &transfer(50_000)).await
                }
            });
        }
    }
    for answer in sent.join_all().await {
        assert!(matches!(answer.status.as_u16(), 201 | 409), "{answer:?}");
    }
    // Both shops read the same tables: ten payments and ten transfers, whichever ran them.
    let settled = async || {
        one.api.payments(&alice).await.len() == 10 && two.api.transfers(&alice).await.len() == 10
    };
    assert!(eventually(Duration::from_secs(30), settled).await);
    assert_eq!(db.payment_rows(&alice).await, 10);
    db.forget(&[&alice]).await;
}

/// A shop stopped after its first request and started afresh on the same database replays
/// the first answer, and its payment is there, once.
#[cfg_attr(not(idem_test_mysql), ignore = "IDEM_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_shop_replays_what_it_answered_before() {
    let Some(db) = MySqlShop::new("a_restarted_shop_replays_what_it_answered_before").await else {
        return;
    };
    let (alice, key) = (user(), key());
    let before = db.serve(Settings::default()).await;
    let first = before.api.pay(&alice, &key, &payment(9800)).await;
    let paid = first.created();
    before.server.stop().await;

    let after = db.serve(Settings::default()).await;
    let again = after.api.pay(&alice, &key, &payment(9800)).await;
    assert!(again.replayed(), "{again:?}");
    assert_eq!(again.body, first.body);
    assert_eq!(after.api.payments(&alice).await, [paid]);
    db.forget(&[&alice]).await;
}
