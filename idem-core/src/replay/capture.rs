//! Capturing a handler's response: buffer the body up to the cap, keep the storable headers.
//!
//! Capture never makes the first caller wait for a body that is still coming: what is there is
//! read at once, and a body that is not all there yet (a stream, server-sent events) comes back
//! [`Unfinished`], for the runtime to stream to the client while it captures the rest.

use axum::{body::Body, response::Response};
use bytes::{Bytes, BytesMut};
use futures_util::{FutureExt, StreamExt, stream};
use http::{HeaderMap, HeaderName, HeaderValue, header};
use http_body_util::BodyExt;

use super::{EncodeError, IDEMPOTENT_REPLAYED, StoredResponse};
use crate::policy::Policy;

/// A captured response: what to store, and what to send to the first caller.
#[derive(Debug)]
pub(crate) struct Captured {
    /// The record to complete the key with, or why no store could keep it (more header values
    /// than a record holds, say).
    pub(crate) record: Result<StoredResponse, EncodeError>,
    /// The response for the caller that ran the operation: the original, unfiltered.
    pub(crate) response: Response,
}

/// A response whose body was not all there when it was captured (a stream, server-sent
/// events): the frames read so far, and the rest still to come.
#[derive(Debug)]
pub(crate) struct Unfinished {
    pub(crate) parts: http::response::Parts,
    pub(crate) read: BodyBuffer,
    pub(crate) rest: Body,
}

/// How far capturing a response got without waiting.
#[derive(Debug)]
pub(crate) enum Capture {
    /// The whole body was there (or more than the cap of it): done.
    Done(Captured),
    /// The body is still coming: the caller decides whether to wait for it or stream it.
    Unfinished(Unfinished),
}

/// The data frames of a body read so far, and their length.
#[derive(Debug, Default)]
pub(crate) struct BodyBuffer {
    // Most handlers answer with one frame; the vector is only allocated for a second one.
    first: Option<Bytes>,
    more: Vec<Bytes>,
    len: usize,
}

impl BodyBuffer {
    /// Adds a data frame.
    pub(crate) fn push(&mut self, data: Bytes) {
        self.len += data.len();
        match self.first {
            None => self.first = Some(data),
            Some(_) => self.more.push(data),
        }
    }

    /// The bytes read so far.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The frames, in order.
    pub(crate) fn into_frames(self) -> impl Iterator<Item = Bytes> {
        self.first.into_iter().chain(self.more)
    }

    /// One `Bytes` of everything read, copying only when there were several frames.
    pub(crate) fn into_bytes(self) -> Bytes {
        let Some(first) = self.first else {
            return Bytes::new();
        };
        if self.more.is_empty() {
            return first;
        }
        let mut joined = BytesMut::with_capacity(self.len);
        joined.extend_from_slice(&first);
        self.more
            .iter()
            .for_each(|chunk| joined.extend_from_slice(chunk));
        joined.freeze()
    }
}

/// Reads `response`'s body as far as it is there without waiting.
///
/// A body that ends (the usual handler's single frame) is captured whole. A body over
/// `policy.max_stored_body` is not kept: the record says so, and the caller's response
/// streams the bytes read so far, then the rest. A body that is not all there yet is
/// [`Unfinished`]: [`finish`] waits for it, or the runtime streams it to the client while it
/// captures it.
pub(crate) fn capture(response: Response, policy: &Policy) -> Result<Capture, axum::Error> {
    let (parts, body) = response.into_parts();
    let mut unfinished = Unfinished {
        parts,
        read: BodyBuffer::default(),
        rest: body,
    };
    loop {
        let Some(frame) = unfinished.rest.frame().now_or_never() else {
            return Ok(Capture::Unfinished(unfinished));
        };
        match read(unfinished, frame, policy)? {
            Read::More(more) => unfinished = more,
            Read::Done(done) => return Ok(Capture::Done(done)),
        }
    }
}

/// Waits for the rest of an [`Unfinished`] body, capturing it as [`capture`] does.
pub(crate) async fn finish(
    mut unfinished: Unfinished,
    policy: &Policy,
) -> Result<Captured, axum::Error> {
    loop {
        let frame = unfinished.rest.frame().await;
        match read(unfinished, frame, policy)? {
            Read::More(more) => unfinished = more,
            Read::Done(done) => return Ok(done),
        }
    }
}

enum Read {
    More(Unfinished),
    Done(Captured),
}

/// Takes one frame (or the end of the body) into the capture.
fn read(
    mut unfinished: Unfinished,
    frame: Option<Result<http_body::Frame<Bytes>, axum::Error>>,
    policy: &Policy,
) -> Result<Read, axum::Error> {
    let Some(frame) = frame else {
        let Unfinished { parts, read, .. } = unfinished;
        let bytes = read.into_bytes();
        let record = StoredResponse::encode(
            parts.status,
            || storable_headers(&parts.headers, policy),
            Some(&bytes),
        );
        return Ok(Read::Done(Captured {
            record,
            response: Response::from_parts(parts, Body::from(bytes)),
        }));
    };
    // Trailers are not stored: few handlers send them and a replay cannot promise them.
    if let Ok(data) = frame?.into_data() {
        unfinished.read.push(data);
    }
    if unfinished.read.len() <= policy.max_stored_body {
        return Ok(Read::More(unfinished));
    }
    let Unfinished { parts, read, rest } = unfinished;
    let read = read.into_frames().map(Ok::<_, axum::Error>);
    let streamed = Body::from_stream(stream::iter(read).chain(rest.into_data_stream()));
    Ok(Read::Done(Captured {
        record: Ok(StoredResponse::omitted(parts.status)),
        response: Response::from_parts(parts, streamed),
    }))
}

/// Headers that describe one connection or one moment, never the response itself.
const NEVER_STORED: [HeaderName; 11] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::DATE,
    header::CONTENT_LENGTH,
];

/// The headers of a response that a replay may send again, in the response's order.
pub(crate) fn storable_headers<'h>(
    headers: &'h HeaderMap,
    policy: &'h Policy,
) -> impl Iterator<Item = (&'h HeaderName, &'h HeaderValue)> + 'h {
    let connection = headers.contains_key(header::CONNECTION);
    headers.iter().filter(move |(name, _)| {
        is_storable(name, policy) && !(connection && named_by_connection(headers, name))
    })
}

/// Whether a header of this name may be replayed, as far as its name and the policy tell.
fn is_storable(name: &HeaderName, policy: &Policy) -> bool {
    !(NEVER_STORED.contains(name)
        || *name == IDEMPOTENT_REPLAYED
        || (*name == header::SET_COOKIE && !policy.replay_set_cookie)
        || policy.exclude_headers.contains(name))
}

/// Headers named by `Connection` are hop-by-hop too (RFC 9110 §7.6.1).
fn named_by_connection(headers: &HeaderMap, name: &HeaderName) -> bool {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|named| named.trim().eq_ignore_ascii_case(name.as_str()))
}

#[cfg(test)]
mod tests {
    use axum::response::IntoResponse;
    use http::StatusCode;

    use super::*;

    /// Captures `response` whole, waiting for a body that is still coming.
    async fn captured(response: Response, policy: &Policy) -> Captured {
        match capture(response, policy).unwrap() {
            Capture::Done(captured) => captured,
            Capture::Unfinished(unfinished) => finish(unfinished, policy).await.unwrap(),
        }
    }

    fn response_with_headers(pairs: &[(&'static str, &'static str)]) -> Response {
        let mut response = (StatusCode::CREATED, "body").into_response();
        for (name, value) in pairs {
            response
                .headers_mut()
                .append(*name, HeaderValue::from_static(value));
        }
        response
    }

    #[tokio::test]
    async fn keeps_the_response_headers_and_drops_the_hop_by_hop_ones() {
        let response = response_with_headers(&[
            ("connection", "x-hop, keep-alive"),
            ("x-hop", "1"),
            ("keep-alive", "timeout=5"),
            ("date", "Sun, 29 Nov 2026 10:00:00 GMT"),
            ("set-cookie", "session=secret"),
            ("location", "/payments/1"),
            ("x-request-id", "r1"),
            ("idempotent-replayed", "true"),
        ]);
        let captured = captured(response, &Policy::new()).await;
        let stored = captured.record.unwrap().headers();
        let names: Vec<_> = stored.keys().map(HeaderName::as_str).collect();
        assert_eq!(names, ["content-type", "location", "x-request-id"]);
        // The first caller still gets every header.
        assert_eq!(captured.response.headers()["set-cookie"], "session=secret");
    }

    #[tokio::test]
    async fn set_cookie_and_extra_exclusions_follow_the_policy() {
        static EXCLUDED: [HeaderName; 1] = [HeaderName::from_static("x-request-id")];
        let policy = Policy::new()
            .replay_set_cookie(true)
            .exclude_headers(&EXCLUDED);
        let response = response_with_headers(&[("set-cookie", "a=1"), ("x-request-id", "r1")]);
        let stored = captured(response, &policy).await.record.unwrap().headers();
        assert_eq!(stored["set-cookie"], "a=1");
        assert!(!stored.contains_key("x-request-id"));
    }

    #[tokio::test]
    async fn a_body_at_the_cap_is_kept_and_one_byte_over_is_streamed_whole() {
        let policy = Policy::new().max_stored_body(8);
        let at_cap = captured((StatusCode::OK, "12345678").into_response(), &policy).await;
        assert_eq!(at_cap.record.unwrap().body(), Some(&b"12345678"[..]));

        let chunks = stream::iter(
            ["1234", "5678", "9", "abc"].map(|c| Ok::<_, axum::Error>(Bytes::from(c))),
        );
        let over = Response::new(Body::from_stream(chunks));
        let captured = captured(over, &policy).await;
        assert_eq!(captured.record, Ok(StoredResponse::omitted(StatusCode::OK)));
        let sent = axum::body::to_bytes(captured.response.into_body(), usize::MAX)
            .await
            .unwrap();
        assert_eq!(&sent[..], b"123456789abc");
    }

    #[tokio::test]
    async fn several_frames_are_joined() {
        let chunks = stream::iter(["ab", "cd"].map(|c| Ok::<_, axum::Error>(Bytes::from(c))));
        let captured = captured(Response::new(Body::from_stream(chunks)), &Policy::new()).await;
        assert_eq!(captured.record.as_ref().unwrap().body(), Some(&b"abcd"[..]));
        let sent = axum::body::to_bytes(captured.response.into_body(), usize::MAX)
            .await
            .unwrap();
        assert_eq!(&sent[..], b"abcd");
    }

    #[tokio::test]
    async fn a_body_that_is_still_coming_is_left_unfinished_with_what_was_read() {
        let chunks = stream::iter(["ab"].map(|c| Ok::<_, axum::Error>(Bytes::from(c)))).chain(
            stream::once(async {
                tokio::task::yield_now().await;
                Ok(Bytes::from("cd"))
            }),
        );
        let response = Response::new(Body::from_stream(chunks));
        let Capture::Unfinished(unfinished) = capture(response, &Policy::new()).unwrap() else {
            panic!("the second frame was not there yet");
        };
        assert_eq!(unfinished.read.len(), 2);
        let captured = finish(unfinished, &Policy::new()).await.unwrap();
        assert_eq!(captured.record.unwrap().body(), Some(&b"abcd"[..]));
    }
}
