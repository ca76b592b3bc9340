//! The `checkout` binary as a user runs it, against a shop served on a loopback port.

use std::{process::Output, time::Duration};

use serde_json::Value;
use shop::{Backend, Settings, Shop};
use tokio::{net::TcpListener, process::Command};

/// A shop whose payments take `payment_delay`, served until the test ends: its base URL.
async fn shop(payment_delay: Duration) -> String {
    let backend = Backend::memory();
    let settings = Settings {
        payment_delay,
        ..Settings::default()
    };
    let router = shop::app(
        Shop::new(backend.ledger.clone(), settings),
        backend.idem.clone(),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(shop::serve(
        listener,
        router,
        backend.idem,
        shop::ConnectionLimits::default(),
        std::future::pending(),
    ));
    url
}

async fn checkout(args: &[&str]) -> Output {
    let run = Command::new(env!("CARGO_BIN_EXE_checkout"))
        .args(args)
        .env_remove("RUST_LOG")
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("checkout ends")
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

async fn payments(url: &str, user: &str) -> Vec<Value> {
    let list: Value = reqwest::Client::new()
        .get(format!("{url}/payments"))
        .bearer_auth(user)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    list["items"].as_array().unwrap().clone()
}

/// Two checkouts at once with one `--key`: both print the same payment, and there is one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_concurrent_checkouts_with_one_key_make_one_payment() {
    let url = shop(Duration::from_millis(1500)).await;
    let args = [
        "--url",
        &url,
        "--user",
        "alice",
        "--amount",
        "9800",
        "--currency",
        "JPY",
        "--key",
        "checkout-test-order-1",
    ];
    let (one, two) = tokio::join!(checkout(&args), checkout(&args));
    for run in [&one, &two] {
        assert!(run.status.success(), "{}", text(&run.stderr));
    }
    let first: Value = serde_json::from_slice(&one.stdout).unwrap();
    let second: Value = serde_json::from_slice(&two.stdout).unwrap();
    assert_eq!(first, second, "the same payment");
    assert_eq!(first["amount"], 9800);
    assert_eq!(payments(&url, "alice").await, [first], "one payment");
    // One ran; the other got its answer replayed (after a 409 if it came while the first
    // was running, as it almost always does).
    let logs = text(&one.stderr) + &text(&two.stderr);
    assert_eq!(logs.matches(", replayed;").count(), 1, "{logs}");
}

/// The seed's story: the first attempt times out, the retries meet 409, and the checkout
/// prints the first attempt's payment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkout_that_times_out_retries_and_prints_the_payment() {
    let url = shop(Duration::from_millis(1500)).await;
    let run = checkout(&[
        "--url",
        &url,
        "--user",
        "bob",
        "--amount",
        "1200",
        "--currency",
        "JPY",
        "--timeout-ms",
        "400",
    ])
    .await;
    let stderr = text(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    let payment: Value = serde_json::from_slice(&run.stdout).unwrap();
    assert!(stderr.contains("no answer within 400 ms"), "{stderr}");
    assert!(stderr.contains("replayed"), "{stderr}");
    assert_eq!(payments(&url, "bob").await, [payment]);
}

/// A final failure: the key reused for another amount prints the Problem Details on stderr and
/// exits 1; nothing on stdout. A usage error exits 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_final_failure_prints_the_problem_and_exits_1() {
    let url = shop(Duration::ZERO).await;
    let pay = |amount: &'static str| {
        let url = url.clone();
        async move {
            checkout(&[
                "--url",
                &url,
                "--user",
                "carol",
                "--amount",
                amount,
                "--currency",
                "JPY",
                "--key",
                "checkout-test-reused",
            ])
            .await
        }
    };
    assert!(pay("9800").await.status.success());
    let reused = pay("1200").await;
    assert_eq!(reused.status.code(), Some(1));
    assert!(reused.stdout.is_empty());
    let stderr = text(&reused.stderr);
    let problem: Value = serde_json::from_str(stderr.lines().next().unwrap()).unwrap();
    assert_eq!(problem["status"], 422);
    assert!(
        problem["type"].as_str().unwrap().ends_with("#key-reused"),
        "{problem}"
    );
    assert!(stderr.contains("already used"), "{stderr}");
    assert_eq!(payments(&url, "carol").await.len(), 1);

    let usage = checkout(&["--url", &url]).await;
    assert_eq!(usage.status.code(), Some(2));
    assert!(text(&usage.stderr).contains("--user is required"));
    let help = checkout(&["--help"]).await;
    assert!(help.status.success());
    assert!(text(&help.stdout).contains("--timeout-ms"));
}
