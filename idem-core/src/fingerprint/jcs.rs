//! The RFC 8785 (JSON Canonicalization Scheme) form of a JSON document, with the one deviation for
//! large integers described in the [module docs](super#canonical-json).
//!
//! Two writers share the string and number formatting: [`canonicalize_json`] walks a
//! [`serde_json::Value`], and [`canonicalize_json_bytes`] drives serde_json's parser with its own
//! visitor and writes the canonical form as the document is read, without building a `Value`.
//! Fingerprints use the second (see the [module docs](super#performance)).

use std::{cell::Cell, cmp::Ordering, fmt, mem};

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Number, Value};

/// Appends the canonical form of `value` to `out`: RFC 8785 (JCS), except that integers beyond
/// ±2<sup>53</sup> keep all their digits (see the [module docs](super#canonical-json)).
///
/// Object members are sorted by the UTF-16 code units of their names, strings are escaped as
/// ECMAScript's `JSON.stringify` does, numbers are written as ECMAScript's `Number.prototype.toString`
/// writes them, and there is no whitespace.
///
/// [`canonicalize_json_bytes`] writes the same bytes straight from JSON text, without a `Value`.
///
/// ```
/// use idem::fingerprint::canonicalize_json;
///
/// let value: serde_json::Value =
///     serde_json::from_str(r#"{ "b": [1.0, 2.50, 1e21], "a": "\u00e9\n" }"#).unwrap();
/// let mut out = Vec::new();
/// canonicalize_json(&value, &mut out);
/// assert_eq!(out, "{\"a\":\"é\\n\",\"b\":[1,2.5,1e+21]}".as_bytes());
/// ```
pub fn canonicalize_json(value: &Value, out: &mut Vec<u8>) {
    // One scratch vector holds the sorted members of every object on the current path, so a
    // document costs one allocation for sorting however many objects it has.
    let mut members = Vec::new();
    write_value(value, out, &mut members);
}

/// Appends the canonical form of the JSON text `json` to `out`, exactly as
/// `canonicalize_json(&serde_json::from_slice(json)?, out)` would, without building the
/// [`Value`].
///
/// The input is what [`serde_json::from_slice`] accepts into a `Value`, and an input it rejects is
/// rejected with the same kind of error: invalid JSON, trailing characters, an unpaired surrogate
/// escape, nesting 128 levels deep or more. On error `out` is left as it was.
///
/// An object that names a member twice, at any depth and however the names are spelled
/// (`"a"` and `"\u0061"` are one name), is rejected too: RFC 8785 canonicalizes I-JSON, which
/// has no such objects, and there is no canonical form that would tell `{"a":1,"a":2}` from
/// `{"a":2}`, which is all a `Value` keeps of it. A fingerprint hashes such a body as bytes.
/// Finding them costs nothing for objects whose members are already in order, as most
/// serializers write them: the check that spares those objects a sort also sees that no name
/// repeats.
///
/// ```
/// use idem::fingerprint::{canonicalize_json, canonicalize_json_bytes};
///
/// let json = br#"{ "b": [1.0, 2.50, 1e21], "a": "\u00e9\n" }"#;
/// let mut out = b"canonical: ".to_vec();
/// canonicalize_json_bytes(json, &mut out).unwrap();
/// assert_eq!(out, "canonical: {\"a\":\"é\\n\",\"b\":[1,2.5,1e+21]}".as_bytes());
///
/// // The same bytes as the `Value` route.
/// let mut expected = b"canonical: ".to_vec();
/// canonicalize_json(&serde_json::from_slice(json).unwrap(), &mut expected);
/// assert_eq!(out, expected);
///
/// // Not JSON: an error, and `out` untouched.
/// assert!(canonicalize_json_bytes(b"[1, 2] and more", &mut out).is_err());
/// assert_eq!(out, expected);
///
/// // Not I-JSON: a member name given twice.
/// let error = canonicalize_json_bytes(br#"{"amount":1,"amount":9800}"#, &mut out).unwrap_err();
/// assert!(error.to_string().starts_with("duplicate member name \"amount\""), "{error}");
/// assert_eq!(out, expected);
/// ```
pub fn canonicalize_json_bytes(json: &[u8], out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
    with_buffers(|buffers| canonicalize_bytes(json, out, &mut buffers.scratch))
}

/// [`canonicalize_json_bytes`] with the caller's scratch space.
pub(super) fn canonicalize_bytes(
    json: &[u8],
    out: &mut Vec<u8>,
    scratch: &mut Scratch,
) -> Result<(), serde_json::Error> {
    let start = out.len();
    // Usually enough: the canonical form drops whitespace and rarely grows.
    out.reserve(json.len());
    scratch.members.clear();
    scratch.names.clear();
    let mut writer = Writer {
        out,
        scratch,
        needs_value: false,
        private_names_as_value: true,
    };
    let mut deserializer = serde_json::Deserializer::from_slice(json);
    let result = ValueSeed {
        writer: &mut writer,
        comma: false,
    }
    .deserialize(&mut deserializer)
    // As `from_slice` does: only whitespace may follow the document.
    .and_then(|()| deserializer.end());
    let needs_value = writer.needs_value;
    if let Err(error) = result {
        out.truncate(start);
        if !needs_value {
            return Err(error);
        }
        // A `Value` keeps the last of repeated names: read the document once more with the
        // private names as plain names, only to refuse repeated ones as above.
        check_names(json, &mut Vec::new(), scratch)?;
        let value: Value = serde_json::from_slice(json)?;
        canonicalize_json(&value, out);
    }
    Ok(())
}

/// The streaming canonicalization into `out`, without the detour through `Value` for
/// serde_json's private names: an error for a document that repeats a member name.
#[cold]
fn check_names(
    json: &[u8],
    out: &mut Vec<u8>,
    scratch: &mut Scratch,
) -> Result<(), serde_json::Error> {
    scratch.members.clear();
    scratch.names.clear();
    let mut writer = Writer {
        out,
        scratch,
        needs_value: false,
        private_names_as_value: false,
    };
    let mut deserializer = serde_json::Deserializer::from_slice(json);
    ValueSeed {
        writer: &mut writer,
        comma: false,
    }
    .deserialize(&mut deserializer)
    .and_then(|()| deserializer.end())
}

/// Buffers kept from one canonicalization to the next on the same thread, so that a request
/// allocates nothing once the buffers have grown to its size.
#[derive(Debug, Default)]
pub(super) struct Buffers {
    /// Whatever the caller hashes; the fingerprint's input.
    pub(super) out: Vec<u8>,
    pub(super) scratch: Scratch,
}

/// A buffer that grew beyond this is freed after use rather than kept, so that one large request
/// does not pin its memory to the thread for good.
const MAX_RETAINED_BYTES: usize = 1 << 20;

impl Buffers {
    const fn new() -> Self {
        Self {
            out: Vec::new(),
            scratch: Scratch {
                members: Vec::new(),
                names: Vec::new(),
                region: Vec::new(),
            },
        }
    }

    /// Empties the buffers, freeing those too large to keep.
    fn recycle(&mut self) {
        fn recycle<T>(buffer: &mut Vec<T>) {
            if buffer.capacity() * mem::size_of::<T>() > MAX_RETAINED_BYTES {
                *buffer = Vec::new();
            } else {
                buffer.clear();
            }
        }
        recycle(&mut self.out);
        recycle(&mut self.scratch.members);
        recycle(&mut self.scratch.names);
        recycle(&mut self.scratch.region);
    }
}

thread_local! {
    // A `Cell` that is emptied while in use rather than a `RefCell`: a nested or concurrent use on
    // the same thread (there is none today) gets fresh buffers instead of a panic.
    static BUFFERS: Cell<Buffers> = const { Cell::new(Buffers::new()) };
}

/// Runs `f` with this thread's buffers, empty, and keeps them for the next call.
pub(super) fn with_buffers<R>(f: impl FnOnce(&mut Buffers) -> R) -> R {
    // `try_with`: during thread teardown the buffers may be gone; then fresh ones do.
    let mut buffers = BUFFERS.try_with(Cell::take).unwrap_or_default();
    buffers.recycle();
    let result = f(&mut buffers);
    buffers.recycle();
    let _ = BUFFERS.try_with(|cell| cell.set(buffers));
    result
}

/// The streaming canonicalizer's bookkeeping, reused across documents.
#[derive(Debug, Default)]
pub(super) struct Scratch {
    /// The members of every object on the current path, innermost last.
    members: Vec<Member>,
    /// Member names whose canonical form differs from the name (they have characters to escape).
    names: Vec<u8>,
    /// An object's members while they are written back in sorted order.
    region: Vec<u8>,
}

/// One object member written to the output, and where to find its name for sorting.
#[derive(Clone, Copy, Debug)]
struct Member {
    /// The first bytes of the name as a number that orders as the names do, mostly; see
    /// [`cmp_names`].
    prefix: u64,
    /// `"name":value` is `out[start..end]`, without the comma before it.
    start: usize,
    end: usize,
    /// The name, unescaped, is `name_len` bytes at `name_start` of the output when its canonical
    /// form needed no escape (almost always), of [`Scratch::names`] otherwise.
    name_start: usize,
    name_len: usize,
    name_in_out: bool,
}

impl Member {
    fn name<'a>(&self, out: &'a [u8], names: &'a [u8]) -> &'a [u8] {
        let text = if self.name_in_out { out } else { names };
        &text[self.name_start..self.name_start + self.name_len]
    }
}

/// The first eight bytes of `name`, zero-padded, as a big-endian number whose order is the names'
/// UTF-16 order whenever two prefixes differ.
///
/// Each byte goes through [`utf16_rank`], which turns UTF-16 order into plain byte order (see
/// [`cmp_utf16_bytes`]). A name shorter than eight bytes is padded with zeros, which sorts it
/// before any longer name it starts, as a prefix sorts first; the only bytes equal to padding are
/// U+0000 characters, which make the prefixes equal and leave the decision to the full names.
fn name_prefix(name: &[u8]) -> u64 {
    let head = &name[..name.len().min(8)];
    let word = head
        .iter()
        .fold(0, |word: u64, &byte| word << 8 | u64::from(byte));
    // Left-aligned, the first byte most significant; an empty name shifts by 64 and is 0.
    let prefix = word.checked_shl(64 - 8 * head.len() as u32).unwrap_or(0);
    // Only non-ASCII names can hold a byte that `utf16_rank` moves.
    if prefix & 0x8080_8080_8080_8080 == 0 {
        return prefix;
    }
    let mut ranks = [0; 8];
    for (rank, &byte) in ranks.iter_mut().zip(head) {
        *rank = utf16_rank(byte);
    }
    u64::from_be_bytes(ranks)
}

/// Maps a byte of UTF-8 so that byte order becomes UTF-16 code unit order: the lead bytes of
/// U+E000 to U+FFFF (0xEE, 0xEF) move after those of the supplementary planes (0xF0 to 0xF4).
/// Continuation bytes are below 0xC0, so position within a character does not matter.
const fn utf16_rank(byte: u8) -> u8 {
    match byte {
        0xEE | 0xEF => byte + 5,
        0xF0..=0xF4 => byte - 2,
        _ => byte,
    }
}

/// Orders two members by name, in UTF-16 order: by prefix when the prefixes differ, else by the
/// full names.
#[inline]
fn cmp_names(a: &Member, b: &Member, out: &[u8], names: &[u8]) -> Ordering {
    match a.prefix.cmp(&b.prefix) {
        Ordering::Equal => cmp_full_names(a, b, out, names),
        unequal => unequal,
    }
}

/// [`cmp_names`] for names that share their first eight bytes: rare enough to stay out of line.
#[cold]
fn cmp_full_names(a: &Member, b: &Member, out: &[u8], names: &[u8]) -> Ordering {
    cmp_utf16_bytes(a.name(out, names), b.name(out, names))
}

/// The first member names that make serde_json's `Value` read an object as something else: a
/// number with the `arbitrary_precision` feature, embedded JSON text with `raw_value`. Whether
/// either feature is on is decided by the whole build, not this crate, so a document that starts
/// an object with one of these names is handed to `Value` to get exactly its reading.
const SERDE_JSON_PRIVATE_NAMES: [&str; 2] = [
    "$serde_json::private::Number",
    "$serde_json::private::RawValue",
];

/// One streaming canonicalization: where the canonical form goes and the bookkeeping for it.
struct Writer<'a> {
    out: &'a mut Vec<u8>,
    scratch: &'a mut Scratch,
    /// Set with the error that stops the parse when the document must go through `Value`.
    needs_value: bool,
    /// Whether an object that starts with one of [`SERDE_JSON_PRIVATE_NAMES`] stops the parse
    /// (`needs_value`), or is read as any other object.
    private_names_as_value: bool,
}

impl Writer<'_> {
    /// Puts the members of the object whose first member starts at `members_start` of the output
    /// and whose records start at `first` in canonical order: sorted by name. A name that
    /// appears twice is an error, which carries the name.
    ///
    /// Nested objects were put in order when they ended, so each object is rewritten at most
    /// once, and a document costs O(size × depth) here; an object already in order (as written
    /// by most serializers, or by a client that canonicalizes) is not rewritten at all, and
    /// needs no search for repeated names either: strictly ascending names cannot repeat.
    fn order_members(&mut self, first: usize, members_start: usize) -> Result<(), String> {
        let Scratch {
            members,
            names,
            region,
        } = &mut *self.scratch;
        let members = &mut members[first..];
        let out: &[u8] = self.out;
        let cmp = |a: &Member, b: &Member| cmp_names(a, b, out, names);
        if members
            .windows(2)
            .all(|pair| cmp(&pair[0], &pair[1]) == Ordering::Less)
        {
            return Ok(());
        }
        members.sort_unstable_by(cmp);
        if let Some(pair) = members
            .windows(2)
            .find(|pair| cmp(&pair[0], &pair[1]) == Ordering::Equal)
        {
            return Err(String::from_utf8_lossy(pair[0].name(out, names)).into_owned());
        }
        region.clear();
        region.extend_from_slice(&self.out[members_start..]);
        self.out.truncate(members_start);
        for (index, member) in members.iter().enumerate() {
            if index > 0 {
                self.out.push(b',');
            }
            self.out.extend_from_slice(
                &region[member.start - members_start..member.end - members_start],
            );
        }
        Ok(())
    }
}

/// Reads one JSON value and writes its canonical form, after a comma if `comma`.
struct ValueSeed<'w, 'a> {
    writer: &'w mut Writer<'a>,
    comma: bool,
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_, '_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        // Here rather than in `visit_seq`: only now is it known that another element follows.
        if self.comma {
            self.writer.out.push(b',');
        }
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.writer.out.extend_from_slice(b"null");
        Ok(())
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<(), E> {
        let text: &[u8] = if value { b"true" } else { b"false" };
        self.writer.out.extend_from_slice(text);
        Ok(())
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<(), E> {
        write_integer(false, value, self.writer.out);
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<(), E> {
        write_integer(value < 0, value.unsigned_abs(), self.writer.out);
        Ok(())
    }

    /// serde_json calls this for numbers with a fraction or an exponent, and for integers beyond
    /// 64 bits: the same numbers that are doubles in a `Value`.
    fn visit_f64<E: de::Error>(self, value: f64) -> Result<(), E> {
        if value.is_finite() {
            write_double(value, self.writer.out);
        } else {
            // What a `Value` holds for a non-finite double; serde_json's parser never produces one.
            self.writer.out.extend_from_slice(b"null");
        }
        Ok(())
    }

    // A string without escapes in the input is borrowed from it, one with escapes from serde_json's
    // scratch buffer (`visit_string` ends up here too); neither is copied before it is written.
    fn visit_borrowed_str<E: de::Error>(self, value: &'de str) -> Result<(), E> {
        write_unescaped_string(value, self.writer.out);
        Ok(())
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<(), E> {
        write_string(value, self.writer.out);
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<(), A::Error> {
        let writer = self.writer;
        writer.out.push(b'[');
        let mut comma = false;
        while let Some(()) = items.next_element_seed(ValueSeed {
            writer: &mut *writer,
            comma,
        })? {
            comma = true;
        }
        writer.out.push(b']');
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let writer = self.writer;
        writer.out.push(b'{');
        let members_start = writer.out.len();
        let first = writer.scratch.members.len();
        let names_mark = writer.scratch.names.len();
        let mut first_member = true;
        // Each member is recorded once its value is written; nested objects have taken their
        // own records off the stack by then.
        while let Some(mut member) = map.next_key_seed(NameSeed {
            writer: &mut *writer,
            first: first_member,
        })? {
            map.next_value_seed(ValueSeed {
                writer: &mut *writer,
                comma: false,
            })?;
            member.end = writer.out.len();
            writer.scratch.members.push(member);
            first_member = false;
        }
        writer
            .order_members(first, members_start)
            .map_err(|name| de::Error::custom(format_args!("duplicate member name {name:?}")))?;
        writer.scratch.members.truncate(first);
        writer.scratch.names.truncate(names_mark);
        writer.out.push(b'}');
        Ok(())
    }
}

/// Reads a member name and writes `"name":`, after a comma unless the member is the object's
/// first.
struct NameSeed<'w, 'a> {
    writer: &'w mut Writer<'a>,
    first: bool,
}

impl<'de> DeserializeSeed<'de> for NameSeed<'_, '_> {
    type Value = Member;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Member, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for NameSeed<'_, '_> {
    type Value = Member;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a member name")
    }

    fn visit_borrowed_str<E: de::Error>(self, name: &'de str) -> Result<Member, E> {
        self.member(name, true)
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<Member, E> {
        self.member(name, false)
    }
}

impl NameSeed<'_, '_> {
    /// Writes the name and records the member; `unescaped` for a name borrowed from the input (see
    /// [`write_unescaped_string`]).
    fn member<E: de::Error>(self, name: &str, unescaped: bool) -> Result<Member, E> {
        let writer = self.writer;
        if self.first && writer.private_names_as_value && SERDE_JSON_PRIVATE_NAMES.contains(&name) {
            writer.needs_value = true;
            return Err(E::custom(
                "a serde_json private member name; read as a Value instead",
            ));
        }
        if !self.first {
            writer.out.push(b',');
        }
        let start = writer.out.len();
        if unescaped {
            write_unescaped_string(name, writer.out);
        } else {
            write_string(name, writer.out);
        }
        // Escaping only lengthens, so an unchanged length means the name is in the output as is.
        let (name_start, name_in_out) = if writer.out.len() - start == name.len() + 2 {
            (start + 1, true)
        } else {
            let names = &mut writer.scratch.names;
            names.extend_from_slice(name.as_bytes());
            (names.len() - name.len(), false)
        };
        writer.out.push(b':');
        Ok(Member {
            prefix: name_prefix(name.as_bytes()),
            start,
            end: start,
            name_start,
            name_len: name.len(),
            name_in_out,
        })
    }
}

fn write_value<'a>(value: &'a Value, out: &mut Vec<u8>, members: &mut Vec<(&'a str, &'a Value)>) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(number) => write_number(number, out),
        Value::String(string) => write_string(string, out),
        Value::Array(items) => {
            out.push(b'[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write_value(item, out, members);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            // The map's own iteration order is not used: it is `str` order, or insertion order
            // when serde_json's `preserve_order` feature is on anywhere in the build.
            let start = members.len();
            members.extend(map.iter().map(|(name, value)| (name.as_str(), value)));
            members[start..].sort_unstable_by(|a, b| cmp_utf16(a.0, b.0));
            out.push(b'{');
            // Indices, not an iterator: nested objects push their own members past `end` while
            // this object's members are being written.
            let end = members.len();
            let mut index = start;
            while index < end {
                let (name, value) = members[index];
                if index > start {
                    out.push(b',');
                }
                write_string(name, out);
                out.push(b':');
                write_value(value, out, members);
                index += 1;
            }
            members.truncate(start);
            out.push(b'}');
        }
    }
}

/// Orders two strings by their UTF-16 code units, as RFC 8785 §3.2.3 sorts member names, without
/// transcoding them.
pub(super) fn cmp_utf16(a: &str, b: &str) -> Ordering {
    cmp_utf16_bytes(a.as_bytes(), b.as_bytes())
}

/// [`cmp_utf16`] on the UTF-8 bytes of two strings.
///
/// UTF-8 byte order is code point order, and UTF-16 order agrees with it except that U+E000 to
/// U+FFFF sort after the supplementary code points, which UTF-16 writes as surrogates
/// (0xD800 to 0xDFFF). Both strings share every byte before the first difference, so that byte
/// is a lead byte in both or a continuation byte in both; only two lead bytes of those two
/// classes (0xEE or 0xEF against 0xF0 to 0xF4) need the order flipped.
fn cmp_utf16_bytes(a: &[u8], b: &[u8]) -> Ordering {
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

fn write_number(number: &Number, out: &mut Vec<u8>) {
    // Integers are written with all their digits. Up to 2^53 that is exactly what RFC 8785
    // writes (ECMAScript prints every integer below 1e21 in plain digits); above it RFC 8785 would
    // round to the nearest double, so two different integers could share a fingerprint.
    if let Some(unsigned) = number.as_u64() {
        write_integer(false, unsigned, out);
    } else if let Some(signed) = number.as_i64() {
        write_integer(signed < 0, signed.unsigned_abs(), out);
    } else if let Some(float) = number.as_f64() {
        write_double(float, out);
    } else {
        // Unreachable without serde_json's `arbitrary_precision`; with it, a number beyond f64 is
        // kept as written rather than dropped.
        out.extend_from_slice(number.to_string().as_bytes());
    }
}

fn write_integer(negative: bool, mut magnitude: u64, out: &mut Vec<u8>) {
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
    out.extend_from_slice(&buffer[start..]);
}

/// 2<sup>53</sup>: every integer up to it in magnitude is a double, and below 10<sup>21</sup>
/// ECMAScript writes an integral double in plain digits.
const EXACT_DOUBLE_INTEGER: f64 = 9_007_199_254_740_992.0;

/// Writes a double as ECMAScript's `Number.prototype.toString` does.
fn write_double(double: f64, out: &mut Vec<u8>) {
    if double.fract() == 0.0 && double.abs() <= EXACT_DOUBLE_INTEGER {
        // A shortcut with the same text: the integer's digits, `-0` as `0`.
        write_integer(double < 0.0, double.abs() as u64, out);
    } else if let Some((digits, scale)) = short_decimal(double.abs()) {
        write_short_decimal(double < 0.0, digits, scale, out);
    } else {
        // `format` rather than `format_finite`: the doubles here are finite, but should that ever
        // not hold, a wrong text is better than an unspecified one.
        out.extend_from_slice(ryu_js::Buffer::new().format(double).as_bytes());
    }
}

/// Powers of ten that are exact doubles.
const POWERS_OF_TEN: [f64; 16] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
];

/// For a positive, non-integral double that some decimal of at most 15 significant digits
/// denotes, that decimal as `digits × 10^-scale` with no trailing zero in `digits`, provided
/// ECMAScript writes it without an exponent (it is at least 10<sup>-6</sup>); `None` otherwise.
///
/// Most decimals in requests (prices, rates, coordinates) are such doubles, and for them this is a
/// shortcut to what the shortest round-trip formatting (`ryu-js`) finds:
/// - the decimal denotes the double: `digits / 10^scale` is computed from two exact doubles with
///   one correctly rounded division, so it is the double nearest the decimal, which is what
///   parsing the decimal gives;
/// - it is the shortest one: two different decimals of at most 15 significant digits never round
///   to the same double (which is why 15 digits always survive a round trip through a double), so
///   no shorter decimal, and no other of the same length, denotes it;
/// - ECMAScript writes those digits without an exponent when the double is at least
///   10<sup>-6</sup> and below 10<sup>21</sup>: digits before the point and after, or `0.`, up to
///   five zeros and the digits.
fn short_decimal(magnitude: f64) -> Option<(u64, usize)> {
    // Below 10^-6 ECMAScript writes an exponent. The double nearest a decimal of at most 15 digits
    // is below the double nearest 10^-6 exactly when the decimal is below 10^-6: rounding keeps
    // order, and two such decimals do not round to the same double.
    if !(1e-6..1e15).contains(&magnitude) {
        return None;
    }
    for (scale, &power) in POWERS_OF_TEN.iter().enumerate().skip(1) {
        // Rounded, not required to be integral: the product of the double nearest a decimal and a
        // power of ten can miss the decimal's digits by an ulp (1.1 × 10 is 11.000000000000002).
        // The division below decides, whatever the candidate.
        let candidate = (magnitude * power).round();
        if candidate >= 1e15 {
            return None;
        }
        if candidate / power == magnitude {
            // An integer below 2^53, so the conversion is exact.
            let (mut digits, mut scale) = (candidate as u64, scale);
            while digits % 10 == 0 {
                digits /= 10;
                scale -= 1;
            }
            // A non-integral double is not a decimal without fraction digits, so `scale` stays
            // above zero.
            return (scale > 0).then_some((digits, scale));
        }
    }
    None
}

/// Writes `digits × 10^-scale`, `0 < scale <= 15`, in plain decimal notation: the integer part
/// (`0` if there is none), a point, and `scale` fraction digits.
fn write_short_decimal(negative: bool, mut digits: u64, scale: usize, out: &mut Vec<u8>) {
    // A sign, at most 15 digits before the point and 15 after it, and the point.
    let mut buffer = [0u8; 32];
    let mut start = buffer.len();
    for _ in 0..scale {
        start -= 1;
        buffer[start] = b'0' + (digits % 10) as u8;
        digits /= 10;
    }
    start -= 1;
    buffer[start] = b'.';
    loop {
        start -= 1;
        buffer[start] = b'0' + (digits % 10) as u8;
        digits /= 10;
        if digits == 0 {
            break;
        }
    }
    if negative {
        start -= 1;
        buffer[start] = b'-';
    }
    out.extend_from_slice(&buffer[start..]);
}

/// Writes a JSON string as RFC 8785 §3.2.2.2 (ECMAScript `JSON.stringify`) does: only `"`, `\`
/// and the controls below U+0020 are escaped; everything else, U+007F, U+2028 and U+2029
/// included, is written as UTF-8.
fn write_string(string: &str, out: &mut Vec<u8>) {
    let bytes = string.as_bytes();
    // Most strings have nothing to escape: one scan, one copy.
    match bytes.iter().position(|&byte| ESCAPED[usize::from(byte)]) {
        None => {
            out.reserve(bytes.len() + 2);
            out.push(b'"');
            out.extend_from_slice(bytes);
            out.push(b'"');
        }
        Some(first) => write_escaped(bytes, first, out),
    }
}

/// [`write_string`] for a string that serde_json borrowed from the input, which has nothing to
/// escape: the input had no escape between its quotes, and serde_json rejects the control
/// characters that JSON forbids there, so it holds no `"`, `\` or control character.
///
/// Not scanning such strings a second time saves about 7% of the canonicalization's instructions
/// and time on typical bodies, whose strings are short. Were serde_json ever to hand over a raw
/// control character, the output would differ from the `Value` route's, which the tests compare
/// on inputs that contain them.
fn write_unescaped_string(string: &str, out: &mut Vec<u8>) {
    debug_assert!(!string.bytes().any(|byte| ESCAPED[usize::from(byte)]));
    out.reserve(string.len() + 2);
    out.push(b'"');
    out.extend_from_slice(string.as_bytes());
    out.push(b'"');
}

/// The bytes [`write_string`] escapes: `"`, `\` and the controls below U+0020.
const ESCAPED: [bool; 256] = {
    let mut escaped = [false; 256];
    let mut byte = 0;
    while byte < 0x20 {
        escaped[byte] = true;
        byte += 1;
    }
    escaped[b'"' as usize] = true;
    escaped[b'\\' as usize] = true;
    escaped
};

/// [`write_string`] for a string whose first byte to escape is at `first`.
#[cold]
fn write_escaped(bytes: &[u8], first: usize, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    out.extend_from_slice(&bytes[..first]);
    let mut rest = &bytes[first..];
    while let Some(index) = rest.iter().position(|&byte| ESCAPED[usize::from(byte)]) {
        out.extend_from_slice(&rest[..index]);
        let byte = rest[index];
        match byte {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x08 => out.extend_from_slice(b"\\b"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            0x0C => out.extend_from_slice(b"\\f"),
            b'\r' => out.extend_from_slice(b"\\r"),
            _ => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(byte >> 4)],
                HEX[usize::from(byte & 0x0F)],
            ]),
        }
        rest = &rest[index + 1..];
    }
    out.extend_from_slice(rest);
    out.push(b'"');
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

    fn double_text(double: f64) -> String {
        let mut out = Vec::new();
        write_double(double, &mut out);
        String::from_utf8(out).expect("a number is ASCII")
    }

    /// What `write_double` must write: `ryu-js`, which implements ECMAScript's algorithm.
    fn ecmascript_text(double: f64) -> String {
        ryu_js::Buffer::new().format(double).to_owned()
    }

    #[test]
    fn double_shortcuts_match_ryu_js_at_their_edges() {
        for double in [
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.5,
            0.1,
            0.2,
            0.3,
            0.1 + 0.2,
            1.1,
            2.675,
            1250.5,
            -1250.25,
            19.99,
            0.000001,
            0.0000015,
            0.000001234,
            1e-6_f64.next_down(),
            1e-6_f64.next_up(),
            0.00000099,
            1e-7,
            123456789012345.6,
            12345678901234.56,
            99999999999999.9,
            999999999999999.9,
            0.999999999999999,
            0.9999999999999999,
            9007199254740991.0,
            9007199254740992.0,
            9007199254740993.0,
            -9007199254740992.0,
            9007199254740994.0,
            1e15,
            1e21,
            1e22,
            5e-324,
            f64::MAX,
            f64::MIN_POSITIVE,
        ] {
            assert_eq!(double_text(double), ecmascript_text(double), "{double:e}");
        }
    }

    #[test]
    fn name_prefixes_order_by_utf16_code_units() {
        let names = [
            "",
            "a",
            "a\0",
            "a\0\0",
            "ab",
            "abcdefgh",
            "abcdefghi",
            "\u{E000}",
            "\u{1F600}",
        ];
        for a in names {
            for b in names {
                let (pa, pb) = (name_prefix(a.as_bytes()), name_prefix(b.as_bytes()));
                if pa != pb {
                    assert_eq!(pa.cmp(&pb), cmp_utf16(a, b), "{a:?} against {b:?}");
                }
            }
        }
        assert_eq!(name_prefix(b""), 0);
        assert_eq!(name_prefix(b"a"), 0x61 << 56);
        assert_eq!(name_prefix(b"abcdefghij"), name_prefix(b"abcdefgh"));
    }

    proptest! {
        #[test]
        fn doubles_match_ryu_js(bits in any::<u64>()) {
            let double = f64::from_bits(bits);
            prop_assume!(double.is_finite());
            prop_assert_eq!(double_text(double), ecmascript_text(double));
        }

        /// The doubles the short-decimal shortcut is for: decimals with few digits, as requests
        /// carry them, and the doubles right next to them.
        #[test]
        fn short_decimals_match_ryu_js(
            digits in prop_oneof![1..100_000_u64, 1..10_000_000_000_000_000_u64],
            scale in 0..24_i32,
            negative in any::<bool>(),
            step in -1..=1_i32,
        ) {
            let text = format!("{}{digits}e-{scale}", if negative { "-" } else { "" });
            let double: f64 = text.parse().unwrap();
            let double = match step {
                -1 => double.next_down(),
                1 => double.next_up(),
                _ => double,
            };
            prop_assert_eq!(double_text(double), ecmascript_text(double), "{}", text);
        }

        #[test]
        fn integral_doubles_match_ryu_js(integer in -(1_i64 << 54)..=(1 << 54)) {
            let double = integer as f64;
            prop_assert_eq!(double_text(double), ecmascript_text(double));
        }

        #[test]
        fn name_prefixes_agree_with_cmp_utf16(a in tricky_string(), b in tricky_string()) {
            let (pa, pb) = (name_prefix(a.as_bytes()), name_prefix(b.as_bytes()));
            if pa != pb {
                prop_assert_eq!(pa.cmp(&pb), cmp_utf16(&a, &b));
            } else {
                // Equal prefixes: the names agree on their first eight bytes, or differ only in
                // U+0000 against the end of the shorter.
                let head = |s: &str| s.as_bytes().iter().take(8).copied().filter(|&b| b != 0).collect::<Vec<_>>();
                prop_assert_eq!(head(&a), head(&b));
            }
        }
    }
}
