//! A policy's settings in a reader's words, for the descriptions of the document.

use std::time::Duration;

use crate::{key::KeySyntax, policy::OnConflict, scope::Scope};

/// A duration as a reader says it: `24 hours`, `10 seconds`, `1.5 seconds`, `500 ms`.
pub(crate) fn duration(duration: Duration) -> String {
    if duration.subsec_nanos() != 0 {
        return if duration < Duration::from_secs(1) {
            format!("{} ms", duration.as_millis())
        } else {
            format!("{} seconds", duration.as_secs_f64())
        };
    }
    let seconds = duration.as_secs();
    let (count, unit) = [(86_400, "day"), (3_600, "hour"), (60, "minute")]
        .into_iter()
        .find(|(size, _)| seconds >= *size && seconds.is_multiple_of(*size))
        .map_or((seconds, "second"), |(size, unit)| (seconds / size, unit));
    let plural = if count == 1 { "" } else { "s" };
    format!("{count} {unit}{plural}")
}

/// What a client must know of the key's presence.
pub(crate) fn required(required: bool) -> &'static str {
    if required {
        "Required: a request without one is answered 400 (`key-missing`)."
    } else {
        "Optional: a request without one runs without idempotency, as if the operation had none."
    }
}

/// The spellings the key may take.
pub(crate) fn syntax(syntax: KeySyntax) -> &'static str {
    match syntax {
        KeySyntax::Lenient => {
            "1 to 255 visible ASCII characters, as an RFC 9651 sf-string \
             (`\"8e03978e-40d5-43e8-bc93-6894a57f9324\"`, the IETF draft's form) or bare \
             (`8e03978e-40d5-43e8-bc93-6894a57f9324`, Stripe's form): both name the same key. \
             A bare key cannot contain a comma; a quoted one can."
        }
        KeySyntax::Strict => {
            "Only as an RFC 9651 sf-string: a double-quoted string of 1 to 255 visible ASCII \
             characters (`\"8e03978e-40d5-43e8-bc93-6894a57f9324\"`); a bare key is answered \
             400 (`key-malformed`)."
        }
    }
}

/// Whose keys they are.
pub(crate) fn scope(scope: Scope) -> String {
    match scope {
        Scope::User => "Keys are the authenticated caller's own: another caller's equal key is \
                        another key."
            .to_owned(),
        Scope::Global => "Keys are shared by every caller of this operation.".to_owned(),
        Scope::Custom(name) => format!(
            "Keys belong to the caller's `{name}`: another `{name}`'s equal key is another key."
        ),
    }
}

/// What a retry meets while the first request runs.
pub(crate) fn conflict(on_conflict: OnConflict) -> String {
    match on_conflict {
        OnConflict::Reject => {
            "A retry while the first request runs is answered 409 with `Retry-After`.".to_owned()
        }
        OnConflict::Wait(wait) => format!(
            "A retry while the first request runs waits up to {} for its answer, and is \
             answered 409 with `Retry-After` if it is still running then.",
            duration(wait)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_a_person_says_them() {
        let cases = [
            (Duration::from_secs(86_400), "1 day"),
            (Duration::from_secs(3 * 86_400), "3 days"),
            (Duration::from_secs(24 * 3_600 + 3_600), "25 hours"),
            (Duration::from_secs(90), "90 seconds"),
            (Duration::from_secs(120), "2 minutes"),
            (Duration::from_secs(1), "1 second"),
            (Duration::from_millis(1_500), "1.5 seconds"),
            (Duration::from_millis(250), "250 ms"),
        ];
        for (value, words) in cases {
            assert_eq!(duration(value), words);
        }
    }
}
