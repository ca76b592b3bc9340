//! The examples as a newcomer runs them, over real HTTP: the minimal one serves where `--addr`
//! says, replays a retried order and leaves a path that is no route to the router's 404; the
//! per-user one keeps each user's keys apart; and a busy address gets one sentence that names
//! it and the flag, not a raw `Os { code: 98, .. }`.
//!
//! `cargo test` builds the examples before it runs the tests; a binary is found next to the
//! test's own (`target/debug/examples/NAME`).

use std::{
    io::BufRead,
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::Duration,
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

/// The minimal example's binary.
fn example() -> PathBuf {
    example_named("minimal")
}

/// An example's binary, built by `cargo test` next to this test's.
fn example_named(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test runs from target/<profile>/deps");
    let binary = profile.join("examples").join(name);
    assert!(
        binary.exists(),
        "{} is missing: `cargo test -p idem` builds it (or `cargo build -p idem --example {name}`)",
        binary.display()
    );
    binary
}

#[test]
fn a_busy_address_gets_one_sentence_and_a_failure_status() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let output = Command::new(example())
        .args(["--addr", &addr])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(&format!("minimal: cannot listen on {addr}: ")),
        "{stderr}"
    );
    assert!(
        stderr.ends_with("; choose another address with --addr HOST:PORT\n"),
        "{stderr}"
    );
    assert!(!stderr.contains("Os {"), "{stderr}");
}

#[test]
fn a_bad_argument_is_a_usage_error() {
    for (args, says) in [
        (
            &["--addr", "localhost"][..],
            "\"localhost\" is not an address",
        ),
        (&["--addr"][..], "--addr needs a value"),
        (&["--port", "1"][..], "unknown argument `--port`"),
    ] {
        let output = Command::new(example()).args(args).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}: {output:?}");
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(
            stderr.contains("usage: minimal [--addr HOST:PORT]"),
            "{stderr}"
        );
    }
}

/// The example, killed when the test ends however it ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Running {
    /// Starts the example `name` on a free port; answers it and the address it listens on.
    fn start(name: &str) -> (Self, String) {
        let mut running = Running(
            Command::new(example_named(name))
                .args(["--addr", "127.0.0.1:0"])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let stdout = running.0.stdout.take().unwrap();
        let (line, said) = mpsc::channel();
        std::thread::spawn(move || {
            let mut first = String::new();
            let _ = std::io::BufReader::new(stdout).read_line(&mut first);
            let _ = line.send(first);
        });
        let first = said
            .recv_timeout(Duration::from_secs(30))
            .expect("the example says where it listens");
        let addr = first
            .trim()
            .strip_prefix("listening on http://")
            .unwrap_or_else(|| panic!("unexpected first line: {first:?}"))
            .to_owned();
        (running, addr)
    }
}

/// A POST of `body` to `path`, with the given extra header lines (each ending in CRLF).
fn post(path: &str, headers: &str, body: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: example\r\n{headers}Content-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn status(answer: &str) -> &str {
    answer.split("\r\n").next().unwrap_or_default()
}

fn body(answer: &str) -> String {
    answer.split("\r\n\r\n").nth(1).unwrap().to_owned()
}

#[tokio::test]
async fn it_serves_where_addr_says_and_replays_a_retried_order() {
    let (_running, addr) = Running::start("minimal");

    let order = post(
        "/orders",
        "Idempotency-Key: order-1\r\n",
        r#"{"item":"tea"}"#,
    );
    let first = exchange(&addr, &order).await;
    let again = exchange(&addr, &order).await;
    assert!(first.starts_with("HTTP/1.1 201 Created\r\n"), "{first}");
    assert!(!first.contains("idempotent-replayed"), "{first}");
    assert!(
        again.contains("\r\nidempotent-replayed: true\r\n"),
        "{again}"
    );
    assert_eq!(body(&again), body(&first));
    assert_eq!(body(&first), r#"{"id":1,"order":{"item":"tea"}}"#);

    let page = exchange(
        &addr,
        "GET /problems/idempotency HTTP/1.1\r\nHost: example\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(page.starts_with("HTTP/1.1 200 OK\r\n"), "{page}");
    assert!(page.contains("<section id=\"key-reused\">"), "{page}");
}

/// A path that is no route, and a method that its route does not serve, are the router's own
/// 404 and 405, with or without a key, whatever the body: never claimed, never a replay or a
/// 422, never asked for a key.
#[tokio::test]
async fn what_no_route_serves_gets_the_routers_own_answer() {
    let (_running, addr) = Running::start("minimal");
    let keyed = "Idempotency-Key: K\r\n";
    for (path, method, expected) in [
        ("/nope", "POST", "HTTP/1.1 404 Not Found"),
        ("/refunds", "PATCH", "HTTP/1.1 405 Method Not Allowed"),
        ("/orders", "PATCH", "HTTP/1.1 405 Method Not Allowed"),
    ] {
        for (headers, body) in [
            (keyed, r#"{"a":1}"#),
            (keyed, r#"{"a":1}"#),
            (keyed, r#"{"a":2}"#),
            ("", r#"{"a":1}"#),
        ] {
            let request = post(path, headers, body).replacen("POST", method, 1);
            let answer = exchange(&addr, &request).await;
            assert_eq!(
                status(&answer),
                expected,
                "{method} {path} {headers:?}: {answer}"
            );
            assert!(!answer.contains("idempotent-replayed"), "{answer}");
        }
    }
}

#[tokio::test]
async fn per_user_keys_keep_each_users_results_apart() {
    let (_running, addr) = Running::start("per_user");
    let pay = |user: &str, amount: u32| {
        post(
            "/payments",
            &format!("Authorization: Bearer {user}\r\nIdempotency-Key: pay-1\r\n"),
            &format!(r#"{{"amount":{amount}}}"#),
        )
    };
    let alice = exchange(&addr, &pay("alice", 9800)).await;
    let again = exchange(&addr, &pay("alice", 9800)).await;
    let bob = exchange(&addr, &pay("bob", 500)).await;
    assert!(alice.starts_with("HTTP/1.1 201 Created\r\n"), "{alice}");
    assert_eq!(body(&alice), r#"{"amount":9800,"id":1,"owner":"alice"}"#);
    assert!(
        again.contains("\r\nidempotent-replayed: true\r\n"),
        "{again}"
    );
    assert_eq!(body(&again), body(&alice));
    // The same key, another user: a payment of Bob's own, not Alice's replayed or refused.
    assert!(bob.starts_with("HTTP/1.1 201 Created\r\n"), "{bob}");
    assert!(!bob.contains("idempotent-replayed"), "{bob}");
    assert_eq!(body(&bob), r#"{"amount":500,"id":2,"owner":"bob"}"#);
    // No credentials: the service's own refusal, before idempotency is asked anything.
    let anonymous = post("/payments", "Idempotency-Key: pay-1\r\n", r#"{"amount":1}"#);
    let refused = exchange(&addr, &anonymous).await;
    assert!(
        refused.starts_with("HTTP/1.1 401 Unauthorized\r\n"),
        "{refused}"
    );
    assert_eq!(body(&refused), "send Authorization: Bearer <user>");
}

/// Sends `request` on a connection of its own and reads the whole answer.
async fn exchange(addr: &str, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(30), stream.read_to_string(&mut answer))
        .await
        .expect("an answer, then the connection closes")
        .unwrap();
    answer
}
