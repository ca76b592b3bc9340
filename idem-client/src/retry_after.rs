//! The `Retry-After` response header (RFC 9110 §10.2.3): delta-seconds or an HTTP-date.

use std::time::{Duration, SystemTime};

use http::{HeaderMap, header::RETRY_AFTER};

/// How long an answer's `Retry-After` asks the client to wait, measured from `now`: `None`
/// when the header is absent or unreadable, zero for a date in the past. Only the first header
/// line counts.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use http::{HeaderMap, HeaderValue, header::RETRY_AFTER};
///
/// let mut headers = HeaderMap::new();
/// headers.insert(RETRY_AFTER, HeaderValue::from_static("2"));
/// assert_eq!(idem_client::retry_after(&headers, SystemTime::now()), Some(Duration::from_secs(2)));
/// ```
pub fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let text = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if !text.is_empty() && text.bytes().all(|byte| byte.is_ascii_digit()) {
        // More digits than a u64 holds is a wait longer than any deadline: saturate.
        let seconds = text.parse::<u64>().unwrap_or(u64::MAX);
        return Some(Duration::from_secs(seconds));
    }
    // httpdate reads the three date formats RFC 9110 asks a recipient to accept.
    let date = httpdate::parse_http_date(text).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn parse(value: &[u8]) -> Option<Duration> {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, HeaderValue::from_bytes(value).unwrap());
        // Sun, 06 Nov 1994 08:49:37 GMT, RFC 9110's example date.
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777);
        retry_after(&headers, now)
    }

    #[test]
    fn delta_seconds() {
        assert_eq!(parse(b"1"), Some(Duration::from_secs(1)));
        assert_eq!(parse(b" 120 "), Some(Duration::from_secs(120)));
        assert_eq!(parse(b"0"), Some(Duration::ZERO));
        assert_eq!(
            parse(b"99999999999999999999999"),
            Some(Duration::from_secs(u64::MAX))
        );
    }

    #[test]
    fn http_dates_in_all_three_formats() {
        assert_eq!(
            parse(b"Sun, 06 Nov 1994 08:49:40 GMT"),
            Some(Duration::from_secs(3))
        );
        assert_eq!(
            parse(b"Sunday, 06-Nov-94 08:49:47 GMT"),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            parse(b"Sun Nov  6 08:50:37 1994"),
            Some(Duration::from_secs(60))
        );
        assert_eq!(
            parse(b"Sat, 05 Nov 1994 08:49:37 GMT"),
            Some(Duration::ZERO),
            "a date in the past: no wait"
        );
    }

    #[test]
    fn garbage_is_no_wait_at_all() {
        for value in [
            &b""[..],
            b"-1",
            b"1.5",
            b"soon",
            b"1, 2",
            b"Sun, 06 Nov 1994 25:00:00 GMT",
            b"\xff\xfe",
        ] {
            assert_eq!(parse(value), None, "{value:?}");
        }
        assert_eq!(retry_after(&HeaderMap::new(), SystemTime::now()), None);
    }
}
