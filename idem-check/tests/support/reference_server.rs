//! A small idempotent server written for the tests, independently of idem, with one switch
//! per classic defect. With every switch off it is correct: it scopes keys to the caller,
//! compares bodies as JSON values, claims a key atomically, answers 409 with `Retry-After`
//! while a run is in progress, finishes a run whose client left, releases a key whose run
//! failed, forgets a key after its TTL, and answers every refusal with Problem Details.
//!
//! `POST /payments` creates a payment (`?delay_ms=N` makes the run take N ms, `?fail=1` makes
//! the first run of each key answer 500); `GET /payments` lists the caller's payments as
//! `{"items": [...]}`. The caller is the token of `Authorization: Bearer <token>`.

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{
    Json, Router,
    body::Bytes,
    extract::{Query, State},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
    routing::post,
};
use serde::Deserialize;
use serde_json::{Value, json};

/// The defects a server can have, and the allowed choices that differ from the reference.
#[derive(Clone, Copy, Debug, Default)]
pub struct Flaws {
    /// Runs every request, key or no key: no record at all.
    pub ignores_key: bool,
    /// Looks records up by the key alone, not by who sent it: replays across users.
    pub unscoped: bool,
    /// Does not compare the retry's body with the first request's.
    pub no_body_compare: bool,
    /// A run that fails leaves its key "processing" forever (the article's Redis sketch
    /// without error handling).
    pub stuck_after_failure: bool,
    /// Answers 500 to a key it cannot parse.
    pub error_on_bad_key: bool,
    /// Runs the operation inside the request, as a plain axum handler does: a client that
    /// gives up cancels it, and its key stays "processing" forever.
    pub cancelled_with_client: bool,
    /// Answers refusals as `text/plain`.
    pub no_problem_details: bool,
    /// Locks only the lookup: the record is written when the run completes, so requests that
    /// arrive while one runs find no record and run too (a check-then-act race that only a
    /// lasting request shows).
    pub lookup_only_lock: bool,
    /// Deduplicates identical requests without a key (same caller, same body): the second is
    /// answered as a replay of the first. Only with `key_optional`.
    pub dedups_keyless: bool,
    /// Answers a finished key's retry with its stored body, but as 409 (a replay sent as 409).
    pub replays_as_409: bool,
    /// Refuses the draft's sf-string keys (`"k"`) with 400: takes bare keys only.
    pub bare_keys_only: bool,
    /// Keeps completed keys forever, whatever the declared TTL.
    pub never_expires: bool,
    /// Allowed: compares bodies as bytes, so reordered members are another request.
    pub raw_bytes: bool,
    /// Allowed but risky: a 409 without `Retry-After`.
    pub no_retry_after: bool,
    /// Allowed: a duplicate waits for the run in progress and gets its answer.
    pub waits_in_flight: bool,
    /// Allowed: a failed run's 500 is stored and replayed (Stripe).
    pub stores_failures: bool,
    /// Allowed: runs requests without a key, without idempotency.
    pub key_optional: bool,
    /// Allowed: takes the draft's sf-string keys only, and refuses bare ones with 400.
    pub strict_keys: bool,
    /// Allowed: the header's bytes are the key, so `"k"` and `k` are two keys.
    pub opaque_keys: bool,
}

/// The reference server's settings.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub flaws: Flaws,
    pub ttl: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            flaws: Flaws::default(),
            ttl: Duration::from_secs(3600),
        }
    }
}

#[derive(Clone, Debug)]
enum Record {
    Running {
        body: Fingerprint,
    },
    Done {
        body: Fingerprint,
        status: StatusCode,
        answer: Bytes,
        expires: Instant,
    },
}

/// What a record compares a retry's body with.
#[derive(Clone, Debug, PartialEq)]
enum Fingerprint {
    Json(Value),
    Bytes(Bytes),
}

#[derive(Debug, Default)]
struct Data {
    records: HashMap<(String, String), Record>,
    payments: HashMap<String, Vec<Value>>,
    runs: HashMap<(String, String), u32>,
    /// Answers to requests without a key, by caller and body (`dedups_keyless`).
    keyless: HashMap<(String, String), (StatusCode, Bytes)>,
}

#[derive(Clone, Debug)]
struct Server {
    config: Config,
    data: Arc<Mutex<Data>>,
}

/// Serves the reference server with `config` on a loopback port, until the test ends.
pub async fn start(config: Config) -> SocketAddr {
    let server = Server {
        config,
        data: Arc::default(),
    };
    let app = Router::new()
        .route("/payments", post(create).get(list))
        .with_state(server);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

#[derive(Debug, Default, Deserialize)]
struct Faults {
    delay_ms: Option<u64>,
    fail: Option<u8>,
}

fn principal(headers: &HeaderMap) -> String {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .unwrap_or("anonymous")
        .to_owned()
}

async fn list(State(server): State<Server>, headers: HeaderMap) -> Json<Value> {
    let data = server.data.lock().unwrap();
    let items = data
        .payments
        .get(&principal(&headers))
        .cloned()
        .unwrap_or_default();
    Json(json!({ "items": items }))
}

async fn create(
    State(server): State<Server>,
    Query(faults): Query<Faults>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let flaws = server.config.flaws;
    let who = principal(&headers);
    let key = match headers
        .get("idempotency-key")
        .map(|value| parse_key(value, flaws))
    {
        None if flaws.ignores_key => String::new(),
        None if flaws.key_optional => return server.keyless(who, body, faults).await,
        None => return server.problem(400, "key-missing", "Idempotency-Key is missing"),
        Some(Err(why)) if flaws.error_on_bad_key && !flaws.ignores_key => {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("internal error: {why}"),
            )
                .into_response();
        }
        Some(Err(_)) if flaws.ignores_key => String::new(),
        Some(Err(why)) => return server.problem(400, "key-malformed", why),
        Some(Ok(key)) => key,
    };
    let Ok(_) = serde_json::from_slice::<Value>(&body) else {
        return server.problem(400, "invalid-body", "the body is not JSON");
    };
    if flaws.ignores_key {
        return server.run(who, key, body, faults, None).await;
    }
    let record_key = (
        if flaws.unscoped {
            String::new()
        } else {
            who.clone()
        },
        key.clone(),
    );
    let fingerprint = server.fingerprint(&body);
    loop {
        match server.claim(&record_key, &fingerprint) {
            Claim::Claimed => {
                return server.run(who, key, body, faults, Some(record_key)).await;
            }
            Claim::Unlocked => return server.run(who, key, body, faults, Some(record_key)).await,
            Claim::Answer(response) => return response,
            Claim::Running if flaws.waits_in_flight => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Claim::Running => return server.conflict(),
        }
    }
}

enum Claim {
    Claimed,
    /// No record, and none written: the run's completion writes it (`lookup_only_lock`).
    Unlocked,
    Running,
    Answer(Response),
}

impl Server {
    fn fingerprint(&self, body: &Bytes) -> Fingerprint {
        if self.config.flaws.raw_bytes {
            return Fingerprint::Bytes(body.clone());
        }
        Fingerprint::Json(serde_json::from_slice(body).expect("checked as JSON"))
    }

    /// One atomic look at the record: claim it, or learn its state.
    fn claim(&self, record_key: &(String, String), fingerprint: &Fingerprint) -> Claim {
        let flaws = self.config.flaws;
        let mut data = self.data.lock().unwrap();
        let same = |stored: &Fingerprint| flaws.no_body_compare || stored == fingerprint;
        match data.records.get(record_key) {
            Some(Record::Done { expires, .. })
                if *expires <= Instant::now() && !flaws.never_expires => {}
            Some(Record::Done {
                body,
                status,
                answer,
                ..
            }) => {
                if !same(body) {
                    return Claim::Answer(self.problem(
                        422,
                        "key-reused",
                        "Idempotency-Key is already used",
                    ));
                }
                let status = if flaws.replays_as_409 {
                    StatusCode::CONFLICT
                } else {
                    *status
                };
                let mut response = (status, answer.clone()).into_response();
                let headers = response.headers_mut();
                headers.insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                headers.insert("idempotent-replayed", HeaderValue::from_static("true"));
                return Claim::Answer(response);
            }
            Some(Record::Running { body }) if !same(body) => {
                return Claim::Answer(self.problem(
                    422,
                    "key-reused",
                    "Idempotency-Key is already used",
                ));
            }
            Some(Record::Running { .. }) => return Claim::Running,
            None => {}
        }
        if flaws.lookup_only_lock {
            return Claim::Unlocked;
        }
        data.records.insert(
            record_key.clone(),
            Record::Running {
                body: fingerprint.clone(),
            },
        );
        Claim::Claimed
    }

    /// Runs the operation in a task of its own, so that it finishes (and its record is
    /// written) even when the client leaves; or, with `cancelled_with_client`, inside the
    /// request, where hyper drops it when the client leaves.
    async fn run(
        &self,
        who: String,
        key: String,
        body: Bytes,
        faults: Faults,
        record_key: Option<(String, String)>,
    ) -> Response {
        let server = self.clone();
        let work = async move {
            tokio::time::sleep(Duration::from_millis(faults.delay_ms.unwrap_or(0))).await;
            let fingerprint = server.fingerprint(&body);
            let mut data = server.data.lock().unwrap();
            let run = {
                let runs = data.runs.entry((who.clone(), key)).or_default();
                *runs += 1;
                *runs
            };
            let (status, answer) = if faults.fail == Some(1) && run == 1 {
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    Bytes::from_static(br#"{"error":"the bank failed"}"#),
                )
            } else {
                let mut payment: Value = serde_json::from_slice(&body).expect("checked as JSON");
                payment["id"] = json!(format!("pay_{:016x}", rand_id()));
                data.payments.entry(who).or_default().push(payment.clone());
                (StatusCode::CREATED, Bytes::from(payment.to_string()))
            };
            if let Some(record_key) = record_key {
                let flaws = server.config.flaws;
                let keep = !status.is_server_error() || flaws.stores_failures;
                if keep {
                    let expires = Instant::now() + server.config.ttl;
                    data.records.insert(
                        record_key,
                        Record::Done {
                            body: fingerprint,
                            status,
                            answer: answer.clone(),
                            expires,
                        },
                    );
                } else if !flaws.stuck_after_failure {
                    data.records.remove(&record_key);
                }
            }
            (status, answer)
        };
        let (status, answer) = if self.config.flaws.cancelled_with_client {
            work.await
        } else {
            tokio::spawn(work).await.unwrap()
        };
        (status, [(header::CONTENT_TYPE, "application/json")], answer).into_response()
    }

    /// A request without a key, where keys are optional: run as it is, or, with
    /// `dedups_keyless`, answered as a replay of an identical earlier one.
    async fn keyless(&self, who: String, body: Bytes, faults: Faults) -> Response {
        if !self.config.flaws.dedups_keyless {
            return self.run(who, String::new(), body, faults, None).await;
        }
        let fingerprint = (who.clone(), String::from_utf8_lossy(&body).into_owned());
        let seen = self.data.lock().unwrap().keyless.get(&fingerprint).cloned();
        if let Some((status, answer)) = seen {
            let mut response = (status, answer).into_response();
            let headers = response.headers_mut();
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            headers.insert("idempotent-replayed", HeaderValue::from_static("true"));
            return response;
        }
        let response = self.run(who, String::new(), body, faults, None).await;
        let (parts, answer) = response.into_parts();
        let answer = axum::body::to_bytes(answer, usize::MAX).await.unwrap();
        self.data
            .lock()
            .unwrap()
            .keyless
            .insert(fingerprint, (parts.status, answer.clone()));
        Response::from_parts(parts, axum::body::Body::from(answer))
    }

    fn conflict(&self) -> Response {
        let mut response = self.problem(
            409,
            "in-flight",
            "A request is outstanding for this Idempotency-Key",
        );
        if !self.config.flaws.no_retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }

    fn problem(&self, status: u16, slug: &str, title: &str) -> Response {
        let status = StatusCode::from_u16(status).unwrap();
        if self.config.flaws.no_problem_details {
            return (
                status,
                [(header::CONTENT_TYPE, "text/plain")],
                format!("error: {title}"),
            )
                .into_response();
        }
        let body = json!({
            "type": format!("https://example.com/problems/{slug}"),
            "title": title,
            "status": status.as_u16(),
            "detail": title,
        });
        (
            status,
            [(header::CONTENT_TYPE, "application/problem+json")],
            body.to_string(),
        )
            .into_response()
    }
}

/// A key in either spelling: `"abc"` (an sf-string without escapes) or `abc`; only one of
/// them under `bare_keys_only` or `strict_keys`; the value as it is under `opaque_keys`.
fn parse_key(value: &HeaderValue, flaws: Flaws) -> Result<String, &'static str> {
    let text = value
        .to_str()
        .map_err(|_| "the key is not visible ASCII")?
        .trim();
    let key = match text.strip_prefix('"') {
        Some(_) if flaws.bare_keys_only => return Err("Invalid Idempotency-Key"),
        Some(_) if flaws.opaque_keys => text,
        Some(rest) => rest
            .strip_suffix('"')
            .ok_or("the key's quoted string is not closed")?,
        None if flaws.strict_keys => return Err("the key is not an sf-string"),
        None => text,
    };
    if key.is_empty() || key.len() > 255 {
        return Err("a key is 1 to 255 characters");
    }
    let quotes_inside = !flaws.opaque_keys && key.contains('"');
    if quotes_inside || key.contains(['\\', ',', ' ']) {
        return Err("the key has a character it may not have");
    }
    Ok(key.to_owned())
}

fn rand_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed) ^ 0x5bd1_e995_0000_0000
}
