//! The record of a [`StoredResponse`]: a compact, versioned byte encoding, which is also what
//! the response is in memory (one allocation) and what a store that keeps bytes keeps.
//!
//! Layout (version 1), integers big-endian:
//!
//! ```text
//! u8  version = 1
//! u8  body kind: 0 = kept, 1 = omitted (too large)
//! u16 status
//! u16 header count, then per header: u16 name length, name, u32 value length, value
//! u64 body length, body            (kind 0 only)
//! ```
//!
//! A later version gets a new number; [`validate`] reads every version it knows.
//!
//! # Limits
//!
//! The widths above bound what a record holds: at most 65,535 header values (repeated names
//! count once per value), names up to 65,535 bytes (all that [`HeaderName`] allows) and values
//! up to 4 GiB − 1 each. [`encode`] refuses a response beyond them with an [`EncodeError`]
//! rather than writing a record that says something else.
//!
//! Everything `encode` writes, [`validate`] accepts. `encode` writes the headers in the map's
//! order (names in lowercase, the values of a name together), and a replay appends them in that
//! order, which rebuilds the map. A [`HeaderMap`] holds at most 24,576 distinct names but any
//! number of values under them, so a record of 65,535 values replays too. A record is also the
//! only one of its response: `validate` refuses what `encode` would not have written (a name in
//! capitals, values of one name apart, a name or value a header cannot have), so a record that
//! validates replays without a failure, and is the bytes `encode` writes for that replay.
//!
//! `validate` never trusts a count or a length before the bytes behind it are there, and
//! answers a [`DecodeError`] for any input, whatever it claims (the first version panicked on a
//! header count above 24,576).

use std::{collections::HashSet, fmt, sync::Arc};

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

const VERSION: u8 = 1;
const BODY_KEPT: u8 = 0;
const BODY_OMITTED: u8 = 1;

/// Where the header count sits, and where the headers begin.
const COUNT_AT: usize = 4;
const HEADERS_AT: usize = 6;

/// Records up to this length are encoded on the stack, then copied into their one allocation.
const ON_THE_STACK: usize = 1024;

/// How many header values a record may declare without its names being counted: fewer values
/// than a [`HeaderMap`] holds distinct names cannot fill one (see [`validate`]).
const VALUES_A_MAP_ALWAYS_TAKES: usize = 24_575;

/// A stored record that cannot be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// The record was written by a format version this build does not know.
    UnknownVersion(u8),
    /// The record ends early, carries bytes past its end, or holds an invalid field.
    Malformed(&'static str),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownVersion(version) => write!(f, "unknown record format version {version}"),
            Self::Malformed(what) => write!(f, "malformed record: {what}"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// A response that the record format cannot hold (see
/// [`StoredResponse::new`](super::StoredResponse::new)).
///
/// Nothing about such a response is wrong for its client; it only cannot be stored for replay.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EncodeError {
    /// More header values than a record holds (65,535); a name given several times counts
    /// once per value.
    TooManyHeaders {
        /// The number of header values in the response.
        count: usize,
    },
    /// A header name longer than a record holds (65,535 bytes).
    HeaderNameTooLong {
        /// The length of the name, in bytes.
        len: usize,
    },
    /// A header value longer than a record holds (4 GiB − 1).
    HeaderValueTooLong {
        /// The header's name.
        name: HeaderName,
        /// The length of the value, in bytes.
        len: usize,
    },
    /// A body longer than a record holds (2<sup>64</sup> − 1 bytes).
    BodyTooLong {
        /// The length of the body, in bytes.
        len: usize,
    },
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooManyHeaders { count } => write!(
                f,
                "the response has {count} header values, more than the 65535 a stored record \
                 holds"
            ),
            Self::HeaderNameTooLong { len } => write!(
                f,
                "a response header name is {len} bytes long, more than the 65535 a stored \
                 record holds"
            ),
            Self::HeaderValueTooLong { name, len } => write!(
                f,
                "the value of the response header `{name}` is {len} bytes long, more than the \
                 4294967295 a stored record holds"
            ),
            Self::BodyTooLong { len } => write!(
                f,
                "the response body is {len} bytes long, more than a stored record holds"
            ),
        }
    }
}

impl std::error::Error for EncodeError {}

/// Where [`write`] puts a record: the record itself, or only the count of its bytes.
trait Sink {
    fn put(&mut self, bytes: &[u8]);
}

/// Counts the bytes of a record without writing them.
struct Length(usize);

impl Sink for Length {
    fn put(&mut self, bytes: &[u8]) {
        self.0 += bytes.len();
    }
}

/// Writes into a buffer already the record's length.
struct Filling<'a> {
    buffer: &'a mut [u8],
    at: usize,
}

impl Sink for Filling<'_> {
    fn put(&mut self, bytes: &[u8]) {
        self.buffer[self.at..self.at + bytes.len()].copy_from_slice(bytes);
        self.at += bytes.len();
    }
}

/// A response to encode: its status, the headers to keep (each call of `headers` iterates
/// them), and its body (`None`: too large to keep).
pub(super) struct Parts<'a, H> {
    pub(super) status: StatusCode,
    pub(super) headers: H,
    pub(super) body: Option<&'a [u8]>,
}

/// Writes a record in the layout of the module docs. One function for both the record and its
/// length, so that the two always agree.
fn write<'h, H, I>(parts: &Parts<'_, H>, sink: &mut impl Sink) -> Result<(), EncodeError>
where
    H: Fn() -> I,
    I: Iterator<Item = (&'h HeaderName, &'h HeaderValue)>,
{
    let count = (parts.headers)().count();
    let count = u16::try_from(count).map_err(|_| EncodeError::TooManyHeaders { count })?;
    let kind = if parts.body.is_some() {
        BODY_KEPT
    } else {
        BODY_OMITTED
    };
    sink.put(&[VERSION, kind]);
    sink.put(&parts.status.as_u16().to_be_bytes());
    sink.put(&count.to_be_bytes());
    for (name, value) in (parts.headers)() {
        let name_bytes = name.as_str().as_bytes();
        let name_len =
            u16::try_from(name_bytes.len()).map_err(|_| EncodeError::HeaderNameTooLong {
                len: name_bytes.len(),
            })?;
        sink.put(&name_len.to_be_bytes());
        sink.put(name_bytes);
        let value_len =
            u32::try_from(value.len()).map_err(|_| EncodeError::HeaderValueTooLong {
                name: name.clone(),
                len: value.len(),
            })?;
        sink.put(&value_len.to_be_bytes());
        sink.put(value.as_bytes());
    }
    if let Some(body) = parts.body {
        let len =
            u64::try_from(body.len()).map_err(|_| EncodeError::BodyTooLong { len: body.len() })?;
        sink.put(&len.to_be_bytes());
        sink.put(body);
    }
    Ok(())
}

/// Encodes a response into its record, in one allocation of exactly its length (a small record
/// is written on the stack first, a large one into a vector, then moved into place).
pub(super) fn encode<'h, H, I>(parts: Parts<'_, H>) -> Result<Arc<[u8]>, EncodeError>
where
    H: Fn() -> I,
    I: Iterator<Item = (&'h HeaderName, &'h HeaderValue)>,
{
    let mut length = Length(0);
    write(&parts, &mut length)?;
    let len = length.0;
    if len <= ON_THE_STACK {
        let mut buffer = [0; ON_THE_STACK];
        write(
            &parts,
            &mut Filling {
                buffer: &mut buffer[..len],
                at: 0,
            },
        )?;
        return Ok(Arc::from(&buffer[..len]));
    }
    let mut buffer = vec![0; len];
    write(
        &parts,
        &mut Filling {
            buffer: &mut buffer,
            at: 0,
        },
    )?;
    Ok(Arc::from(buffer))
}

/// What [`validate`] found of a record: where its body begins (the record's length when the
/// body was not kept).
pub(super) struct Layout {
    pub(super) body_at: usize,
}

/// Checks that `bytes` are a record [`encode`] could have written, reading it all.
pub(super) fn validate(bytes: &[u8]) -> Result<Layout, DecodeError> {
    let mut reader = Reader(bytes);
    let version = reader.u8()?;
    if version != VERSION {
        return Err(DecodeError::UnknownVersion(version));
    }
    let kind = reader.u8()?;
    StatusCode::from_u16(reader.u16()?)
        .map_err(|_| DecodeError::Malformed("status code out of range"))?;
    let count = usize::from(reader.u16()?);
    let mut names = NamesSeen::default();
    for _ in 0..count {
        let (name, value) = next_header(&mut reader)?;
        // `encode` writes names in lowercase, the values of one name together: anything else
        // was not written by it, and would not replay as the same bytes.
        if name.iter().any(u8::is_ascii_uppercase) {
            return Err(DecodeError::Malformed("header name not in lowercase"));
        }
        if name.is_empty() || !name.iter().all(|&byte| is_name_byte(byte)) {
            return Err(DecodeError::Malformed("invalid header name"));
        }
        if !names.next(name) {
            return Err(DecodeError::Malformed("header values of one name apart"));
        }
        if !value.iter().all(|&byte| is_value_byte(byte)) {
            return Err(DecodeError::Malformed("invalid header value"));
        }
    }
    if count > VALUES_A_MAP_ALWAYS_TAKES {
        // Enough values that the names might be more than a map holds: build the map the
        // replay would build, once, to find out (from a copy of the headers, not the body).
        let headers_end = bytes.len() - reader.0.len();
        headers_into(
            &Bytes::copy_from_slice(&bytes[..headers_end]),
            &mut HeaderMap::new(),
        )
        .map_err(|_| DecodeError::Malformed("more header names than a header map holds"))?;
    }
    let body_at = match kind {
        BODY_KEPT => {
            let len = usize::try_from(reader.u64()?)
                .map_err(|_| DecodeError::Malformed("body length overflows"))?;
            reader.take(len)?;
            bytes.len() - len
        }
        BODY_OMITTED => bytes.len(),
        _ => return Err(DecodeError::Malformed("unknown body kind")),
    };
    if !reader.0.is_empty() {
        return Err(DecodeError::Malformed("trailing bytes"));
    }
    Ok(Layout { body_at })
}

/// A byte of a header name in lowercase, as [`HeaderName::from_bytes`] accepts it (RFC 9110's
/// `tchar`): checked here without making the name, which allocates for names it does not know.
fn is_name_byte(byte: u8) -> bool {
    byte.is_ascii_lowercase() || byte.is_ascii_digit() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

/// A byte a header value may hold: what [`HeaderValue::from_bytes`] accepts.
fn is_value_byte(byte: u8) -> bool {
    byte == b'\t' || (byte >= 0x20 && byte != 0x7f)
}

/// The names of a record's headers so far, to tell the next value of the last name from a
/// name that came back after another.
#[derive(Default)]
struct NamesSeen<'a> {
    last: Option<&'a [u8]>,
    /// Every name before the last; a set once there are more than a few.
    earlier: Vec<&'a [u8]>,
    many: HashSet<&'a [u8]>,
}

impl<'a> NamesSeen<'a> {
    /// Takes the next header's name: `false` if it is a name seen before the last one.
    fn next(&mut self, name: &'a [u8]) -> bool {
        if self.last == Some(name) {
            return true;
        }
        if self.earlier.contains(&name) || self.many.contains(name) {
            return false;
        }
        if let Some(last) = self.last.replace(name) {
            if self.earlier.len() < 16 {
                self.earlier.push(last);
            } else {
                self.many.insert(last);
            }
        }
        true
    }
}

/// The status of a record [`validate`] accepted.
pub(super) fn status(record: &[u8]) -> StatusCode {
    StatusCode::from_u16(u16::from_be_bytes([record[2], record[3]]))
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// Whether a record [`validate`] accepted keeps its body.
pub(super) fn keeps_body(record: &[u8]) -> bool {
    record[1] == BODY_KEPT
}

/// How many header values a record [`validate`] accepted holds.
pub(super) fn header_count(record: &[u8]) -> usize {
    usize::from(u16::from_be_bytes([record[COUNT_AT], record[COUNT_AT + 1]]))
}

/// Appends the headers of a record [`validate`] accepted to `map`, in the record's order; their
/// values share the record's bytes. Fails only when the map cannot take them, which `validate`
/// rules out for the records it accepts.
pub(super) fn headers_into(
    record: &Bytes,
    map: &mut HeaderMap,
) -> Result<(), http::header::MaxSizeReached> {
    let mut reader = Reader(&record[HEADERS_AT..]);
    for _ in 0..header_count(record) {
        let Ok((name, value)) = next_header(&mut reader) else {
            break;
        };
        let value = record.slice_ref(value);
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name),
            HeaderValue::from_maybe_shared(value),
        ) {
            map.try_append(name, value)?;
        }
    }
    Ok(())
}

/// The next header's name and value.
fn next_header<'a>(reader: &mut Reader<'a>) -> Result<(&'a [u8], &'a [u8]), DecodeError> {
    let name_len = usize::from(reader.u16()?);
    let name = reader.take(name_len)?;
    let value_len = usize::try_from(reader.u32()?)
        .map_err(|_| DecodeError::Malformed("header value length overflows"))?;
    Ok((name, reader.take(value_len)?))
}

/// The status and whether the body was kept, read from the first 4 bytes of a record: what a
/// look-up says of a completed record without reading its headers and body.
pub(crate) fn read_head(bytes: &[u8]) -> Result<ResponseHead, DecodeError> {
    let mut reader = Reader(bytes);
    let version = reader.u8()?;
    if version != VERSION {
        return Err(DecodeError::UnknownVersion(version));
    }
    let body_kept = match reader.u8()? {
        BODY_KEPT => true,
        BODY_OMITTED => false,
        _ => return Err(DecodeError::Malformed("unknown body kind")),
    };
    let status = StatusCode::from_u16(reader.u16()?)
        .map_err(|_| DecodeError::Malformed("status code out of range"))?;
    Ok(ResponseHead { status, body_kept })
}

/// The head of a stored response's record: its status, and whether its body was kept
/// ([`StoredResponse::read_head`](super::StoredResponse::read_head)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseHead {
    /// The response's status.
    pub status: StatusCode,
    /// Whether the body was kept; `false` for a response too large to keep
    /// ([`StoredResponse::omitted`](super::StoredResponse::omitted)).
    pub body_kept: bool,
}

/// Reads a record's fields one after another, never past its end. Shared by the codecs of
/// every record a store keeps in bytes (responses, steps, kept requests).
pub(crate) struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self(bytes)
    }

    /// Whether every byte has been read.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn take(&mut self, len: usize) -> Result<&'a [u8], DecodeError> {
        if self.0.len() < len {
            return Err(DecodeError::Malformed("record ends early"));
        }
        let (head, tail) = self.0.split_at(len);
        self.0 = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        self.take(N)?
            .try_into()
            .map_err(|_| DecodeError::Malformed("record ends early"))
    }

    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }

    pub(crate) fn u16(&mut self) -> Result<u16, DecodeError> {
        self.array().map(u16::from_be_bytes)
    }

    pub(crate) fn u32(&mut self) -> Result<u32, DecodeError> {
        self.array().map(u32::from_be_bytes)
    }

    pub(crate) fn u64(&mut self) -> Result<u64, DecodeError> {
        self.array().map(u64::from_be_bytes)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    use crate::replay::StoredResponse;

    fn sample() -> StoredResponse {
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        headers.append("x-a", HeaderValue::from_static("1"));
        headers.append("x-a", HeaderValue::from_static("2"));
        StoredResponse::new(StatusCode::CREATED, &headers, b"{\"ok\":true}").unwrap()
    }

    fn decode(bytes: &[u8]) -> Result<StoredResponse, DecodeError> {
        StoredResponse::decode(bytes)
    }

    /// The record of a response, as a store keeps it.
    fn encoded(response: &StoredResponse) -> Vec<u8> {
        response.as_bytes().to_vec()
    }

    /// `count` header values spread over `names` distinct names, as a handler would build
    /// them.
    fn with_headers(count: usize, names: usize) -> Result<HeaderMap, http::header::MaxSizeReached> {
        let mut headers = HeaderMap::new();
        for index in 0..count {
            let name = HeaderName::from_bytes(format!("x-{}", index % names).as_bytes())
                .expect("a header name");
            headers.try_append(name, HeaderValue::from(index))?;
        }
        Ok(headers)
    }

    /// A response of `headers` and a two-byte body.
    fn response_of(headers: &HeaderMap) -> Result<StoredResponse, EncodeError> {
        StoredResponse::new(StatusCode::OK, headers, b"ok")
    }

    /// The start of a version 1 record with a kept body, status 200 and `count` headers.
    fn record_head(count: u16) -> Vec<u8> {
        let mut record = vec![VERSION, BODY_KEPT];
        record.extend_from_slice(&200u16.to_be_bytes());
        record.extend_from_slice(&count.to_be_bytes());
        record
    }

    fn push_header(record: &mut Vec<u8>, name: &str, value: &str) {
        record.extend_from_slice(&(name.len() as u16).to_be_bytes());
        record.extend_from_slice(name.as_bytes());
        record.extend_from_slice(&(value.len() as u32).to_be_bytes());
        record.extend_from_slice(value.as_bytes());
    }

    #[test]
    fn round_trips_kept_and_omitted_bodies() {
        let kept = sample();
        assert_eq!(decode(&encoded(&kept)).unwrap(), kept);
        let omitted = StoredResponse::omitted(StatusCode::OK);
        assert_eq!(decode(&encoded(&omitted)).unwrap(), omitted);
    }

    #[test]
    fn the_record_is_exactly_what_write_counts_on_and_off_the_stack() {
        for body in [&b"{}"[..], &[b' '; ON_THE_STACK * 2][..]] {
            let headers = with_headers(3, 2).unwrap();
            let parts = Parts {
                status: StatusCode::OK,
                headers: || headers.iter(),
                body: Some(body),
            };
            let mut length = Length(0);
            write(&parts, &mut length).unwrap();
            let record = encode(parts).unwrap();
            assert_eq!(record.len(), length.0);
            let response = decode(&record).unwrap();
            assert_eq!(response.headers(), headers);
            assert_eq!(response.body(), Some(body));
        }
    }

    #[test]
    fn version_byte_comes_first() {
        let bytes = encoded(&sample());
        assert_eq!(bytes[0], 1);
        let mut future = bytes.clone();
        future[0] = 2;
        assert_eq!(decode(&future), Err(DecodeError::UnknownVersion(2)));
        future[0] = 0;
        assert_eq!(decode(&future), Err(DecodeError::UnknownVersion(0)));
    }

    #[test]
    fn truncated_or_padded_records_are_malformed() {
        let bytes = encoded(&sample());
        for len in 0..bytes.len() {
            assert!(
                decode(&bytes[..len]).is_err(),
                "prefix of {len} bytes decoded"
            );
        }
        let mut padded = bytes.clone();
        padded.push(0);
        assert_eq!(
            decode(&padded),
            Err(DecodeError::Malformed("trailing bytes"))
        );
    }

    /// The record that made `decode` panic: a header count above what a `HeaderMap` can be
    /// sized for, and nothing behind it.
    #[test]
    fn a_huge_header_count_with_nothing_behind_it_is_malformed() {
        assert_eq!(
            decode(&[1, 0, 0, 200, 0xff, 0xff]),
            Err(DecodeError::Malformed("record ends early"))
        );
        for count in [24_576, 24_577, 32_768, 65_535] {
            let mut record = record_head(count);
            push_header(&mut record, "x-a", "1");
            assert_eq!(
                decode(&record),
                Err(DecodeError::Malformed("record ends early")),
                "{count} headers declared, one present"
            );
        }
    }

    /// More distinct names than a `HeaderMap` holds: no handler could have built the map, so
    /// no `encode` wrote the record.
    #[test]
    fn more_names_than_a_header_map_holds_are_malformed() {
        assert!(
            with_headers(24_577, 24_577).is_err(),
            "a map holds 24,576 names"
        );
        let mut record = record_head(30_000);
        for index in 0..30_000 {
            push_header(&mut record, &format!("x-{index}"), "v");
        }
        record.extend_from_slice(&0u64.to_be_bytes());
        assert_eq!(
            decode(&record),
            Err(DecodeError::Malformed(
                "more header names than a header map holds"
            ))
        );
    }

    /// Counts between what a `HeaderMap` can be sized for and what a record holds used to
    /// encode and never decode.
    #[test]
    fn many_header_values_round_trip() {
        // A map holds 24,576 names, and takes no value at all once it has them: 24,575 names
        // is the most that leaves room for repeated values.
        for (count, names) in [
            (24_576, 24_576),
            (24_577, 1),
            (24_577, 24_575),
            (40_000, 7),
            (65_535, 1),
            (65_535, 24_575),
        ] {
            let headers = with_headers(count, names).expect("a map that holds these names");
            let response = response_of(&headers).expect("an encodable response");
            assert_eq!(response.headers(), headers);
            let bytes = encoded(&response);
            assert_eq!(
                decode(&bytes).as_ref(),
                Ok(&response),
                "{count} values, {names} names"
            );
        }
    }

    /// One value more than the count field holds used to panic in `encode`.
    #[test]
    fn too_many_header_values_are_refused() {
        for count in [65_536, 70_000] {
            let headers = with_headers(count, 3).unwrap();
            assert_eq!(
                response_of(&headers),
                Err(EncodeError::TooManyHeaders { count })
            );
        }
        assert_eq!(
            EncodeError::TooManyHeaders { count: 65_536 }.to_string(),
            "the response has 65536 header values, more than the 65535 a stored record holds"
        );
    }

    #[test]
    fn the_longest_header_name_round_trips() {
        // `HeaderName` allows 65,535 bytes, exactly what the name's length field holds.
        let long_name = HeaderName::from_bytes(&[b'a'; 65_535]).unwrap();
        assert!(HeaderName::from_bytes(&[b'a'; 65_536]).is_err());
        let mut headers = HeaderMap::new();
        headers.insert(long_name, HeaderValue::from_static("v"));
        headers.insert("x-long", HeaderValue::from_bytes(&[b'v'; 1 << 20]).unwrap());
        let response = StoredResponse::new(StatusCode::OK, &headers, &vec![7; 1 << 20]).unwrap();
        assert_eq!(decode(&encoded(&response)), Ok(response));
    }

    #[test]
    fn lengths_beyond_the_record_are_malformed() {
        // A value length of 4 GiB - 1 with a few bytes behind it.
        let mut record = record_head(1);
        record.extend_from_slice(&1u16.to_be_bytes());
        record.push(b'a');
        record.extend_from_slice(&u32::MAX.to_be_bytes());
        record.extend_from_slice(b"short");
        assert_eq!(
            decode(&record),
            Err(DecodeError::Malformed("record ends early"))
        );
        // A body length of 2^64 - 1.
        let mut record = record_head(0);
        record.extend_from_slice(&u64::MAX.to_be_bytes());
        assert!(matches!(decode(&record), Err(DecodeError::Malformed(_))));
    }

    #[test]
    fn records_encode_would_not_write_are_malformed() {
        let body = |record: &mut Vec<u8>| record.extend_from_slice(&0u64.to_be_bytes());
        let mut apart = record_head(3);
        push_header(&mut apart, "x-a", "1");
        push_header(&mut apart, "x-b", "2");
        push_header(&mut apart, "x-a", "3");
        body(&mut apart);
        assert_eq!(
            decode(&apart),
            Err(DecodeError::Malformed("header values of one name apart"))
        );
        let mut capitals = record_head(1);
        push_header(&mut capitals, "X-A", "1");
        body(&mut capitals);
        assert_eq!(
            decode(&capitals),
            Err(DecodeError::Malformed("header name not in lowercase"))
        );
        let mut together = record_head(3);
        push_header(&mut together, "x-a", "1");
        push_header(&mut together, "x-a", "3");
        push_header(&mut together, "x-b", "2");
        body(&mut together);
        let response = decode(&together).unwrap();
        assert_eq!(encoded(&response), together);
    }

    proptest! {
        /// A record is the only one of its response: what decodes encodes to the same bytes.
        #[test]
        fn whatever_decodes_encodes_back_to_its_bytes(
            headers in proptest::collection::vec(
                (prop::sample::select(vec!["x-a", "x-b", "X-A", "content-type"]), "[ -~]{0,4}"),
                0..5,
            ),
            omitted in any::<bool>(),
            body in proptest::collection::vec(any::<u8>(), 0..8),
        ) {
            let mut record = record_head(headers.len() as u16);
            record[1] = if omitted { BODY_OMITTED } else { BODY_KEPT };
            for (name, value) in &headers {
                push_header(&mut record, name, value);
            }
            if !omitted {
                record.extend_from_slice(&(body.len() as u64).to_be_bytes());
                record.extend_from_slice(&body);
            }
            if let Ok(response) = decode(&record) {
                prop_assert_eq!(encoded(&response), record);
            }
        }

        #[test]
        fn any_response_round_trips(
            status in 100u16..1000,
            headers in proptest::collection::vec(("[a-z][a-z0-9-]{0,20}", "[ -~]{0,40}"), 0..8),
            body in proptest::collection::vec(any::<u8>(), 0..2048),
        ) {
            let mut map = HeaderMap::new();
            for (name, value) in &headers {
                map.append(HeaderName::from_bytes(name.as_bytes()).unwrap(), HeaderValue::from_str(value).unwrap());
            }
            let response = StoredResponse::new(StatusCode::from_u16(status).unwrap(), &map, &body).unwrap();
            prop_assert_eq!(response.headers(), map);
            prop_assert_eq!(decode(&encoded(&response)).unwrap(), response);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode(&bytes);
        }

        /// Records whose header count is anything, followed by anything.
        #[test]
        fn any_declared_header_count_never_panics(
            count in any::<u16>(),
            tail in proptest::collection::vec(any::<u8>(), 0..512),
        ) {
            let mut record = record_head(count);
            record.extend_from_slice(&tail);
            let _ = decode(&record);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(16))]

        /// Any map a handler can build is encoded and read back, or refused when it has more
        /// values than a record holds.
        #[test]
        fn any_encodable_response_round_trips_with_many_headers(
            count in 0usize..70_000,
            names in 1usize..30_000,
            omitted in any::<bool>(),
        ) {
            let Ok(headers) = with_headers(count, names) else {
                // More names than a map holds: there is no such response to store.
                return Ok(());
            };
            let body = (!omitted).then_some(&b"ok"[..]);
            match StoredResponse::encode(StatusCode::OK, || headers.iter(), body) {
                Ok(response) => {
                    prop_assert!(count <= usize::from(u16::MAX));
                    prop_assert_eq!(response.body(), body);
                    prop_assert_eq!(decode(response.as_bytes()), Ok(response));
                }
                Err(error) => {
                    prop_assert_eq!(&error, &EncodeError::TooManyHeaders { count });
                }
            }
        }
    }
}
