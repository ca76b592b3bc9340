//! Capturing a handler's response: buffer the body up to the cap, keep the storable headers.

use axum::{body::Body, response::Response};
use bytes::{Bytes, BytesMut};
use futures_util::{StreamExt, stream};
use http::{HeaderMap, HeaderName, header};
use http_body_util::BodyExt;

use super::{IDEMPOTENT_REPLAYED, StoredResponse};
use crate::policy::Policy;

/// A captured response: what to store, and what to send to the first caller.
#[derive(Debug)]
pub(crate) struct Captured {
    /// The record to complete the key with.
    pub(crate) record: StoredResponse,
    /// The response for the caller that ran the operation: the original, unfiltered.
    pub(crate) response: Response,
}

/// Buffers `response`'s body. A body over `policy.max_stored_body` is not kept: the record
/// says so, and the caller's response streams the bytes read so far, then the rest.
pub(crate) async fn capture(response: Response, policy: &Policy) -> Result<Captured, axum::Error> {
    let (parts, mut body) = response.into_parts();
    // Most handlers answer with one frame; the vector is only allocated for a second one.
    let mut first: Option<Bytes> = None;
    let mut more: Vec<Bytes> = Vec::new();
    let mut len = 0usize;
    while let Some(frame) = body.frame().await {
        // Trailers are not stored: few handlers send them and a replay cannot promise them.
        let Ok(data) = frame?.into_data() else {
            continue;
        };
        len += data.len();
        match first {
            None => first = Some(data),
            Some(_) => more.push(data),
        }
        if len > policy.max_stored_body {
            let read = first.into_iter().chain(more).map(Ok::<_, axum::Error>);
            let streamed = Body::from_stream(stream::iter(read).chain(body.into_data_stream()));
            return Ok(Captured {
                record: StoredResponse::omitted(parts.status),
                response: Response::from_parts(parts, streamed),
            });
        }
    }
    let bytes = concat(first, more, len);
    let record = StoredResponse::new(
        parts.status,
        storable_headers(&parts.headers, policy),
        bytes.clone(),
    );
    Ok(Captured {
        record,
        response: Response::from_parts(parts, Body::from(bytes)),
    })
}

/// One `Bytes` from the frames, copying only when there were several.
fn concat(first: Option<Bytes>, more: Vec<Bytes>, len: usize) -> Bytes {
    let Some(first) = first else {
        return Bytes::new();
    };
    if more.is_empty() {
        return first;
    }
    let mut joined = BytesMut::with_capacity(len);
    joined.extend_from_slice(&first);
    more.iter()
        .for_each(|chunk| joined.extend_from_slice(chunk));
    joined.freeze()
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

/// The headers of a response that a replay may send again.
pub(crate) fn storable_headers(headers: &HeaderMap, policy: &Policy) -> HeaderMap {
    // Headers named by `Connection` are hop-by-hop too (RFC 9110 §7.6.1).
    let named_by_connection: Vec<String> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|name| name.trim().to_ascii_lowercase())
        .collect();
    let mut kept = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        let dropped = NEVER_STORED.contains(name)
            || *name == IDEMPOTENT_REPLAYED
            || (*name == header::SET_COOKIE && !policy.replay_set_cookie)
            || policy.exclude_headers.contains(name)
            || named_by_connection
                .iter()
                .any(|named| named == name.as_str());
        if !dropped {
            kept.append(name.clone(), value.clone());
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use axum::response::IntoResponse;
    use http::{HeaderValue, StatusCode};

    use super::*;

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
        let captured = capture(response, &Policy::new()).await.unwrap();
        let stored: Vec<_> = captured
            .record
            .headers()
            .keys()
            .map(HeaderName::as_str)
            .collect();
        assert_eq!(stored, ["content-type", "location", "x-request-id"]);
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
        let captured = capture(response, &policy).await.unwrap();
        assert_eq!(captured.record.headers()["set-cookie"], "a=1");
        assert!(!captured.record.headers().contains_key("x-request-id"));
    }

    #[tokio::test]
    async fn a_body_at_the_cap_is_kept_and_one_byte_over_is_streamed_whole() {
        let policy = Policy::new().max_stored_body(8);
        let at_cap = capture((StatusCode::OK, "12345678").into_response(), &policy)
            .await
            .unwrap();
        assert_eq!(at_cap.record.body().unwrap(), "12345678");

        let chunks = stream::iter(
            ["1234", "5678", "9", "abc"].map(|c| Ok::<_, axum::Error>(Bytes::from(c))),
        );
        let over = Response::new(Body::from_stream(chunks));
        let captured = capture(over, &policy).await.unwrap();
        assert_eq!(captured.record, StoredResponse::omitted(StatusCode::OK));
        let sent = axum::body::to_bytes(captured.response.into_body(), usize::MAX)
            .await
            .unwrap();
        assert_eq!(&sent[..], b"123456789abc");
    }

    #[tokio::test]
    async fn several_frames_are_joined() {
        let chunks = stream::iter(["ab", "cd"].map(|c| Ok::<_, axum::Error>(Bytes::from(c))));
        let captured = capture(Response::new(Body::from_stream(chunks)), &Policy::new())
            .await
            .unwrap();
        assert_eq!(captured.record.body().unwrap(), "abcd");
        let sent = axum::body::to_bytes(captured.response.into_body(), usize::MAX)
            .await
            .unwrap();
        assert_eq!(&sent[..], b"abcd");
    }
}
