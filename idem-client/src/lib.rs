//! The client side: send a POST, and retry it safely with one key per operation.
//!
//! A client that times out cannot know whether its request was processed; with an
//! `Idempotency-Key` it sends the same request again, with the same key, and gets the first
//! result. [`RetryPolicy::send`] does that over reqwest: one call is one operation, one key,
//! and every attempt carries that key and the same body bytes.
//!
//! ```no_run
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use idem_client::{IdempotencyKey, RetryPolicy};
//! use serde_json::json;
//!
//! let http = reqwest::Client::new();
//! let url = "https://api.example.com/customers";
//! let policy = RetryPolicy::new();
//!
//! // The key names the operation, so a second call creates nothing new.
//! let key = IdempotencyKey::derive("customer-create", ["user-42"])?;
//! let body = json!({ "email": "alice@example.com" });
//! let first = policy.send_with_key(&key, http.post(url).json(&body)).await?;
//! println!("{} after {} attempt(s)", first.status(), first.attempts());
//!
//! // Sent again (a second click, a restarted job): the server answers with the first result.
//! let again = policy.send_with_key(&key, http.post(url).json(&body)).await?;
//! assert!(again.is_replayed());
//! assert_eq!(again.body(), first.body());
//!
//! // The same key for another body is a bug in the caller, and says so.
//! let other = json!({ "email": "bob@example.com" });
//! let error = policy.send_with_key(&key, http.post(url).json(&other)).await.unwrap_err();
//! assert!(error.is_key_reused());
//! assert_eq!(error.attempts(), 1);
//! # Ok(()) }
//! ```
//!
//! The same exchange runs against a real idem server in the repository's end-to-end tests
//! (`tests/tests/client_idem_server.rs`), and the example shop's `checkout` command is a
//! whole program built on it.
//!
//! # The crate
//!
//! It builds on reqwest and tokio's timer, and on `idem-protocol`, which it shares with the
//! server: the key, its spellings and idem's Problem Details kinds, re-exported here
//! ([`IdempotencyKey`], [`KeyForm`], [`ProblemKind`]). It does not depend on axum, on any store,
//! or on the server runtime `idem-core`, which re-exports this crate as `idem::client`
//! under its feature `client`.
//!
//! # Keys
//!
//! A key names one logical operation, and is the same on every retry of it: random
//! ([`IdempotencyKey::random`], a UUID v4, what [`RetryPolicy::send`] uses) for an operation
//! nothing else names, or derived from the business identifiers that make the operation what it
//! is ([`IdempotencyKey::derive`]): `customer-create` and the user id, so that two clicks create
//! one customer. The derivation is stable across processes and versions and is written down in
//! [`idem_protocol::key::derive`], so that a program in another language can reproduce it. The key is sent
//! as an RFC 9651 sf-string (the IETF draft) or bare (Stripe), as [`KeyForm`] says.
//!
//! # What is retried
//!
//! | the attempt met | retried | why |
//! | --- | --- | --- |
//! | a 2xx or 3xx | no: done | |
//! | no answer: connection refused, reset or closed, the attempt timeout | yes | the request may or may not have run; the same key makes sending it again safe |
//! | 409 Conflict | yes, after `Retry-After` | the first request with the key is still running; the retry gets its result |
//! | 429 Too Many Requests | yes, after `Retry-After` | the server asks the client to slow down, not to give up |
//! | 500, 502, 503, 504 and every other 5xx | yes, after `Retry-After` if given | the server failed; idem releases the key on a 5xx, so the retry runs again |
//! | 501 Not Implemented | no | the server does not do this; a retry meets the same server |
//! | an error answer marked `Idempotent-Replayed: true` | no | it is the stored result for the key: every retry gets it again |
//! | 400, 401, 403, 404, 410, 413, 415, 422 and every other 4xx | no | the request is wrong; the caller must change it |
//! | a 422 about the key (idem's `key-reused`, the IETF draft's title) | no: [`ErrorKind::KeyReused`] | the key was used for another request: a bug in the caller |
//!
//! The wait before retry `n` is at least the answer's `Retry-After` (delta-seconds or an
//! HTTP-date) and at least a backoff drawn uniformly from `[0, min(max_backoff,
//! initial_backoff × 2^(n-1))]` (full jitter). No wait begins that would end after the
//! deadline: a `Retry-After` beyond it ends the call at once, with the answer that asked.
//!
//! # Defaults
//!
//! | setting | default | the Stripe SDKs |
//! | --- | --- | --- |
//! | [`max_attempts`](RetryPolicy::max_attempts) | 10 | 3 (2 retries) |
//! | [`initial_backoff`](RetryPolicy::initial_backoff) | 500 ms, doubling | 500 ms, doubling (stripe-node) or growing as 0.5 s + 0.5 s × n² (stripe-go) |
//! | [`max_backoff`](RetryPolicy::max_backoff) | 5 s | 5 s |
//! | [`attempt_timeout`](RetryPolicy::attempt_timeout) | 30 s | 80 s |
//! | [`deadline`](RetryPolicy::deadline) | 60 s | none |
//!
//! [docs/client.md](https://github.com/idem-rs/idem/blob/main/docs/client.md) in the repository has the whole comparison and the design.
//!
//! The backoff's bounds are Stripe's; its jitter is full rather than a fraction of the delay,
//! so that clients that failed together (a store outage answered 503 to all of them) do not
//! come back together. The budget is not Stripe's: Stripe's 2 retries cover a blip on an API whose
//! answers come in a second, and whose 409 means two requests raced. An idem server answers
//! 409 for as long as the first request runs (a 10 s bank transfer, say) and says when to come
//! back; a client that stops after 2 retries loses a result it could have had. So the bound
//! that matters is time, the deadline, with the attempts cap as a backstop against a server
//! that fails fast forever. An attempt timeout shorter than Stripe's is safe here because the
//! server goes on with an abandoned attempt and the retry collects its result.
//!
//! # No panics, bounded reads
//!
//! Nothing a server answers makes a call panic: unreadable or repeated headers are ignored,
//! a `Retry-After` that is neither form is no wait, a body that is not Problem Details is kept
//! as bytes. At most [`max_error_body`](RetryPolicy::max_error_body) bytes of an error answer
//! are read, and a successful body longer than
//! [`max_response_body`](RetryPolicy::max_response_body) ends the call.
//!
//! # Logs
//!
//! Each attempt emits a `tracing` event: `debug` for the answer that ends the call, `info` for
//! each retry (what the attempt met, and the wait), `warn` when the budget runs out. Keys are
//! never logged.

mod answer;
mod backoff;
mod decide;
mod error;
#[cfg(feature = "grpc")]
#[cfg_attr(docsrs, doc(cfg(feature = "grpc")))]
pub mod grpc;
mod policy;
mod problem;
mod retry_after;
mod send;

pub use self::{
    answer::{Answer, ErrorAnswer},
    error::{ClientError, ErrorKind, GaveUp},
    policy::RetryPolicy,
    problem::ProblemDetails,
    retry_after::retry_after,
};
pub use idem_protocol::{
    DeriveError, IdempotencyKey, KeyForm, ProblemKind,
    key::{IDEMPOTENCY_KEY, MAX_KEY_LEN},
};
