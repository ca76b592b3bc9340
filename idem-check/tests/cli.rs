//! The binary as scripts and CI jobs call it: the documented flags, the JSON shape, the exit
//! status (0 nothing failed, 1 a case failed, 2 bad usage or a target that cannot be
//! checked), and a clear message with nothing on stdout when there is no report.

mod support;

use std::{net::SocketAddr, process::Output, time::Duration};

use axum::{Router, response::Html, routing::post};
use serde_json::Value;
use support::reference_server::{self, Config, Flaws};
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::Command,
};

const BIN: &str = env!("CARGO_BIN_EXE_idem-check");

async fn idem_check<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    let output = tokio::time::timeout(
        Duration::from_secs(120),
        Command::new(BIN).args(args).env("NO_COLOR", "1").output(),
    )
    .await
    .expect("idem-check ends within its time bound")
    .expect("idem-check runs");
    eprintln!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The documented interface's flags, for the payments of the server at `addr`.
fn documented_flags(addr: SocketAddr) -> Vec<String> {
    let base = format!("http://{addr}");
    [
        "--url",
        &format!("{base}/payments"),
        "--body",
        support::BODY,
        "-X",
        "POST",
        "-H",
        "Authorization: Bearer alice",
        "--other-header",
        "Authorization: Bearer bob",
        "--count-url",
        &format!("{base}/payments"),
    ]
    .map(str::to_owned)
    .to_vec()
}

fn args(flags: &[String], more: &[&str]) -> Vec<String> {
    flags
        .iter()
        .cloned()
        .chain(more.iter().map(|arg| arg.to_string()))
        .collect()
}

fn json_report(output: &Output) -> Value {
    let text = String::from_utf8(output.stdout.clone()).unwrap();
    assert_eq!(text.lines().count(), 1, "one JSON object on one line");
    serde_json::from_str(&text).unwrap()
}

/// Every case of a JSON report, as `(name, verdict)`, after checking its shape.
fn verdicts(report: &Value) -> Vec<(String, String)> {
    let cases = report["cases"].as_array().expect("a cases array");
    assert_eq!(cases.len(), 15);
    cases
        .iter()
        .map(|case| {
            let verdict = case["verdict"].as_str().unwrap().to_owned();
            assert!(
                ["pass", "fail", "warn", "skipped"].contains(&verdict.as_str()),
                "{case}"
            );
            assert!(
                case["detail"]
                    .as_str()
                    .is_some_and(|detail| !detail.is_empty()),
                "{case}"
            );
            (case["name"].as_str().unwrap().to_owned(), verdict)
        })
        .collect()
}

/// Every case says what its verdict rests on: its level and its rule.
fn assert_rests_on_its_rules(report: &Value) {
    assert_eq!(report["key_style"], "sf-string");
    assert_eq!(report["notes"], serde_json::json!([]));
    for case in report["cases"].as_array().unwrap() {
        let basis = case["basis"].as_str().unwrap();
        assert!(
            ["draft MUST", "draft SHOULD", "declared"].contains(&basis),
            "{case}"
        );
        assert!(!case["source"].as_str().unwrap().is_empty(), "{case}");
    }
    assert_eq!(report["cases"][3]["basis"], "declared", "no-key");
    assert_eq!(
        report["cases"][14]["basis"], "draft SHOULD",
        "problem-details"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_correct_server_exits_0_with_the_documented_json() {
    let addr = reference_server::start(Config::default()).await;
    let flags = documented_flags(addr);
    let output = idem_check(&args(&flags, &["--format", "json"])).await;
    assert_eq!(output.status.code(), Some(0));
    let report = json_report(&output);
    let verdicts = verdicts(&report);
    assert!(
        verdicts.iter().all(|(_, verdict)| verdict != "fail"),
        "{verdicts:?}"
    );
    let verdict = |name: &str| {
        verdicts
            .iter()
            .find(|(case, _)| case == name)
            .unwrap()
            .1
            .clone()
    };
    assert_rests_on_its_rules(&report);
    // -H, --other-header and --count-url did their part.
    assert_eq!(verdict("scope"), "pass");
    assert_eq!(verdict("replay"), "pass");
    assert!(
        report["cases"][0]["detail"]
            .as_str()
            .unwrap()
            .contains("one effect")
    );
    // Without a slow or a failing variant, those cases say which flag would run them.
    assert_eq!(verdict("in-flight"), "skipped");
    let in_flight = &report["cases"][2]["detail"];
    assert!(
        in_flight.as_str().unwrap().contains("--slow-url"),
        "{in_flight}"
    );
    // What will be sent is said before, on stderr.
    let said = stderr(&output);
    assert!(
        said.contains(&format!("requests to 127.0.0.1:{}", addr.port())),
        "{said}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_case_exits_1_and_says_what_was_sent_and_what_came_back() {
    let addr = reference_server::start(Config {
        flaws: Flaws {
            unscoped: true,
            ..Flaws::default()
        },
        ..Config::default()
    })
    .await;
    let output = idem_check(&args(&documented_flags(addr), &["--format", "json"])).await;
    assert_eq!(output.status.code(), Some(1));
    let report = json_report(&output);
    let failed: Vec<(String, String)> = verdicts(&report)
        .into_iter()
        .filter(|(_, verdict)| verdict == "fail")
        .collect();
    assert_eq!(failed, [("scope".to_owned(), "fail".to_owned())]);
    let detail = report["cases"][8]["detail"].as_str().unwrap();
    assert!(detail.contains("→ POST /payments"), "{detail}");
    assert!(detail.contains("(as the second principal)"), "{detail}");
    assert!(detail.contains("← 201"), "{detail}");
    assert!(
        !detail.contains("Bearer"),
        "credentials are never shown: {detail}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_and_junit_reports() {
    let addr = reference_server::start(Config {
        flaws: Flaws {
            unscoped: true,
            ..Flaws::default()
        },
        ..Config::default()
    })
    .await;
    let flags = documented_flags(addr);
    let text = idem_check(&flags).await;
    assert_eq!(text.status.code(), Some(1));
    let table = String::from_utf8(text.stdout).unwrap();
    assert!(table.contains("scope            fail"), "{table}");
    assert!(
        table.contains("fail 9 scope (the same key from another principal; declared)"),
        "{table}"
    );
    assert!(table.contains("15 cases: "), "{table}");
    assert!(!table.contains('\x1b'), "no colour under NO_COLOR");

    let junit = idem_check(&args(&flags, &["--format", "junit"])).await;
    assert_eq!(junit.status.code(), Some(1));
    let xml = String::from_utf8(junit.stdout).unwrap();
    assert!(
        xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites"),
        "{xml}"
    );
    assert!(xml.contains("tests=\"15\" failures=\"1\""), "{xml}");
    assert_eq!(xml.matches("<testcase ").count(), 15);
    assert_eq!(xml.matches("<failure ").count(), 1);
    assert!(xml.contains("name=\"scope: "), "{xml}");
    assert!(
        xml.contains("<property name=\"key-style\" value=\"sf-string\"/>"),
        "{xml}"
    );
    assert!(xml.trim_end().ends_with("</testsuites>"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_usage_exits_2_with_a_clear_message_and_no_report() {
    let url = "http://127.0.0.1:9/payments";
    for (args, says) in [
        (&["--url", url][..], "--body is required"),
        (&["--body", "{}"], "--url is required"),
        (&["--url", url, "--body", "amount=1"], "--body is not JSON"),
        (
            &["--url", "localhost:3000", "--body", "{}"],
            "not an http:// or https:// URL",
        ),
        (&["--url", "http//h/x", "--body", "{}"], "not a URL"),
        (
            &["--url", url, "--body", "{}", "-H", "Authorization"],
            "has no colon",
        ),
        (
            &["--url", url, "--body", "{}", "--format", "xml"],
            "invalid value 'xml'",
        ),
        (
            &["--url", url, "--body", "{}", "--ttl", "1M"],
            "not a duration",
        ),
        (
            &["--url", url, "--body", "{}", "--wait-ttl"],
            "--wait-ttl needs --ttl",
        ),
        (
            &["--url", url, "--body", "{}", "--concurrency", "1"],
            "out of range",
        ),
        (
            &["--url", url, "--body", "{}", "--unknown"],
            "unexpected argument",
        ),
        (
            &[
                "--url",
                url,
                "--body",
                "{}",
                "--config",
                "/nonexistent.toml",
            ],
            "--config",
        ),
    ] {
        let output = idem_check(args).await;
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(output.stdout.is_empty(), "{args:?}");
        assert!(
            stderr(&output).contains(says),
            "{args:?}: {}",
            stderr(&output)
        );
    }
    let help = idem_check(&["--help"]).await;
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).contains("--other-header"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_target_exits_2_without_a_report() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/payments");
    for format in ["text", "json", "junit"] {
        let output = idem_check(&["--url", &url, "--body", "{}", "--format", format]).await;
        assert_eq!(output.status.code(), Some(2));
        assert!(output.stdout.is_empty(), "no partial report as {format}");
        assert!(
            stderr(&output).contains(&format!("cannot reach {url}")),
            "{}",
            stderr(&output)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_that_is_not_json_exits_2() {
    let app = Router::new().route(
        "/form",
        post(|| async { Html("<html><body>Thanks!</body></html>") }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let output = idem_check(&["--url", &format!("http://{addr}/form"), "--body", "{}"]).await;
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    let said = stderr(&output);
    assert!(said.contains("not JSON (text/html)"), "{said}");
    assert!(said.contains("no report"), "{said}");
}

/// A server that refuses the draft's sf-string keys: from the default flags, the check goes
/// on in bare keys and says so first; with `--key-style sf-string`, it stops with exit 2
/// and names the flag to pass, instead of "check the URL, the body and the headers".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_of_quoted_keys_is_noticed_by_the_preflight() {
    let addr = reference_server::start(Config {
        flaws: Flaws {
            bare_keys_only: true,
            ..Flaws::default()
        },
        ..Config::default()
    })
    .await;
    let flags = documented_flags(addr);
    let output = idem_check(&flags).await;
    assert_eq!(output.status.code(), Some(0));
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.starts_with("note: keys were sent bare"), "{text}");

    let output = idem_check(&args(&flags, &["--key-style", "sf-string"])).await;
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    let said = stderr(&output);
    assert!(said.contains("pass --key-style bare"), "{said}");
    assert!(said.contains("Invalid Idempotency-Key"), "{said}");
}

/// A request refused whatever the key's spelling: the preflight says that the refusal is not
/// about the key, and what to check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_refused_in_both_key_spellings_exits_2() {
    let app = Router::new().route(
        "/payments",
        post(|| async {
            (
                axum::http::StatusCode::BAD_REQUEST,
                axum::Json(serde_json::json!({ "title": "currency is required" })),
            )
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let output = idem_check(&["--url", &format!("http://{addr}/payments"), "--body", "{}"]).await;
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    let said = stderr(&output);
    assert!(
        said.contains("check the URL, the body and the headers"),
        "{said}"
    );
    assert!(
        said.contains("the refusal is not about how the key is written"),
        "{said}"
    );
}

/// A count URL that does not count what the endpoint creates would make every "one effect"
/// verdict a guess: the check stops before any case.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_count_url_that_does_not_count_exits_2() {
    let addr = reference_server::start(Config::default()).await;
    // A listing of something else: it never moves when a payment is made.
    let other = Router::new().route(
        "/refunds",
        axum::routing::get(|| async { axum::Json(serde_json::json!({ "items": [1, 2] })) }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let other_addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, other).await });
    let output = idem_check(&[
        "--url",
        &format!("http://{addr}/payments"),
        "--body",
        support::BODY,
        "--count-url",
        &format!("http://{other_addr}/refunds"),
    ])
    .await;
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("left the count at 2 unchanged"),
        "{}",
        stderr(&output)
    );
}

/// The same settings from a TOML file; a flag given too wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_from_a_toml_file() {
    let addr = reference_server::start(Config::default()).await;
    let dir = std::env::temp_dir().join(format!("idem-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("check.toml");
    std::fs::write(
        &file,
        format!(
            "url = \"http://{addr}/payments\"\nbody = '{}'\nheader = [\"Authorization: Bearer alice\"]\n\
             other-header = [\"Authorization: Bearer bob\"]\ncount-url = \"http://{addr}/payments\"\n\
             key-style = \"both\"\nformat = \"text\"\n",
            support::BODY
        ),
    )
    .unwrap();
    let output = idem_check(&["--config", file.to_str().unwrap(), "--format", "json"]).await;
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(output.status.code(), Some(0));
    let verdicts = verdicts(&json_report(&output));
    let verdict = |name: &str| {
        verdicts
            .iter()
            .find(|(case, _)| case == name)
            .unwrap()
            .1
            .clone()
    };
    assert_eq!(verdict("key-forms"), "pass", "key-style from the file");
    assert_eq!(verdict("scope"), "pass", "other-header from the file");
}

/// Both binaries as processes: `idem-check serve`, then `idem-check` against it with every
/// variant chosen in the query: exit 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idem_check_against_idem_check_serve() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = Command::new(BIN)
        .args(["serve", "--addr", &format!("127.0.0.1:{port}")])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut banner = BufReader::new(server.stdout.take().unwrap()).lines();
    let first = banner.next_line().await.unwrap().unwrap();
    assert!(first.contains("listening on"), "{first}");
    let base = format!("http://127.0.0.1:{port}");
    let output = idem_check(&[
        "--url",
        &format!("{base}/payments"),
        "--body",
        support::BODY,
        "-H",
        "Authorization: Bearer alice",
        "--other-header",
        "Authorization: Bearer bob",
        "--count-url",
        &format!("{base}/payments"),
        "--slow-url",
        &format!("{base}/payments?delay_ms=600"),
        "--slow-count-url",
        &format!("{base}/payments"),
        "--timeout-ms",
        "200",
        "--fail-url",
        &format!("{base}/payments?fail_first=1"),
        "--fail-count-url",
        &format!("{base}/payments"),
        "--key-style",
        "both",
        "--format",
        "json",
    ])
    .await;
    server.kill().await.unwrap();
    assert_eq!(output.status.code(), Some(0));
    let verdicts = verdicts(&json_report(&output));
    let skipped: Vec<&str> = verdicts
        .iter()
        .filter(|(_, verdict)| verdict != "pass")
        .map(|(name, _)| name.as_str())
        .collect();
    assert_eq!(skipped, ["retention"], "{verdicts:?}");
}
