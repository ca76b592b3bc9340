//! What the doors that are not HTTP share: a call from outside HTTP (a broker's message, a
//! gRPC call) presented to the flow as the request it becomes, and the flow's answer read back.
//!
//! The message door and the gRPC door each turn their call into a `POST` to a route of their
//! own, with the call's key as the `Idempotency-Key` header ([`request`], [`key_header`]),
//! take it through the one flow, and read what the flow decided from its answer: the kind of
//! a Problem it answered instead of the handler ([`problem_kind`]), or the handler's own
//! response. Nothing here knows a broker or gRPC.

use axum::{body::Body, extract::Request, response::Response};
use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Uri};

use crate::problem::ProblemKind;

/// The header the flow reads the key from.
pub(crate) const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// A call to `uri` as the flow's request: a `POST` with `headers`, `body`, and `key` as its
/// `Idempotency-Key` (`None`: the call has no key, and any such header it carried is dropped,
/// so that only the door decides where a key comes from).
pub(crate) fn request(
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
    key: Option<HeaderValue>,
) -> Request {
    let mut request = Request::new(Body::from(body));
    *request.method_mut() = Method::POST;
    *request.uri_mut() = uri;
    *request.headers_mut() = headers;
    let headers = request.headers_mut();
    headers.remove(IDEMPOTENCY_KEY);
    if let Some(key) = key {
        headers.insert(IDEMPOTENCY_KEY, key);
    }
    request
}

/// `key` as the value of an `Idempotency-Key` header: an RFC 9651 sf-string, which both key
/// syntaxes accept and in which a comma is part of the key. `None` when the key has a
/// character a header value cannot carry; the flow refuses what the key rules refuse
/// (visible ASCII, 1 to 255 characters).
pub(crate) fn key_header(key: &str) -> Option<HeaderValue> {
    let mut quoted = String::with_capacity(key.len() + 2);
    quoted.push('"');
    for character in key.chars() {
        if matches!(character, '"' | '\\') {
            quoted.push('\\');
        }
        quoted.push(character);
    }
    quoted.push('"');
    HeaderValue::from_str(&quoted).ok()
}

/// The kind of the Problem the flow answered instead of the handler, if the answer is one.
/// A stored Problem that is replayed is the handler's answer, not the flow's, and has none.
pub(crate) fn problem_kind(response: &Response) -> Option<ProblemKind> {
    response.extensions().get::<ProblemKind>().copied()
}

#[cfg(test)]
mod tests {
    use axum::response::IntoResponse;
    use idem_protocol::key::{IdempotencyKey, KeySyntax};

    use super::*;
    use crate::problem::Problem;

    #[test]
    fn the_header_value_is_the_same_key_in_both_syntaxes() {
        for key in ["m-1", "a,b", r#"say"hi""#, r"back\slash"] {
            let value = key_header(key).unwrap();
            for syntax in [KeySyntax::Lenient, KeySyntax::Strict] {
                let parsed = IdempotencyKey::parse(&value, syntax).unwrap();
                assert_eq!(parsed.as_str(), key);
            }
        }
        assert!(key_header("caf\u{e9}\n").is_none());
    }

    #[test]
    fn the_request_carries_only_the_doors_key() {
        let mut headers = HeaderMap::new();
        headers.insert(IDEMPOTENCY_KEY, HeaderValue::from_static("smuggled"));
        let uri = Uri::from_static("/route");
        let without = request(uri.clone(), headers.clone(), Bytes::new(), None);
        assert_eq!(without.method(), Method::POST);
        assert!(!without.headers().contains_key(IDEMPOTENCY_KEY));
        let with = request(uri, headers, Bytes::new(), key_header("k"));
        assert_eq!(with.headers()[IDEMPOTENCY_KEY], "\"k\"");
    }

    #[test]
    fn a_problem_says_its_kind_and_a_plain_answer_none() {
        let problem = Problem::new(ProblemKind::KeyReused, "detail").into_response();
        assert_eq!(problem_kind(&problem), Some(ProblemKind::KeyReused));
        assert_eq!(problem_kind(&().into_response()), None);
    }
}
