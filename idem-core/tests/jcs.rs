//! The canonicalizer against RFC 8785: its examples, the reference implementation's test data,
//! Appendix B's numbers, and a cross-check with `serde_json_canonicalizer` on generated documents.

mod common;

use idem::fingerprint::{canonicalize_json, canonicalize_json_bytes};
use proptest::prelude::*;
use serde_json::Value;

fn canonical(value: &Value) -> String {
    let mut out = Vec::new();
    canonicalize_json(value, &mut out);
    String::from_utf8(out).expect("canonical JSON is UTF-8")
}

fn canonical_text(json: &str) -> String {
    canonical(&serde_json::from_str(json).expect("test input is JSON"))
}

/// Checks one input against its expected canonical form, and the reference crate against the same
/// expectation so that a typo in a vector cannot pass unnoticed.
#[track_caller]
fn assert_canonical(input: &str, expected: &str) {
    let value: Value = serde_json::from_str(input).expect("test input is JSON");
    assert_eq!(canonical(&value), expected, "canonical form of {input}");
    assert_eq!(
        serde_json_canonicalizer::to_string(&value).unwrap(),
        expected,
        "serde_json_canonicalizer disagrees with the vector for {input}"
    );
}

// The inputs and outputs of https://github.com/cyberphone/json-canonicalization/tree/dc406ceaf94b5fa554fcabb92c091089c2357e83/testdata,
// the test data of RFC 8785's reference implementation.

#[test]
fn reference_arrays() {
    assert_canonical(
        r#"[
  56,
  {
    "d": true,
    "10": null,
    "1": [ ]
  }
]"#,
        r#"[56,{"1":[],"10":null,"d":true}]"#,
    );
}

#[test]
fn reference_french() {
    assert_canonical(
        r#"{
  "peach": "This sorting order",
  "péché": "is wrong according to French",
  "pêche": "but canonicalization MUST",
  "sin":   "ignore locale"
}"#,
        r#"{"peach":"This sorting order","péché":"is wrong according to French","pêche":"but canonicalization MUST","sin":"ignore locale"}"#,
    );
}

#[test]
fn reference_structures() {
    assert_canonical(
        r#"{
  "1": {"f": {"f": "hi","F": 5} ,"\n": 56.0},
  "10": { },
  "": "empty",
  "a": { },
  "111": [ {"e": "yes","E": "no" } ],
  "A": { }
}"#,
        r#"{"":"empty","1":{"\n":56,"f":{"F":5,"f":"hi"}},"10":{},"111":[{"E":"no","e":"yes"}],"A":{},"a":{}}"#,
    );
}

#[test]
fn reference_unicode_is_not_normalized() {
    assert_canonical(
        r#"{
  "Unnormalized Unicode":"A\u030a"
}"#,
        "{\"Unnormalized Unicode\":\"A\u{30A}\"}",
    );
}

#[test]
fn reference_values() {
    // Also RFC 8785 §3.2.2's example, whose UTF-8 bytes §3.2.4 lists.
    assert_canonical(
        r#"{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}"#,
        r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#,
    );
}

#[test]
fn reference_weird() {
    assert_canonical(
        r#"{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\u000a": "Newline",
  "1": "One",
  "\u0080": "Control\u007f",
  "\ud83d\ude02": "Smiley",
  "\u00f6": "Latin Small Letter O With Diaeresis",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "</script>": "Browser Challenge"
}"#,
        concat!(
            r#"{"\n":"Newline","\r":"Carriage Return","1":"One","</script>":"Browser Challenge","#,
            "\"\u{80}\":\"Control\u{7F}\",",
            r#""ö":"Latin Small Letter O With Diaeresis","€":"Euro Sign","😂":"Smiley","#,
            "\"\u{FB33}\":\"Hebrew Letter Dalet With Dagesh\"}",
        ),
    );
}

#[test]
fn rfc_sorting_example() {
    // RFC 8785 §3.2.3: U+1F600 (D83D DE00 in UTF-16) sorts before U+FB33, unlike in code point or
    // UTF-8 order.
    assert_canonical(
        r#"{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}"#,
        concat!(
            r#"{"\r":"Carriage Return","1":"One","#,
            "\"\u{80}\":\"Control\",",
            r#""ö":"Latin Small Letter O With Diaeresis","€":"Euro Sign","#,
            r#""😀":"Emoji: Grinning Face","#,
            "\"\u{FB33}\":\"Hebrew Letter Dalet With Dagesh\"}",
        ),
    );
}

#[test]
fn rfc_serialized_bytes() {
    // RFC 8785 §3.2.4 lists the bytes of the §3.2.2 example, to rule out a wrong encoding.
    let expected = "7b 22 6c 69 74 65 72 61 6c 73 22 3a 5b 6e 75 6c 6c 2c 74 72 75 65 2c 66 61 6c 73 \
                    65 5d 2c 22 6e 75 6d 62 65 72 73 22 3a 5b 33 33 33 33 33 33 33 33 33 2e 33 33 \
                    33 33 33 33 33 2c 31 65 2b 33 30 2c 34 2e 35 2c 30 2e 30 30 32 2c 31 65 2d 32 \
                    37 5d 2c 22 73 74 72 69 6e 67 22 3a 22 e2 82 ac 24 5c 75 30 30 30 66 5c 6e 41 \
                    27 42 5c 22 5c 5c 5c 5c 5c 22 2f 22 7d";
    let expected: Vec<u8> = expected
        .split_whitespace()
        .map(|byte| u8::from_str_radix(byte, 16).unwrap())
        .collect();
    let value: Value = serde_json::from_str(
        r#"{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],
            "string":"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/","literals":[null,true,false]}"#,
    )
    .unwrap();
    let mut out = Vec::new();
    canonicalize_json(&value, &mut out);
    assert_eq!(out, expected);
}

/// RFC 8785 Appendix B: IEEE 754 bit patterns and their canonical text (NaN and Infinity are not
/// JSON and have no entry).
const APPENDIX_B: &[(u64, &str)] = &[
    (0x0000000000000000, "0"),
    (0x8000000000000000, "0"),
    (0x0000000000000001, "5e-324"),
    (0x8000000000000001, "-5e-324"),
    (0x7fefffffffffffff, "1.7976931348623157e+308"),
    (0xffefffffffffffff, "-1.7976931348623157e+308"),
    (0x4340000000000000, "9007199254740992"),
    (0xc340000000000000, "-9007199254740992"),
    (0x4430000000000000, "295147905179352830000"),
    (0x44b52d02c7e14af5, "9.999999999999997e+22"),
    (0x44b52d02c7e14af6, "1e+23"),
    (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
    (0x444b1ae4d6e2ef4e, "999999999999999700000"),
    (0x444b1ae4d6e2ef4f, "999999999999999900000"),
    (0x444b1ae4d6e2ef50, "1e+21"),
    (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
    (0x3eb0c6f7a0b5ed8d, "0.000001"),
    (0x41b3de4355555553, "333333333.3333332"),
    (0x41b3de4355555554, "333333333.33333325"),
    (0x41b3de4355555555, "333333333.3333333"),
    (0x41b3de4355555556, "333333333.3333334"),
    (0x41b3de4355555557, "333333333.33333343"),
    (0xbecbf647612f3696, "-0.0000033333333333333333"),
    (0x43143ff3c1cb0959, "1424953923781206.2"),
];

#[test]
fn appendix_b_numbers() {
    for &(bits, expected) in APPENDIX_B {
        let double = f64::from_bits(bits);
        let value = Value::from(double);
        assert_eq!(canonical(&value), expected, "{bits:016x}");
        assert_eq!(
            serde_json_canonicalizer::to_string(&value).unwrap(),
            expected,
            "serde_json_canonicalizer on {bits:016x}"
        );
        // The same double arriving as JSON text, as it does in a request body.
        let parsed: f64 = serde_json::from_str(expected).unwrap();
        assert_eq!(parsed, double, "{expected} parses back to {bits:016x}");
        assert_eq!(canonical_text(expected), expected);
    }
}

#[test]
fn number_spellings() {
    for (input, expected) in [
        ("1", "1"),
        ("1.0", "1"),
        ("1e0", "1"),
        ("10E-1", "1"),
        ("-0", "0"),
        ("-0.0", "0"),
        ("0e10", "0"),
        ("4.50", "4.5"),
        ("2e-3", "0.002"),
        ("0.0000001", "1e-7"),
        ("1e-7", "1e-7"),
        ("0.000001", "0.000001"),
        ("1e21", "1e+21"),
        ("1E+21", "1e+21"),
        ("1e20", "100000000000000000000"),
        ("1000000000000000000000", "1e+21"),
        ("5e-324", "5e-324"),
        ("1.7976931348623157e308", "1.7976931348623157e+308"),
        ("9007199254740992", "9007199254740992"),
        ("-9007199254740992", "-9007199254740992"),
        ("295147905179352830000", "295147905179352830000"),
        ("0.1", "0.1"),
        ("-123.456e-2", "-1.23456"),
    ] {
        assert_eq!(canonical_text(input), expected, "canonical form of {input}");
    }
}

#[test]
fn integers_beyond_two_to_the_53_keep_their_digits() {
    // The documented deviation: RFC 8785 would write all three as 9007199254740992.
    assert_eq!(canonical_text("9007199254740992"), "9007199254740992");
    assert_eq!(canonical_text("9007199254740993"), "9007199254740993");
    assert_eq!(canonical_text("-9007199254740993"), "-9007199254740993");
    assert_eq!(
        serde_json_canonicalizer::pipe("9007199254740993").unwrap(),
        "9007199254740992",
        "RFC 8785 rounds, which is why this crate deviates"
    );
    assert_eq!(
        canonical_text("18446744073709551615"),
        "18446744073709551615"
    );
    assert_eq!(
        canonical_text("-9223372036854775808"),
        "-9223372036854775808"
    );
    // Written as a double, the number is a double: the same rounding as RFC 8785.
    assert_eq!(canonical_text("9007199254740993.0"), "9007199254740992");
    // Beyond u64, serde_json parses a double.
    assert_eq!(
        canonical_text("18446744073709551616"),
        "18446744073709552000"
    );
}

#[test]
fn whitespace_and_escapes_do_not_survive() {
    assert_eq!(
        canonical_text("  [ \"\\u00e9\\u0041\\/\" ,\t{ }\r\n, [ ] ]  "),
        "[\"éA/\",{},[]]"
    );
    assert_eq!(canonical_text(r#""\u2028\u2029""#), "\"\u{2028}\u{2029}\"");
    assert_eq!(canonical_text(r#""\u001F\u007f""#), "\"\\u001f\u{7F}\"");
}

#[test]
fn keys_sort_by_utf16_not_by_str() {
    // In `str` (code point) order U+E000 comes first; in UTF-16, U+1F600 (a surrogate pair,
    // 0xD83D 0xDE00) does.
    assert_canonical(
        r#"{"\ue000":1,"\ud83d\ude00":2,"\uffff":3,"\ud7ff":4}"#,
        "{\"\u{D7FF}\":4,\"\u{1F600}\":2,\"\u{E000}\":1,\"\u{FFFF}\":3}",
    );
}

#[test]
fn map_order_is_not_trusted() {
    // Build the map in reverse order: with serde_json's `preserve_order` on anywhere in the
    // build, this is the order the map iterates in.
    let mut map = serde_json::Map::new();
    for name in ["c", "b", "a"] {
        map.insert(name.into(), Value::from(name));
    }
    assert_eq!(
        canonical(&Value::Object(map)),
        r#"{"a":"a","b":"b","c":"c"}"#
    );
}

#[test]
fn canonicalize_json_appends() {
    let mut out = b"prefix:".to_vec();
    canonicalize_json(&Value::from(1), &mut out);
    canonicalize_json(&Value::Null, &mut out);
    assert_eq!(out, b"prefix:1null");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn matches_serde_json_canonicalizer(value in common::json_value()) {
        let expected = serde_json_canonicalizer::to_string(&value).unwrap();
        prop_assert_eq!(canonical(&value), expected);
    }

    #[test]
    fn canonical_form_is_a_fixed_point(value in common::json_value()) {
        let once = canonical(&value);
        prop_assert_eq!(canonical_text(&once), once);
    }

    /// serde_json's `float_roundtrip` feature is what makes this hold: without it, some 17-digit
    /// numbers parse to a neighbouring double and their canonical text is not RFC 8785's.
    #[test]
    fn serde_json_parses_doubles_exactly(bits in any::<u64>()) {
        let double = f64::from_bits(bits);
        prop_assume!(double.is_finite());
        for text in [format!("{double:.16e}"), format!("{double:e}"), format!("{double:?}")] {
            let parsed: f64 = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(parsed.to_bits(), text.parse::<f64>().unwrap().to_bits(), "{}", text);
        }
    }
}

// The streaming canonicalizer, `canonicalize_json_bytes`, against the `Value` route it replaces in
// fingerprints: the same bytes for every document, and the same documents rejected.

/// `canonicalize_json_bytes`, after a prefix that must survive.
fn streamed(json: &[u8]) -> Result<String, serde_json::Error> {
    let mut out = b"prefix".to_vec();
    let result = canonicalize_json_bytes(json, &mut out);
    let text = String::from_utf8(out).expect("canonical JSON is UTF-8");
    let canonical = text
        .strip_prefix("prefix")
        .expect("the prefix is kept")
        .to_owned();
    match result {
        Ok(()) => Ok(canonical),
        Err(error) => {
            assert_eq!(canonical, "", "output left after an error");
            Err(error)
        }
    }
}

/// The `Value` route.
fn via_value(json: &[u8]) -> Result<String, serde_json::Error> {
    Ok(canonical(&serde_json::from_slice(json)?))
}

/// The streamed form is the `Value` route's, and so are the documents refused, but for repeated
/// member names, which only the streaming route refuses.
#[track_caller]
fn assert_streams_as_value_does(json: impl AsRef<[u8]>) {
    let json = json.as_ref();
    let shown = String::from_utf8_lossy(json);
    match (streamed(json), via_value(json)) {
        (Ok(streamed), Ok(expected)) => {
            assert_eq!(streamed, expected, "{shown}");
            assert_eq!(common::repeats_a_name(json), Some(false), "{shown}");
        }
        (Err(_), Err(_)) => {}
        // What only the streaming route refuses: a `Value` keeps the last of repeated names.
        (Err(error), Ok(_)) if common::repeats_a_name(json) == Some(true) => assert!(
            error.to_string().starts_with("duplicate member name"),
            "{shown}: {error}"
        ),
        (streamed, expected) => {
            panic!("{shown}: streamed {streamed:?}, through a Value {expected:?}")
        }
    }
}

#[test]
fn streaming_matches_the_value_route() {
    for json in [
        // RFC 8785 §3.2.2 and the reference implementation's names.
        r#"{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],
            "string":"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/","literals":[null,true,false]}"#,
        r#"{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh",
            "1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"ö"}"#,
        r#"{"1":{"f":{"f":"hi","F":5},"\n":56.0},"10":{},"":"empty","a":{},"111":[{"e":"yes","E":"no"}],"A":{}}"#,
        // Names whose canonical form is escaped, or is not but was in the input.
        r#"{"\"":1,"\\":2,"\u0000":3,"\u001f":4,"a":5,"\b":6,"\/":7}"#,
        r#"{"\u0062":1,"\u0061":2,"c\u0301":3}"#,
        // Names that agree on their first eight bytes, or differ only in U+0000.
        r#"{"customer_name":1,"customer_id":2,"customer":3,"customer\u0000":4,"customerX":5}"#,
        r#"{"a\u0000":1,"a":2,"a\u0000\u0000":3,"":4,"\u0000":5}"#,
        // UTF-16 order across the first eight bytes and beyond them.
        "{\"\u{E000}\":1,\"\u{1F600}\":2,\"\u{FFFF}\":3,\"\u{D7FF}\":4,\"abcdefgh\u{E000}\":5,\"abcdefgh\u{1F600}\":6}",
        // Out of order at every level.
        r#"{"z":{"y":{"x":{"w":1,"v":2},"u":[{"t":1,"s":2},{"r":[3,{"q":4,"p":5}]}]}},"a":[]}"#,
        // Scalars and empty containers.
        "1.0",
        "-0",
        "\"x\"",
        "null",
        " [ ] ",
        "{ }",
        "[{},[],{\"a\":[]}]",
        "[1e21,1e-7,0.000001,1.5,-2.75,12345678901234567890,18446744073709551616,-9223372036854775809]",
        // serde_json's private names.
        r#"{"$serde_json::private::Number":"1.5"}"#,
        r#"{"$serde_json::private::RawValue":"[1,2]"}"#,
        r#"{"a":{"$serde_json::private::Number":"x","b":1}}"#,
        r#"{"z":1,"$serde_json::private::Number":"1"}"#,
        r#"[{"$serde_json::private::RawValue":1}]"#,
    ] {
        assert_streams_as_value_does(json);
    }
}

/// A name given twice has no canonical form (RFC 8785 takes I-JSON): however the names are
/// spelled, wherever the object is, in or out of order, and on the detour through `Value` that
/// serde_json's private names take.
#[test]
fn streaming_rejects_repeated_names() {
    for json in [
        r#"{"a":1,"a":2}"#,
        r#"{"amount":1,"amount":9800,"currency":"EUR"}"#,
        r#"{"currency":"EUR","amount":1,"amount":9800}"#,
        r#"{"b":1,"a":2,"b":3,"a":4,"b":5}"#,
        r#"{"a":1,"\u0061":2}"#,
        r#"{"\n":1,"\u000a":2,"m":0}"#,
        r#"{"customer_id_long":1,"customer_id_long":2}"#,
        r#"{"a":{"x":1,"x":2}}"#,
        r#"[1,[2,{"y":[{"z":1,"z":0}]}]]"#,
        r#"{"z":0,"z":{"b":1,"a":2}}"#,
        "{\"\u{1F600}\":1,\"\\ud83d\\ude00\":2}",
        r#"{"$serde_json::private::Number":"1","$serde_json::private::Number":"2"}"#,
        r#"{"$serde_json::private::Number":"1","a":{"b":1,"b":2}}"#,
        r#"[{"$serde_json::private::RawValue":1},{"a":1,"a":1}]"#,
        r#"{"a":{"$serde_json::private::Number":"1"},"a":2}"#,
    ] {
        assert_eq!(
            common::repeats_a_name(json.as_bytes()),
            Some(true),
            "the test input {json} repeats a name"
        );
        let error = streamed(json.as_bytes()).expect_err(json);
        assert!(
            error.to_string().starts_with("duplicate member name"),
            "{json}: {error}"
        );
    }
    // The error names the name, unescaped.
    let error = streamed(br#"{"b":{"\u0061":1,"a":2}}"#).unwrap_err();
    assert_eq!(
        error.to_string(),
        "duplicate member name \"a\" at line 1 column 23"
    );
    // Names that only look alike are different names.
    for json in [
        r#"{"a":1,"A":2,"a\u0000":3,"\u0000a":4}"#,
        r#"{"a":{"a":{"a":1}}}"#,
        r#"[{"a":1},{"a":2}]"#,
        "{\"e\u{301}\":1,\"\u{E9}\":2}",
    ] {
        assert_eq!(
            common::repeats_a_name(json.as_bytes()),
            Some(false),
            "{json}"
        );
        assert_streams_as_value_does(json);
    }
}

#[test]
fn streaming_rejects_what_serde_json_rejects() {
    for json in [
        &b""[..],
        b"   ",
        b"{\"a\":",
        b"{'a': 1}",
        b"{\"a\":1} trailing",
        b"[1] [2]",
        b"\xEF\xBB\xBF{\"a\":1}",
        b"[\"\\ud800\"]",
        b"{\"\\udc00\":1}",
        b"1e400",
        b"[-1e400]",
        b"\xFF",
        b"[\"\xFF\"]",
        b"{\"\xC0\xAF\":1}",
        b"[1,]",
        b"{\"a\":1,}",
        b"{\"a\" 1}",
        b"{1:1}",
        b"\"\\u00\"",
        b"\"a\tb\"",
        b"{\"a\nb\":1}",
        b"NaN",
        b"01",
    ] {
        assert!(
            streamed(json).is_err(),
            "{:?} is accepted",
            String::from_utf8_lossy(json)
        );
        assert_streams_as_value_does(json);
    }
}

#[test]
fn streaming_keeps_serde_json_nesting_limit() {
    let arrays = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let objects =
        |depth: usize| format!("{}1{}", "{\"b\":0,\"a\":".repeat(depth), "}".repeat(depth));
    let mixed = |depth: usize| {
        let open: String = (0..depth)
            .map(|level| {
                if level % 2 == 0 {
                    "["
                } else {
                    "{\"z\":1,\"k\":"
                }
            })
            .collect();
        let close: String = (0..depth)
            .rev()
            .map(|level| if level % 2 == 0 { "]" } else { "}" })
            .collect();
        format!("{open}{close}")
    };
    for depth in [1, 2, 100, 126, 127, 128, 129, 130, 1000] {
        for json in [arrays(depth), objects(depth), mixed(depth)] {
            assert_streams_as_value_does(&json);
        }
    }
    // Where the limit falls: serde_json reads 127 levels, not 128.
    assert!(streamed(arrays(127).as_bytes()).is_ok());
    assert!(streamed(arrays(128).as_bytes()).is_err());
}

/// JSON text that may repeat member names, each name spelled plainly or with `\u` escapes.
fn json_text_with_repeats() -> impl Strategy<Value = String> {
    let name = prop::sample::select(vec![
        "a",
        "b",
        "é",
        "\u{1F600}",
        "\u{E000}",
        "a\u{0}",
        "\"",
        "\n",
        "customer",
        "customer_id",
    ]);
    let spelled_name = (name, any::<bool>()).prop_map(|(name, escaped)| {
        if escaped {
            let units: String = name
                .encode_utf16()
                .map(|unit| format!("\\u{unit:04x}"))
                .collect();
            format!("\"{units}\"")
        } else {
            serde_json::to_string(name).unwrap()
        }
    });
    let leaf = prop_oneof![
        Just("null".to_owned()),
        any::<i32>().prop_map(|n| n.to_string()),
        (-1e6..1e6_f64).prop_map(|n| format!("{n}")),
        common::json_value().prop_map(|value| value.to_string()),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6)
                .prop_map(|items| format!("[{}]", items.join(","))),
            prop::collection::vec((spelled_name.clone(), inner), 0..6).prop_map(|members| {
                let members: Vec<String> = members
                    .into_iter()
                    .map(|(name, value)| format!("{name}:{value}"))
                    .collect();
                format!("{{{}}}", members.join(" , "))
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn streaming_matches_value_and_serde_json_canonicalizer(value in common::json_value()) {
        let expected = serde_json_canonicalizer::to_string(&value).unwrap();
        prop_assert_eq!(canonical(&value), expected.clone());
        for json in [serde_json::to_vec(&value).unwrap(), serde_json::to_vec_pretty(&value).unwrap()] {
            prop_assert_eq!(streamed(&json).unwrap(), expected.clone());
        }
    }

    /// Text that may repeat names: refused exactly when an independent reading finds a repeated
    /// name, and otherwise the `Value` route's bytes.
    #[test]
    fn streaming_refuses_exactly_the_repeated_names(json in json_text_with_repeats()) {
        let repeats = common::repeats_a_name(json.as_bytes()).expect("generated text is JSON");
        match streamed(json.as_bytes()) {
            Ok(streamed) => {
                prop_assert!(!repeats, "{} repeats a name and was canonicalized", json);
                prop_assert_eq!(&streamed, &via_value(json.as_bytes()).unwrap(), "{}", json);
                // And the result is canonical: its own canonical form.
                prop_assert_eq!(&canonical_text(&streamed), &streamed);
            }
            Err(error) => {
                prop_assert!(repeats, "{}: {}", json, error);
                prop_assert!(error.to_string().starts_with("duplicate member name"), "{}", error);
            }
        }
    }

    /// Strings put between quotes as they are, raw control characters, quotes and backslashes
    /// included: the streaming route writes a string without escapes in the input as it is.
    #[test]
    fn streaming_matches_value_on_raw_strings(chars in prop::collection::vec(
        prop_oneof![any::<char>(), prop::char::range('\u{0}', '\u{22}'), Just('\\')],
        0..8,
    )) {
        let text = String::from_iter(chars);
        assert_streams_as_value_does(format!("[\"{text}\",{{\"{text}\":1}}]"));
    }

    #[test]
    fn streaming_matches_value_on_any_bytes(json in prop::collection::vec(
        prop::sample::select(b"{}[],:\"\\ 0123456789.eE+-aeflnrstu\t\n\x00\x1f\x7f".to_vec()),
        0..24,
    )) {
        assert_streams_as_value_does(&json);
    }
}
