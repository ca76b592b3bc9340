//! A first day without silent failures, over real HTTP against a service in a process of its
//! own (`src/bin/misconfigured.rs`), as its operator and its clients see it: a route set up
//! wrong answers 500 without blaming the client, and says so in one line of the service's
//! output (once per route, however many requests meet it); and a layer added with
//! `Router::layer` leaves requests that no route serves to the router.

use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
};

use axum::http::StatusCode;
use idem_tests::{Answer, REQUEST_TIMEOUT, eventually};

/// The service, killed when the test ends; its stderr collected line by line.
struct Service {
    child: Child,
    url: String,
    log: Arc<Mutex<Vec<String>>>,
}

impl Service {
    fn start() -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_misconfigured"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the test service starts");
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let url = first
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
            .to_owned();
        let log = Arc::new(Mutex::new(Vec::new()));
        let stderr = BufReader::new(child.stderr.take().unwrap());
        let lines = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line);
            }
        });
        Self { child, url, log }
    }

    fn client() -> reqwest::Client {
        reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .unwrap()
    }

    async fn post(&self, path: &str, key: Option<&str>, body: &str) -> Answer {
        self.send(reqwest::Method::POST, path, key, body).await
    }

    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        key: Option<&str>,
        body: &str,
    ) -> Answer {
        let mut request = Self::client()
            .request(method, format!("{}{path}", self.url))
            .header("content-type", "application/json")
            .header("authorization", "Bearer alice")
            .body(body.to_owned());
        if let Some(key) = key {
            request = request.header("idempotency-key", key);
        }
        Answer::of(request).await
    }

    /// The log lines that contain `text`, of all the service logged before now: a mark logged
    /// after them is waited for, and the log is read in the order it was written.
    async fn lines_with(&self, text: &str) -> Vec<String> {
        let n = rand::random::<u32>();
        let asked = Self::client()
            .get(format!("{}/mark?n={n}", self.url))
            .send()
            .await;
        assert_eq!(asked.unwrap().status(), StatusCode::NO_CONTENT);
        let mark = format!("mark {n}");
        let logged = || {
            self.log
                .lock()
                .unwrap()
                .iter()
                .any(|line| line.ends_with(&mark))
        };
        assert!(
            eventually(REQUEST_TIMEOUT, async || logged()).await,
            "the mark never came"
        );
        let log = self.log.lock().unwrap();
        log.iter()
            .filter(|line| line.contains(text))
            .cloned()
            .collect()
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn a_handler_without_its_runtime_is_the_services_fault_said_once() {
    let service = Service::start();
    for key in ["a", "b", "c"] {
        let answer = service.post("/orders", Some(key), "{}").await;
        let problem = answer.problem(StatusCode::INTERNAL_SERVER_ERROR, "misconfigured");
        let detail = problem["detail"].as_str().unwrap();
        assert!(detail.contains("the fault is the service's"), "{detail}");
    }
    let said = service
        .lines_with("called without the idempotency runtime")
        .await;
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].contains("ERROR"), "{said:?}");
    assert!(said[0].contains("route=\"/orders\""), "{said:?}");
    assert!(
        said[0].contains(".layer(axum::Extension(idempotency))"),
        "{said:?}"
    );
}

#[tokio::test]
async fn a_principal_the_service_did_not_name_is_its_fault_said_once() {
    let service = Service::start();
    for key in ["a", "b"] {
        // A client with valid credentials: nothing it could fix.
        let answer = service.post("/payments", Some(key), "{}").await;
        let problem = answer.problem(StatusCode::INTERNAL_SERVER_ERROR, "principal-missing");
        let detail = problem["detail"].as_str().unwrap();
        assert!(detail.contains("the fault is the service's"), "{detail}");
        assert!(!detail.contains("authenticate"), "{detail}");
    }
    let said = service.lines_with("keys are per principal").await;
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].contains("ERROR") && said[0].contains("route=\"/payments\""),
        "{said:?}"
    );
    assert!(said[0].contains("idem::Principal"), "{said:?}");
}

#[tokio::test]
async fn a_layer_on_the_whole_router_leaves_unknown_paths_to_the_router() {
    let service = Service::start();
    for (key, body) in [
        (Some("K"), r#"{"a":1}"#),
        (Some("K"), r#"{"a":1}"#),
        (Some("K"), r#"{"a":2}"#),
        (None, r#"{"a":1}"#),
    ] {
        let answer = service.post("/nope", key, body).await;
        assert_eq!(
            answer.status,
            StatusCode::NOT_FOUND,
            "{key:?} {body}: {answer:?}"
        );
        assert!(!answer.replayed(), "{answer:?}");
    }
    // A method the route does not serve: the router's 405, never stored, so never replayed,
    // and another body under the key is not a reuse.
    for body in [r#"{"a":1}"#, r#"{"a":1}"#, r#"{"a":2}"#] {
        let answer = service
            .send(reqwest::Method::PATCH, "/layered", Some("P"), body)
            .await;
        assert_eq!(
            answer.status,
            StatusCode::METHOD_NOT_ALLOWED,
            "{body}: {answer:?}"
        );
        assert!(!answer.replayed(), "{answer:?}");
    }
    // The route itself is idempotent as ever.
    let first = service.post("/layered", Some("L"), r#"{"b":1}"#).await;
    let again = service.post("/layered", Some("L"), r#"{"b":1}"#).await;
    assert_eq!(first.status, StatusCode::CREATED);
    assert!(again.replayed());
}

/// A store that cannot be reached as the service starts says which store, where (without the
/// password) and what to check, in the one line `main` prints for the error it returns.
#[tokio::test]
async fn an_unreachable_store_names_itself_and_where_it_was_looked_for() {
    let port = idem_tests::free_port();
    let redis = idem::redis::RedisStore::builder()
        .connection_timeout(std::time::Duration::from_secs(2))
        .connect(format!("redis://:secret@127.0.0.1:{port}/0").as_str())
        .await
        .expect_err("nothing listens there");
    let said = format!("Error: {redis:?}");
    assert!(
        said.starts_with(&format!(
            "Error: cannot connect to Redis at 127.0.0.1:{port}: "
        )),
        "{said}"
    );
    assert!(said.ends_with("check that it runs there and that the address, port, database and credentials are right"), "{said}");
    assert!(!said.contains("secret"), "{said}");

    let postgres = idem::postgres::PostgresStore::builder()
        .acquire_timeout(std::time::Duration::from_secs(2))
        .connect(&format!("postgres://shop:secret@127.0.0.1:{port}/orders"))
        .await
        .expect_err("nothing listens there");
    let said = format!("Error: {postgres:?}");
    assert!(
        said.starts_with(&format!(
            "Error: cannot connect to PostgreSQL at 127.0.0.1:{port}/orders: "
        )),
        "{said}"
    );
    assert!(!said.contains("secret"), "{said}");
}
