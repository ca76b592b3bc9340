//! The JSON Schema of the `Idempotency-Key` header: exactly the values the key parser accepts.
//!
//! The rules are those of [`crate::key`] (the crate `idem-protocol`'s parser):
//!
//! - a **bare** key (Stripe's spelling) is the value itself: 1 to 255 visible ASCII characters
//!   (`0x21..=0x7E`) without a comma, which would make it a list, and not starting with `"`,
//!   which would make it a quoted key;
//! - a **quoted** key (the IETF draft's) is an RFC 9651 sf-string whose content, escapes `\"`
//!   and `\\` resolved, is 1 to 255 visible ASCII characters. RFC 9651 parameters may follow it
//!   (`"abc";v=1`); the runtime ignores them, as RFC 9651 asks of parameters a field does not
//!   define, so the pattern admits every well-formed one.
//!
//! Each pattern is built from named pieces of the RFC 9651 grammar, and a test holds both
//! schemas against the key parser itself, on chosen and on random values, so that a document
//! cannot drift from the runtime.
//!
//! The patterns are ECMA-262, as JSON Schema asks, and use only what the `regex` crate reads the
//! same way (classes of `\xHH` ranges, non-capturing groups, bounded repetition).

use std::sync::LazyLock;

use utoipa::openapi::{
    RefOr, Schema,
    schema::{ObjectBuilder, OneOfBuilder, Type},
};

use crate::key::KeySyntax;

/// The characters of a bare key: visible ASCII but the comma.
const BARE_CHAR: &str = r"[\x21-\x2B\x2D-\x7E]";
/// The first character of a bare key: neither a comma nor the quote that starts a quoted key.
const BARE_FIRST: &str = r"[\x21\x23-\x2B\x2D-\x7E]";
/// One character of a quoted key's content: a visible character other than `"` and `\`, or one
/// of those two escaped.
const QUOTED_CHAR: &str = r#"(?:[\x21\x23-\x5B\x5D-\x7E]|\\["\\])"#;

/// RFC 9651 bare items, for parameter values.
const SF_INTEGER: &str = "-?[0-9]{1,15}";
const SF_DECIMAL: &str = r"-?[0-9]{1,12}\.[0-9]{1,3}";
/// An sf-string of any length, spaces included.
const SF_STRING: &str = r#""(?:[\x20\x21\x23-\x5B\x5D-\x7E]|\\["\\])*""#;
const SF_TOKEN: &str = "[A-Za-z*][!#$%&'*+.^_`|~0-9A-Za-z:/-]*";
/// Base64 between colons, padding optional.
const SF_BINARY: &str = ":(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}(?:==)?|[A-Za-z0-9+/]{3}=?)?:";
const SF_BOOLEAN: &str = r"\?[01]";
const SF_DATE: &str = "@-?[0-9]{1,15}";
/// A display string: printable ASCII but `"` and `%`, or percent-encoded (lowercase hex)
/// octets that form valid UTF-8.
const SF_DISPLAY_STRING: &str = concat!(
    r#"%"(?:[\x20\x21\x23\x24\x26-\x7E]"#,
    "|%[0-7][0-9a-f]",
    "|%c[2-9a-f]%[89ab][0-9a-f]|%d[0-9a-f]%[89ab][0-9a-f]",
    "|%e0%[ab][0-9a-f]%[89ab][0-9a-f]",
    "|%e[1-9a-cef]%[89ab][0-9a-f]%[89ab][0-9a-f]",
    "|%ed%[89][0-9a-f]%[89ab][0-9a-f]",
    "|%f0%(?:9[0-9a-f]|[ab][0-9a-f])%[89ab][0-9a-f]%[89ab][0-9a-f]",
    "|%f[1-3]%[89ab][0-9a-f]%[89ab][0-9a-f]%[89ab][0-9a-f]",
    "|%f4%8[0-9a-f]%[89ab][0-9a-f]%[89ab][0-9a-f]",
    r#")*""#,
);
/// A parameter's key.
const SF_KEY: &str = "[a-z*][a-z0-9_.*-]*";

/// The pattern of a bare key.
static BARE_PATTERN: LazyLock<String> =
    LazyLock::new(|| format!("^{BARE_FIRST}{BARE_CHAR}{{0,254}}$"));

/// The pattern of a quoted key, with the parameters that may follow it.
static QUOTED_PATTERN: LazyLock<String> = LazyLock::new(|| {
    let bare_item = [
        SF_DECIMAL,
        SF_INTEGER,
        SF_STRING,
        SF_TOKEN,
        SF_BINARY,
        SF_BOOLEAN,
        SF_DATE,
        SF_DISPLAY_STRING,
    ]
    .join("|");
    format!("^\"{QUOTED_CHAR}{{1,255}}\"(?:; *{SF_KEY}(?:=(?:{bare_item}))?)*$")
});

/// The schema of a key under `syntax`.
pub(crate) fn for_syntax(syntax: KeySyntax) -> RefOr<Schema> {
    match syntax {
        KeySyntax::Lenient => lenient().into(),
        KeySyntax::Strict => strict().into(),
    }
}

/// The schema of a key in either spelling: one of [`bare`] and [`quoted`], which no value
/// matches both of (a bare key cannot start with `"`).
fn lenient() -> impl Into<RefOr<Schema>> {
    OneOfBuilder::new().item(bare()).item(quoted())
}

/// The schema of a key under the strict syntax: only [`quoted`].
fn strict() -> impl Into<RefOr<Schema>> {
    quoted()
}

/// The schema of a bare key.
fn bare() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .title(Some("bare key"))
        .description(Some(
            "Stripe's spelling: the key itself, 1 to 255 visible ASCII characters, no comma, \
             not starting with `\"`",
        ))
        .min_length(Some(1))
        .max_length(Some(255))
        .pattern(Some(BARE_PATTERN.as_str()))
}

/// The schema of a quoted key.
fn quoted() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .title(Some("quoted key"))
        .description(Some(
            "The IETF draft's spelling: an RFC 9651 sf-string whose content (after resolving \
             `\\\"` and `\\\\`) is 1 to 255 visible ASCII characters. RFC 9651 parameters may \
             follow; they are ignored.",
        ))
        .min_length(Some(3))
        .pattern(Some(QUOTED_PATTERN.as_str()))
}

#[cfg(test)]
mod tests {
    //! The schemas against the key parser. The evaluator below reads the schema as it is
    //! rendered into the document and knows only the keywords it uses; a new keyword fails the
    //! test until the evaluator learns it.

    use std::{collections::HashMap, sync::Mutex};

    use http::HeaderValue;
    use proptest::prelude::*;
    use regex::Regex;
    use serde_json::Value;

    use super::*;
    use crate::key::IdempotencyKey;

    /// Whether the runtime takes `value` as an `Idempotency-Key` under `syntax`.
    fn parser_accepts(value: &str, syntax: KeySyntax) -> bool {
        // A value `HeaderValue` refuses (a control character) never reaches the runtime.
        HeaderValue::from_str(value)
            .is_ok_and(|header| IdempotencyKey::parse(&header, syntax).is_ok())
    }

    /// Whether `value` is valid against `schema`, a JSON Schema as the document renders it.
    fn schema_accepts(schema: &Value, value: &str) -> bool {
        let schema = schema.as_object().expect("a schema is an object");
        let mut valid = true;
        for (keyword, argument) in schema {
            valid &= match keyword.as_str() {
                "title" | "description" | "examples" => true,
                "type" => argument == "string",
                "minLength" => value.chars().count() >= usize_of(argument),
                "maxLength" => value.chars().count() <= usize_of(argument),
                "pattern" => compiled(argument.as_str().unwrap()).is_match(value),
                "oneOf" => {
                    argument
                        .as_array()
                        .unwrap()
                        .iter()
                        .filter(|alternative| schema_accepts(alternative, value))
                        .count()
                        == 1
                }
                other => panic!("the evaluator does not know the keyword `{other}`"),
            };
        }
        valid
    }

    /// The regex of `pattern`, compiled once: the random test asks thousands of times.
    fn compiled(pattern: &str) -> Regex {
        static COMPILED: LazyLock<Mutex<HashMap<String, Regex>>> = LazyLock::new(Default::default);
        COMPILED
            .lock()
            .unwrap()
            .entry(pattern.to_owned())
            .or_insert_with(|| Regex::new(pattern).expect("the pattern is a valid regex"))
            .clone()
    }

    fn usize_of(argument: &Value) -> usize {
        usize::try_from(argument.as_u64().unwrap()).unwrap()
    }

    fn rendered(schema: impl Into<RefOr<Schema>>) -> Value {
        serde_json::to_value(schema.into()).unwrap()
    }

    /// Values on both sides of every rule.
    fn chosen_values() -> Vec<String> {
        let mut values: Vec<String> = [
            // bare
            "a",
            "8e03978e-40d5-43e8-bc93-6894a57f9324",
            "abc;v=1",
            "a\"b",
            "a\\b",
            "~!#$%&'*+-./:;<=>?@[]^_`{|}",
            "a,b",
            ",",
            "a b",
            " ",
            "",
            "\t",
            "a\u{1}b",
            "a\u{7f}",
            // quoted
            "\"a\"",
            "\"8e03978e-40d5-43e8-bc93-6894a57f9324\"",
            "\"a,b\"",
            "\"a\\\"b\"",
            "\"a\\\\b\"",
            "\"\\\\\"",
            "\"\\\"\"",
            "\"\"",
            "\"a b\"",
            "\"a\\b\"",
            "\"a",
            "\"a\\\"",
            "\"a\"b",
            "\"a\", \"b\"",
            "\"a\",\"b\"",
            "\"a\"\"b\"",
            // parameters
            "\"a\";v=1",
            "\"a\"; v=1",
            "\"a\";v",
            "\"a\";*x.y_z-1=tok/en:1",
            "\"a\";v=-999999999999999",
            "\"a\";v=9999999999999999",
            "\"a\";v=1.5",
            "\"a\";v=123456789012.123",
            "\"a\";v=1234567890123.1",
            "\"a\";v=1.1234",
            "\"a\";v=1.",
            "\"a\";v=-",
            "\"a\";v=\"x y\\\"z\"",
            "\"a\";v=\"x",
            "\"a\";v=:aGVsbG8=:",
            "\"a\";v=:aGVsbG8:",
            "\"a\";v=:aGVsbA==:",
            "\"a\";v=:aGVsbA:",
            "\"a\";v=:a:",
            "\"a\";v=:a===:",
            "\"a\";v=?1",
            "\"a\";v=?2",
            "\"a\";v=@1659578233",
            "\"a\";v=%\"caf%c3%a9\"",
            "\"a\";v=%\"%e2%82%ac and %f0%9f%98%80\"",
            "\"a\";v=%\"%c3\"",
            "\"a\";v=%\"%C3%A9\"",
            "\"a\";v=%\"%ed%a0%80\"",
            "\"a\";v=%\"%\"",
            "\"a\";V=1",
            "\"a\";1=1",
            "\"a\";",
            "\"a\";v=1;w=?0",
            "\"a\" ;v=1",
            "\"a\";v=1,\"b\"",
        ]
        .iter()
        .map(|value| (*value).to_owned())
        .collect();
        for len in [254, 255, 256] {
            values.push("k".repeat(len));
            values.push(format!("\"{}\"", "k".repeat(len)));
            // Each escape is two characters in the header and one in the key.
            values.push(format!("\"{}\"", "\\\"".repeat(len)));
            values.push(format!("\",{}\"", "\\\\".repeat(len - 1)));
        }
        values
    }

    #[test]
    fn the_schemas_accept_exactly_what_the_parser_accepts_on_chosen_values() {
        let lenient = rendered(lenient());
        let strict = rendered(strict());
        for value in chosen_values() {
            assert_eq!(
                schema_accepts(&lenient, &value),
                parser_accepts(&value, KeySyntax::Lenient),
                "lenient: {value:?}"
            );
            assert_eq!(
                schema_accepts(&strict, &value),
                parser_accepts(&value, KeySyntax::Strict),
                "strict: {value:?}"
            );
        }
    }

    #[test]
    fn each_syntax_has_its_schema() {
        assert_eq!(
            rendered(for_syntax(KeySyntax::Lenient)),
            rendered(lenient())
        );
        assert_eq!(rendered(for_syntax(KeySyntax::Strict)), rendered(strict()));
    }

    #[test]
    fn the_chosen_values_cover_both_answers_in_both_syntaxes() {
        for syntax in [KeySyntax::Lenient, KeySyntax::Strict] {
            let accepted = chosen_values()
                .iter()
                .filter(|value| parser_accepts(value, syntax))
                .count();
            assert!(accepted > 10, "{syntax:?}: {accepted} accepted");
            assert!(
                chosen_values().len() - accepted > 10,
                "{syntax:?}: {accepted} accepted"
            );
        }
    }

    /// Strings made of the characters the rules turn on, around the length limits.
    fn header_like() -> impl Strategy<Value = String> {
        let special = prop::sample::select(vec![
            '"', '\\', ',', ';', '=', ' ', '\t', ':', '?', '@', '%', '*', '.', '-', '/', '+',
            '\u{1}', '\u{7f}', 'é',
        ]);
        let ordinary = prop::sample::select(vec!['a', 'z', 'A', '0', '9', 'c', 'f', 'v']);
        let character = prop_oneof![3 => ordinary, 2 => special];
        let short = prop::collection::vec(character.clone(), 0..24);
        let long = prop::collection::vec(character, 240..270);
        // A field value has no whitespace around it (HTTP parsers strip it), so neither the
        // schema nor the parser ever sees any.
        prop_oneof![4 => short, 1 => long].prop_map(|chars| {
            let value: String = chars.into_iter().collect();
            value.trim_matches([' ', '\t']).to_owned()
        })
    }

    /// A quoted key with random parameters, so the parameter grammar is exercised too.
    fn quoted_with_parameters() -> impl Strategy<Value = String> {
        (
            "[a-z]{1,8}",
            "(;[ ]{0,1}[a-z*][a-z0-9_.*-]{0,3}(=[-a-zA-Z0-9.:?@%\"=/+*]{0,12})?){0,3}",
        )
            .prop_map(|(key, parameters)| format!("\"{key}\"{parameters}"))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn the_schemas_accept_exactly_what_the_parser_accepts_on_random_values(
            value in prop_oneof![header_like(), quoted_with_parameters()]
        ) {
            let lenient = rendered(lenient());
            let strict = rendered(strict());
            prop_assert_eq!(
                schema_accepts(&lenient, &value),
                parser_accepts(&value, KeySyntax::Lenient),
                "lenient: {:?}", value
            );
            prop_assert_eq!(
                schema_accepts(&strict, &value),
                parser_accepts(&value, KeySyntax::Strict),
                "strict: {:?}", value
            );
        }
    }
}
