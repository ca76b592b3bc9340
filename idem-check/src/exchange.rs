//! One request and what came back: the types every other part of the check reads, and what
//! an answer's headers say (its media type, whether it is marked a replay, when it asks to be
//! retried). A leaf: it uses no other module of the crate, so that sending (`wire`), showing
//! (`show`) and comparing (`compare`) all build on it, one direction.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use reqwest::Url;
use tokio::time::Instant;

/// The header an idem server (and Stripe) puts on a stored answer sent again.
pub(crate) const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";

/// Who sends a request: the endpoint's credentials, or the second principal's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Principal {
    First,
    Second,
}

/// One request to send.
#[derive(Clone, Debug)]
pub(crate) struct Probe {
    pub(crate) method: Method,
    pub(crate) url: Url,
    pub(crate) headers: HeaderMap,
    /// The `Idempotency-Key` header value; none: no header.
    pub(crate) key: Option<HeaderValue>,
    pub(crate) body: Option<Bytes>,
    pub(crate) principal: Principal,
    /// The client gives up after this long, on purpose (case 5).
    pub(crate) give_up_after: Option<Duration>,
}

impl Probe {
    /// A `GET` of `url` with `headers`, no key and no body, as the first principal.
    pub(crate) fn get(url: Url, headers: HeaderMap) -> Self {
        Self {
            method: Method::GET,
            url,
            headers,
            key: None,
            body: None,
            principal: Principal::First,
            give_up_after: None,
        }
    }
}

/// What came back.
#[derive(Clone, Debug)]
pub(crate) enum Received {
    /// An answer, read whole (or as much of it as the wire reads).
    Answered(Answer),
    /// The client gave up as the probe asked, with no answer yet.
    GaveUp(Duration),
    /// No answer: the connection was reset or closed, or the request timed out.
    NoAnswer(String),
}

/// An HTTP answer.
#[derive(Clone, Debug)]
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

impl Answer {
    /// The media type, lower-case, without parameters.
    pub(crate) fn media_type(&self) -> Option<String> {
        let value = self.headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
        let media = value.split(';').next()?.trim().to_ascii_lowercase();
        (!media.is_empty()).then_some(media)
    }

    /// A header's value as text (lossy), empty when absent.
    pub(crate) fn header_text(&self, name: &str) -> String {
        self.headers
            .get(name)
            .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned())
            .unwrap_or_default()
    }

    /// `Idempotent-Replayed`: `None` when absent, `Some(true)` for `true` in any case, and
    /// `Some(false)` for any other value.
    pub(crate) fn replay_header(&self) -> Option<bool> {
        let value = self.headers.get(IDEMPOTENT_REPLAYED)?;
        Some(
            value
                .to_str()
                .is_ok_and(|text| text.trim().eq_ignore_ascii_case("true")),
        )
    }

    /// Whether the answer says it is a replay.
    pub(crate) fn is_replayed(&self) -> bool {
        self.replay_header() == Some(true)
    }

    /// How long `Retry-After` asks to wait (delta-seconds or an HTTP-date), if it is readable.
    pub(crate) fn retry_after(&self) -> Option<Duration> {
        idem_client::retry_after(&self.headers, SystemTime::now())
    }

    /// Whether the answer is a 2xx.
    pub(crate) fn succeeded(&self) -> bool {
        self.status.is_success()
    }
}

/// A request and what came back, with when and how long.
#[derive(Clone, Debug)]
pub(crate) struct Exchange {
    pub(crate) probe: Probe,
    pub(crate) received: Received,
    /// When the request was sent.
    pub(crate) started: Instant,
    pub(crate) elapsed: Duration,
}

impl Exchange {
    /// The answer, if there was one.
    pub(crate) fn answer(&self) -> Option<&Answer> {
        match &self.received {
            Received::Answered(answer) => Some(answer),
            _ => None,
        }
    }

    /// The status, if there was an answer.
    pub(crate) fn status(&self) -> Option<StatusCode> {
        self.answer().map(|answer| answer.status)
    }

    /// When it was received.
    pub(crate) fn ended(&self) -> Instant {
        self.started + self.elapsed
    }

    /// Whether the answer was a 2xx.
    pub(crate) fn succeeded(&self) -> bool {
        self.answer().is_some_and(Answer::succeeded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(headers: &[(&'static str, &'static str)]) -> Answer {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.insert(*name, HeaderValue::from_static(value));
        }
        Answer {
            status: StatusCode::OK,
            headers: map,
            body: Bytes::new(),
        }
    }

    #[test]
    fn headers_are_read_leniently() {
        assert_eq!(answer(&[]).replay_header(), None);
        assert_eq!(
            answer(&[(IDEMPOTENT_REPLAYED, "TRUE")]).replay_header(),
            Some(true)
        );
        assert_eq!(
            answer(&[(IDEMPOTENT_REPLAYED, "yes")]).replay_header(),
            Some(false)
        );
        assert_eq!(
            answer(&[("retry-after", "2")]).retry_after(),
            Some(Duration::from_secs(2))
        );
        assert_eq!(answer(&[("retry-after", "soon")]).retry_after(), None);
        let typed = answer(&[("content-type", "Application/Problem+JSON; charset=utf-8")]);
        assert_eq!(
            typed.media_type().as_deref(),
            Some("application/problem+json")
        );
    }
}
