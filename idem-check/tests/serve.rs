//! `idem-check serve` as a server for testing clients: each fault does what it says over
//! real TCP, the shop's `checkout` (idem's client) gets one payment through each, as the
//! server's own count of runs shows, and idem-check passes every case against it.

mod support;

use std::{net::SocketAddr, time::Duration};

use idem_check::{
    OnServerError, Variant, Verdict,
    serve::{KeyRuns, Runs, ServeOptions, app, serve_app},
};
use idem_client::IdempotencyKey;
use serde_json::Value;
use shop::checkout::Checkout;

/// `serve` with `options` on a loopback port, and its count of runs.
async fn start(options: ServeOptions) -> (SocketAddr, Runs) {
    let (router, _idem, runs) = app(options);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve_app(listener, router, std::future::pending()));
    (addr, runs)
}

/// `checkout` as the user alice, with a key of its own; answers whether it paid, and what it
/// wrote to stdout and stderr.
async fn checkout(
    addr: SocketAddr,
    key: &IdempotencyKey,
    timeout: Duration,
) -> (bool, String, String) {
    let checkout = Checkout {
        url: format!("http://{addr}"),
        user: "alice".to_owned(),
        amount: 9800,
        currency: "JPY".to_owned(),
        timeout: Some(timeout),
        key: Some(key.clone()),
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let paid = checkout.run(&mut out, &mut err).await;
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap();
    (paid, text(out), text(err))
}

async fn payments(addr: SocketAddr, user: &str) -> Vec<Value> {
    let answer: Value = reqwest::Client::new()
        .get(format!("http://{addr}/payments"))
        .bearer_auth(user)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    answer["items"].as_array().unwrap().clone()
}

/// The article's case 5 for real: the payment is made, and the connection drops before the
/// answer. The client cannot know; its retry with the same key gets the payment, and the
/// operation ran once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkout_whose_answer_was_lost_gets_it_on_its_retry() {
    let (addr, runs) = start(ServeOptions {
        drop_first: 1,
        ..ServeOptions::default()
    })
    .await;
    let key = IdempotencyKey::random();
    let (paid, out, err) = checkout(addr, &key, Duration::from_secs(10)).await;
    assert!(paid, "{err}");
    assert!(err.contains("after 2 attempt(s), replayed"), "{err}");
    let payment: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(payments(addr, "alice").await, [payment]);
    assert_eq!(
        runs.of("alice", key.as_str()),
        KeyRuns {
            attempts: 2,
            runs: 1
        }
    );
}

/// A dropped connection is dropped: no status line, no byte of answer, though the request
/// ran; `GET /runs` says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_first_processes_then_answers_nothing() {
    let (addr, _runs) = start(ServeOptions::default()).await;
    let http = reqwest::Client::new();
    let send = || {
        http.post(format!("http://{addr}/payments?drop_first=1"))
            .bearer_auth("bob")
            .header("idempotency-key", "\"order-7\"")
            .json(&serde_json::json!({ "amount": 1 }))
            .send()
    };
    let error = send().await.unwrap_err();
    assert!(!error.is_timeout() && !error.is_connect(), "{error:?}");
    let retried = send().await.unwrap();
    assert_eq!(retried.status(), 201);
    assert_eq!(retried.headers()["idempotent-replayed"], "true");
    let runs: Value = http
        .get(format!("http://{addr}/runs?key=order-7"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        runs,
        serde_json::json!({ "keys": [{ "principal": "bob", "key": "order-7", "attempts": 2, "runs": 1 }] })
    );
}

/// A client that gives up on a slow payment retries through 409 and gets the first run's
/// answer; the operation ran once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkout_that_times_out_gets_the_first_run_through_409s() {
    let (addr, runs) = start(ServeOptions {
        delay: Duration::from_millis(1500),
        ..ServeOptions::default()
    })
    .await;
    let key = IdempotencyKey::random();
    let (paid, _, err) = checkout(addr, &key, Duration::from_millis(400)).await;
    assert!(paid, "{err}");
    assert!(err.contains("replayed"), "{err}");
    assert_eq!(payments(addr, "alice").await.len(), 1);
    let counted = runs.of("alice", key.as_str());
    assert_eq!(counted.runs, 1);
    assert!(
        counted.attempts >= 3,
        "a timeout, a 409 and the replay at least: {counted:?}"
    );
}

/// A 500 releases the key (the default): the client's retry runs the operation again, and
/// that run pays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkout_retries_a_5xx_and_the_second_run_pays() {
    let (addr, runs) = start(ServeOptions {
        fail_first: 1,
        ..ServeOptions::default()
    })
    .await;
    let key = IdempotencyKey::random();
    let (paid, _, err) = checkout(addr, &key, Duration::from_secs(10)).await;
    assert!(paid, "{err}");
    assert!(err.contains("after 2 attempt(s)"), "{err}");
    assert_eq!(payments(addr, "alice").await.len(), 1);
    assert_eq!(
        runs.of("alice", key.as_str()),
        KeyRuns {
            attempts: 2,
            runs: 2
        }
    );
}

/// A stored 5xx is the operation's outcome: the client's retry gets it replayed and stops,
/// and the operation is not run again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_5xx_is_final_for_checkout() {
    let (addr, runs) = start(ServeOptions {
        fail_first: 1,
        on_server_error: OnServerError::Stored,
        ..ServeOptions::default()
    })
    .await;
    let key = IdempotencyKey::random();
    let (paid, out, err) = checkout(addr, &key, Duration::from_secs(10)).await;
    assert!(!paid && out.is_empty(), "{out}");
    assert!(err.contains("fault-injected"), "{err}");
    assert!(payments(addr, "alice").await.is_empty());
    assert_eq!(
        runs.of("alice", key.as_str()),
        KeyRuns {
            attempts: 2,
            runs: 1
        }
    );
}

/// idem-check against serve, its fast, slow and failing variants chosen in the query, and a
/// TTL of one second waited out: every case passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idem_check_passes_every_case_against_serve() {
    let (addr, _runs) = start(ServeOptions {
        ttl: Duration::from_secs(1),
        ..ServeOptions::default()
    })
    .await;
    let mut settings = support::settings(addr);
    let url = |path: &str| Some(format!("http://{addr}{path}").parse().unwrap());
    settings.slow = Some(Variant {
        url: url("/payments?delay_ms=600"),
        ..settings.slow.unwrap()
    });
    settings.failing = Some(Variant {
        url: url("/payments?fail_first=1"),
        ..settings.failing.unwrap()
    });
    settings.ttl = Some(Duration::from_secs(1));
    settings.wait_ttl = true;
    let report = support::check(settings).await;
    let all: Vec<&str> = report.cases.iter().map(|case| case.name).collect();
    assert_eq!(report.names(Verdict::Pass), all);
}

/// The `type` of an injected fault, and of idem's own refusals, leads to a page the server
/// serves, with a section for it, as a reader resolves it against the request's URL.
#[tokio::test]
async fn every_problem_type_leads_to_a_section_the_server_serves() {
    let (addr, _runs) = start(ServeOptions {
        fail_first: 1,
        ..ServeOptions::default()
    })
    .await;
    let http = reqwest::Client::new();
    let url = reqwest::Url::parse(&format!("http://{addr}/payments")).unwrap();
    let pay = |key: Option<&str>| {
        let request = http
            .post(url.clone())
            .bearer_auth("alice")
            .json(&serde_json::json!({"amount": 9800, "currency": "JPY"}));
        match key {
            Some(key) => request.header("Idempotency-Key", key),
            None => request,
        }
    };
    let fault: Value = pay(Some("k1")).send().await.unwrap().json().await.unwrap();
    let missing: Value = pay(None).send().await.unwrap().json().await.unwrap();
    for (problem, page, slug) in [
        (fault, "/problems/check", "fault-injected"),
        (missing, "/problems/idempotency", "key-missing"),
    ] {
        let resolved = url.join(problem["type"].as_str().unwrap()).unwrap();
        assert_eq!(resolved.path(), page, "{problem}");
        assert_eq!(resolved.fragment(), Some(slug), "{problem}");
        let answer = http.get(resolved).send().await.unwrap();
        assert_eq!(answer.status(), 200);
        let html = answer.text().await.unwrap();
        assert!(html.contains(&format!("<section id=\"{slug}\">")), "{html}");
    }
}
