//! What an answer says: its media type, whether it is marked a replay, when it asks to be
//! retried, and whether two answers are the same.

use std::time::{Duration, SystemTime};

use http::{HeaderMap, header};
use serde_json::Value;

use crate::wire::Answer;

/// The header an idem server (and Stripe) puts on a stored answer sent again.
pub(crate) const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";

/// The media type, lower-case, without parameters.
pub(crate) fn media_type(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    let media = value.split(';').next()?.trim().to_ascii_lowercase();
    (!media.is_empty()).then_some(media)
}

/// A header's value as text (lossy), empty when absent.
pub(crate) fn header_text(headers: &HeaderMap, name: &str) -> String {
    headers
        .get(name)
        .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned())
        .unwrap_or_default()
}

/// `Idempotent-Replayed`: `None` when absent, `Some(true)` for `true` in any case, and
/// `Some(false)` for any other value.
pub(crate) fn replay_header(headers: &HeaderMap) -> Option<bool> {
    let value = headers.get(IDEMPOTENT_REPLAYED)?;
    Some(
        value
            .to_str()
            .is_ok_and(|text| text.trim().eq_ignore_ascii_case("true")),
    )
}

/// Whether the answer says it is a replay.
pub(crate) fn is_replayed(answer: &Answer) -> bool {
    replay_header(&answer.headers) == Some(true)
}

/// How long `Retry-After` asks to wait (delta-seconds or an HTTP-date), if it is readable.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    idem_client::retry_after(headers, SystemTime::now())
}

/// How two answers' bodies compare.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Sameness {
    /// The same bytes.
    Bytes,
    /// The same JSON value, written differently.
    Json,
    /// Different; says where, as a JSON Pointer when both are JSON.
    Differs(String),
}

/// Compares two answers' bodies.
pub(crate) fn compare(first: &[u8], second: &[u8]) -> Sameness {
    if first == second {
        return Sameness::Bytes;
    }
    match (
        serde_json::from_slice::<Value>(first),
        serde_json::from_slice::<Value>(second),
    ) {
        (Ok(a), Ok(b)) => match first_difference(&a, &b, String::new()) {
            None => Sameness::Json,
            Some(difference) => Sameness::Differs(difference),
        },
        _ => Sameness::Differs("the bodies are not the same bytes".to_owned()),
    }
}

/// Where two JSON values first differ: `/id: "pay_1" vs "pay_2"`.
fn first_difference(a: &Value, b: &Value, path: String) -> Option<String> {
    match (a, b) {
        (Value::Object(a_members), Value::Object(b_members)) => {
            let mut names: Vec<&String> = a_members.keys().chain(b_members.keys()).collect();
            names.sort();
            names.dedup();
            names.into_iter().find_map(|name| {
                let at = format!("{path}/{}", name.replace('~', "~0").replace('/', "~1"));
                match (a_members.get(name), b_members.get(name)) {
                    (Some(a), Some(b)) => first_difference(a, b, at),
                    (Some(_), None) => Some(format!("{at}: only in the first")),
                    _ => Some(format!("{at}: only in the second")),
                }
            })
        }
        (Value::Array(a_items), Value::Array(b_items)) if a_items.len() == b_items.len() => a_items
            .iter()
            .zip(b_items)
            .enumerate()
            .find_map(|(index, (a, b))| first_difference(a, b, format!("{path}/{index}"))),
        _ if a == b => None,
        _ => Some(format!(
            "{}: {} vs {}",
            if path.is_empty() { "/" } else { &path },
            crate::show::body_text(a.to_string().as_bytes()),
            crate::show::body_text(b.to_string().as_bytes())
        )),
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    #[test]
    fn answers_compare_by_bytes_then_by_json() {
        assert_eq!(compare(b"{\"a\":1}", b"{\"a\":1}"), Sameness::Bytes);
        assert_eq!(
            compare(b"{\"a\":1,\"b\":2}", b"{\"b\":2, \"a\":1}"),
            Sameness::Json
        );
        assert_eq!(
            compare(br#"{"id":"p1","n":[1,2]}"#, br#"{"id":"p2","n":[1,2]}"#),
            Sameness::Differs(r#"/id: "p1" vs "p2""#.to_owned())
        );
        assert_eq!(
            compare(br#"{"n":[1,2]}"#, br#"{"n":[1,3]}"#),
            Sameness::Differs("/n/1: 2 vs 3".to_owned())
        );
        assert_eq!(
            compare(br#"{"a":1}"#, br#"{"a":1,"b":2}"#),
            Sameness::Differs("/b: only in the second".to_owned())
        );
        assert!(matches!(compare(b"x", b"y"), Sameness::Differs(_)));
    }

    #[test]
    fn headers_are_read_leniently() {
        let mut headers = HeaderMap::new();
        assert_eq!(replay_header(&headers), None);
        headers.insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("TRUE"));
        assert_eq!(replay_header(&headers), Some(true));
        headers.insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("yes"));
        assert_eq!(replay_header(&headers), Some(false));
        headers.insert(header::RETRY_AFTER, HeaderValue::from_static("2"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert(header::RETRY_AFTER, HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&headers), None);
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("Application/Problem+JSON; charset=utf-8"),
        );
        assert_eq!(
            media_type(&headers).as_deref(),
            Some("application/problem+json")
        );
    }
}
