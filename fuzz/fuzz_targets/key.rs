//! The `Idempotency-Key` parser on any header lines: it never panics, and a key it accepts is
//! 1 to 255 visible ASCII characters that both spellings name again.
//!
//! The input is split at `\n` into header lines (a field value cannot hold one); each line
//! that is a valid `HeaderValue` becomes one `Idempotency-Key` line of a request.

#![no_main]

use http::{HeaderMap, HeaderValue};
use idem_core::key::{IDEMPOTENCY_KEY, IdempotencyKey, KeyError, KeySyntax, MAX_KEY_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let lines: Vec<HeaderValue> = data
        .split(|&byte| byte == b'\n')
        .filter_map(|line| HeaderValue::from_bytes(line).ok())
        .collect();
    let mut headers = HeaderMap::new();
    for line in &lines {
        headers.append(IDEMPOTENCY_KEY, line.clone());
    }
    for syntax in [KeySyntax::Lenient, KeySyntax::Strict] {
        match IdempotencyKey::from_headers(&headers, syntax) {
            Ok(None) => assert!(lines.is_empty()),
            Ok(Some(key)) => {
                assert_eq!(lines.len(), 1);
                assert_eq!(IdempotencyKey::parse(&lines[0], syntax), Ok(key.clone()));
                check_key(&key);
            }
            Err(error) => {
                assert!(!lines.is_empty());
                if lines.len() > 1 {
                    assert_eq!(error, KeyError::Multiple);
                }
                // The message is the `detail` of a 400 answer.
                assert!(!error.to_string().is_empty());
            }
        }
    }
    if let [value] = lines.as_slice() {
        // The strict syntax accepts a subset of the lenient one, and reads it alike.
        if let Ok(key) = IdempotencyKey::parse(value, KeySyntax::Strict) {
            assert_eq!(IdempotencyKey::parse(value, KeySyntax::Lenient), Ok(key));
        }
        // A bare value that is accepted is the key itself, without the surrounding whitespace.
        if let Ok(key) = IdempotencyKey::parse(value, KeySyntax::Lenient) {
            let text = value.to_str().expect("an accepted value is ASCII");
            let text = text.trim_matches([' ', '\t']);
            if !text.starts_with('"') {
                assert_eq!(key.as_str(), text);
            }
        }
    }
});

/// What every accepted key is, and that both spellings of it name it again.
fn check_key(key: &IdempotencyKey) {
    let text = key.as_str();
    assert!(
        (1..=MAX_KEY_LEN).contains(&text.len()),
        "{} characters",
        text.len()
    );
    assert!(
        text.bytes().all(|byte| (0x21..=0x7E).contains(&byte)),
        "{text:?}"
    );
    assert_eq!(IdempotencyKey::new(text), Ok(key.clone()));

    let mut quoted = String::from("\"");
    for character in text.chars() {
        if matches!(character, '"' | '\\') {
            quoted.push('\\');
        }
        quoted.push(character);
    }
    quoted.push('"');
    let quoted = HeaderValue::from_str(&quoted).expect("visible ASCII");
    for syntax in [KeySyntax::Lenient, KeySyntax::Strict] {
        assert_eq!(IdempotencyKey::parse(&quoted, syntax), Ok(key.clone()));
    }
    if !text.starts_with('"') && !text.contains(',') {
        let bare = HeaderValue::from_str(text).expect("visible ASCII");
        assert_eq!(
            IdempotencyKey::parse(&bare, KeySyntax::Lenient),
            Ok(key.clone())
        );
    }
}
