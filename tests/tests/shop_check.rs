//! idem-check against the shop on each store (memory, SQLite, Redis, PostgreSQL, MySQL): every
//! case passes.
//!
//! The retention case waits out the payments' TTL, so the shop runs with its records kept
//! for 10 s at most (`SHOP_MAX_TTL_MS`, the runtime's `max_ttl`, which never goes below the
//! payments' 10 s lease), and the check is told so (`--ttl 10s --wait-ttl`).
//!
//! The settings are the ones a user of the shop would give: payments as the endpoint, counted
//! by `GET /payments`; a second user; transfers as the slow request (a bank that takes
//! 800 ms here, given up on after 300 ms, and what the concurrent case sends), counted by
//! `GET /transfers`; a refund while the bank is down as the failing request, whose 502 the
//! shop declares stored (`store_server_errors`); both key spellings.
//! The Redis, PostgreSQL and MySQL runs are ignored, naming the variable, when it is unset; the
//! memory and SQLite runs always run (SQLite on a file in a directory of the test's own).

use std::time::Duration;

use http::HeaderMap;
use idem_check::{Check, KeyStyle, OnServerError, Report, Settings, Variant, Verdict};
use idem_tests::{
    key, redis_fixture,
    shop_fixture::{TestShop, payment, settings, user},
};
use shop::{Backend, Settings as ShopSettings};

/// The shop's transfers take the bank this long, at the least.
const TRANSFER_DELAY: Duration = Duration::from_millis(800);

/// When the client gives up on a transfer (and sends case 3's duplicate): well inside the
/// bank's least time, however loaded the machine is.
const GIVE_UP: Duration = Duration::from_millis(300);

/// The payments' retention in these runs: their lease, the least `max_ttl` leaves them.
const RETENTION: Duration = Duration::from_secs(10);

async fn check_the_shop(backend: Backend) -> Report {
    let test = TestShop::on(
        backend.with_runtime(Some(RETENTION), None),
        ShopSettings {
            transfer_delay: TRANSFER_DELAY,
            ..settings()
        },
    )
    .await;
    let (alice, bob) = (user(), user());
    // The failing request: a refund of a payment while the bank is down.
    let paid = test.api.pay(&alice, &key(), &payment(9800)).await.created();
    test.shop.bank().set_down(true);
    let base = test.server.url("");
    let url = |path: &str| format!("{base}{path}").parse().unwrap();
    let mut check = Settings::post(
        &format!("{base}/payments"),
        r#"{"amount":9800,"currency":"JPY"}"#,
    )
    .unwrap();
    check
        .add_header(&format!("Authorization: Bearer {alice}"))
        .unwrap();
    check
        .add_other_header(&format!("Authorization: Bearer {bob}"))
        .unwrap();
    check.count_url = Some(url("/payments"));
    check.key_style = Some(KeyStyle::Both);
    check.slow = Some(Variant {
        url: Some(url("/transfers")),
        body: Some(r#"{"amount":50000,"currency":"JPY","toAccount":"0000000"}"#.into()),
        headers: HeaderMap::new(),
        count_url: Some(url("/transfers")),
    });
    check.give_up_after = Some(GIVE_UP);
    check.failing = Some(Variant {
        url: Some(url(&format!(
            "/payments/{}/refunds",
            paid["id"].as_str().unwrap()
        ))),
        body: Some(r#"{"amount":500}"#.into()),
        headers: HeaderMap::new(),
        count_url: None,
    });
    check.on_server_error = OnServerError::Stored;
    check.ttl = Some(RETENTION);
    check.wait_ttl = true;
    let report = Check::new(check)
        .unwrap()
        .run()
        .await
        .expect("the check runs to its end");
    println!("{}", idem_check::report::text(&report, false));
    report
}

/// Every case passes.
fn assert_every_case_passes(report: &Report) {
    let not_passed: Vec<(&str, Verdict)> = report
        .cases
        .iter()
        .filter(|case| case.verdict != Verdict::Pass)
        .map(|case| (case.name, case.verdict))
        .collect();
    assert_eq!(not_passed, []);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_case_passes_against_the_shop_in_memory() {
    assert_every_case_passes(&check_the_shop(Backend::memory()).await);
}

#[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_case_passes_against_the_shop_on_redis() {
    let Some(url) = redis_fixture::redis_url() else {
        return;
    };
    let backend = Backend::redis(redis_fixture::connect(&url).await);
    assert_every_case_passes(&check_the_shop(backend).await);
}

#[cfg_attr(not(idem_test_postgres), ignore = "IDEM_TEST_DATABASE_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_case_passes_against_the_shop_on_postgres() {
    let test = "every_case_passes_against_the_shop_on_postgres";
    let Some(url) = idem_tests::postgres_fixture::database_url(test) else {
        return;
    };
    let admin = idem_tests::postgres_fixture::admin_pool(&url).await;
    let records = idem_tests::postgres_fixture::fresh_name(&admin, "r").await;
    let store = idem::postgres::PostgresStore::builder()
        .table(&records)
        .unwrap()
        .connect(&url)
        .await
        .unwrap();
    let backend = Backend::postgres(store).await.unwrap();
    assert_every_case_passes(&check_the_shop(backend).await);
}

#[cfg_attr(not(idem_test_mysql), ignore = "IDEM_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_case_passes_against_the_shop_on_mysql() {
    let test = "every_case_passes_against_the_shop_on_mysql";
    let Some(url) = idem_tests::mysql_fixture::mysql_url(test) else {
        return;
    };
    let admin = idem_tests::mysql_fixture::admin_pool(&url).await;
    let records = idem_tests::mysql_fixture::fresh_name(&admin, "r").await;
    let store = idem::mysql::MySqlStore::builder()
        .table(&records)
        .unwrap()
        .connect(&url)
        .await
        .unwrap();
    let backend = Backend::mysql(store).await.unwrap();
    assert_every_case_passes(&check_the_shop(backend).await);
    idem_tests::mysql_fixture::drop_table(&admin, &records).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_case_passes_against_the_shop_on_sqlite() {
    let scratch = idem_tests::sqlite_fixture::Scratch::new(module_path!());
    let file = scratch.file("shop.db");
    let store = idem::sqlite::SqliteStore::connect(file.to_str().unwrap())
        .await
        .unwrap();
    let backend = Backend::sqlite(store).await.unwrap();
    assert_every_case_passes(&check_the_shop(backend).await);
}
