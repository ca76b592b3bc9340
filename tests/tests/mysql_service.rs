//! A service on `MySqlStore` over real HTTP, its handler writing in the request's transaction
//! (`Tx`): what commits and what rolls back, one run per key under a thousand simultaneous
//! requests, two instances on one database, and the faults InnoDB answers with (a deadlock, a
//! lock wait timeout) and a record that does not decode. Skipped, saying so, when
//! `IDEM_TEST_MYSQL_URL` is unset.

use std::{sync::Arc, time::Duration};

use axum::http::{Method, StatusCode};
use idem::{Idempotency, IdempotencyKey, Policy, Scope, StoreKey, mysql::MySqlStore, store::Store};
use idem_tests::{
    Answer, Served, eventually, key,
    mysql_fixture::{Payments, Step, admin_pool, count, drop_table, fresh_name, mysql_url},
};
use serde_json::json;
use sqlx::{AssertSqlSafe, Executor, MySqlPool};
use tokio::{sync::Notify, task::JoinSet};

/// Long enough for anything the runtime does in the background to land on a slow machine.
const PATIENCE: Duration = Duration::from_secs(30);

/// A payment service on a fresh records table and a fresh payments table, served; dropped
/// tables at the end.
struct Setup {
    admin: MySqlPool,
    records: String,
    payments: Payments,
    store: MySqlStore,
    served: Served,
    http: reqwest::Client,
}

impl Setup {
    async fn new(test: &str) -> Option<Self> {
        let url = mysql_url(test)?;
        let admin = admin_pool(&url).await;
        let records = fresh_name(&admin, "r").await;
        let payments = Payments::create(&admin, &fresh_name(&admin, "p").await).await;
        let store = store(&url, &records).await;
        store.migrate().await.unwrap();
        let idem = Idempotency::builder(store.clone())
            .store_timeout(PATIENCE)
            .build();
        let router = payments.router_with(idem, Policy::new().scope(Scope::Global));
        Some(Self {
            served: Served::start(router).await,
            http: reqwest::Client::new(),
            admin,
            records,
            payments,
            store,
        })
    }

    async fn pay(&self, key: &str) -> Answer {
        Answer::of(
            self.http
                .post(self.served.url("/payments"))
                .header("idempotency-key", key)
                .json(&json!({ "amount": 9800 })),
        )
        .await
    }

    async fn rows(&self) -> i64 {
        count(&self.admin, &self.payments.table).await
    }

    /// The record of `key`'s row, as `state`.
    async fn state(&self, key: &str) -> Option<String> {
        sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT state FROM {} WHERE store_key = ?",
            self.records
        )))
        .bind(store_key(key).as_bytes().to_vec())
        .fetch_optional(&self.admin)
        .await
        .unwrap()
    }

    async fn tear_down(self) {
        drop_table(&self.admin, &self.records).await;
        drop_table(&self.admin, &self.payments.table).await;
    }
}

/// A store whose pool waits for connections as long as the test may take: a thousand
/// requests at once queue for its connections.
async fn store(url: &str, table: &str) -> MySqlStore {
    MySqlStore::builder()
        .table(table)
        .unwrap()
        .acquire_timeout(PATIENCE)
        .max_connections(16)
        .lock_wait_timeout(Duration::from_secs(1))
        .connect(url)
        .await
        .unwrap()
}

/// The store key of the test service's `key`.
fn store_key(key: &str) -> StoreKey {
    StoreKey::new(
        &Scope::Global,
        None,
        &Method::POST,
        "/payments",
        &IdempotencyKey::new(key).unwrap(),
    )
}

/// Retries `key` until it is answered 201, for at most [`PATIENCE`].
async fn pay_until_created(setup: &Setup, key: &str) -> Answer {
    let mut last = None;
    let created = eventually(PATIENCE, async || {
        let answer = setup.pay(key).await;
        let done = answer.status == StatusCode::CREATED;
        last = Some(answer);
        done
    })
    .await;
    let answer = last.expect("at least one answer");
    assert!(created, "{key} was never answered 201: {answer:?}");
    answer
}

#[cfg_attr(not(idem_test_mysql), ignore = "IDEM_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_successful_handler_commits_its_row_with_the_record_and_a_failed_one_neither() {
    let test = "a_successful_handler_commits_its_row_with_the_record_and_a_failed_one_neither";
    let Some(setup) = Setup::new(test).await else {
        return;
    };
    let key = key();
    setup.payments.then(Step::Fail);
    let failed = setup.pay(&key).await;
    assert_eq!(failed.status, 500, "{failed:?}");
    assert_eq!(setup.rows().await, 0, "the failed run's row rolled back");
    assert_eq!(setup.state(&key).await, None, "and its key was released");

    let created = setup.pay(&key).await;
    assert_eq!(created.json()["execution"], 2, "{created:?}");
    let again = setup.pay(&key).await;
    assert!(again.replayed());
    assert_eq!(again.body, created.body);
    assert_eq!(setup.rows().await, 1);
    assert_eq!(setup.state(&key).await.as_deref(), Some("completed"));
    setup.tear_down().await;
}

/// A thousand requests with one key at once: the handler runs once, one answer is its 201,
/// every other one a 409 or the replay of that 201, and no deadlock or lock wait between the
/// claims' inserts surfaces as an error.
#[cfg_attr(not(idem_test_mysql), ignore = "IDEM_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_simultaneous_requests_with_one_key_run_the_handler_once() {
    let test = "a_thousand_simultaneous_requests_with_one_key_run_the_handler_once";
    let Some(setup) = Setup::new(test).await else {
        return;
    };
    let _ = rlimit::increase_nofile_limit(8192);
    let (setup, key) = (Arc::new(setup), key());
    let start = Arc::new(tokio::sync::Barrier::new(1000));
    let mut sent = JoinSet::new();
    for _ in 0..1000 {
        let (setup, key, start) = (Arc::clone(&setup), key.clone(), Arc::clone(&start));
        sent.spawn(async move {
            start.wait().await;
            setup.pay(&key).await
        });
    }
    let answers = sent.join_all().await;
    let mut first = None;
    for answer in &answers {
        match answer.status {
            StatusCode::CREATED if !answer.replayed() => {
                assert!(
                    first.replace(answer.body.clone()).is_none(),
                    "two first runs"
                );
            }
            StatusCode::CREATED | StatusCode::CONFLICT => {}
            _ => panic!("an answer that is neither 201 nor 409: {answer:?}"),
        }
    }
    let first = first.expect("one request ran");
    for answer in answers.iter().filter(|answer| answer.replayed()) {
        assert_eq!(answer.body, first, "every replay is the first answer");
    }
    assert_eq!(setup.payments.executions(), 1);
    assert_eq!(setup.rows().await, 1);
    let setup = Arc::into_inner(setup).expect("every request ended");
    setup.tear_down().await;
}

/// Two instances, each with its own pool, on one records table: keys sent to both at once
/// run once each.
#[cfg_attr(not(idem_test_mysql), ignore = "IDEM_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_on_one_database_run_each_key_once() {
    let test = "two_instances_on_one_database_run_each_key_once";
    let Some(setup) = Setup::new(test).await else {
        return;
    };
    let url = mysql_url(test).unwrap();
    let other = Served::start(setup.payments.router(store(&url, &setup.records).await)).await;
    let urls = [setup.served.url("/payments"), other.url("/payments")];
    let keys: Vec<String> = (0..50).map(|_| key()).collect();
    let mut sent = JoinSet::new();
    for key in &keys {
        for url in urls.iter().chain(&urls) {
            let (http, url, key) = (setup.http.clone(), url.clone(), key.clone());
            sent.spawn(async move {
                let request = http.post(url).header("idempotency-key", key);
                Answer::of(request.json(&json!({ "amount": 9800 }))).await
            });
        }
    }
    for answer in sent.join_all().await {
        assert!(matches!(answer.status.as_u16(), 201 | 409), "{answer:?}");
    }
    for key in &keys {
        pay_until_created(&setup, key).await;
    }
    assert_eq!(setup.payments.executions(), 50, "each key ran once");
    assert_eq!(setup.rows().await, 50);
    drop(other);
    setup.tear_down().await;
}

/// Holds `key`'s record row locked, in a transaction of the test's own, until it is dropped
/// or rolled back; `weight` rows inserted first make this transaction the heavier one, which
/// InnoDB keeps when it breaks a deadlock.
async fn lock_record(
    setup: &Setup,
    key: &str,
    weight: usize,
) -> sqlx::pool::PoolConnection<sqlx::MySql> {
    let mut conn = setup.admin.acquire().await.unwrap();
    conn.execute("START TRANSACTION").await.unwrap();
    if weight > 0 {
        let scratch = fresh_name(&setup.admin, "w").await;
        // DDL commits: make the table before the transaction that fills it.
        conn.execute("COMMIT").await.unwrap();
        let ddl = format!("CREATE TABLE {scratch} (n INT PRIMARY KEY) ENGINE = InnoDB");
        conn.execute(AssertSqlSafe(ddl)).await.unwrap();
        conn.execute("START TRANSACTION").await.unwrap();
        for n in 0..weight {
            let insert = format!("INSERT INTO {scratch} VALUES ({n})");
            conn.execute(AssertSqlSafe(insert)).await.unwrap();
        }
    }
    let locked: Vec<String> = sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT state FROM {} WHERE store_key = ? FOR UPDATE",
        setup.records
    )))
    .bind(store_key(key).as_bytes().to_vec())
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    assert_eq!(locked.len(), 1, "the record is there to lock");
    conn
}

/// The completion waits for a row lock the test holds on the record, longer than
/// `innodb_lock_wait_timeout`: the statement fails, the transaction rolls back with the
/// handler's row, the request is answered 503, and once the lock is gone the key is free and
/// the retry runs once more, writing one row.
#[cfg_attr(not(idem_test_mysql), ignore = "IDEM_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_wait_timeout_at_the_completion_rolls_back_and_answers_503() {
    let test = "a_lock_wait_timeout_at_the_completion_rolls_back_and_answers_503";
    let Some(setup) = Setup::new(test).await else {
        return;
    };
    let (written, proceed) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    setup.payments.then(Step::Wait {
        written: Arc::clone(&written),
        proceed: Arc::clone(&proceed),
    });
    let setup = Arc::new(setup);
    let key = key();
    let first = tokio::spawn({
        let (setup, key) = (Arc::clone(&setup), key.clone());
        async move { setup.pay(&key).await }
    });
    written.notified().await;
    let mut lock = lock_record(&setup, &key, 0).await;
    proceed.notify_one();
    let first = first.await.unwrap();
    first.refusal(StatusCode::SERVICE_UNAVAILABLE, "store-unavailable");
    assert!(first.header("retry-after").is_some(), "{first:?}");
    lock.execute("ROLLBACK").await.unwrap();
    drop(lock);

    let retried = pay_until_created(&setup, &key).await;
    assert!(!retried.replayed(), "the first run committed nothing");
    assert_eq!(retried.json()["execution"], 2);
    assert_eq!(setup.rows().await, 1, "the first run's row rolled back");
    Arc::into_inner(setup).unwrap().tear_down().await;
}

/// The completion closes a deadlock: the test's transaction holds the record and waits for
/// the handler's uncommitted row, the handler's completion waits for the record. InnoDB rolls
/// the lighter transaction back, the handler's: its row goes with it, the request is answered
/// 503, and the retry runs once more, writing one row.
#[cfg_attr(not(idem_test_mysql), ignore = "IDEM_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadlock_at_the_completion_rolls_back_and_answers_503() {
    let test = "a_deadlock_at_the_completion_rolls_back_and_answers_503";
    let Some(setup) = Setup::new(test).await else {
        return;
    };
    let (written, proceed) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    setup.payments.then(Step::Wait {
        written: Arc::clone(&written),
        proceed: Arc::clone(&proceed),
    });
    let setup = Arc::new(setup);
    let key = key();
    let first = tokio::spawn({
        let (setup, key) = (Arc::clone(&setup), key.clone());
        async move { setup.pay(&key).await }
    });
    written.notified().await;
    let mut lock = lock_record(&setup, &key, 50).await;
    // The test's transaction now waits for the handler's row...
    let waiting = tokio::spawn({
        let table = setup.payments.table.to_string();
        async move {
            let rows = sqlx::query(AssertSqlSafe(format!("SELECT id FROM {table} FOR UPDATE")))
                .fetch_all(&mut *lock)
                .await
                .expect("the test's transaction is not the deadlock's victim");
            lock.execute("ROLLBACK").await.unwrap();
            rows.len()
        }
    });
    let admin = setup.admin.clone();
    let lock_waits = async || {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT'",
        )
        .fetch_one(&admin)
        .await
        .unwrap();
        waiting > 0
    };
    assert!(eventually(PATIENCE, lock_waits).await);
    // ...and the handler's completion closes the circle.
    proceed.notify_one();
    let first = first.await.unwrap();
    first.refusal(StatusCode::SERVICE_UNAVAILABLE, "store-unavailable");
    assert_eq!(waiting.await.unwrap(), 0, "the handler's row rolled back");

    let retried = pay_until_created(&setup, &key).await;
    assert!(!retried.replayed(), "the first run committed nothing");
    assert_eq!(retried.json()["execution"], 2);
    assert_eq!(setup.rows().await, 1);
    Arc::into_inner(setup).unwrap().tear_down().await;
}

/// A completed record whose response does not decode: every retry is answered 503 Problem
/// Details, the handler does not run again, and the record is left as it is.
#[cfg_attr(not(idem_test_mysql), ignore = "IDEM_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_that_does_not_decode_answers_503_and_runs_nothing() {
    let test = "a_record_that_does_not_decode_answers_503_and_runs_nothing";
    let Some(setup) = Setup::new(test).await else {
        return;
    };
    let key = key();
    setup.pay(&key).await.created();
    let damage = format!(
        "UPDATE {} SET response = x'ff00ff' WHERE store_key = ?",
        setup.records
    );
    sqlx::query(AssertSqlSafe(damage))
        .bind(store_key(&key).as_bytes().to_vec())
        .execute(&setup.admin)
        .await
        .unwrap();
    for _ in 0..2 {
        let answer = setup.pay(&key).await;
        answer.refusal(StatusCode::SERVICE_UNAVAILABLE, "store-unavailable");
    }
    assert_eq!(setup.payments.executions(), 1);
    assert_eq!(setup.rows().await, 1);
    assert_eq!(setup.state(&key).await.as_deref(), Some("completed"));
    let held = setup.store.look_up(&store_key(&key)).await;
    assert!(
        held.is_err(),
        "the record still does not read back: {held:?}"
    );
    setup.tear_down().await;
}

/// A pool of one connection serves a transactional request: the handler's transaction holds
/// the connection to its end, and nothing the completion does inside it (the first look at
/// the server's `max_allowed_packet` included) waits for a second one.
#[cfg_attr(not(idem_test_mysql), ignore = "IDEM_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_of_one_connection_serves_a_transactional_request() {
    let test = "a_pool_of_one_connection_serves_a_transactional_request";
    let Some(setup) = Setup::new(test).await else {
        return;
    };
    let url = mysql_url(test).unwrap();
    let one = MySqlStore::builder()
        .table(&setup.records)
        .unwrap()
        .max_connections(1)
        .connect(&url)
        .await
        .unwrap();
    let served = Served::start(setup.payments.router(one)).await;
    let key = key();
    let request = || {
        setup
            .http
            .post(served.url("/payments"))
            .header("idempotency-key", &key)
            .json(&json!({ "amount": 9800 }))
    };
    let first = Answer::of(request()).await;
    first.created();
    let again = Answer::of(request()).await;
    assert!(again.replayed(), "{again:?}");
    assert_eq!(setup.rows().await, 1);
    drop(served);
    setup.tear_down().await;
}
