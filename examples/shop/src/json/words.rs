//! serde's messages about a body, in words a client understands.
//!
//! serde_json says `invalid type: string "9800", expected i64`: right, but `i64` is a Rust type,
//! not something a client sent or can look up. [`in_plain_words`] keeps the kind of mistake and
//! says what the member must be, and what it was, in JSON's terms:
//! `invalid type: must be an integer, not the string "9800"`.

/// `message`, a serde error about one value, in a client's words; a message of another shape
/// unchanged.
pub(super) fn in_plain_words(message: &str) -> String {
    for kind in ["invalid type", "invalid value"] {
        let Some((found, expected)) = message
            .strip_prefix(kind)
            .and_then(|rest| rest.strip_prefix(": "))
            // The expected type never holds this text; a string that was found may.
            .and_then(|rest| rest.rsplit_once(", expected "))
        else {
            continue;
        };
        let must_be = match (kind, integer_range(expected)) {
            ("invalid value", Some((min, max))) => format!("an integer from {min} to {max}"),
            _ => expected_in_words(expected).to_owned(),
        };
        return format!("{kind}: must be {must_be}, not {}", found_in_words(found));
    }
    message.to_owned()
}

/// What serde expected (a Rust type, or serde's name for a kind of value), as JSON names it.
fn expected_in_words(expected: &str) -> &str {
    if integer_range(expected).is_some() {
        return "an integer";
    }
    match expected {
        "f32" | "f64" => "a number",
        "a boolean" => "true or false",
        "a sequence" => "an array",
        "a map" => "an object",
        other if other.starts_with("struct ") => "an object",
        other => other,
    }
}

/// What serde found, as JSON names it.
fn found_in_words(found: &str) -> String {
    if let Some(string) = found.strip_prefix("string ") {
        return format!("the string {string}");
    }
    for prefix in ["floating point ", "integer ", "boolean "] {
        if let Some(value) = found.strip_prefix(prefix) {
            return value.trim_matches('`').to_owned();
        }
    }
    match found {
        "map" => "an object".to_owned(),
        "sequence" => "an array".to_owned(),
        "unit value" => "null".to_owned(),
        other => other.to_owned(),
    }
}

/// The range of the Rust integer type serde names, if it is one.
fn integer_range(rust_type: &str) -> Option<(i128, i128)> {
    Some(match rust_type {
        "i8" => (i8::MIN.into(), i8::MAX.into()),
        "i16" => (i16::MIN.into(), i16::MAX.into()),
        "i32" => (i32::MIN.into(), i32::MAX.into()),
        "i64" | "isize" => (i64::MIN.into(), i64::MAX.into()),
        "u8" => (0, u8::MAX.into()),
        "u16" => (0, u16::MAX.into()),
        "u32" => (0, u32::MAX.into()),
        "u64" | "usize" => (0, u64::MAX.into()),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_types_become_json_words() {
        for (serde_says, client_reads) in [
            (
                r#"invalid type: string "9800", expected i64"#,
                r#"invalid type: must be an integer, not the string "9800""#,
            ),
            (
                "invalid type: floating point `1.5`, expected i64",
                "invalid type: must be an integer, not 1.5",
            ),
            (
                "invalid type: null, expected i64",
                "invalid type: must be an integer, not null",
            ),
            (
                "invalid type: integer `5`, expected a string",
                "invalid type: must be a string, not 5",
            ),
            (
                "invalid type: map, expected a string",
                "invalid type: must be a string, not an object",
            ),
            (
                "invalid type: sequence, expected u32",
                "invalid type: must be an integer, not an array",
            ),
            (
                "invalid type: boolean `true`, expected f64",
                "invalid type: must be a number, not true",
            ),
            (
                r#"invalid type: string "no", expected a boolean"#,
                r#"invalid type: must be true or false, not the string "no""#,
            ),
            (
                "invalid type: integer `1`, expected struct Address",
                "invalid type: must be an object, not 1",
            ),
            (
                "invalid value: integer `9223372036854775808`, expected i64",
                "invalid value: must be an integer from -9223372036854775808 to \
                 9223372036854775807, not 9223372036854775808",
            ),
            (
                "invalid value: integer `-1`, expected u8",
                "invalid value: must be an integer from 0 to 255, not -1",
            ),
        ] {
            assert_eq!(in_plain_words(serde_says), client_reads);
        }
    }

    #[test]
    fn a_found_string_may_hold_the_word_expected() {
        assert_eq!(
            in_plain_words(r#"invalid type: string "a, expected i64", expected i64"#),
            r#"invalid type: must be an integer, not the string "a, expected i64""#
        );
    }

    #[test]
    fn other_messages_are_left_as_they_are() {
        for message in [
            "unknown field `amout`, expected `amount` or `currency`",
            "unknown variant `x`, expected `transfer.settled`",
            "invalid length 2, expected a tuple of size 3",
        ] {
            assert_eq!(in_plain_words(message), message);
        }
    }
}
