//! The RFC 8785 (JSON Canonicalization Scheme) form of a [`serde_json::Value`], with the one
//! deviation for large integers described in the [module docs](super#canonical-json).

use std::cmp::Ordering;

use serde_json::{Number, Value};

/// Where canonical bytes go: a `Vec<u8>` for [`canonicalize_json`], the hasher for a fingerprint,
/// so that a fingerprint never materializes the canonical document.
pub(super) trait Sink {
    fn put(&mut self, bytes: &[u8]);
}

impl Sink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// Appends the canonical form of `value` to `out`: RFC 8785 (JCS), except that integers beyond
/// ±2<sup>53</sup> keep all their digits (see the [module docs](super#canonical-json)).
///
/// Object members are sorted by the UTF-16 code units of their names, strings are escaped as
/// ECMAScript's `JSON.stringify` does, numbers are written as ECMAScript's `Number.prototype.toString`
/// writes them, and there is no whitespace.
///
/// ```
/// use idem_core::fingerprint::canonicalize_json;
///
/// let value: serde_json::Value =
///     serde_json::from_str(r#"{ "b": [1.0, 2.50, 1e21], "a": "\u00e9\n" }"#).unwrap();
/// let mut out = Vec::new();
/// canonicalize_json(&value, &mut out);
/// assert_eq!(out, "{\"a\":\"é\\n\",\"b\":[1,2.5,1e+21]}".as_bytes());
/// ```
pub fn canonicalize_json(value: &Value, out: &mut Vec<u8>) {
    write_canonical(value, out);
}

/// Writes the canonical form of `value` into `sink`.
pub(super) fn write_canonical(value: &Value, sink: &mut impl Sink) {
    // One scratch vector holds the sorted members of every object on the current path, so a
    // document costs one allocation for sorting however many objects it has.
    let mut members = Vec::new();
    write_value(value, sink, &mut members);
}

fn write_value<'a>(
    value: &'a Value,
    sink: &mut impl Sink,
    members: &mut Vec<(&'a str, &'a Value)>,
) {
    match value {
        Value::Null => sink.put(b"null"),
        Value::Bool(true) => sink.put(b"true"),
        Value::Bool(false) => sink.put(b"false"),
        Value::Number(number) => write_number(number, sink),
        Value::String(string) => write_string(string, sink),
        Value::Array(items) => {
            sink.put(b"[");
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    sink.put(b",");
                }
                write_value(item, sink, members);
            }
            sink.put(b"]");
        }
        Value::Object(map) => {
            // The map's own iteration order is not used: it is `str` order, or insertion order
            // when serde_json's `preserve_order` feature is on anywhere in the build.
            let start = members.len();
            members.extend(map.iter().map(|(name, value)| (name.as_str(), value)));
            members[start..].sort_unstable_by(|a, b| cmp_utf16(a.0, b.0));
            sink.put(b"{");
            // Indices, not an iterator: nested objects push their own members past `end` while
            // this object's members are being written.
            let end = members.len();
            let mut index = start;
            while index < end {
                let (name, value) = members[index];
                if index > start {
                    sink.put(b",");
                }
                write_string(name, sink);
                sink.put(b":");
                write_value(value, sink, members);
                index += 1;
            }
            members.truncate(start);
            sink.put(b"}");
        }
    }
}

/// Orders two strings by their UTF-16 code units, as RFC 8785 §3.2.3 sorts member names, without
/// transcoding them.
///
/// UTF-8 byte order is code point order, and UTF-16 order agrees with it except that U+E000 to
/// U+FFFF sort after the supplementary code points, which UTF-16 writes as surrogates
/// (0xD800 to 0xDFFF). Both strings share every byte before the first difference, so that byte
/// is a lead byte in both or a continuation byte in both; only two lead bytes of those two
/// classes (0xEE or 0xEF against 0xF0 to 0xF4) need the order flipped.
pub(super) fn cmp_utf16(a: &str, b: &str) -> Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    match a.iter().zip(b).position(|(x, y)| x != y) {
        None => a.len().cmp(&b.len()),
        Some(index) => {
            let (x, y) = (a[index], b[index]);
            let supplementary = |byte: u8| byte >= 0xF0;
            if x >= 0xEE && y >= 0xEE && supplementary(x) != supplementary(y) {
                y.cmp(&x)
            } else {
                x.cmp(&y)
            }
        }
    }
}

fn write_number(number: &Number, sink: &mut impl Sink) {
    // Integers are written with all their digits. Up to 2^53 that is exactly what RFC 8785
    // writes (ECMAScript prints every integer below 1e21 in plain digits); above it RFC 8785 would
    // round to the nearest double, so two different integers could share a fingerprint.
    if let Some(unsigned) = number.as_u64() {
        write_integer(false, unsigned, sink);
    } else if let Some(signed) = number.as_i64() {
        write_integer(signed < 0, signed.unsigned_abs(), sink);
    } else if let Some(float) = number.as_f64() {
        // `format` rather than `format_finite`: a `Number` is always finite, but should that ever
        // not hold, a wrong text is better than an unspecified one.
        sink.put(ryu_js::Buffer::new().format(float).as_bytes());
    } else {
        // Unreachable without serde_json's `arbitrary_precision`; with it, a number beyond f64 is
        // kept as written rather than dropped.
        sink.put(number.to_string().as_bytes());
    }
}

fn write_integer(negative: bool, mut magnitude: u64, sink: &mut impl Sink) {
    // "-18446744073709551615" at most: a sign and 20 digits.
    let mut buffer = [0u8; 21];
    let mut start = buffer.len();
    loop {
        start -= 1;
        buffer[start] = b'0' + (magnitude % 10) as u8;
        magnitude /= 10;
        if magnitude == 0 {
            break;
        }
    }
    if negative {
        start -= 1;
        buffer[start] = b'-';
    }
    sink.put(&buffer[start..]);
}

/// Writes a JSON string as RFC 8785 §3.2.2.2 (ECMAScript `JSON.stringify`) does: only `"`, `\`
/// and the controls below U+0020 are escaped; everything else, U+007F, U+2028 and U+2029
/// included, is written as UTF-8.
fn write_string(string: &str, sink: &mut impl Sink) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    sink.put(b"\"");
    let bytes = string.as_bytes();
    let mut unescaped_from = 0;
    let mut control = *b"\\u0000";
    for (index, &byte) in bytes.iter().enumerate() {
        let escape: &[u8] = match byte {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            b'\t' => b"\\t",
            b'\n' => b"\\n",
            0x0C => b"\\f",
            b'\r' => b"\\r",
            0x00..=0x1F => {
                control[4] = HEX[usize::from(byte >> 4)];
                control[5] = HEX[usize::from(byte & 0x0F)];
                &control
            }
            _ => continue,
        };
        sink.put(&bytes[unescaped_from..index]);
        sink.put(escape);
        unescaped_from = index + 1;
    }
    sink.put(&bytes[unescaped_from..]);
    sink.put(b"\"");
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn canonical(value: &Value) -> String {
        let mut out = Vec::new();
        canonicalize_json(value, &mut out);
        String::from_utf8(out).expect("canonical JSON is UTF-8")
    }

    fn utf16_order(a: &str, b: &str) -> Ordering {
        a.encode_utf16().cmp(b.encode_utf16())
    }

    /// Characters from every range whose UTF-8 and UTF-16 orders could disagree.
    fn tricky_char() -> impl Strategy<Value = char> {
        prop_oneof![
            any::<char>(),
            prop::char::range('\u{0}', '\u{7F}'),
            prop::char::range('\u{D000}', '\u{D7FF}'),
            prop::char::range('\u{E000}', '\u{FFFF}'),
            prop::char::range('\u{10000}', '\u{10FFFF}'),
        ]
    }

    fn tricky_string() -> impl Strategy<Value = String> {
        prop::collection::vec(tricky_char(), 0..6).prop_map(String::from_iter)
    }

    #[test]
    fn utf16_order_puts_supplementary_before_private_use() {
        // U+1F600 is D83D DE00 in UTF-16, so it sorts before U+E000 and U+FFFF, unlike in `str`
        // order.
        assert_eq!(cmp_utf16("\u{1F600}", "\u{E000}"), Ordering::Less);
        assert_eq!(cmp_utf16("\u{FFFF}", "\u{10000}"), Ordering::Greater);
        assert!(
            "\u{1F600}" > "\u{E000}",
            "str order differs, or the test proves nothing"
        );
        // Below U+E000 the two orders agree.
        assert_eq!(cmp_utf16("\u{D7FF}", "\u{10000}"), Ordering::Less);
        assert_eq!(cmp_utf16("a\u{1F600}", "a\u{E000}b"), Ordering::Less);
        assert_eq!(cmp_utf16("ab", "a"), Ordering::Greater);
        assert_eq!(cmp_utf16("", ""), Ordering::Equal);
        // Same lead byte 0xF0, difference in a continuation byte: plain byte order.
        assert_eq!(cmp_utf16("\u{1F600}", "\u{1F601}"), Ordering::Less);
    }

    #[test]
    fn objects_sort_by_utf16_code_units() {
        let value = json!({ "\u{E000}": 1, "\u{1F600}": 2, "z": 3, "\u{FB33}": 4, "\u{20AC}": 5 });
        assert_eq!(
            canonical(&value),
            "{\"z\":3,\"\u{20AC}\":5,\"\u{1F600}\":2,\"\u{E000}\":1,\"\u{FB33}\":4}"
        );
    }

    #[test]
    fn strings_escape_only_what_json_stringify_escapes() {
        let value =
            Value::String("\"\\/\u{8}\t\n\u{B}\u{C}\r\u{0}\u{1F}\u{7F}\u{2028}\u{2029}é😀".into());
        assert_eq!(
            canonical(&value),
            "\"\\\"\\\\/\\b\\t\\n\\u000b\\f\\r\\u0000\\u001f\u{7F}\u{2028}\u{2029}é😀\""
        );
        assert_eq!(canonical(&json!("")), "\"\"");
        assert_eq!(canonical(&json!("plain")), "\"plain\"");
    }

    #[test]
    fn integers_keep_every_digit() {
        assert_eq!(canonical(&json!(0)), "0");
        assert_eq!(canonical(&json!(-1)), "-1");
        assert_eq!(
            canonical(&json!(9_007_199_254_740_993_u64)),
            "9007199254740993"
        );
        assert_eq!(canonical(&json!(u64::MAX)), "18446744073709551615");
        assert_eq!(canonical(&json!(i64::MIN)), "-9223372036854775808");
        assert_eq!(canonical(&json!(i64::MAX)), "9223372036854775807");
    }

    #[test]
    fn nested_objects_do_not_disturb_their_parent() {
        // The scratch vector is shared between levels; a nested object must leave the parent's
        // sorted members where they were.
        let value =
            json!({ "b": { "y": { "k": 1, "j": 2 }, "x": [] }, "a": { "d": 1, "c": 2 }, "c": 0 });
        assert_eq!(
            canonical(&value),
            r#"{"a":{"c":2,"d":1},"b":{"x":[],"y":{"j":2,"k":1}},"c":0}"#
        );
    }

    proptest! {
        #[test]
        fn cmp_utf16_matches_transcoded_order(a in tricky_string(), b in tricky_string()) {
            prop_assert_eq!(cmp_utf16(&a, &b), utf16_order(&a, &b));
            prop_assert_eq!(cmp_utf16(&b, &a), utf16_order(&b, &a));
            prop_assert_eq!(cmp_utf16(&a, &a), Ordering::Equal);
        }

        #[test]
        fn strings_round_trip_through_serde_json(s in tricky_string()) {
            let text = canonical(&Value::String(s.clone()));
            prop_assert_eq!(serde_json::from_str::<String>(&text).unwrap(), s);
        }

        #[test]
        fn integers_match_their_display(n in any::<i64>(), m in any::<u64>()) {
            prop_assert_eq!(canonical(&json!(n)), n.to_string());
            prop_assert_eq!(canonical(&json!(m)), m.to_string());
        }
    }
}
