//! A compact, versioned byte encoding of [`StoredResponse`] for stores that keep bytes.
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
//! A later version gets a new number; `decode` reads every version it knows.
//!
//! # Limits
//!
//! The widths above bound what a record holds: at most 65,535 header values (repeated names
//! count once per value), names up to 65,535 bytes (all that [`HeaderName`] allows) and values
//! up to 4 GiB − 1 each. [`encode`] refuses a response beyond them with an [`EncodeError`]
//! rather than writing a record that says something else, and [`check`] tells the same without
//! writing anything, so the runtime can answer such a response without storing it.
//!
//! Everything `encode` writes, `decode` reads back. `encode` writes the headers in the map's
//! order (names in lowercase, the values of a name together) and `decode` appends them in that
//! order, which rebuilds the map. A [`HeaderMap`] holds at most 24,576 distinct names but any
//! number of values under them, so a record of 65,535 values decodes too. A record is also the
//! only one of its response: `decode` refuses what `encode` would not have written (a name in
//! capitals, values of one name apart), so whatever decodes encodes back to the same bytes.
//!
//! `decode` never trusts a count or a length before the bytes behind it are there: it sizes the
//! header map for no more headers than the remaining bytes could hold, adds headers with the
//! fallible [`HeaderMap::try_append`], and answers a [`DecodeError`] for any input, whatever it
//! claims (the first version panicked on a header count above 24,576).

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

use super::StoredResponse;

const VERSION: u8 = 1;
const BODY_KEPT: u8 = 0;
const BODY_OMITTED: u8 = 1;

/// The fewest bytes one header takes in a record: both lengths and a one-byte name.
const MIN_HEADER_LEN: usize = 2 + 1 + 4;

/// A stored record that cannot be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The record was written by a format version this build does not know.
    #[error("unknown record format version {0}")]
    UnknownVersion(u8),
    /// The record ends early, carries bytes past its end, or holds an invalid field.
    #[error("malformed record: {0}")]
    Malformed(&'static str),
}

/// A response that the record format cannot hold (see [`StoredResponse::encode`]).
///
/// Nothing about such a response is wrong for its client; it only cannot be stored for replay.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// More header values than a record holds (65,535); a name given several times counts
    /// once per value.
    #[error("the response has {count} header values, more than the 65535 a stored record holds")]
    TooManyHeaders {
        /// The number of header values in the response.
        count: usize,
    },
    /// A header name longer than a record holds (65,535 bytes).
    #[error(
        "a response header name is {len} bytes long, more than the 65535 a stored record holds"
    )]
    HeaderNameTooLong {
        /// The length of the name, in bytes.
        len: usize,
    },
    /// A header value longer than a record holds (4 GiB − 1).
    #[error(
        "the value of the response header `{name}` is {len} bytes long, more than the \
         4294967295 a stored record holds"
    )]
    HeaderValueTooLong {
        /// The header's name.
        name: HeaderName,
        /// The length of the value, in bytes.
        len: usize,
    },
    /// A body longer than a record holds (2<sup>64</sup> − 1 bytes).
    #[error("the response body is {len} bytes long, more than a stored record holds")]
    BodyTooLong {
        /// The length of the body, in bytes.
        len: usize,
    },
}

/// Where [`write`] puts a record: the record itself, or only the count of its bytes.
trait Sink {
    fn put(&mut self, bytes: &[u8]);
}

impl Sink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// Counts the bytes of a record without writing them.
struct Length(usize);

impl Sink for Length {
    fn put(&mut self, bytes: &[u8]) {
        self.0 += bytes.len();
    }
}

/// Writes `response` in the layout of the module docs. One function for both the record and
/// its length, so that [`check`] refuses exactly what [`encode`] refuses.
fn write(response: &StoredResponse, sink: &mut impl Sink) -> Result<(), EncodeError> {
    let count = response.headers().len();
    let count = u16::try_from(count).map_err(|_| EncodeError::TooManyHeaders { count })?;
    sink.put(&[
        VERSION,
        if response.body().is_some() {
            BODY_KEPT
        } else {
            BODY_OMITTED
        },
    ]);
    sink.put(&response.status().as_u16().to_be_bytes());
    sink.put(&count.to_be_bytes());
    for (name, value) in response.headers() {
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
    if let Some(body) = response.body() {
        let len =
            u64::try_from(body.len()).map_err(|_| EncodeError::BodyTooLong { len: body.len() })?;
        sink.put(&len.to_be_bytes());
        sink.put(body);
    }
    Ok(())
}

/// Whether [`encode`] would take `response`, without allocating.
pub(super) fn check(response: &StoredResponse) -> Result<(), EncodeError> {
    write(response, &mut Length(0))
}

/// The length of what [`encode`] writes, without writing it.
pub(super) fn encoded_len(response: &StoredResponse) -> Result<usize, EncodeError> {
    let mut length = Length(0);
    write(response, &mut length)?;
    Ok(length.0)
}

/// The status and whether the body was kept, read from the first 4 bytes of a record: what a
/// look-up says of a completed record without reading its headers and body.
#[cfg(any(feature = "redis", feature = "postgres"))]
pub(crate) fn read_head(bytes: &[u8]) -> Result<(StatusCode, bool), DecodeError> {
    let mut reader = Reader(bytes);
    let version = reader.u8()?;
    if version != VERSION {
        return Err(DecodeError::UnknownVersion(version));
    }
    let kept = match reader.u8()? {
        BODY_KEPT => true,
        BODY_OMITTED => false,
        _ => return Err(DecodeError::Malformed("unknown body kind")),
    };
    let status = StatusCode::from_u16(reader.u16()?)
        .map_err(|_| DecodeError::Malformed("status code out of range"))?;
    Ok((status, kept))
}

pub(super) fn encode(response: &StoredResponse) -> Result<Vec<u8>, EncodeError> {
    let mut length = Length(0);
    write(response, &mut length)?;
    let mut out = Vec::with_capacity(length.0);
    write(response, &mut out)?;
    Ok(out)
}

pub(super) fn decode(bytes: &[u8]) -> Result<StoredResponse, DecodeError> {
    let mut reader = Reader(bytes);
    let version = reader.u8()?;
    if version != VERSION {
        return Err(DecodeError::UnknownVersion(version));
    }
    let kind = reader.u8()?;
    let status = StatusCode::from_u16(reader.u16()?)
        .map_err(|_| DecodeError::Malformed("status code out of range"))?;
    let count = usize::from(reader.u16()?);
    // The count is the record's word, not a fact: size the map for no more headers than the
    // remaining bytes could hold, and start empty when even that is more than a map can be
    // sized for (it still grows to every name it can hold). Room, too, for the names a replay
    // adds, so that adding them does not grow the map.
    let capacity = count.min(reader.0.len() / MIN_HEADER_LEN) + super::NAMES_A_REPLAY_ADDS;
    let mut headers = HeaderMap::try_with_capacity(capacity).unwrap_or_default();
    let mut previous: Option<HeaderName> = None;
    for _ in 0..count {
        let name_len = usize::from(reader.u16()?);
        let raw_name = reader.take(name_len)?;
        let name = HeaderName::from_bytes(raw_name)
            .map_err(|_| DecodeError::Malformed("invalid header name"))?;
        // `encode` writes names in lowercase, the values of one name together: anything else
        // was not written by it, and would not encode back to the same bytes.
        if name.as_str().as_bytes() != raw_name {
            return Err(DecodeError::Malformed("header name not in lowercase"));
        }
        if previous.as_ref() != Some(&name) {
            if headers.contains_key(&name) {
                return Err(DecodeError::Malformed("header values of one name apart"));
            }
            previous = Some(name.clone());
        }
        let value_len = usize::try_from(reader.u32()?)
            .map_err(|_| DecodeError::Malformed("header value length overflows"))?;
        let value = HeaderValue::from_bytes(reader.take(value_len)?)
            .map_err(|_| DecodeError::Malformed("invalid header value"))?;
        headers
            .try_append(name, value)
            .map_err(|_| DecodeError::Malformed("more header names than a header map holds"))?;
    }
    let body = match kind {
        BODY_KEPT => {
            let len = usize::try_from(reader.u64()?)
                .map_err(|_| DecodeError::Malformed("body length overflows"))?;
            Some(Bytes::copy_from_slice(reader.take(len)?))
        }
        BODY_OMITTED => None,
        _ => return Err(DecodeError::Malformed("unknown body kind")),
    };
    if !reader.0.is_empty() {
        return Err(DecodeError::Malformed("trailing bytes"));
    }
    Ok(match body {
        Some(body) => StoredResponse::new(status, headers, body),
        None => StoredResponse::omitted_with(status, headers),
    })
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

    fn sample() -> StoredResponse {
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        headers.append("x-a", HeaderValue::from_static("1"));
        headers.append("x-a", HeaderValue::from_static("2"));
        StoredResponse::new(
            StatusCode::CREATED,
            headers,
            Bytes::from_static(b"{\"ok\":true}"),
        )
    }

    /// `encode`, for a response the test knows to be encodable.
    fn encoded(response: &StoredResponse) -> Vec<u8> {
        encode(response).expect("an encodable response")
    }

    /// A response with `count` header values spread over `names` distinct names, built as a
    /// handler would build it.
    fn with_headers(
        count: usize,
        names: usize,
    ) -> Result<StoredResponse, http::header::MaxSizeReached> {
        let mut headers = HeaderMap::new();
        for index in 0..count {
            let name = HeaderName::from_bytes(format!("x-{}", index % names).as_bytes())
                .expect("a header name");
            headers.try_append(name, HeaderValue::from(index))?;
        }
        Ok(StoredResponse::new(
            StatusCode::OK,
            headers,
            Bytes::from_static(b"ok"),
        ))
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
    fn encode_allocates_exactly_the_record() {
        let bytes = encoded(&sample());
        assert_eq!(bytes.len(), bytes.capacity());
        let mut length = Length(0);
        write(&sample(), &mut length).unwrap();
        assert_eq!(length.0, bytes.len());
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
            let response = with_headers(count, names).expect("a map that holds these names");
            assert_eq!(response.check_encodable(), Ok(()));
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
            let response = with_headers(count, 3).unwrap();
            let expected = Err(EncodeError::TooManyHeaders { count });
            assert_eq!(response.check_encodable(), expected.clone().map(drop));
            assert_eq!(encode(&response), expected);
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
        let response = StoredResponse::new(StatusCode::OK, headers, Bytes::from(vec![7; 1 << 20]));
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
            let response = StoredResponse::new(StatusCode::from_u16(status).unwrap(), map, Bytes::from(body));
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

        /// Any map a handler can build is encoded and read back, or refused by both `encode` and
        /// `check_encodable` when it has more values than a record holds.
        #[test]
        fn any_encodable_response_round_trips_with_many_headers(
            count in 0usize..70_000,
            names in 1usize..30_000,
            omitted in any::<bool>(),
        ) {
            let Ok(mut response) = with_headers(count, names) else {
                // More names than a map holds: there is no such response to store.
                return Ok(());
            };
            if omitted {
                response = StoredResponse::omitted_with(response.status(), response.headers().clone());
            }
            match encode(&response) {
                Ok(bytes) => {
                    prop_assert!(count <= usize::from(u16::MAX));
                    prop_assert_eq!(response.check_encodable(), Ok(()));
                    prop_assert_eq!(decode(&bytes), Ok(response));
                }
                Err(error) => {
                    prop_assert_eq!(&error, &EncodeError::TooManyHeaders { count });
                    prop_assert_eq!(response.check_encodable(), Err(error));
                }
            }
        }
    }
}
