//! Derived keys: the documented derivation, reproduced here by hand, and every derived key a
//! key that the server's parser reads back unchanged, in either form and either syntax.

use http::HeaderValue;
use idem_protocol::key::{DeriveError, IdempotencyKey, KeyForm, KeySyntax, MAX_KEY_LEN};
use proptest::prelude::*;
use sha2::{Digest, Sha256};

/// Fixed vectors: the same in every process and every release. A program in another language
/// that follows the documented derivation gets these keys.
#[test]
fn derived_keys_are_these_exact_strings() {
    let cases: [(&str, &[&str], &str); 6] = [
        ("customer-create", &["42"], "customer-create:42"),
        ("transfer", &["alice", "k:1"], "transfer:alice:k%3A1"),
        ("nightly-report", &[], "nightly-report"),
        ("empty", &[""], "empty:"),
        ("t", &["a b~%\"\\,é"], "t:a%20b%7E%25%22%5C%2C%C3%A9"),
        ("v1.orders_x", &["A-Z.a_z"], "v1.orders_x:A-Z.a_z"),
    ];
    for (namespace, parts, expected) in cases {
        let key = IdempotencyKey::derive(namespace, parts).unwrap();
        assert_eq!(key.as_str(), expected, "{namespace} {parts:?}");
    }
    // Over 255 characters: the first 190 of the full form, `~`, and the SHA-256 of all of it.
    let long = IdempotencyKey::derive("order", ["x".repeat(300)]).unwrap();
    let digest = "3914a97306f5b27aff04d21c72b3e767a9383f43a0b07f7fddf78d0fa4c6f0ab";
    assert_eq!(long.as_str(), format!("order:{}~{digest}", "x".repeat(184)));
    // A cut may fall inside an escape; the digest still covers the whole.
    let emoji = IdempotencyKey::derive("customer-create", ["\u{1F600}".repeat(30)]).unwrap();
    assert_eq!(
        emoji.as_str(),
        format!(
            "customer-create:{}%F0%9F~785cd83ece899c739321fc7998aa0b1c543c2108cb310eca303d63d6efb1a606",
            "%F0%9F%98%80".repeat(14)
        )
    );
}

/// Numbers and strings are parts through their `Display`, so `42` and `"42"` name the same
/// operation.
#[test]
fn a_part_is_its_display_form() {
    assert_eq!(
        IdempotencyKey::derive("customer-create", [42]).unwrap(),
        IdempotencyKey::derive("customer-create", ["42"]).unwrap(),
    );
}

#[test]
fn a_bad_namespace_is_refused() {
    assert!(matches!(
        IdempotencyKey::derive("customer create", ["1"]),
        Err(DeriveError::InvalidNamespace { .. })
    ));
}

/// The derivation as the documentation states it, written independently of the crate's code.
fn reference(namespace: &str, parts: &[String]) -> String {
    let mut full = namespace.to_owned();
    for part in parts {
        full.push(':');
        for byte in part.bytes() {
            if byte.is_ascii_alphanumeric() || b"-_.".contains(&byte) {
                full.push(byte as char);
            } else {
                full.push_str(&format!("%{byte:02X}"));
            }
        }
    }
    if full.len() <= 255 {
        return full;
    }
    let digest = Sha256::digest(full.as_bytes());
    let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
    format!("{}~{hex}", &full[..190])
}

fn namespace() -> impl Strategy<Value = String> {
    "[A-Za-z0-9._-]{1,64}"
}

fn parts() -> impl Strategy<Value = Vec<String>> {
    let part = prop_oneof![
        any::<String>(),
        "[ -~]{0,40}",
        "[a-z:%~]{0,8}",
        "[a-z]{100,400}",
    ];
    prop::collection::vec(part, 0..5)
}

fn parse(value: &HeaderValue, syntax: KeySyntax) -> IdempotencyKey {
    IdempotencyKey::parse(value, syntax)
        .unwrap_or_else(|error| panic!("{value:?} does not parse: {error}"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Whatever the parts, the key is at most 255 visible ASCII characters, the derivation is
    /// the documented one, and the server reads the key back from the header unchanged: quoted
    /// under the strict and the lenient syntax, bare under the lenient one.
    #[test]
    fn every_derived_key_parses_back_on_the_server(namespace in namespace(), parts in parts()) {
        let key = IdempotencyKey::derive(&namespace, &parts).unwrap();
        let text = key.as_str();
        prop_assert!(!text.is_empty() && text.len() <= MAX_KEY_LEN);
        prop_assert!(text.bytes().all(|byte| (0x21..=0x7E).contains(&byte)));
        prop_assert!(!text.contains(['"', '\\', ',']));
        prop_assert_eq!(text, reference(&namespace, &parts));
        let quoted = KeyForm::Quoted.header_value(&key);
        prop_assert_eq!(&parse(&quoted, KeySyntax::Strict), &key);
        prop_assert_eq!(&parse(&quoted, KeySyntax::Lenient), &key);
        let bare = KeyForm::Bare.header_value(&key);
        prop_assert_eq!(&parse(&bare, KeySyntax::Lenient), &key);
    }

    /// Different operations get different keys: another namespace, or other parts.
    #[test]
    fn different_operations_get_different_keys(
        (a_namespace, a_parts) in (namespace(), parts()),
        (b_namespace, b_parts) in (namespace(), parts()),
    ) {
        prop_assume!((&a_namespace, &a_parts) != (&b_namespace, &b_parts));
        let a = IdempotencyKey::derive(&a_namespace, &a_parts).unwrap();
        let b = IdempotencyKey::derive(&b_namespace, &b_parts).unwrap();
        prop_assert_ne!(a, b);
    }

    /// Parts that differ only in where they are cut apart are still different operations.
    #[test]
    fn splitting_a_part_differently_changes_the_key(text in "[a-z:]{2,20}", at in 1usize..19) {
        let at = at.min(text.len() - 1);
        let whole = IdempotencyKey::derive("n", [&text]).unwrap();
        let split = IdempotencyKey::derive("n", [&text[..at], &text[at..]]).unwrap();
        prop_assert_ne!(whole, split);
    }

    /// Any key a caller makes, not only derived ones, survives the quoted form.
    #[test]
    fn any_key_survives_the_quoted_form(text in "[!-~]{1,255}") {
        let key = IdempotencyKey::new(text).unwrap();
        let quoted = KeyForm::Quoted.header_value(&key);
        prop_assert_eq!(&parse(&quoted, KeySyntax::Strict), &key);
    }
}
