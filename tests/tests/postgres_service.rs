//! A service on `PostgresStore`, over real HTTP: transactional handlers, restarts, two
//! instances on one database, and database faults. Skipped, with a note, when
//! `IDEM_TEST_DATABASE_URL` is unset.
//!
//! The service (`postgres_fixture::Shop`) writes one payment row per run, in the request's
//! transaction through the `Tx` extractor, so row counts show what committed.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use axum::{Extension, Json, Router, extract::State, response::Response, routing::post};
use idem::{Idempotency, extract::Tx, idempotent, postgres::PostgresStore};
use idem_tests::{
    Answer, key, postgres_fixture,
    postgres_fixture::{
        Instance, Proxy, Shop, Step, admin_pool, count, database_url, fresh_name, pay, payments_of,
        policy, spawn_pay, through,
    },
};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::{AssertSqlSafe, PgPool};
use tokio::{
    sync::{Barrier, Notify},
    task::JoinSet,
};

/// A test's database: a records table and a payments table of its own.
struct Setup {
    url: String,
    admin: PgPool,
    records: String,
    shop: Shop,
    client: reqwest::Client,
}

async fn setup(test: &str) -> Option<Setup> {
    let url = database_url(test)?;
    let admin = admin_pool(&url).await;
    let records = fresh_name(&admin, "r").await;
    let shop = Shop::new(&payments_of(&records));
    shop.create_table(&admin).await;
    PostgresStore::builder()
        .table(&records)
        .unwrap()
        .build(admin.clone())
        .migrate()
        .await
        .unwrap();
    Some(Setup {
        url,
        admin,
        records,
        shop,
        client: reqwest::Client::new(),
    })
}

impl Setup {
    fn instance(&self) -> Instance {
        Instance::on_table(&self.shop, &self.url, &self.records)
    }

    async fn payments(&self) -> i64 {
        count(&self.admin, &self.shop.payments).await
    }

    async fn records(&self) -> i64 {
        count(&self.admin, &self.records).await
    }

    async fn completed_records(&self) -> i64 {
        let sql = format!(
            "SELECT count(*) FROM {} WHERE state = 'completed'",
            self.records
        );
        sqlx::query_scalar(AssertSqlSafe(sql))
            .fetch_one(&self.admin)
            .await
            .unwrap()
    }

    /// The `execution` column of every payment row, in order.
    async fn payment_executions(&self) -> Vec<i64> {
        let sql = format!("SELECT execution FROM {} ORDER BY id", self.shop.payments);
        sqlx::query_scalar(AssertSqlSafe(sql))
            .fetch_all(&self.admin)
            .await
            .unwrap()
    }

    async fn tear_down(self) {
        postgres_fixture::drop_table(&self.admin, &self.records).await;
        postgres_fixture::drop_table(&self.admin, &self.shop.payments).await;
    }
}

fn payment() -> Value {
    json!({ "amount": 1250 })
}

/// Waits for `notify`, failing the test rather than hanging it.
async fn wait(notify: &Notify, what: &str) {
    tokio::time::timeout(Duration::from_secs(20), notify.notified())
        .await
        .unwrap_or_else(|_| panic!("timed out waiting: {what}"));
}

fn created(answer: &Answer, execution: i64) -> Value {
    assert_eq!(
        answer.status,
        201,
        "{:?}",
        String::from_utf8_lossy(&answer.body)
    );
    let body = answer.json();
    assert_eq!(body["execution"], execution, "{body}");
    assert_eq!(body["amount"], 1250);
    body
}

/// A commit the server refuses (here a deferred constraint) rolls the row and the record's
/// completion back together; the outcome is known, so the key is released at once and the
/// retry runs, instead of waiting out the lease.
#[cfg_attr(not(idem_test_postgres), ignore = "IDEM_TEST_DATABASE_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_commit_releases_the_key_and_its_retry_runs_again() {
    let Some(setup) = setup("a_refused_commit_releases_the_key_and_its_retry_runs_again").await
    else {
        return;
    };
    let instance = setup.instance();
    let key = key();
    setup.shop.then(Step::FailAtCommit);
    let refused = pay(&setup.client, &instance, &key, &payment()).await;
    refused.problem(StatusCode::SERVICE_UNAVAILABLE, "store-unavailable");
    assert_eq!(setup.payments().await, 0, "the row rolled back");
    assert_eq!(setup.records().await, 0, "the key was released");
    let retry = pay(&setup.client, &instance, &key, &payment()).await;
    created(&retry, 2);
    assert_eq!(setup.payment_executions().await, [2]);
    assert_eq!(setup.completed_records().await, 1);
    setup.tear_down().await;
}

/// A handler that writes its row and then fails (a 5xx answer, or a panic) leaves neither
/// the row nor a record, and the retry with the same key runs the handler again.
#[cfg_attr(not(idem_test_postgres), ignore = "IDEM_TEST_DATABASE_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_transactional_handler_leaves_nothing_and_its_retry_runs_again() {
    let Some(setup) =
        setup("a_failed_transactional_handler_leaves_nothing_and_its_retry_runs_again").await
    else {
        return;
    };
    let instance = setup.instance();
    // Each failure runs twice: the failed run, then the retry. Rows and records only grow
    // by the retry's.
    let cases = [("a 500", Step::Fail, 0, 2), ("a panic", Step::Panic, 1, 4)];
    for (failure, step, rows_before, retry_execution) in cases {
        let key = key();
        setup.shop.then(step);
        let failed = pay(&setup.client, &instance, &key, &payment()).await;
        assert_eq!(failed.status, 500, "{failure}");
        if matches!(failure, "a panic") {
            failed.problem(StatusCode::INTERNAL_SERVER_ERROR, "handler-failed");
        }
        assert_eq!(
            setup.payments().await,
            rows_before,
            "{failure}: the row must roll back"
        );
        assert_eq!(
            setup.records().await,
            rows_before,
            "{failure}: the key must be released"
        );

        let retried = pay(&setup.client, &instance, &key, &payment()).await;
        assert!(
            !retried.replayed(),
            "{failure}: the retry must run, not replay"
        );
        created(&retried, retry_execution);
        assert_eq!(setup.payments().await, rows_before + 1);
        assert_eq!(setup.completed_records().await, rows_before + 1);
    }
    assert_eq!(setup.payment_executions().await, [2, 4]);
    drop(instance);
    setup.tear_down().await;
}

/// A handler that succeeds commits its row with the record; the retry replays the same bytes
/// and writes nothing.
#[cfg_attr(not(idem_test_postgres), ignore = "IDEM_TEST_DATABASE_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_successful_handler_commits_its_row_with_the_record_and_its_retry_replays() {
    let Some(setup) =
        setup("a_successful_handler_commits_its_row_with_the_record_and_its_retry_replays").await
    else {
        return;
    };
    let instance = setup.instance();
    let key = key();
    let first = pay(&setup.client, &instance, &key, &payment()).await;
    assert!(!first.replayed());
    created(&first, 1);
    assert_eq!(setup.payments().await, 1);
    assert_eq!(setup.completed_records().await, 1);

    let again = pay(&setup.client, &instance, &key, &payment()).await;
    assert!(again.replayed());
    assert_eq!(again.status, 201);
    assert_eq!(again.body, first.body, "a replay sends the same bytes");
    assert_eq!(again.header("content-type"), first.header("content-type"));
    assert_eq!(setup.payments().await, 1);
    assert_eq!(setup.shop.executions(), 1);

    // The same key with another body is refused, and writes nothing.
    let other = pay(&setup.client, &instance, &key, &json!({ "amount": 1 })).await;
    other.problem(StatusCode::UNPROCESSABLE_ENTITY, "key-reused");
    assert_eq!(setup.payments().await, 1);
    drop(instance);
    setup.tear_down().await;
}

/// A handler whose statement failed (aborting its transaction) and that answered 409 all the
/// same: the 409 is the operation's result. It is stored and replayed, and nothing the handler
/// wrote commits, since the transaction could only roll back.
#[cfg_attr(not(idem_test_postgres), ignore = "IDEM_TEST_DATABASE_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_after_a_failed_statement_is_stored_without_the_writes() {
    let Some(setup) =
        setup("an_answer_after_a_failed_statement_is_stored_without_the_writes").await
    else {
        return;
    };
    let instance = setup.instance();
    setup.shop.then(Step::Duplicate);
    let key = key();
    let first = pay(&setup.client, &instance, &key, &payment()).await;
    assert_eq!(
        first.status,
        409,
        "{:?}",
        String::from_utf8_lossy(&first.body)
    );
    assert_eq!(first.json()["error"], "payment already exists");
    assert_eq!(
        setup.payments().await,
        0,
        "the aborted transaction wrote nothing"
    );
    assert_eq!(setup.completed_records().await, 1);

    let again = pay(&setup.client, &instance, &key, &payment()).await;
    assert!(again.replayed());
    assert_eq!(again.status, 409);
    assert_eq!(again.body, first.body);
    assert_eq!(setup.shop.executions(), 1);
    drop(instance);
    setup.tear_down().await;
}

/// 100 requests with one key at once, from as many tasks: one runs, the others answer 409
/// or replay its result, and exactly one row is written.
#[cfg_attr(not(idem_test_postgres), ignore = "IDEM_TEST_DATABASE_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_hundred_concurrent_requests_with_one_key_write_one_row() {
    let Some(setup) = setup("one_hundred_concurrent_requests_with_one_key_write_one_row").await
    else {
        return;
    };
    let instance = setup.instance();
    setup.shop.then(Step::Hold(Duration::from_millis(300)));
    let key = key();
    let start = Arc::new(Barrier::new(100));
    let mut requests = JoinSet::new();
    for _ in 0..100 {
        let (client, url, key, start) = (
            setup.client.clone(),
            instance.url("/payments"),
            key.clone(),
            start.clone(),
        );
        requests.spawn(async move {
            start.wait().await;
            let response = client
                .post(url)
                .header("idempotency-key", key)
                .json(&payment())
                .send()
                .await
                .unwrap();
            Answer::read(response).await
        });
    }
    let (mut ran, mut replayed, mut in_flight) = (Vec::new(), 0, 0);
    while let Some(answer) = requests.join_next().await {
        let answer = answer.unwrap();
        match (answer.status.as_u16(), answer.replayed()) {
            (201, false) => ran.push(answer),
            (201, true) => replayed += 1,
            (409, _) => {
                answer.problem(StatusCode::CONFLICT, "request-in-flight");
                assert!(answer.header("retry-after").is_some());
                in_flight += 1;
            }
            _ => panic!("unexpected answer {answer:?}"),
        }
    }
    assert_eq!(ran.len(), 1, "exactly one request runs the handler");
    created(&ran[0], 1);
    assert_eq!(replayed + in_flight, 99);
    assert!(in_flight > 0, "the others came while the first was running");
    assert_eq!(setup.payments().await, 1);
    assert_eq!(setup.shop.executions(), 1);
    drop(instance);
    setup.tear_down().await;
}

/// A handler whose lease was taken over while it ran (its lease lapsed: a stalled process,
/// say) does not commit: the completion in its transaction finds the record fenced, its row
/// rolls back, and its caller is told to retry. The request that took over is the result.
#[cfg_attr(not(idem_test_postgres), ignore = "IDEM_TEST_DATABASE_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_fences_the_transactional_completion_and_rolls_its_writes_back() {
    let Some(setup) =
        setup("a_takeover_fences_the_transactional_completion_and_rolls_its_writes_back").await
    else {
        return;
    };
    let instance = setup.instance();
    let (written, proceed) = (Arc::<Notify>::default(), Arc::<Notify>::default());
    setup.shop.then(Step::Wait {
        written: written.clone(),
        proceed: proceed.clone(),
    });
    let key = key();
    let first = spawn_pay(&setup.client, &instance, &key, payment());
    wait(&written, "the first handler writes its row").await;

    // The first holder stops renewing: its lease lapses.
    let lapse = format!(
        "UPDATE {} SET lease_expires_at = clock_timestamp() - interval '1 second' \
         WHERE state = 'in_flight'",
        setup.records
    );
    let lapsed = sqlx::query(AssertSqlSafe(lapse))
        .execute(&setup.admin)
        .await
        .unwrap();
    assert_eq!(lapsed.rows_affected(), 1);

    let second = pay(&setup.client, &instance, &key, &payment()).await;
    assert!(!second.replayed(), "the retry takes the lapsed key over");
    created(&second, 2);

    proceed.notify_one();
    let first = first.await.unwrap();
    let problem = first.problem(StatusCode::CONFLICT, "request-in-flight");
    assert!(
        problem["detail"].as_str().unwrap().contains("took it over"),
        "{problem}"
    );
    assert_eq!(
        setup.payment_executions().await,
        [2],
        "the fenced handler's row must roll back"
    );
    let replay = pay(&setup.client, &instance, &key, &payment()).await;
    assert!(replay.replayed());
    assert_eq!(replay.body, second.body);
    drop(instance);
    setup.tear_down().await;
}

/// A service that dies in the middle of a transactional handler leaves neither the handler's
/// row nor a completed record: the database rolls the transaction back, the claim's lease
/// lapses (retries meanwhile answer 409), and then a retry on another instance runs again.
#[cfg_attr(not(idem_test_postgres), ignore = "IDEM_TEST_DATABASE_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_mid_request_leaves_nothing_and_the_retry_runs_once_the_lease_lapses() {
    let Some(setup) =
        setup("a_crash_mid_request_leaves_nothing_and_the_retry_runs_once_the_lease_lapses").await
    else {
        return;
    };
    let lease = Duration::from_secs(1);
    let start = |setup: &Setup| {
        let (url, records) = (setup.url.clone(), setup.records.clone());
        Instance::start(&setup.shop, policy().lease(lease), move || async move {
            PostgresStore::builder()
                .table(&records)
                .unwrap()
                .connect(&url)
                .await
                .unwrap()
        })
    };
    let (written, proceed) = (Arc::<Notify>::default(), Arc::<Notify>::default());
    setup.shop.then(Step::Wait {
        written: written.clone(),
        proceed,
    });
    let doomed = start(&setup);
    let key = key();
    let request = setup
        .client
        .post(doomed.url("/payments"))
        .header("idempotency-key", &key)
        .json(&payment())
        .send();
    let lost = tokio::spawn(request);
    wait(&written, "the handler writes its row").await;
    doomed.kill();
    assert!(
        lost.await.unwrap().is_err(),
        "the crashed instance answers nothing"
    );

    let survivor = start(&setup);
    let early = pay(&setup.client, &survivor, &key, &payment()).await;
    early.problem(StatusCode::CONFLICT, "request-in-flight");
    assert_eq!(
        setup.payments().await,
        0,
        "the crashed handler's row rolled back"
    );

    tokio::time::sleep(lease + Duration::from_millis(300)).await;
    let retried = pay(&setup.client, &survivor, &key, &payment()).await;
    assert!(!retried.replayed());
    created(&retried, 2);
    assert_eq!(setup.payment_executions().await, [2]);
    assert_eq!(setup.completed_records().await, 1);
    drop(survivor);
    setup.tear_down().await;
}

/// Records are durable: a service stopped after the first request (runtime, router and pool
/// dropped) and started afresh on the same table replays it.
#[cfg_attr(not(idem_test_postgres), ignore = "IDEM_TEST_DATABASE_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_service_replays_what_it_answered_before() {
    let Some(setup) = setup("a_restarted_service_replays_what_it_answered_before").await else {
        return;
    };
    let key = key();
    let before = setup.instance();
    let first = pay(&setup.client, &before, &key, &payment()).await;
    created(&first, 1);
    before.stop();

    let after = setup.instance();
    let again = pay(&setup.client, &after, &key, &payment()).await;
    assert!(again.replayed());
    assert_eq!(again.status, 201);
    assert_eq!(again.body, first.body);
    assert_eq!(setup.shop.executions(), 1);
    assert_eq!(setup.payments().await, 1);
    drop(after);
    setup.tear_down().await;
}

/// Two instances (two runtimes, two pools, two ports) on one database behave as one: a
/// request in flight on one answers 409 on the other, and each replays what the other ran.
#[cfg_attr(not(idem_test_postgres), ignore = "IDEM_TEST_DATABASE_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_on_one_database_behave_as_one() {
    let Some(setup) = setup("two_instances_on_one_database_behave_as_one").await else {
        return;
    };
    let (one, two) = (setup.instance(), setup.instance());
    assert_ne!(one.addr, two.addr);
    let (written, proceed) = (Arc::<Notify>::default(), Arc::<Notify>::default());
    setup.shop.then(Step::Wait {
        written: written.clone(),
        proceed: proceed.clone(),
    });
    let key = key();
    let first = spawn_pay(&setup.client, &one, &key, payment());
    wait(&written, "the handler on instance one runs").await;

    let conflict = pay(&setup.client, &two, &key, &payment()).await;
    conflict.problem(StatusCode::CONFLICT, "request-in-flight");
    assert!(conflict.header("retry-after").is_some());

    proceed.notify_one();
    let first = first.await.unwrap();
    created(&first, 1);
    let replay = pay(&setup.client, &two, &key, &payment()).await;
    assert!(replay.replayed());
    assert_eq!(replay.body, first.body);

    // And the other way round.
    let other = key.clone() + "-2";
    let ran = pay(&setup.client, &two, &other, &payment()).await;
    created(&ran, 2);
    let replay = pay(&setup.client, &one, &other, &payment()).await;
    assert!(replay.replayed());
    assert_eq!(replay.body, ran.body);

    assert_eq!(setup.shop.executions(), 2);
    assert_eq!(setup.payments().await, 2);
    drop((one, two));
    setup.tear_down().await;
}

/// The database goes away (every connection breaks, new ones fail): requests answer 503
/// Problem Details promptly, and run nothing. When it is back, the same service, unrestarted,
/// serves again, and the refused key runs.
#[cfg_attr(not(idem_test_postgres), ignore = "IDEM_TEST_DATABASE_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_database_answers_503_promptly_and_the_service_recovers() {
    let Some(setup) = setup("a_lost_database_answers_503_promptly_and_the_service_recovers").await
    else {
        return;
    };
    let proxy = Proxy::start(&setup.url).await;
    let options = through(&setup.url, &proxy);
    let records = setup.records.clone();
    let instance = Instance::start(&setup.shop, policy(), move || async move {
        PostgresStore::builder()
            .table(&records)
            .unwrap()
            .acquire_timeout(Duration::from_millis(500))
            .connect_with(options)
            .await
            .unwrap()
    });
    let before = key();
    created(&pay(&setup.client, &instance, &before, &payment()).await, 1);

    proxy.cut();
    let during = key();
    for _ in 0..3 {
        let started = Instant::now();
        let refused = pay(&setup.client, &instance, &during, &payment()).await;
        let took = started.elapsed();
        let problem = refused.problem(StatusCode::SERVICE_UNAVAILABLE, "store-unavailable");
        assert!(
            problem["type"]
                .as_str()
                .unwrap()
                .ends_with("#store-unavailable")
        );
        assert!(refused.header("retry-after").is_some());
        assert!(took < Duration::from_secs(3), "took {took:?}");
    }
    assert_eq!(
        setup.shop.executions(),
        1,
        "nothing runs while the store is away"
    );

    proxy.restore();
    let after = pay(&setup.client, &instance, &during, &payment()).await;
    assert!(!after.replayed());
    created(&after, 2);
    let replay = pay(&setup.client, &instance, &before, &payment()).await;
    assert!(replay.replayed());
    assert_eq!(setup.payments().await, 2);
    drop(instance);
    setup.tear_down().await;
}

/// A pool of one connection, held by a slow transactional handler: another request answers
/// 503 Problem Details after the short acquire timeout, not after sqlx's default 30 s, and
/// runs once the connection is free.
#[cfg_attr(not(idem_test_postgres), ignore = "IDEM_TEST_DATABASE_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exhausted_pool_answers_503_promptly_and_the_service_recovers() {
    let Some(setup) =
        setup("an_exhausted_pool_answers_503_promptly_and_the_service_recovers").await
    else {
        return;
    };
    let (url, records) = (setup.url.clone(), setup.records.clone());
    let instance = Instance::start(&setup.shop, policy(), move || async move {
        PostgresStore::builder()
            .table(&records)
            .unwrap()
            .max_connections(1)
            .acquire_timeout(Duration::from_millis(300))
            .connect(&url)
            .await
            .unwrap()
    });
    let (written, proceed) = (Arc::<Notify>::default(), Arc::<Notify>::default());
    setup.shop.then(Step::Wait {
        written: written.clone(),
        proceed: proceed.clone(),
    });
    let slow = spawn_pay(&setup.client, &instance, &key(), payment());
    wait(&written, "the slow handler holds the only connection").await;

    let other = key();
    let started = Instant::now();
    let refused = pay(&setup.client, &instance, &other, &payment()).await;
    let took = started.elapsed();
    refused.problem(StatusCode::SERVICE_UNAVAILABLE, "store-unavailable");
    assert!(refused.header("retry-after").is_some());
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(2),
        "took {took:?}"
    );

    proceed.notify_one();
    created(&slow.await.unwrap(), 1);
    let after = pay(&setup.client, &instance, &other, &payment()).await;
    created(&after, 2);
    assert_eq!(setup.payments().await, 2);
    drop(instance);
    setup.tear_down().await;
}

#[idempotent(scope = "global")]
async fn create_payment_once(shop: State<Shop>, tx: Tx, body: Json<Value>) -> Response {
    postgres_fixture::create_payment(shop, tx, body).await
}

/// With `#[idempotent]` the handler's extractors run before the key is claimed; `Tx` is one
/// of them and must not begin the transaction there. On a pool of one connection an eager
/// begin would hold the only connection while the claim waits for it (503); a lazy one lets
/// the claim run, then begins in the handler's body. A request rejected by an extractor (bad
/// JSON) stores nothing, so the same key runs once the body is fixed.
#[cfg_attr(not(idem_test_postgres), ignore = "IDEM_TEST_DATABASE_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_attribute_the_transaction_begins_in_the_handler_body() {
    let Some(setup) = setup("with_the_attribute_the_transaction_begins_in_the_handler_body").await
    else {
        return;
    };
    let (url, records, shop) = (setup.url.clone(), setup.records.clone(), setup.shop.clone());
    let instance = Instance::serve(move || async move {
        let store = PostgresStore::builder()
            .table(&records)
            .unwrap()
            .max_connections(1)
            .acquire_timeout(Duration::from_millis(300))
            .connect(&url)
            .await
            .unwrap();
        Router::new()
            .route("/payments", post(create_payment_once))
            .with_state(shop)
            .layer(Extension(Idempotency::new(store)))
    });
    let key = key();
    let malformed = setup
        .client
        .post(instance.url("/payments"))
        .header("idempotency-key", &key)
        .header("content-type", "application/json")
        .body("{\"amount\": ")
        .send()
        .await
        .unwrap();
    assert_eq!(malformed.status(), 400);
    assert_eq!(
        setup.records().await,
        0,
        "a rejected request stores nothing"
    );
    assert_eq!(setup.shop.executions(), 0);

    let first = pay(&setup.client, &instance, &key, &payment()).await;
    assert!(!first.replayed());
    created(&first, 1);
    assert_eq!(setup.payments().await, 1);
    let again = pay(&setup.client, &instance, &key, &payment()).await;
    assert!(again.replayed());
    assert_eq!(again.body, first.body);
    assert_eq!(setup.payments().await, 1);
    drop(instance);
    setup.tear_down().await;
}
