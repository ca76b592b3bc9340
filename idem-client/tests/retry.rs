//! The client over real loopback HTTP, against a scripted server that misbehaves on purpose
//! (raw TCP, one request per connection). The same client against a real idem server is in the
//! workspace's end-to-end tests (`tests/tests/client_idem_server.rs`).
//!
//! Timing is asserted only as lower bounds the client must respect (it waited at least what
//! `Retry-After` said) or as generous upper bounds (it gave up long before a wait it refused);
//! everything else is counted at the server.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::{Duration, SystemTime},
};

use idem_client::{ErrorKind, GaveUp, RetryPolicy};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    time::Instant,
};

/// What the scripted server does with the request of one connection.
#[derive(Clone)]
enum Step {
    /// Reads the whole request, then closes the connection without a word.
    Drop,
    /// Reads the whole request and never answers.
    Hang,
    /// Answers these bytes, then closes the connection.
    Answer(Vec<u8>),
}

/// One request as the server read it.
#[derive(Clone, Debug)]
struct Seen {
    at: Instant,
    key: Option<String>,
    body: Vec<u8>,
}

/// A server that plays `steps` in order, one per request, and repeats the last one.
struct Scripted {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Scripted {
    async fn start(steps: Vec<Step>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (log, steps) = (Arc::clone(&log), steps.clone());
                tokio::spawn(async move { serve_one(stream, &log, &steps).await });
            }
        });
        Self { addr, seen }
    }

    fn url(&self) -> String {
        format!("http://{}/payments", self.addr)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

async fn serve_one(mut stream: TcpStream, log: &Mutex<Vec<Seen>>, steps: &[Step]) {
    let Some((head, body)) = read_request(&mut stream).await else {
        return;
    };
    let key = head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("idempotency-key")
            .then(|| value.trim().to_owned())
    });
    let step = {
        let mut log = log.lock().unwrap();
        log.push(Seen {
            at: Instant::now(),
            key,
            body,
        });
        steps[(log.len() - 1).min(steps.len() - 1)].clone()
    };
    match step {
        Step::Drop => drop(stream),
        Step::Hang => tokio::time::sleep(Duration::from_secs(3600)).await,
        Step::Answer(bytes) => {
            let _ = stream.write_all(&bytes).await;
            let _ = stream.shutdown().await;
        }
    }
}

/// Reads one HTTP/1.1 request with a `Content-Length` body: its head and its body.
async fn read_request(stream: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            break at + 4;
        }
        let read = stream.read(&mut chunk).await.ok()?;
        if read == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let length: usize = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0);
    while buffer.len() < head_end + length {
        let read = stream.read(&mut chunk).await.ok()?;
        if read == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..read]);
    }
    Some((head, buffer[head_end..head_end + length].to_vec()))
}

/// A raw answer: status line, headers, and a body with its length; the connection closes.
fn reply(status: &str, headers: &[(&str, &[u8])], body: &[u8]) -> Step {
    let mut bytes = format!("HTTP/1.1 {status}\r\nconnection: close\r\n").into_bytes();
    for (name, value) in headers {
        bytes.extend_from_slice(name.as_bytes());
        bytes.extend_from_slice(b": ");
        bytes.extend_from_slice(value);
        bytes.extend_from_slice(b"\r\n");
    }
    bytes.extend_from_slice(format!("content-length: {}\r\n\r\n", body.len()).as_bytes());
    bytes.extend_from_slice(body);
    Step::Answer(bytes)
}

fn problem(status: u16, title: &str) -> Vec<u8> {
    json!({ "type": "https://example.com/probs/x", "title": title, "status": status, "detail": "d" })
        .to_string()
        .into_bytes()
}

const PROBLEM: (&str, &[u8]) = ("content-type", b"application/problem+json");

/// A policy whose backoff is short, so that only `Retry-After` makes a test wait.
fn quick() -> RetryPolicy {
    RetryPolicy::new()
        .initial_backoff(Duration::from_millis(20))
        .max_backoff(Duration::from_millis(40))
}

fn http() -> reqwest::Client {
    reqwest::Client::new()
}

/// The issue's sequence: the connection is dropped after the first request is read, then 409
/// with `Retry-After: 1`, then 503, then 201. Four attempts, each with the same key and the same
/// body bytes; the third came at least a second after the second; the answer is the 201.
#[tokio::test]
async fn a_misbehaving_server_gets_four_identical_attempts_and_the_call_gets_its_201() {
    let server = Scripted::start(vec![
        Step::Drop,
        reply(
            "409 Conflict",
            &[PROBLEM, ("retry-after", b"1")],
            &problem(409, "A request is outstanding for this Idempotency-Key"),
        ),
        reply("503 Service Unavailable", &[], b"busy"),
        reply(
            "201 Created",
            &[("content-type", b"application/json")],
            br#"{"id":"pay_1"}"#,
        ),
    ])
    .await;
    let body = json!({ "amount": 9800, "currency": "JPY" });
    let answer = quick()
        .send(http().post(server.url()).json(&body))
        .await
        .unwrap();

    assert_eq!(answer.status(), 201);
    assert_eq!(answer.json::<Value>().unwrap(), json!({ "id": "pay_1" }));
    assert_eq!(answer.attempts(), 4);
    assert!(!answer.is_replayed());
    let seen = server.seen();
    assert_eq!(seen.len(), 4, "{seen:?}");
    let quoted = format!("\"{}\"", answer.key().as_str());
    for request in &seen {
        assert_eq!(request.key.as_deref(), Some(quoted.as_str()));
        assert_eq!(request.body, serde_json::to_vec(&body).unwrap());
    }
    assert!(
        seen[2].at - seen[1].at >= Duration::from_secs(1),
        "waited {:?} after Retry-After: 1",
        seen[2].at - seen[1].at
    );
}

/// A 4xx the caller must fix ends the call after one attempt, with its Problem Details.
#[tokio::test]
async fn a_4xx_ends_the_call_after_one_attempt() {
    for status in [
        "400 Bad Request",
        "401 Unauthorized",
        "403 Forbidden",
        "404 Not Found",
        "410 Gone",
        "413 Content Too Large",
        "422 Unprocessable Content",
        "501 Not Implemented",
    ] {
        let code: u16 = status[..3].parse().unwrap();
        let server = Scripted::start(vec![reply(status, &[PROBLEM], &problem(code, "no"))]).await;
        let error = quick()
            .send(http().post(server.url()).body("x"))
            .await
            .unwrap_err();
        assert_eq!(server.seen().len(), 1, "{status}");
        assert_eq!(error.attempts(), 1);
        assert_eq!(error.status().map(|status| status.as_u16()), Some(code));
        assert_eq!(error.gave_up(), None);
        let problem = error.problem().expect("Problem Details");
        assert_eq!(problem.status(), Some(code));
        assert_eq!(problem.title(), Some("no"));
        assert!(
            !error.is_key_reused(),
            "{status}: a 422 about something else"
        );
        assert!(error.to_string().contains(&status[..3]), "{error}");
    }
}

/// A stored error answer is what every retry would get again: it is not retried.
#[tokio::test]
async fn a_replayed_5xx_is_not_retried() {
    let server = Scripted::start(vec![reply(
        "500 Internal Server Error",
        &[("idempotent-replayed", b"true")],
        b"stored",
    )])
    .await;
    let error = quick()
        .send(http().post(server.url()).body("x"))
        .await
        .unwrap_err();
    assert_eq!(server.seen().len(), 1);
    let answer = error.answer().unwrap();
    assert!(answer.is_replayed());
    assert_eq!(answer.body().as_ref(), b"stored");
}

/// The attempt cap: a server that always fails gets exactly that many requests.
#[tokio::test]
async fn the_attempt_cap_is_honoured() {
    let server = Scripted::start(vec![reply("500 Internal Server Error", &[], b"")]).await;
    let error = quick()
        .max_attempts(3)
        .send(http().post(server.url()).body("x"))
        .await
        .unwrap_err();
    assert_eq!(server.seen().len(), 3);
    assert_eq!(error.attempts(), 3);
    assert_eq!(error.gave_up(), Some(GaveUp::Attempts));
    assert_eq!(
        error.status(),
        Some(reqwest::StatusCode::INTERNAL_SERVER_ERROR)
    );
}

/// The deadline: a server that keeps asking for a second gets at most the attempts that fit,
/// and the call ends within the deadline (plus a generous margin for a busy machine).
#[tokio::test]
async fn the_deadline_is_honoured() {
    let server = Scripted::start(vec![reply(
        "503 Service Unavailable",
        &[("retry-after", b"1")],
        b"",
    )])
    .await;
    let deadline = Duration::from_millis(2500);
    let error = quick()
        .max_attempts(100)
        .deadline(deadline)
        .send(http().post(server.url()).body("x"))
        .await
        .unwrap_err();
    assert_eq!(error.gave_up(), Some(GaveUp::Deadline));
    let sent = server.seen().len();
    assert!(
        (1..=3).contains(&sent),
        "{sent} attempts in 2.5 s, 1 s apart"
    );
    assert_eq!(error.attempts() as usize, sent);
    assert!(
        error.elapsed() < deadline + Duration::from_secs(2),
        "{error}"
    );
    assert!(error.to_string().contains("deadline"), "{error}");
}

/// A `Retry-After` that reaches past the deadline is not waited for: the call ends at once with
/// the answer that asked, rather than retrying earlier than the server said.
#[tokio::test]
async fn a_retry_after_beyond_the_deadline_ends_the_call_at_once() {
    let server = Scripted::start(vec![reply(
        "429 Too Many Requests",
        &[("retry-after", b"30")],
        b"",
    )])
    .await;
    let error = quick()
        .deadline(Duration::from_secs(10))
        .send(http().post(server.url()).body("x"))
        .await
        .unwrap_err();
    assert_eq!(server.seen().len(), 1);
    assert_eq!(error.gave_up(), Some(GaveUp::Deadline));
    assert_eq!(error.status(), Some(reqwest::StatusCode::TOO_MANY_REQUESTS));
    assert!(error.elapsed() < Duration::from_secs(5), "{error}");
}

/// `Retry-After` as an HTTP-date two seconds ahead (whole seconds, so more than one second
/// from when it was written): the retry comes after that date.
#[tokio::test]
async fn an_http_date_retry_after_is_honoured() {
    let date = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(2));
    let server = Scripted::start(vec![
        reply(
            "503 Service Unavailable",
            &[("retry-after", date.as_bytes())],
            b"",
        ),
        reply("201 Created", &[], b"ok"),
    ])
    .await;
    let answer = quick()
        .send(http().post(server.url()).body("x"))
        .await
        .unwrap();
    assert_eq!(answer.attempts(), 2);
    let retried_at = SystemTime::now();
    let asked = httpdate::parse_http_date(&date).unwrap();
    assert!(retried_at >= asked, "the retry came before {date}");
}

/// An attempt that gets no answer within the attempt timeout is abandoned and sent again.
#[tokio::test]
async fn an_attempt_that_hangs_is_abandoned_and_sent_again() {
    let server = Scripted::start(vec![Step::Hang, reply("201 Created", &[], b"ok")]).await;
    let answer = quick()
        .attempt_timeout(Duration::from_millis(300))
        .send(http().post(server.url()).body("x"))
        .await
        .unwrap();
    assert_eq!(answer.attempts(), 2);
    let seen = server.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].key, seen[1].key);

    let server = Scripted::start(vec![Step::Hang]).await;
    let error = quick()
        .attempt_timeout(Duration::from_millis(200))
        .max_attempts(2)
        .send(http().post(server.url()).body("x"))
        .await
        .unwrap_err();
    assert!(matches!(error.kind(), ErrorKind::TimedOut(_)), "{error}");
    assert_eq!(server.seen().len(), 2);
}

/// A refused connection is retried, and reported as a transport error when the budget ends.
#[tokio::test]
async fn a_refused_connection_is_retried() {
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let error = quick()
        .max_attempts(3)
        .send(http().post(format!("http://{addr}/payments")).body("x"))
        .await
        .unwrap_err();
    assert!(matches!(error.kind(), ErrorKind::Transport(_)), "{error}");
    assert_eq!(error.attempts(), 3);
    assert_eq!(error.gave_up(), Some(GaveUp::Attempts));
}

/// Nothing a server sends makes the client panic, and it never reads more of an error than
/// the policy says.
#[tokio::test]
async fn garbage_answers_are_handled_without_panicking() {
    // A huge error body: only the first KiB is kept.
    let huge = vec![b'x'; 4 * 1024 * 1024];
    let server = Scripted::start(vec![reply("400 Bad Request", &[PROBLEM], &huge)]).await;
    let error = quick()
        .max_error_body(1024)
        .send(http().post(server.url()).body("x"))
        .await
        .unwrap_err();
    let answer = error.answer().unwrap();
    assert_eq!(answer.body().len(), 1024);
    assert!(answer.is_truncated());
    assert!(answer.problem().is_none());

    // A successful body over the limit ends the call; it is not retried.
    let server = Scripted::start(vec![reply("201 Created", &[], &huge)]).await;
    let error = quick()
        .max_response_body(1024)
        .send(http().post(server.url()).body("x"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            error.kind(),
            ErrorKind::ResponseTooLarge { limit: 1024, .. }
        ),
        "{error}"
    );
    assert_eq!(server.seen().len(), 1);

    // Unreadable headers, a Problem body that is not JSON, an odd replay marker: a plain 409
    // retried after the backoff, then a 201 that is not a replay.
    let server = Scripted::start(vec![
        reply(
            "409 Conflict",
            &[
                PROBLEM,
                ("retry-after", b"\xff\xfe soon"),
                ("retry-after", b"5"),
                ("idempotent-replayed", b"maybe"),
            ],
            b"{not json",
        ),
        reply(
            "201 Created",
            &[
                ("idempotent-replayed", &b"\xff"[..]),
                ("content-type", b"\xfe"),
            ],
            b"ok",
        ),
    ])
    .await;
    let answer = quick()
        .send(http().post(server.url()).body("x"))
        .await
        .unwrap();
    assert_eq!(answer.attempts(), 2);
    assert!(!answer.is_replayed());
    let waited = server.seen()[1].at - server.seen()[0].at;
    assert!(
        waited < Duration::from_secs(4),
        "the second Retry-After line is not read: {waited:?}"
    );

    // Not HTTP at all, or a header with a control character (which hyper refuses to parse):
    // a transport error, retried like one.
    for garbage in [
        b"SMTP ready\r\n\r\n".to_vec(),
        b"HTTP/1.1 200 OK\r\nx-bad: a\x01b\r\ncontent-length: 0\r\n\r\n".to_vec(),
        b"HTTP/1.1 2000 OK\r\ncontent-length: 0\r\n\r\n".to_vec(),
    ] {
        let server = Scripted::start(vec![Step::Answer(garbage), reply("200 OK", &[], b"")]).await;
        let answer = quick()
            .send(http().post(server.url()).body("x"))
            .await
            .unwrap();
        assert_eq!(answer.attempts(), 2);
    }
}

/// A request that already names its key, or whose body cannot be sent twice, is refused before
/// anything is sent.
#[tokio::test]
async fn a_request_that_cannot_be_retried_safely_is_not_sent() {
    let server = Scripted::start(vec![reply("201 Created", &[], b"")]).await;
    let error = quick()
        .send(
            http()
                .post(server.url())
                .header("idempotency-key", "mine")
                .body("x"),
        )
        .await
        .unwrap_err();
    assert!(matches!(error.kind(), ErrorKind::KeyAlreadySet), "{error}");
    assert_eq!(error.attempts(), 0);

    let chunks = futures_util::stream::iter([Ok::<_, std::io::Error>("x")]);
    let error = quick()
        .send(
            http()
                .post(server.url())
                .body(reqwest::Body::wrap_stream(chunks)),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(error.kind(), ErrorKind::BodyNotReplayable),
        "{error}"
    );

    let error = quick().send(http().post("not a url")).await.unwrap_err();
    assert!(
        matches!(error.kind(), ErrorKind::InvalidRequest(_)),
        "{error}"
    );
    assert!(server.seen().is_empty());
}
