//! The `shop` binary as a user runs it: it starts with no services, says where it listens,
//! serves, and on SIGTERM finishes the request in progress before it exits.

use std::{process::Stdio, time::Duration};

use serde_json::json;
use tokio::{
    io::{AsyncBufReadExt, AsyncReadExt, BufReader},
    process::{Child, ChildStdout, Command},
};

/// Starts the binary on a free port with `vars`, and answers it, its stdout and its address.
async fn start(vars: &[(&str, &str)]) -> (Child, BufReader<ChildStdout>, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_shop"));
    command
        .env_remove("IDEM_STORE")
        .env_remove("SHOP_NATS_URL")
        .env("SHOP_ADDR", "127.0.0.1:0")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .kill_on_drop(true);
    for (name, value) in vars {
        command.env(name, value);
    }
    let mut child = command.spawn().expect("the shop starts");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    tokio::time::timeout(Duration::from_secs(30), stdout.read_line(&mut first))
        .await
        .expect("the shop says where it listens")
        .unwrap();
    let address = first
        .trim()
        .strip_prefix("shop: listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {first:?}"))
        .to_owned();
    (child, stdout, address)
}

#[tokio::test]
async fn the_binary_serves_on_memory_and_finishes_a_transfer_on_sigterm() {
    let (mut child, mut stdout, address) = start(&[("SHOP_TRANSFER_DELAY_MS", "2000")]).await;
    let mut banner = String::new();
    for _ in 0..3 {
        stdout.read_line(&mut banner).await.unwrap();
    }
    assert!(banner.contains("MemoryStore"), "{banner}");
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let health = client
        .get(format!("{address}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);

    let transfer = client
        .post(format!("{address}/transfers"))
        .bearer_auth("alice")
        .header("idempotency-key", "binary-test-transfer")
        .json(&json!({ "amount": 50000, "currency": "JPY", "toAccount": "0000000" }))
        .send();
    let transfer = tokio::spawn(transfer);
    // Long enough for the request to reach the shop, well within the transfer's 2 s.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let pid = child.id().unwrap().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(killed.success());

    let answer = transfer
        .await
        .unwrap()
        .expect("the request in progress is answered");
    assert_eq!(answer.status(), 201);
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("the shop exits")
        .unwrap();
    assert!(status.success(), "{status}");
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).await.unwrap();
    assert!(rest.trim_end().ends_with("shop: stopped"), "{rest}");
}

#[tokio::test]
async fn the_binary_explains_its_settings() {
    let output = Command::new(env!("CARGO_BIN_EXE_shop"))
        .arg("--help")
        .output()
        .await
        .unwrap();
    assert!(output.status.success());
    let usage = String::from_utf8(output.stdout).unwrap();
    for setting in [
        "--addr",
        "SHOP_ADDR",
        "IDEM_STORE",
        "SHOP_TRANSFER_DELAY_MS",
    ] {
        assert!(usage.contains(setting), "{setting}: {usage}");
    }

    // A store the shop does not know (it knows memory, redis, postgres, mysql and sqlite).
    let output = Command::new(env!("CARGO_BIN_EXE_shop"))
        .env("IDEM_STORE", "cassandra://db/shop")
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let error = String::from_utf8(output.stderr).unwrap();
    assert!(error.contains("IDEM_STORE"), "{error}");
}

/// Runs the binary with `vars` and its default log filter until it listens, stops it with
/// SIGTERM, and answers what it wrote to stderr, a pipe as when it logs to a file.
async fn logs_of_a_run(vars: &[(&str, &str)]) -> String {
    logs_of(vars, async |_| {}).await
}

/// [`logs_of_a_run`], doing `work` with the shop's address while it serves.
async fn logs_of(vars: &[(&str, &str)], work: impl AsyncFnOnce(&str)) -> String {
    let mut command = Command::new(env!("CARGO_BIN_EXE_shop"));
    command
        .env_remove("IDEM_STORE")
        .env_remove("RUST_LOG")
        .env_remove("NO_COLOR")
        .env("SHOP_ADDR", "127.0.0.1:0")
        .envs(vars.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn().expect("the shop starts");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    tokio::time::timeout(Duration::from_secs(30), stdout.read_line(&mut first))
        .await
        .expect("the shop says where it listens")
        .unwrap();
    let address = first
        .trim()
        .strip_prefix("shop: listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {first:?}"));
    // Once it answers, it is serving, and its SIGTERM handler is in place.
    let health = reqwest::get(format!("{address}/healthz")).await.unwrap();
    assert_eq!(health.status(), 200);
    work(address).await;
    let pid = child.id().unwrap().to_string();
    let killed = Command::new("kill").args(["-TERM", &pid]).status().await;
    assert!(killed.unwrap().success());
    let output = tokio::time::timeout(Duration::from_secs(10), child.wait_with_output())
        .await
        .expect("the shop exits")
        .unwrap();
    assert!(output.status.success(), "{}", output.status);
    String::from_utf8(output.stderr).unwrap()
}

/// With `SHOP_MEMORY_MAX_ENTRIES=50`, 200 fresh payments evict 150 records before their TTL:
/// `GET /metrics` counts them among the shop's own series, and the log warns with the bound
/// it would take.
#[tokio::test]
async fn a_memory_store_past_its_bound_says_so_in_its_metrics_and_its_log() {
    let mut metrics = String::new();
    let logs = logs_of(&[("SHOP_MEMORY_MAX_ENTRIES", "50")], async |address| {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(20))
            .build()
            .unwrap();
        for n in 0..200 {
            let paid = client
                .post(format!("{address}/payments"))
                .bearer_auth("alice")
                .header("idempotency-key", format!("bound-test-{n}"))
                .json(&json!({ "amount": 9800, "currency": "JPY" }))
                .send()
                .await
                .unwrap();
            assert_eq!(paid.status(), 201);
        }
        let answer = client
            .get(format!("{address}/metrics"))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200);
        assert_eq!(answer.headers()["content-type"], shop::metrics::TEXT_FORMAT);
        metrics = answer.text().await.unwrap();
    })
    .await;
    let value = |series: &str| {
        shop::metrics::value_of(&metrics, series)
            .unwrap_or_else(|| panic!("{series} is not in:\n{metrics}"))
    };
    assert!(
        value("idem_memory_evicted_early_total") >= 150.0,
        "{metrics}"
    );
    assert!(value("idem_memory_records") <= 50.0, "{metrics}");
    assert_eq!(value("shop_payments_created_total"), 200.0);
    assert_eq!(
        value("idem_requests_total{outcome=\"completed\",route=\"/payments\"}"),
        200.0
    );
    assert!(
        metrics.contains("idem_store_call_seconds_bucket{op=\"claim\""),
        "{metrics}"
    );
    let warning = logs
        .lines()
        .find(|line| line.contains("WARN") && line.contains("the memory store evicted"))
        .unwrap_or_else(|| panic!("no warning in:\n{logs}"));
    assert!(warning.contains("records per second × TTL"), "{warning}");
    assert!(warning.contains("max_entries=50"), "{warning}");
}

/// Logs written to a pipe (or a file) are plain text: no terminal colour codes.
#[tokio::test]
async fn the_binary_logs_plain_text_when_stderr_is_not_a_terminal() {
    let logs = logs_of_a_run(&[]).await;
    assert!(logs.contains("INFO shop: shutting down"), "{logs}");
    assert!(!logs.contains('\u{1b}'), "{logs:?}");
}

/// On a database whose tables exist, PostgreSQL answers the shop's `CREATE ... IF NOT EXISTS`
/// with notices ("relation ... already exists, skipping"), which sqlx logs at INFO: the default
/// log filter leaves them out. The test makes a database of its own and starts the shop on it
/// twice, so that the second start meets the tables of the first.
#[tokio::test]
#[cfg_attr(not(idem_test_postgres), ignore = "IDEM_TEST_DATABASE_URL is not set")]
async fn the_binary_leaves_postgres_notices_out_of_its_default_logs() {
    let url = std::env::var("IDEM_TEST_DATABASE_URL")
        .expect("IDEM_TEST_DATABASE_URL, as when the tests were built");
    let admin = sqlx::PgPool::connect(&url).await.unwrap();
    let database = format!("shop_binary_{:016x}", rand::random::<u64>());
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {database}")))
        .execute(&admin)
        .await
        .unwrap();
    let (base, _) = url
        .rsplit_once('/')
        .expect("a database URL ends with its name");
    let store = format!("{base}/{database}");
    let first = logs_of_a_run(&[("IDEM_STORE", &store)]).await;
    let second = logs_of_a_run(&[("IDEM_STORE", &store)]).await;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE {database} WITH (FORCE)"
    )))
    .execute(&admin)
    .await
    .unwrap();
    for logs in [first, second] {
        assert!(logs.contains("INFO shop: shutting down"), "{logs}");
        assert!(!logs.contains("already exists"), "{logs}");
        assert!(!logs.contains('\u{1b}'), "{logs:?}");
    }
}

/// A `nats-server -js` of the test's own, on a free port; `None` (said on stderr) when the
/// machine has none.
struct NatsServer {
    child: Child,
    url: String,
    dir: std::path::PathBuf,
}

impl NatsServer {
    async fn start() -> Option<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .unwrap()
            .port();
        let dir = std::env::temp_dir().join(format!("shop-nats-{port}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let Ok(child) = Command::new("nats-server")
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string()])
            .arg("-sd")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
        else {
            eprintln!("skipped: `nats-server` is not on PATH");
            return None;
        };
        let url = format!("127.0.0.1:{port}");
        for _ in 0..500 {
            if tokio::net::TcpStream::connect(&url).await.is_ok() {
                return Some(Self {
                    child,
                    url: format!("nats://{url}"),
                    dir,
                });
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("nats-server did not come up");
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What the README shows: with `SHOP_NATS_URL`, a payment is published on
/// `shop.payments.created` of the stream `SHOP`, and `GET /receipts` lists its receipt.
#[tokio::test]
async fn with_a_broker_each_payment_gets_one_receipt() {
    let Some(nats) = NatsServer::start().await else {
        return;
    };
    let (mut child, mut stdout, address) = start(&[("SHOP_NATS_URL", &nats.url)]).await;
    let mut banner = String::new();
    while !banner.ends_with("\n\n") {
        stdout.read_line(&mut banner).await.unwrap();
    }
    assert!(banner.contains("shop.payments.created"), "{banner}");
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let pay = || {
        client
            .post(format!("{address}/payments"))
            .bearer_auth("carol")
            .header("idempotency-key", "binary-test-payment")
            .json(&json!({ "amount": 9800, "currency": "JPY" }))
            .send()
    };
    let payment: serde_json::Value = pay().await.unwrap().json().await.unwrap();
    let replayed = pay().await.unwrap();
    assert_eq!(replayed.headers()["idempotent-replayed"], "true");
    let mut receipts = Vec::new();
    for _ in 0..500 {
        let list: serde_json::Value = client
            .get(format!("{address}/receipts"))
            .bearer_auth("carol")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        receipts = list["items"].as_array().unwrap().clone();
        if !receipts.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(receipts.len(), 1, "{receipts:?}");
    assert_eq!(receipts[0]["paymentId"], payment["id"]);

    let pid = child.id().unwrap().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .await
            .unwrap()
            .success()
    );
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("the shop exits")
        .unwrap();
    assert!(status.success(), "{status}");
}
