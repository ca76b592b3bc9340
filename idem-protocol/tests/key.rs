//! The `Idempotency-Key` header rules of docs/contract.md (*The key*), through the public API.

use http::{HeaderMap, HeaderValue};
use idem_protocol::key::{IDEMPOTENCY_KEY, IdempotencyKey, KeyError, KeySyntax, MAX_KEY_LEN};
use proptest::prelude::*;

use KeySyntax::{Lenient, Strict};

const UUID: &str = "8e03978e-40d5-43e8-bc93-6894a57f9324";

fn parse_bytes(value: &[u8], syntax: KeySyntax) -> Result<IdempotencyKey, KeyError> {
    let value = HeaderValue::from_bytes(value).expect("a valid header value");
    IdempotencyKey::parse(&value, syntax)
}

fn parse(value: &str, syntax: KeySyntax) -> Result<IdempotencyKey, KeyError> {
    parse_bytes(value.as_bytes(), syntax)
}

fn key(value: &str, syntax: KeySyntax) -> String {
    match parse(value, syntax) {
        Ok(key) => key.as_str().to_owned(),
        Err(error) => panic!("{value:?} rejected: {error}"),
    }
}

fn headers<'a>(values: impl IntoIterator<Item = &'a str>) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for value in values {
        headers.append(IDEMPOTENCY_KEY, HeaderValue::from_str(value).unwrap());
    }
    headers
}

fn invalid(position: usize, byte: u8) -> Result<IdempotencyKey, KeyError> {
    Err(KeyError::InvalidCharacter { position, byte })
}

/// Quotes a key as an RFC 9651 sf-string.
fn quote(key: &str) -> String {
    let mut quoted = String::from('"');
    for c in key.chars() {
        if matches!(c, '"' | '\\') {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted.push('"');
    quoted
}

// --- Spellings ---

#[test]
fn quoted_and_bare_spellings_are_the_same_key() {
    let quoted = parse(&format!("\"{UUID}\""), Lenient).unwrap();
    let bare = parse(UUID, Lenient).unwrap();
    assert_eq!(quoted.as_str(), UUID);
    assert_eq!(quoted, bare);
}

#[test]
fn escapes_in_a_quoted_key_are_resolved() {
    assert_eq!(key(r#""a\"b""#, Lenient), r#"a"b"#);
    assert_eq!(key(r#""a\\b""#, Lenient), r"a\b");
    assert_eq!(key(r#""\\\"""#, Strict), r#"\""#);
}

#[test]
fn parameters_after_a_quoted_key_are_ignored() {
    assert_eq!(key(r#""abc";x=1"#, Lenient), "abc");
    assert_eq!(key(r#""abc";x=1;flag;y="z""#, Strict), "abc");
    assert_eq!(key(r#""abc"; x=1"#, Strict), "abc");
}

#[test]
fn a_bare_value_is_taken_verbatim() {
    assert_eq!(key("abc;x=1", Lenient), "abc;x=1");
    assert_eq!(key(r#"ab"c"#, Lenient), r#"ab"c"#);
    assert_eq!(key(r"a\b", Lenient), r"a\b");
    assert_eq!(key("123", Lenient), "123");
    assert_eq!(key("?1", Lenient), "?1");
}

#[test]
fn a_quoted_key_may_contain_a_comma() {
    assert_eq!(key(r#""a,b""#, Lenient), "a,b");
    assert_eq!(key(r#""a,b";x=1"#, Strict), "a,b");
    // The space, not the comma, is what makes this one invalid.
    assert_eq!(parse(r#""a, b""#, Strict), invalid(4, b' '));
}

#[test]
fn whitespace_around_the_value_is_ignored() {
    assert_eq!(key("  abc\t", Lenient), "abc");
    assert_eq!(key("\t \"abc\" \t", Strict), "abc");
    assert_eq!(key(" \"abc\";x=1 ", Strict), "abc");
}

// --- Strict syntax ---

#[test]
fn strict_syntax_rejects_a_bare_value() {
    assert_eq!(parse(UUID, Strict), Err(KeyError::Unquoted));
    assert_eq!(parse("a,b", Strict), Err(KeyError::Unquoted));
    assert_eq!(
        KeyError::Unquoted.to_string(),
        r#"the Idempotency-Key must be a quoted string, e.g. `Idempotency-Key: "abc"`"#
    );
}

#[test]
fn strict_syntax_accepts_a_quoted_value() {
    assert_eq!(key(&format!("\"{UUID}\""), Strict), UUID);
}

// --- Empty ---

#[test]
fn an_empty_value_is_rejected() {
    for syntax in [Lenient, Strict] {
        assert_eq!(parse("", syntax), Err(KeyError::Empty));
        assert_eq!(parse(" \t ", syntax), Err(KeyError::Empty));
        assert_eq!(parse(r#""""#, syntax), Err(KeyError::Empty));
        assert_eq!(parse(r#""";x=1"#, syntax), Err(KeyError::Empty));
    }
    assert_eq!(IdempotencyKey::new(""), Err(KeyError::Empty));
}

#[test]
fn an_empty_header_differs_from_a_missing_one() {
    assert_eq!(
        IdempotencyKey::from_headers(&HeaderMap::new(), Lenient),
        Ok(None)
    );
    assert_eq!(
        IdempotencyKey::from_headers(&headers([""]), Lenient),
        Err(KeyError::Empty)
    );
    assert_eq!(
        IdempotencyKey::from_headers(&headers([r#""""#]), Strict),
        Err(KeyError::Empty)
    );
}

// --- Length ---

#[test]
fn the_longest_key_is_accepted_in_both_spellings() {
    let longest = "k".repeat(MAX_KEY_LEN);
    assert_eq!(key(&longest, Lenient), longest);
    assert_eq!(key(&quote(&longest), Strict), longest);
    assert_eq!(
        IdempotencyKey::new(longest.clone()).unwrap().as_str(),
        longest
    );
}

#[test]
fn one_character_more_is_rejected_in_both_spellings() {
    let too_long = "k".repeat(MAX_KEY_LEN + 1);
    assert_eq!(
        parse(&too_long, Lenient),
        Err(KeyError::TooLong { len: 256 })
    );
    assert_eq!(
        parse(&quote(&too_long), Strict),
        Err(KeyError::TooLong { len: 256 })
    );
    assert_eq!(
        IdempotencyKey::new(too_long),
        Err(KeyError::TooLong { len: 256 })
    );
}

#[test]
fn the_length_of_a_quoted_key_is_counted_after_unescaping() {
    // 255 characters of key, 256 + 2 characters of header value.
    let with_escape = format!("{}\"", "k".repeat(MAX_KEY_LEN - 1));
    assert_eq!(key(&quote(&with_escape), Strict), with_escape);
}

#[test]
fn the_too_long_message_says_the_length_and_the_maximum() {
    assert_eq!(
        parse(&"k".repeat(300), Lenient).unwrap_err().to_string(),
        "the Idempotency-Key is 300 characters long; the maximum is 255"
    );
}

// --- Characters ---

#[test]
fn a_space_inside_the_key_is_rejected_with_its_position() {
    assert_eq!(parse("ab cd", Lenient), invalid(3, b' '));
    // Positions count in the value as sent, quote and escapes included.
    assert_eq!(parse(r#""ab cd""#, Lenient), invalid(4, b' '));
    assert_eq!(parse(r#""a\"b cd""#, Strict), invalid(6, b' '));
    // ... after the surrounding whitespace is removed.
    assert_eq!(parse("  ab cd", Lenient), invalid(3, b' '));
}

#[test]
fn a_tab_inside_the_key_is_rejected() {
    assert_eq!(parse("ab\tcd", Lenient), invalid(3, b'\t'));
    assert_eq!(parse("\"ab\tcd\"", Lenient), invalid(4, b'\t'));
}

#[test]
fn bytes_outside_ascii_are_rejected_with_their_position() {
    // "café" in UTF-8, and the same key with a stray Latin-1 byte.
    assert_eq!(parse_bytes(b"caf\xc3\xa9", Lenient), invalid(4, 0xC3));
    assert_eq!(parse_bytes(b"caf\xe9", Lenient), invalid(4, 0xE9));
    assert_eq!(parse_bytes(b"\"caf\xc3\xa9\"", Strict), invalid(5, 0xC3));
    assert_eq!(parse_bytes(b" \xff", Strict), invalid(1, 0xFF));
    assert_eq!(IdempotencyKey::new("café"), invalid(4, 0xC3));
}

#[test]
fn control_characters_and_del_are_rejected() {
    // A `HeaderValue` cannot hold these, so they reach only `new`.
    assert_eq!(IdempotencyKey::new("ab\0"), invalid(3, 0x00));
    assert_eq!(IdempotencyKey::new("a\nb"), invalid(2, b'\n'));
    assert_eq!(IdempotencyKey::new("\x1b[0m"), invalid(1, 0x1B));
    assert_eq!(IdempotencyKey::new("ab\x7f"), invalid(3, 0x7F));
    assert_eq!(IdempotencyKey::new(" ab"), invalid(1, b' '));
}

#[test]
fn the_invalid_character_message_names_the_position_but_not_the_key() {
    let message = parse("secret value", Lenient).unwrap_err().to_string();
    assert_eq!(
        message,
        "character 7 of the Idempotency-Key is a space; a key may contain only visible ASCII \
         characters: letters, digits and punctuation"
    );
    assert!(!message.contains("secret"));

    let describe = |key: &str| IdempotencyKey::new(key).unwrap_err().to_string();
    assert!(describe("a\x7f").starts_with("character 2 of the Idempotency-Key is DEL"));
    assert!(describe("a\x01").contains("is a control character;"));
    assert!(describe("a\tb").contains("is a tab;"));
    assert!(describe("aé").contains("is not ASCII;"));
}

#[test]
fn every_visible_ascii_character_is_accepted() {
    let visible: String = (0x21u8..=0x7E)
        .map(char::from)
        .filter(|&c| c != ',')
        .collect();
    assert_eq!(key(&visible, Lenient), visible);
    assert_eq!(key(&quote(&visible), Strict), visible);
    let with_comma: String = (0x21u8..=0x7E).map(char::from).collect();
    assert_eq!(
        IdempotencyKey::new(with_comma.clone()).unwrap().as_str(),
        with_comma
    );
}

// --- Malformed quoted strings ---

#[test]
fn an_unterminated_quoted_string_is_rejected() {
    for value in [r#"""#, r#""abc"#, r#""abc\""#, r#""abc\"#] {
        for syntax in [Lenient, Strict] {
            assert_eq!(
                parse(value, syntax),
                Err(KeyError::UnterminatedString),
                "{value}"
            );
        }
    }
}

#[test]
fn an_invalid_escape_is_rejected_with_its_position() {
    assert_eq!(
        parse(r#""a\bc""#, Lenient),
        Err(KeyError::InvalidEscape { position: 3 })
    );
    assert_eq!(
        parse(r#""\n""#, Strict),
        Err(KeyError::InvalidEscape { position: 2 })
    );
    assert_eq!(
        parse(r#""a\bc""#, Lenient).unwrap_err().to_string(),
        "the Idempotency-Key has an invalid escape at character 3; inside quotes a backslash may \
         only precede `\"` or `\\`"
    );
}

#[test]
fn characters_after_the_closing_quote_are_rejected() {
    let trailing = |position| Err(KeyError::TrailingCharacters { position });
    assert_eq!(parse(r#""abc"def"#, Lenient), trailing(6));
    assert_eq!(parse(r#""abc" def"#, Lenient), trailing(7));
    assert_eq!(parse(r#""abc""def""#, Strict), trailing(6));
    // Malformed parameters: a dangling `;`, a key that is not an sf-key, a missing value.
    assert_eq!(parse(r#""abc";"#, Lenient), trailing(6));
    assert_eq!(parse(r#""abc";X=1"#, Lenient), trailing(7));
    assert_eq!(parse(r#""abc";x="#, Lenient), trailing(8));
    // A list that is malformed is not recognised as several values.
    assert_eq!(parse(r#""abc","#, Lenient), trailing(6));
}

#[test]
fn the_first_fault_in_a_quoted_value_is_reported() {
    assert_eq!(parse(r#""a b"#, Lenient), invalid(3, b' '));
    assert_eq!(
        parse(r#""a\x b"#, Lenient),
        Err(KeyError::InvalidEscape { position: 3 })
    );
}

// --- Several values ---

#[test]
fn repeated_header_lines_are_rejected() {
    for syntax in [Lenient, Strict] {
        let twice = headers([r#""a""#, r#""b""#]);
        assert_eq!(
            IdempotencyKey::from_headers(&twice, syntax),
            Err(KeyError::Multiple)
        );
        // Even when the lines agree, or one of them is empty.
        let same = headers([r#""a""#, r#""a""#]);
        assert_eq!(
            IdempotencyKey::from_headers(&same, syntax),
            Err(KeyError::Multiple)
        );
        let one_empty = headers([r#""a""#, ""]);
        assert_eq!(
            IdempotencyKey::from_headers(&one_empty, syntax),
            Err(KeyError::Multiple)
        );
    }
}

#[test]
fn a_quoted_list_is_rejected() {
    for syntax in [Lenient, Strict] {
        assert_eq!(parse(r#""a", "b""#, syntax), Err(KeyError::List));
        assert_eq!(parse(r#""a","b""#, syntax), Err(KeyError::List));
        assert_eq!(parse(r#""a";x=1, "b", "c""#, syntax), Err(KeyError::List));
        assert_eq!(parse(r#""a", b"#, syntax), Err(KeyError::List));
    }
}

#[test]
fn a_bare_value_with_a_comma_is_rejected() {
    assert_eq!(parse("a,b", Lenient), Err(KeyError::List));
    assert_eq!(parse("a, b", Lenient), Err(KeyError::List));
    assert_eq!(parse(",", Lenient), Err(KeyError::List));
    assert_eq!(parse(r#"a, "b""#, Lenient), Err(KeyError::List));
    let folded = headers(["abc, def"]);
    assert_eq!(
        IdempotencyKey::from_headers(&folded, Lenient),
        Err(KeyError::List)
    );
}

#[test]
fn the_messages_tell_repeated_lines_from_a_list() {
    assert_eq!(
        KeyError::Multiple.to_string(),
        "the Idempotency-Key header appears more than once; send it once, with a single key"
    );
    assert_eq!(
        KeyError::List.to_string(),
        "the Idempotency-Key holds several values separated by commas; send a single key (a key \
         that contains a comma must be sent as a quoted string, e.g. `\"a,b\"`)"
    );
}

// --- From headers ---

#[test]
fn from_headers_reads_the_one_value() {
    let found = IdempotencyKey::from_headers(&headers([UUID]), Lenient).unwrap();
    assert_eq!(found.unwrap().as_str(), UUID);
    let found = IdempotencyKey::from_headers(&headers([quote(UUID).as_str()]), Strict).unwrap();
    assert_eq!(found.unwrap().as_str(), UUID);
    let mut other = HeaderMap::new();
    other.insert("x-request-id", HeaderValue::from_static("abc"));
    assert_eq!(IdempotencyKey::from_headers(&other, Lenient), Ok(None));
}

// --- Redaction ---

#[test]
fn debug_shows_the_length_not_the_key() {
    let key = IdempotencyKey::new("very-secret-key").unwrap();
    let shown = format!("{key:?}");
    assert_eq!(shown, "IdempotencyKey(len=15)");
    assert_eq!(format!("{:?}", Some(key)), "Some(IdempotencyKey(len=15))");
}

// --- Messages ---

#[test]
fn every_message_starts_lowercase_without_a_trailing_period() {
    let errors = [
        KeyError::Multiple,
        KeyError::Empty,
        KeyError::TooLong { len: 300 },
        KeyError::InvalidCharacter {
            position: 1,
            byte: b' ',
        },
        KeyError::Unquoted,
        KeyError::UnterminatedString,
        KeyError::InvalidEscape { position: 2 },
        KeyError::TrailingCharacters { position: 3 },
    ];
    for error in errors {
        let message = error.to_string();
        assert!(
            message.starts_with("the ") || message.starts_with("character "),
            "{message}"
        );
        assert!(!message.ends_with('.'), "{message}");
        assert!(message.contains("Idempotency-Key"), "{message}");
    }
}

// --- Properties ---

/// 1 to 255 visible ASCII characters, no comma, not starting with a quote.
fn bare_key() -> impl Strategy<Value = String> {
    proptest::string::string_regex(r#"[!#-+\--~][!-+\--~]{0,254}"#).unwrap()
}

proptest! {
    #[test]
    fn a_bare_key_parses_to_itself(key in bare_key()) {
        let parsed = parse(&key, Lenient).unwrap();
        prop_assert_eq!(parsed.as_str(), key.as_str());
        prop_assert_eq!(IdempotencyKey::new(key.clone()).unwrap(), parsed);
    }

    #[test]
    fn quoting_a_bare_key_yields_the_same_key(key in bare_key()) {
        let bare = parse(&key, Lenient).unwrap();
        let quoted = parse(&quote(&key), Strict).unwrap();
        prop_assert_eq!(quoted.as_str(), key.as_str());
        prop_assert_eq!(quoted, bare);
    }

    #[test]
    fn a_quoted_key_is_accepted_unless_it_has_a_space_which_is_located(
        key in proptest::string::string_regex("[ -~]{1,40}").unwrap(),
    ) {
        let quoted = quote(&key);
        match parse(&quoted, Strict) {
            Ok(parsed) => {
                prop_assert!(!key.contains(' '));
                prop_assert_eq!(parsed.as_str(), key.as_str());
            }
            Err(KeyError::InvalidCharacter { position, byte: b' ' }) => {
                prop_assert_eq!(quoted.as_bytes()[position - 1], b' ');
                prop_assert!(!quoted[..position - 1].contains(' '));
            }
            Err(error) => prop_assert!(false, "{quoted:?} rejected: {error:?}"),
        }
    }

    #[test]
    fn any_header_value_parses_or_fails_without_panicking(
        bytes in proptest::collection::vec(
            prop_oneof![Just(b'\t'), 0x20u8..=0x7E, 0x80u8..=0xFF],
            0..300,
        ),
        strict in any::<bool>(),
    ) {
        let syntax = if strict { Strict } else { Lenient };
        if let Ok(key) = parse_bytes(&bytes, syntax) {
            prop_assert!((1..=MAX_KEY_LEN).contains(&key.as_str().len()));
            prop_assert!(key.as_str().bytes().all(|b| (0x21..=0x7E).contains(&b)));
        }
    }
}

/// What a structured-fields crate makes of a quoted value, as the key's parser must: the key
/// (when the value is one sf-string item, parameters allowed), a list of several values, or
/// neither.
#[derive(Debug, PartialEq)]
enum Reading {
    Item(String),
    List,
    Neither,
}

fn reading_of_sfv(value: &str) -> Reading {
    use std::borrow::Cow;
    match sfv::Parser::new(value).parse_item::<Cow<'_, sfv::StringRef>>() {
        Ok(content) => Reading::Item(content.as_str().to_owned()),
        Err(_)
            if sfv::Parser::new(value)
                .parse::<sfv::List>()
                .is_ok_and(|l| l.len() > 1) =>
        {
            Reading::List
        }
        Err(_) => Reading::Neither,
    }
}

/// What the key's parser makes of `value`; `trimmed` is the value without the spaces around
/// it, which the key's own rules refuse inside a well-formed item.
fn reading_of_idem(value: &str, trimmed: &str) -> Reading {
    match parse(value, Strict) {
        Ok(key) => Reading::Item(key.as_str().to_owned()),
        Err(KeyError::List) => Reading::List,
        // The key's own rules refuse some well-formed items (empty, a space, too long): what
        // counts here is that the value read as an item, which these errors come after; the
        // structured-fields crate's reading of it is then the only one to compare with.
        Err(
            KeyError::Empty
            | KeyError::TooLong { .. }
            | KeyError::InvalidCharacter { byte: b' ', .. },
        ) if matches!(reading_of_sfv(trimmed), Reading::Item(_)) => reading_of_sfv(trimmed),
        Err(_) => Reading::Neither,
    }
}

/// A bare item, well formed or nearly: each type of RFC 9651, and near misses of each.
fn bare_item() -> impl Strategy<Value = String> {
    prop_oneof![
        "-?[0-9]{1,16}(\\.[0-9]{0,4})?",
        "\"[ab\\\\\" ]{0,4}\"?",
        "[a-zA-Z*][a-z0-9:/*.]{0,4}",
        ":[A-Za-z0-9+/=]{0,6}:?",
        "\\?[01x]",
        "@-?[0-9]{1,3}(\\.[0-9])?",
        "%\"([a-z ]|%[0-9a-fA-F]{2}){0,3}\"?",
    ]
}

/// An item with parameters, or an inner list of items.
fn member() -> impl Strategy<Value = String> {
    let parameters = prop::collection::vec(
        (
            "; ?[a-zA-Z*][a-z0-9_.*-]{0,2}",
            prop::option::of(bare_item()),
        ),
        0..3,
    )
    .prop_map(|parameters| {
        parameters
            .into_iter()
            .map(|(key, value)| match value {
                Some(value) => format!("{key}={value}"),
                None => key,
            })
            .collect::<String>()
    });
    let inner =
        prop::collection::vec(bare_item(), 0..3).prop_map(|items| format!("({})", items.join(" ")));
    (prop_oneof![bare_item(), inner], parameters).prop_map(|(item, parameters)| item + &parameters)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4_000))]

    /// Values built from the grammar's parts: a quoted string with parameters, followed or not
    /// by more members, with the separators right or wrong.
    #[test]
    fn structured_values_read_as_rfc_9651_reads_them(
        first in "\"[ab\\\\\"]{1,4}\"",
        parameters in member().prop_map(|member| member.split_once(';').map(|(_, p)| format!(";{p}")).unwrap_or_default()),
        rest in prop::collection::vec((prop_oneof![Just(", "), Just(","), Just(" ,\t"), Just(" "), Just(",,")], member()), 0..3),
    ) {
        let mut value = first + &parameters;
        for (separator, member) in rest {
            value.push_str(separator);
            value.push_str(&member);
        }
        let trimmed = value.trim_end_matches([' ', '\t']);
        let expected = reading_of_sfv(trimmed);
        prop_assert_eq!(reading_of_idem(&value, trimmed), expected, "value {:?}", value);
    }

    /// The key's RFC 9651 parser reads every quoted value as the structured-fields crate does:
    /// the same key from the same item, a list where it sees several members, and a fault
    /// everywhere else. Values are drawn from the characters that make the grammar's choices
    /// (quotes, escapes, parameters, numbers, tokens, byte sequences, inner lists, commas).
    #[test]
    fn quoted_values_read_as_rfc_9651_reads_them(
        tail in "[ab\"\\\\;=, \t1.\\-?@%:()*A/+]{0,14}",
    ) {
        let value = format!("\"{tail}");
        let trimmed = value.trim_end_matches([' ', '\t']);
        let expected = reading_of_sfv(trimmed);
        prop_assert_eq!(reading_of_idem(&value, trimmed), expected, "value {:?}", value);
    }
}
