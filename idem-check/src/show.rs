//! How the report shows what was sent and what came back: short enough to read, exact
//! enough to reproduce with curl. Credentials are never shown, only which principal sent a
//! request.

use std::time::Duration;

use http::HeaderValue;

use crate::exchange::{Exchange, IDEMPOTENT_REPLAYED, Principal, Probe, Received};

/// The most characters of a body or a key shown.
const SHOWN: usize = 160;

pub(crate) use crate::duration::show as duration;

/// Both lines of an exchange: `→` what was sent, `←` what came back.
pub(crate) fn exchange(exchange: &Exchange) -> String {
    format!(
        "{}\n{}",
        sent(&exchange.probe),
        received(&exchange.received, exchange.elapsed)
    )
}

/// `→ POST /payments  Idempotency-Key: "…"  {"amount":9800}`.
pub(crate) fn sent(probe: &Probe) -> String {
    let mut line = format!("→ {} {}", probe.method, target(probe));
    match &probe.key {
        Some(key) => line.push_str(&format!("  Idempotency-Key: {}", key_value(key))),
        None => line.push_str("  (no Idempotency-Key)"),
    }
    if probe.principal == Principal::Second {
        line.push_str("  (as the second principal)");
    }
    if let Some(body) = &probe.body {
        line.push_str(&format!("  {}", body_text(body)));
    }
    if let Some(after) = probe.give_up_after {
        line.push_str(&format!("  (giving up after {})", duration(after)));
    }
    line
}

/// `← 201, Idempotent-Replayed: true, in 3 ms: {"id":"pay_1"}`.
pub(crate) fn received(received: &Received, elapsed: Duration) -> String {
    match received {
        Received::Answered(answer) => {
            let mut line = format!("← {}", answer.status.as_u16());
            if let Some(media) = answer.media_type() {
                line.push_str(&format!(" {media}"));
            }
            if answer.replay_header().is_some() {
                line.push_str(&format!(
                    ", Idempotent-Replayed: {}",
                    answer.header_text(IDEMPOTENT_REPLAYED)
                ));
            }
            if let Some(after) = answer.headers.get(http::header::RETRY_AFTER) {
                line.push_str(&format!(", Retry-After: {}", text(after.as_bytes())));
            }
            line.push_str(&format!(", in {}", duration(elapsed)));
            if !answer.body.is_empty() {
                line.push_str(&format!(": {}", body_text(&answer.body)));
            }
            line
        }
        Received::GaveUp(after) => {
            format!("← nothing: the client gave up after {}", duration(*after))
        }
        Received::NoAnswer(why) => format!("← no answer after {}: {why}", duration(elapsed)),
    }
}

/// A one-line summary of what an exchange received: `201`, `409`, `no answer (connection reset)`.
pub(crate) fn summary(exchange: &Exchange) -> String {
    match &exchange.received {
        Received::Answered(answer) => answer.status.as_u16().to_string(),
        Received::GaveUp(after) => format!("no answer within {}", duration(*after)),
        Received::NoAnswer(why) => format!("no answer ({why})"),
    }
}

fn target(probe: &Probe) -> String {
    let mut shown = probe.url.path().to_owned();
    if let Some(query) = probe.url.query() {
        shown.push('?');
        shown.push_str(query);
    }
    shown
}

/// A key as sent, shortened when it is long.
pub(crate) fn key_value(key: &HeaderValue) -> String {
    let text = text(key.as_bytes());
    if text.chars().count() > 60 {
        let head: String = text.chars().take(40).collect();
        format!("{head}… ({} characters)", key.len())
    } else if text.is_empty() {
        "(empty)".to_owned()
    } else {
        text
    }
}

/// A body, on one line, shortened when it is long.
pub(crate) fn body_text(body: &[u8]) -> String {
    let text = text(body).replace(['\r', '\n'], " ");
    if text.chars().count() > SHOWN {
        let head: String = text.chars().take(SHOWN).collect();
        format!("{head}… ({} bytes)", body.len())
    } else {
        text
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_things_are_shortened() {
        let long = "x".repeat(300);
        assert!(body_text(long.as_bytes()).ends_with("… (300 bytes)"));
        assert_eq!(body_text(b"{\"a\":\n1}"), "{\"a\": 1}");
        let key = HeaderValue::from_str(&"k".repeat(256)).unwrap();
        assert!(key_value(&key).ends_with("(256 characters)"));
        assert_eq!(key_value(&HeaderValue::from_static("")), "(empty)");
    }
}
