//! What is stored and what is replayed (see docs/contract.md, *What is stored and what is replayed*).
//!
//! The runtime captures a handler's response (status, headers, body), keeps what is safe to
//! send again, and answers every retry with those bytes plus `Idempotent-Replayed: true`.
//!
//! ```
//! use bytes::Bytes;
//! use http::{HeaderMap, StatusCode};
//! use idem_core::replay::StoredResponse;
//!
//! let stored = StoredResponse::new(StatusCode::CREATED, HeaderMap::new(), Bytes::from_static(b"{\"id\":1}"));
//! let replay = stored.into_replay();
//! assert_eq!(replay.status(), StatusCode::CREATED);
//! assert_eq!(replay.headers()["idempotent-replayed"], "true");
//! ```
//!
//! # Which headers are kept
//!
//! Never stored: hop-by-hop headers (`Connection` and the headers it names, `Keep-Alive`,
//! `Proxy-Connection`, `TE`, `Trailer`, `Transfer-Encoding`, `Upgrade`,
//! `Proxy-Authenticate`, `Proxy-Authorization`), `Date` (a replay is sent now),
//! `Content-Length` (recomputed from the body) and `Idempotent-Replayed`. `Set-Cookie` is not
//! stored unless the policy says [`replay_set_cookie`](crate::policy::Policy::replay_set_cookie),
//! and [`exclude_headers`](crate::policy::Policy::exclude_headers) adds names of your own. Response
//! trailers are not stored.
//!
//! # Responses too large to keep
//!
//! A body over the policy's [`max_stored_body`](crate::policy::Policy::max_stored_body) still reaches
//! the first caller in full, streamed. The record is completed without the body, so the
//! operation never runs again for its key, and a retry is answered 410 Problem Details
//! (`response-not-replayable`, with the original status in `originalStatus`).

pub(crate) mod capture;
pub(crate) mod codec;

use axum::{
    body::Body,
    response::{IntoResponse, IntoResponseParts, Response, ResponseParts},
};
use bytes::Bytes;
use std::{fmt, sync::Arc};

use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

pub use self::codec::{DecodeError, EncodeError};
use crate::problem::{Problem, ProblemKind};

/// The header that marks a replayed response (Stripe's name).
pub const IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// Marks a response as not the operation's result: the runtime releases the key instead of
/// storing the response, and a retry with the same key runs the handler again.
///
/// Return it from a handler with the response (it is an [`IntoResponseParts`]):
///
/// ```
/// use axum::{http::StatusCode, response::IntoResponse};
/// use idem_core::NoStore;
///
/// async fn reserve_seat() -> impl IntoResponse {
///     // The seat map is being rebuilt: ask the client to come back, same key and all.
///     (StatusCode::TOO_MANY_REQUESTS, NoStore, "try again shortly")
/// }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NoStore;

impl IntoResponseParts for NoStore {
    type Error = std::convert::Infallible;

    fn into_response_parts(self, mut parts: ResponseParts) -> Result<ResponseParts, Self::Error> {
        parts.extensions_mut().insert(self);
        Ok(parts)
    }
}

/// A completed operation's response, as a store keeps it.
///
/// Cheap to clone: clones share one record (the memory store keeps the very record the
/// runtime captured, and a replay copies only what it sends).
#[derive(Clone)]
pub struct StoredResponse(Arc<Record>);

#[derive(Clone, Debug, PartialEq)]
struct Record {
    status: StatusCode,
    headers: HeaderMap,
    body: Option<Bytes>,
}

impl StoredResponse {
    /// A response to replay: status, the headers to send again, and the body.
    pub fn new(status: StatusCode, headers: HeaderMap, body: Bytes) -> Self {
        Self::from_parts(status, headers, Some(body))
    }

    /// The record of a response whose body was too large to keep: the operation ran and
    /// answered `status`, and retries are told that it cannot be replayed.
    pub fn omitted(status: StatusCode) -> Self {
        Self::from_parts(status, HeaderMap::new(), None)
    }

    /// An omitted record that keeps headers: what a decoded record may hold.
    pub(crate) fn omitted_with(status: StatusCode, headers: HeaderMap) -> Self {
        Self::from_parts(status, headers, None)
    }

    fn from_parts(status: StatusCode, headers: HeaderMap, body: Option<Bytes>) -> Self {
        Self(Arc::new(Record {
            status,
            headers,
            body,
        }))
    }

    /// The original status code.
    pub fn status(&self) -> StatusCode {
        self.0.status
    }

    /// The headers a replay sends.
    pub fn headers(&self) -> &HeaderMap {
        &self.0.headers
    }

    /// The body, or `None` when it was too large to keep.
    pub fn body(&self) -> Option<&Bytes> {
        self.0.body.as_ref()
    }

    /// An estimate of the heap this record occupies, in bytes, for stores bounded by bytes:
    /// the shared record itself, its header table (sized by its capacity, not its length),
    /// each header's name and value with their allocations, and the body. The constants were
    /// fitted to what a record really holds (bench/memory.sh measures it; see
    /// docs/benchmarks.md, *Memory*): the estimate errs on the high side, by up to a fifth
    /// for responses with many headers.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use http::{HeaderMap, StatusCode};
    /// use idem_core::replay::StoredResponse;
    ///
    /// let small = StoredResponse::new(StatusCode::CREATED, HeaderMap::new(), Bytes::from_static(b"{}"));
    /// let large = StoredResponse::new(StatusCode::CREATED, HeaderMap::new(), Bytes::from(vec![b' '; 4096]));
    /// assert!(large.weight() > small.weight() + 4096);
    /// ```
    pub fn weight(&self) -> usize {
        /// The `Arc`'d record with its status and header table, as allocated.
        const RECORD: usize = 192;
        /// One slot of the header table (a name, a value and the table's links).
        const SLOT: usize = 180;
        /// A header's own allocations besides its bytes (its name and value buffers).
        const HEADER: usize = 96;
        let headers: usize = self
            .headers()
            .iter()
            .map(|(name, value)| name.as_str().len() + value.len() + HEADER)
            .sum();
        let body = self.body().map_or(0, |body| body.len() + body.len() / 16);
        RECORD + self.headers().capacity() * SLOT + headers + body
    }

    /// Encodes the record for a store that keeps bytes: a format version byte, then the
    /// status, the headers and the body (see [`decode`](Self::decode)).
    ///
    /// The format holds up to 65,535 header values (a repeated name counts once per value)
    /// and values up to 4 GiB − 1 each; a response beyond that is an [`EncodeError`], and a
    /// store that meets one writes nothing. Whatever this encodes, [`decode`](Self::decode)
    /// reads back.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use http::{HeaderMap, HeaderValue, StatusCode};
    /// use idem_core::replay::{EncodeError, StoredResponse};
    ///
    /// let stored = StoredResponse::new(StatusCode::CREATED, HeaderMap::new(), Bytes::from_static(b"{}"));
    /// let bytes = stored.encode()?;
    /// assert_eq!(StoredResponse::decode(&bytes), Ok(stored));
    ///
    /// let mut headers = HeaderMap::new();
    /// for _ in 0..70_000 {
    ///     headers.append("x-trace", HeaderValue::from_static("1"));
    /// }
    /// let crowded = StoredResponse::new(StatusCode::OK, headers, Bytes::new());
    /// assert_eq!(crowded.encode(), Err(EncodeError::TooManyHeaders { count: 70_000 }));
    /// # Ok::<(), EncodeError>(())
    /// ```
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        codec::encode(self)
    }

    /// The length of [`encode`](Self::encode)'s output, counted without writing it: the size
    /// a store that keeps bytes holds.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use http::{HeaderMap, StatusCode};
    /// use idem_core::replay::StoredResponse;
    ///
    /// let stored = StoredResponse::new(StatusCode::CREATED, HeaderMap::new(), Bytes::from_static(b"{}"));
    /// assert_eq!(stored.encoded_len(), Ok(stored.encode()?.len()));
    /// # Ok::<(), idem_core::replay::EncodeError>(())
    /// ```
    pub fn encoded_len(&self) -> Result<usize, EncodeError> {
        codec::encoded_len(self)
    }

    /// Whether [`encode`](Self::encode) would take this response, found without allocating:
    /// the runtime asks before a response reaches a store.
    pub(crate) fn check_encodable(&self) -> Result<(), EncodeError> {
        codec::check(self)
    }

    /// Decodes [`encode`](Self::encode)'s output.
    ///
    /// Any input, however it was damaged, is a [`DecodeError`], never a panic; a record of a
    /// format version this build does not know is [`DecodeError::UnknownVersion`].
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        codec::decode(bytes)
    }

    /// The answer to a retry: the stored response marked `Idempotent-Replayed: true`, or a
    /// 410 Problem Details when the body was too large to keep.
    pub fn into_replay(self) -> Response {
        self.into_replay_with(Problem::new)
    }

    /// [`into_replay`](Self::into_replay), with the 410 made by `problem` (the runtime's, whose
    /// type URIs follow its configuration).
    pub(crate) fn into_replay_with(
        self,
        problem: impl FnOnce(ProblemKind, String) -> Problem,
    ) -> Response {
        // A record of its own (decoded from a shared store's bytes) is moved; one the store
        // shares (the memory store's) is copied into a map with room for what the replay adds,
        // where a copy of the map would be full and grow (reallocate and rehash) to take it.
        let (status, headers, body) = match Arc::try_unwrap(self.0) {
            Ok(Record {
                status,
                headers,
                body,
            }) => (status, headers, body),
            Err(shared) => (
                shared.status,
                copy_with_room_for_replay(&shared.headers),
                shared.body.clone(),
            ),
        };
        let mut response = match body {
            Some(body) => {
                let mut response = Response::new(Body::from(body));
                *response.status_mut() = status;
                *response.headers_mut() = headers;
                response
            }
            None => problem(
                ProblemKind::ResponseNotReplayable,
                format!(
                    "the request with this Idempotency-Key was processed and answered {status}, \
                     but its response was too large to keep for replay; it will not run again"
                ),
            )
            .with_original_status(status)
            .into_response(),
        };
        response
            .headers_mut()
            .insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
        response
    }
}

/// The names a replay's headers gain after the record's: the `Idempotent-Replayed` marker, and
/// the `Content-Length` that axum's router sets on every response on its way out (a record
/// never keeps one: see `capture::NEVER_STORED`). A map sized for the record's names plus these
/// takes them without growing.
pub(crate) const NAMES_A_REPLAY_ADDS: usize = 2;

/// A copy of `headers`, every value in its order, with room for the names a replay adds.
fn copy_with_room_for_replay(headers: &HeaderMap) -> HeaderMap {
    let mut copy = HeaderMap::with_capacity(headers.keys_len() + NAMES_A_REPLAY_ADDS);
    for (name, value) in headers {
        copy.append(name.clone(), value.clone());
    }
    copy
}

impl PartialEq for StoredResponse {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0 == other.0
    }
}

impl fmt::Debug for StoredResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoredResponse")
            .field("status", &self.0.status)
            .field("headers", &self.0.headers)
            .field("body", &self.0.body)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use http::header;

    use super::*;

    #[tokio::test]
    async fn replay_sends_the_same_status_headers_and_bytes() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.append("x-multi", HeaderValue::from_static("a"));
        headers.append("x-multi", HeaderValue::from_static("b"));
        let stored = StoredResponse::new(
            StatusCode::CREATED,
            headers,
            Bytes::from_static(b"{\"id\":7}"),
        );

        let replay = stored.into_replay();
        assert_eq!(replay.status(), StatusCode::CREATED);
        assert_eq!(replay.headers()[header::CONTENT_TYPE], "application/json");
        let multi: Vec<_> = replay.headers().get_all("x-multi").iter().collect();
        assert_eq!(multi, ["a", "b"]);
        assert_eq!(replay.headers()[IDEMPOTENT_REPLAYED], "true");
        let body = axum::body::to_bytes(replay.into_body(), usize::MAX)
            .await
            .unwrap();
        assert_eq!(&body[..], b"{\"id\":7}");
    }

    #[test]
    fn a_shared_record_replays_every_header_in_order_and_stays_as_it_was() {
        let mut headers = HeaderMap::new();
        headers.append("x-multi", HeaderValue::from_static("a"));
        headers.insert(header::LOCATION, HeaderValue::from_static("/payments/7"));
        headers.append("x-multi", HeaderValue::from_static("b"));
        let stored = StoredResponse::new(StatusCode::CREATED, headers.clone(), Bytes::new());
        // The memory store keeps the record and replays a shared copy of it.
        let kept = stored.clone();

        let replay = stored.into_replay();
        let mut expected = headers.clone();
        expected.insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
        assert_eq!(replay.headers(), &expected);
        let multi: Vec<_> = replay.headers().get_all("x-multi").iter().collect();
        assert_eq!(multi, ["a", "b"]);
        assert_eq!(kept.headers(), &headers, "the kept record has no marker");
    }

    #[test]
    fn a_replay_takes_the_content_length_the_router_adds_without_growing() {
        // Two to six names: sized for them and the marker alone, some of these maps are full
        // when Content-Length comes (two names and the marker fill one exactly).
        for names in 2..=6 {
            let mut headers = HeaderMap::new();
            for index in 0..names {
                headers.insert(
                    HeaderName::try_from(format!("x-header-{index}")).unwrap(),
                    HeaderValue::from_static("v"),
                );
            }
            let shared = StoredResponse::new(StatusCode::CREATED, headers, Bytes::new());
            // The memory store's record, shared, and one decoded from a shared store's bytes.
            let decoded = StoredResponse::decode(&shared.encode().unwrap()).unwrap();
            for (kind, record) in [("shared", shared.clone()), ("decoded", decoded)] {
                let mut replay = record.into_replay();
                let room = replay.headers().capacity();
                replay
                    .headers_mut()
                    .insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
                assert_eq!(
                    replay.headers().capacity(),
                    room,
                    "{kind} record of {names} names: the map grew to take Content-Length"
                );
            }
        }
    }

    #[tokio::test]
    async fn replay_without_content_type_sends_none() {
        let stored =
            StoredResponse::new(StatusCode::OK, HeaderMap::new(), Bytes::from_static(b"raw"));
        let replay = stored.into_replay();
        assert_eq!(replay.headers().get(header::CONTENT_TYPE), None);
    }

    #[tokio::test]
    async fn omitted_body_replays_as_410_problem() {
        let replay = StoredResponse::omitted(StatusCode::CREATED).into_replay();
        assert_eq!(replay.status(), StatusCode::GONE);
        assert_eq!(
            replay.headers()[header::CONTENT_TYPE],
            "application/problem+json"
        );
        assert_eq!(replay.headers()[IDEMPOTENT_REPLAYED], "true");
        let body = axum::body::to_bytes(replay.into_body(), usize::MAX)
            .await
            .unwrap();
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(json["originalStatus"], 201);
        assert_eq!(json["status"], 410);
    }
}
