//! The request-facing side of idempotency: what a replay checks ([`PureBody`]), and, on a store
//! with transactions, the request's database transaction ([`Tx`]).
//!
//! # What a replay checks
//!
//! Which of a handler's extractors run again before a stored response is answered.
//!
//! A stored response is handed out only to a request that passed every check that guarded
//! the first execution. Under `#[idempotent]`:
//!
//! - every extractor that reads only the request's parts (authentication, `Path`, `Query`,
//!   `TypedHeader`, `State`) runs before the key is claimed, on every request: a first
//!   request and every replay;
//! - the body extractor, the last argument, is a **guard** unless its type implements
//!   [`PureBody`]: a guard runs before the claim too, on the body the runtime has already
//!   buffered, on every request. Its rejection is answered as it is, and nothing is claimed
//!   or stored;
//! - a [`PureBody`] extractor (`Json`, `Form`, `Bytes`, `String`...) runs after the claim, and
//!   only when the handler runs: a replay skips it, since its verdict depends on nothing but
//!   the body, which the fingerprint already compared with the first request's. Its rejection
//!   (bad JSON, a failed validation) releases the key, so the client can fix the body and
//!   retry with the same key.
//!
//! Checks written inside the handler's body cannot be run again: a replay does not run the
//! handler. Put every check that decides whether a request may have the result (who sends
//! it, whether it is signed) in an extractor.
//!
//! ## A signed webhook
//!
//! A body signature is a check over the raw body, so it lives in a body extractor. Written
//! the natural way, as a `FromRequest` of its own, it is a guard with no annotation: a
//! redelivery without the signature, or with a wrong one, gets the extractor's 401, not the
//! stored result.
//!
//! ```
//! use axum::{
//!     Json,
//!     body::Bytes,
//!     extract::{FromRequest, Request},
//!     http::StatusCode,
//! };
//! use idem::idempotent;
//!
//! /// An event whose `Signature` header is the sender's signature of the body.
//! struct SignedEvent(serde_json::Value);
//!
//! impl<S: Send + Sync> FromRequest<S> for SignedEvent {
//!     type Rejection = StatusCode;
//!
//!     async fn from_request(request: Request, state: &S) -> Result<Self, StatusCode> {
//!         let signature = request.headers().get("signature").cloned();
//!         let body = Bytes::from_request(request, state)
//!             .await
//!             .map_err(|_| StatusCode::BAD_REQUEST)?;
//!         // A real check computes an HMAC of `body` and compares it in constant time.
//!         if signature.as_ref().and_then(|value| value.to_str().ok()) != Some("trusted") {
//!             return Err(StatusCode::UNAUTHORIZED);
//!         }
//!         serde_json::from_slice(&body).map(Self).map_err(|_| StatusCode::BAD_REQUEST)
//!     }
//! }
//!
//! // `SignedEvent` does not implement `PureBody`: it runs before every replay.
//! #[idempotent(scope = "global", fingerprint = "raw")]
//! async fn webhook(SignedEvent(event): SignedEvent) -> Json<serde_json::Value> {
//!     Json(event)
//! }
//! # let _: axum::Router = axum::Router::new().route("/webhook", axum::routing::post(webhook));
//! ```
//!
//! Verifying the signature inside the handler instead (`headers: HeaderMap, body: Bytes`, then
//! a check in the body) would not protect the stored result: `Bytes` is pure, the handler
//! does not run on a replay, and nothing would check the retry's signature.
//!
//! ## Your own pure extractor
//!
//! An extractor that only parses and validates the body, as `Json` does, can implement
//! [`PureBody`] so that replays skip it:
//!
//! ```
//! use axum::{body::Bytes, extract::{FromRequest, Request}, http::StatusCode};
//!
//! /// A body of comma-separated numbers.
//! struct Numbers(Vec<u64>);
//!
//! impl<S: Send + Sync> FromRequest<S> for Numbers {
//!     type Rejection = StatusCode;
//!
//!     async fn from_request(request: Request, state: &S) -> Result<Self, StatusCode> {
//!         let body = String::from_request(request, state)
//!             .await
//!             .map_err(|_| StatusCode::BAD_REQUEST)?;
//!         body.split(',')
//!             .map(|number| number.trim().parse().map_err(|_| StatusCode::BAD_REQUEST))
//!             .collect::<Result<_, _>>()
//!             .map(Self)
//!     }
//! }
//!
//! // Its verdict depends on the body alone.
//! impl idem::PureBody for Numbers {}
//! ```

mod tx;

use axum::{
    Form, Json,
    body::{Body, Bytes},
    extract::RawForm,
};
use bytes::BytesMut;

pub use self::tx::{Tx, TxError, TxErrorKind};

/// A body extractor that only parses the request body: `#[idempotent]` skips it on a replay.
///
/// Implement it only for an extractor whose outcome depends on nothing but the body bytes and
/// the `Content-Type` header, and whose rejections only say that the body is malformed. An
/// extractor that checks a signature, a token, a permission, or reads anything else of the
/// request (another header, the state, the clock) must not implement it: it is then a guard,
/// and runs before every replay.
///
/// The fingerprint pins the body, as its bytes or, under `fingerprint = "json"`, as its
/// canonical JSON, and not its `Content-Type`. So a retry that differs only in what a pure
/// extractor would refuse for its form (a `text/plain` type for the same bytes, `1.0` where
/// the first request sent `1`) still gets the replay. Neither can carry a credential, which
/// is what makes skipping a pure extractor safe.
///
/// Implemented for axum's body extractors that are pure: [`Json`], [`Form`] (which reads the
/// query string of a `GET`; the fingerprint covers it), [`RawForm`], [`Bytes`], [`BytesMut`],
/// [`String`] and [`Body`], and for `Option<T>` and `Result<T, E>` of a pure `T`.
///
/// ```
/// use idem::PureBody;
///
/// struct Csv(Vec<String>);
///
/// // Csv's `FromRequest` splits the body into lines and nothing else.
/// impl PureBody for Csv {}
/// ```
pub trait PureBody {}

impl<T> PureBody for Json<T> {}
impl<T> PureBody for Form<T> {}
impl PureBody for RawForm {}
impl PureBody for Bytes {}
impl PureBody for BytesMut {}
impl PureBody for String {}
impl PureBody for Body {}
impl<T: PureBody> PureBody for Option<T> {}
impl<T: PureBody, E> PureBody for Result<T, E> {}
