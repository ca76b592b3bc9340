//! What is stored and what is replayed (see [docs/contract.md](https://github.com/idem-rs/idem/blob/main/docs/contract.md), *What is stored and what is replayed*).
//!
//! The runtime captures a handler's response (status, headers, body), keeps what is safe to
//! send again, and answers every retry with those bytes plus `Idempotent-Replayed: true`.
//!
//! ```
//! use http::{HeaderMap, StatusCode};
//! use idem::replay::StoredResponse;
//!
//! let stored = StoredResponse::new(StatusCode::CREATED, &HeaderMap::new(), b"{\"id\":1}")?;
//! let replay = stored.into_replay();
//! assert_eq!(replay.status(), StatusCode::CREATED);
//! assert_eq!(replay.headers()["idempotent-replayed"], "true");
//! # Ok::<(), idem::replay::EncodeError>(())
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

pub use self::codec::{DecodeError, EncodeError, ResponseHead};
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
/// use idem::NoStore;
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

/// A completed operation's response, as a store keeps it: its status, the headers a replay
/// sends and its body, in one allocation that clones share.
///
/// The allocation is the response's record, the encoding that the shared stores keep (see
/// [`decode`](Self::decode)): a store that keeps bytes sends [`as_bytes`](Self::as_bytes) as
/// they are, and the memory store keeps the record itself, so that a record it evicts is one
/// block freed. A replay reads the headers and the body out of it.
///
/// ```
/// use http::{HeaderMap, HeaderValue, StatusCode, header};
/// use idem::replay::StoredResponse;
///
/// let mut headers = HeaderMap::new();
/// headers.insert(header::LOCATION, HeaderValue::from_static("/payments/7"));
/// let stored = StoredResponse::new(StatusCode::CREATED, &headers, b"{\"id\":7}")?;
/// assert_eq!(stored.status(), StatusCode::CREATED);
/// assert_eq!(stored.headers(), headers);
/// assert_eq!(stored.body(), Some(&b"{\"id\":7}"[..]));
/// # Ok::<(), idem::replay::EncodeError>(())
/// ```
#[derive(Clone)]
pub struct StoredResponse {
    record: Arc<[u8]>,
    /// Where the body begins in the record; its length when the body was not kept.
    body_at: usize,
}

impl StoredResponse {
    /// A response to replay: status, the headers to send again, and the body.
    ///
    /// A response the record format cannot hold (more than 65,535 header values, say; see
    /// [`decode`](Self::decode)) is an [`EncodeError`]: it can be answered, never stored.
    ///
    /// ```
    /// use http::{HeaderMap, HeaderValue, StatusCode};
    /// use idem::replay::{EncodeError, StoredResponse};
    ///
    /// let mut headers = HeaderMap::new();
    /// for _ in 0..70_000 {
    ///     headers.append("x-trace", HeaderValue::from_static("1"));
    /// }
    /// assert_eq!(
    ///     StoredResponse::new(StatusCode::OK, &headers, b"").unwrap_err(),
    ///     EncodeError::TooManyHeaders { count: 70_000 }
    /// );
    /// ```
    pub fn new(status: StatusCode, headers: &HeaderMap, body: &[u8]) -> Result<Self, EncodeError> {
        Self::encode(status, || headers.iter(), Some(body))
    }

    /// The record of a response whose body was too large to keep: the operation ran and
    /// answered `status`, and retries are told that it cannot be replayed.
    pub fn omitted(status: StatusCode) -> Self {
        Self::encode(status, std::iter::empty, None).expect("a status alone is always a record")
    }

    /// Encodes a response whose headers are those `headers` iterates (already the ones to
    /// keep; it is called twice, to count the record's bytes and to write them).
    pub(crate) fn encode<'h, I>(
        status: StatusCode,
        headers: impl Fn() -> I,
        body: Option<&[u8]>,
    ) -> Result<Self, EncodeError>
    where
        I: Iterator<Item = (&'h HeaderName, &'h HeaderValue)>,
    {
        let record = codec::encode(codec::Parts {
            status,
            headers,
            body,
        })?;
        let body_at = record.len() - body.map_or(0, <[u8]>::len);
        Ok(Self { record, body_at })
    }

    /// The original status code.
    pub fn status(&self) -> StatusCode {
        codec::status(&self.record)
    }

    /// The headers a replay sends, read out of the record.
    pub fn headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        // A record that was made or decoded holds no more names than a map takes.
        let _ = codec::headers_into(&self.shared(), &mut headers);
        headers
    }

    /// The record as [`Bytes`] that share it: one allocation, whatever is sliced from it.
    fn shared(&self) -> Bytes {
        Bytes::from_owner(Record(Arc::clone(&self.record)))
    }

    /// The body, or `None` when it was too large to keep.
    pub fn body(&self) -> Option<&[u8]> {
        codec::keeps_body(&self.record).then(|| &self.record[self.body_at..])
    }

    /// The heap this record occupies, in bytes, for stores bounded by bytes: the record's one
    /// block with its shared counts and the allocator's header, and a sixteenth more for the
    /// allocator's rounding and slack, fitted to the resident memory a record really takes
    /// (bench/memory.sh measures it; see [docs/benchmarks.md](https://github.com/idem-rs/idem/blob/main/docs/benchmarks.md), *Memory*).
    ///
    /// ```
    /// use http::{HeaderMap, StatusCode};
    /// use idem::replay::StoredResponse;
    ///
    /// let small = StoredResponse::new(StatusCode::CREATED, &HeaderMap::new(), b"{}")?;
    /// let large = StoredResponse::new(StatusCode::CREATED, &HeaderMap::new(), &[b' '; 4096])?;
    /// assert!(large.weight() > small.weight() + 4094);
    /// # Ok::<(), idem::replay::EncodeError>(())
    /// ```
    pub fn weight(&self) -> usize {
        /// The `Arc`'s two counts, and the allocator's header of the block.
        const BLOCK: usize = 16 + 8;
        let len = self.record.len();
        BLOCK + len + len / 16
    }

    /// The record: what a store that keeps bytes keeps, and [`decode`](Self::decode) reads
    /// back. Its layout (version 1), integers big-endian:
    ///
    /// ```text
    /// u8  version = 1
    /// u8  body kind: 0 = kept, 1 = omitted (too large)
    /// u16 status
    /// u16 header count, then per header: u16 name length, name, u32 value length, value
    /// u64 body length, body            (kind 0 only)
    /// ```
    ///
    /// ```
    /// use http::{HeaderMap, StatusCode};
    /// use idem::replay::StoredResponse;
    ///
    /// let stored = StoredResponse::new(StatusCode::CREATED, &HeaderMap::new(), b"{}")?;
    /// assert_eq!(StoredResponse::decode(stored.as_bytes()), Ok(stored));
    /// # Ok::<(), idem::replay::EncodeError>(())
    /// ```
    pub fn as_bytes(&self) -> &[u8] {
        &self.record
    }

    /// Reads a record back from a store's bytes, checking every field (see
    /// [`as_bytes`](Self::as_bytes)).
    ///
    /// The format holds up to 65,535 header values (a repeated name counts once per value)
    /// and values up to 4 GiB − 1 each. Any input, however it was damaged, is a
    /// [`DecodeError`], never a panic; a record of a format version this build does not know
    /// is [`DecodeError::UnknownVersion`]; and a record that decodes is the very bytes
    /// [`new`](Self::new) writes for its status, headers and body.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let codec::Layout { body_at } = codec::validate(bytes)?;
        Ok(Self {
            record: Arc::from(bytes),
            body_at,
        })
    }

    /// The status of a record and whether its body was kept, read from its first four bytes
    /// (see [`as_bytes`](Self::as_bytes)) without decoding the rest: what a store answers of
    /// a completed record to a look-up ([`Store::look_up`](crate::store::Store::look_up)).
    ///
    /// ```
    /// use http::{HeaderMap, StatusCode};
    /// use idem::replay::StoredResponse;
    ///
    /// let stored = StoredResponse::new(StatusCode::CREATED, &HeaderMap::new(), b"{}")?;
    /// let head = StoredResponse::read_head(stored.as_bytes())?;
    /// assert_eq!((head.status, head.body_kept), (StatusCode::CREATED, true));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read_head(bytes: &[u8]) -> Result<ResponseHead, DecodeError> {
        codec::read_head(bytes)
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
        let status = self.status();
        let mut response = match self.body() {
            Some(_) => {
                // A map with room for what the replay adds, so that adding it does not grow
                // the map (reallocate and rehash).
                let capacity = codec::header_count(&self.record) + NAMES_A_REPLAY_ADDS;
                let mut headers = HeaderMap::try_with_capacity(capacity).unwrap_or_default();
                // The header values and the body are slices of the record, not copies.
                let record = self.shared();
                let _ = codec::headers_into(&record, &mut headers);
                let mut response = Response::new(Body::from(record.slice(self.body_at..)));
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

/// A record, as the owner of the [`Bytes`] a replay slices from it.
struct Record(Arc<[u8]>);

impl AsRef<[u8]> for Record {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// The names a replay's headers gain after the record's: the `Idempotent-Replayed` marker, and
/// the `Content-Length` that axum's router sets on every response on its way out (a record
/// never keeps one: see `capture::NEVER_STORED`). A map sized for the record's names plus these
/// takes them without growing.
pub(crate) const NAMES_A_REPLAY_ADDS: usize = 2;

impl PartialEq for StoredResponse {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.record, &other.record) || self.record == other.record
    }
}

impl fmt::Debug for StoredResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoredResponse")
            .field("status", &self.status())
            .field("headers", &self.headers())
            .field("body", &self.body().map(Bytes::copy_from_slice))
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
        let stored = StoredResponse::new(StatusCode::CREATED, &headers, b"{\"id\":7}").unwrap();

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
        let stored = StoredResponse::new(StatusCode::CREATED, &headers, b"").unwrap();
        // The memory store keeps the record and replays a shared copy of it.
        let kept = stored.clone();

        let replay = stored.into_replay();
        let mut expected = headers.clone();
        expected.insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
        assert_eq!(replay.headers(), &expected);
        let multi: Vec<_> = replay.headers().get_all("x-multi").iter().collect();
        assert_eq!(multi, ["a", "b"]);
        assert_eq!(kept.headers(), headers, "the kept record has no marker");
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
            let shared = StoredResponse::new(StatusCode::CREATED, &headers, b"").unwrap();
            // The memory store's record, shared, and one decoded from a shared store's bytes.
            let decoded = StoredResponse::decode(shared.as_bytes()).unwrap();
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
        let stored = StoredResponse::new(StatusCode::OK, &HeaderMap::new(), b"raw").unwrap();
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
