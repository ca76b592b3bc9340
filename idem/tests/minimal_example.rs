//! The minimal example as a newcomer runs it: it serves where `--addr` says and replays a
//! retried order, and a busy address gets one sentence that names it and the flag, not a raw
//! `Os { code: 98, .. }`.
//!
//! `cargo test` builds the examples before it runs the tests; the binary is found next to the
//! test's own (`target/debug/examples/minimal`).

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

/// The example's binary, built by `cargo test` next to this test's.
fn example() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test runs from target/<profile>/deps");
    let binary = profile.join("examples").join("minimal");
    assert!(
        binary.exists(),
        "{} is missing: `cargo test -p idem` builds it (or `cargo build -p idem --example minimal`)",
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

#[tokio::test]
async fn it_serves_where_addr_says_and_replays_a_retried_order() {
    let mut running = Running(
        Command::new(example())
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

    let order = "POST /orders HTTP/1.1\r\nHost: example\r\nIdempotency-Key: order-1\r\n\
                 Content-Type: application/json\r\nContent-Length: 14\r\nConnection: close\r\n\
                 \r\n{\"item\":\"tea\"}";
    let first = exchange(&addr, order).await;
    let again = exchange(&addr, order).await;
    assert!(first.starts_with("HTTP/1.1 201 Created\r\n"), "{first}");
    assert!(!first.contains("idempotent-replayed"), "{first}");
    assert!(
        again.contains("\r\nidempotent-replayed: true\r\n"),
        "{again}"
    );
    let body = |answer: &str| answer.split("\r\n\r\n").nth(1).unwrap().to_owned();
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
