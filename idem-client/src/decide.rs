//! Which outcomes of an attempt are retried: the table of the module documentation, as code.

use http::StatusCode;

use crate::{ProblemDetails, ProblemKind};

/// What an attempt's outcome calls for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ruling {
    /// A successful answer: the call is done.
    Done,
    /// Worth another attempt with the same key and body.
    Retry,
    /// Final: a retry would get the same answer, or the caller must change the request.
    Fail,
}

/// The ruling on an answer with `status`; `replayed` when it says `Idempotent-Replayed: true`.
pub(crate) fn on_status(status: StatusCode, replayed: bool) -> Ruling {
    match status.as_u16() {
        ..400 => Ruling::Done,
        // A stored answer is what every retry with this key will get.
        _ if replayed => Ruling::Fail,
        // In flight (409) and rate limited (429): the server asks the client to come back.
        409 | 429 => Ruling::Retry,
        // Not implemented: a retry meets the same server.
        501 => Ruling::Fail,
        500..=599 => Ruling::Retry,
        // Every other 4xx: the request itself is wrong.
        _ => Ruling::Fail,
    }
}

/// The ruling on an attempt that got no answer.
pub(crate) fn on_error(error: &reqwest::Error) -> Ruling {
    if error.is_builder() || error.is_redirect() {
        // The request is invalid, or the server redirects in circles: the same every time.
        Ruling::Fail
    } else {
        // Connection refused, reset or closed before the answer, a timeout, a body cut short:
        // the request may or may not have reached the server, which is what the key is for.
        Ruling::Retry
    }
}

/// Whether a 422 says that the key was used for another request: idem's `key-reused` type
/// (under any base: a service may point its type URIs at its own documentation), or the IETF
/// draft's title. Any other 422 (a validation error, say) is an ordinary 4xx.
pub(crate) fn is_key_reused(status: StatusCode, problem: Option<&ProblemDetails>) -> bool {
    let kind = ProblemKind::KeyReused;
    let slug = format!("#{}", kind.slug());
    status == kind.status()
        && problem.is_some_and(|problem| {
            problem.type_uri().ends_with(&slug) || problem.title() == Some(kind.title())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ruling(status: u16, replayed: bool) -> Ruling {
        on_status(StatusCode::from_u16(status).unwrap(), replayed)
    }

    #[test]
    fn the_retry_table() {
        for status in [200, 201, 204, 302] {
            assert_eq!(ruling(status, false), Ruling::Done, "{status}");
            assert_eq!(ruling(status, true), Ruling::Done, "{status}");
        }
        for status in [409, 429, 500, 502, 503, 504, 507, 599] {
            assert_eq!(ruling(status, false), Ruling::Retry, "{status}");
        }
        for status in [400, 401, 403, 404, 405, 410, 413, 415, 418, 422, 451, 501] {
            assert_eq!(ruling(status, false), Ruling::Fail, "{status}");
        }
        for status in [500, 502, 503] {
            assert_eq!(ruling(status, true), Ruling::Fail, "a stored {status}");
        }
    }

    #[test]
    fn only_a_422_about_the_key_is_key_reuse() {
        let idem = ProblemDetails::from_json(
            format!(r#"{{"type":"{}"}}"#, ProblemKind::KeyReused.type_uri()).as_bytes(),
        );
        let draft = ProblemDetails::from_json(
            br#"{"type":"https://developer.example.com/idempotency/docs","title":"Idempotency-Key is already used"}"#,
        );
        let validation = ProblemDetails::from_json(br#"{"title":"amount is negative"}"#);
        let status = StatusCode::UNPROCESSABLE_ENTITY;
        assert!(is_key_reused(status, idem.as_ref()));
        assert!(is_key_reused(status, draft.as_ref()));
        assert!(!is_key_reused(status, validation.as_ref()));
        assert!(!is_key_reused(status, None));
        assert!(!is_key_reused(StatusCode::BAD_REQUEST, idem.as_ref()));
    }
}
