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

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

use super::StoredResponse;

const VERSION: u8 = 1;
const BODY_KEPT: u8 = 0;
const BODY_OMITTED: u8 = 1;

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

pub(super) fn encode(response: &StoredResponse) -> Vec<u8> {
    let body_len = response.body.as_ref().map_or(0, Bytes::len);
    let mut out = Vec::with_capacity(response.weight() + body_len);
    out.push(VERSION);
    out.push(if response.body.is_some() {
        BODY_KEPT
    } else {
        BODY_OMITTED
    });
    out.extend_from_slice(&response.status.as_u16().to_be_bytes());
    let count = u16::try_from(response.headers.len()).expect("at most 65535 response headers");
    out.extend_from_slice(&count.to_be_bytes());
    for (name, value) in &response.headers {
        let name_len = u16::try_from(name.as_str().len()).expect("header names are short");
        out.extend_from_slice(&name_len.to_be_bytes());
        out.extend_from_slice(name.as_str().as_bytes());
        let value_len = u32::try_from(value.len()).expect("header values are under 4 GiB");
        out.extend_from_slice(&value_len.to_be_bytes());
        out.extend_from_slice(value.as_bytes());
    }
    if let Some(body) = &response.body {
        out.extend_from_slice(&(body.len() as u64).to_be_bytes());
        out.extend_from_slice(body);
    }
    out
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
    let count = reader.u16()?;
    let mut headers = HeaderMap::with_capacity(usize::from(count));
    for _ in 0..count {
        let name_len = usize::from(reader.u16()?);
        let name = HeaderName::from_bytes(reader.take(name_len)?)
            .map_err(|_| DecodeError::Malformed("invalid header name"))?;
        let value_len = reader.u32()? as usize;
        let value = HeaderValue::from_bytes(reader.take(value_len)?)
            .map_err(|_| DecodeError::Malformed("invalid header value"))?;
        headers.append(name, value);
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
    Ok(StoredResponse {
        status,
        headers,
        body,
    })
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Result<&'a [u8], DecodeError> {
        if self.0.len() < len {
            return Err(DecodeError::Malformed("record ends early"));
        }
        let (head, tail) = self.0.split_at(len);
        self.0 = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        Ok(self.take(N)?.try_into().expect("take returns N bytes"))
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }

    fn u16(&mut self) -> Result<u16, DecodeError> {
        self.array().map(u16::from_be_bytes)
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        self.array().map(u32::from_be_bytes)
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
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

    #[test]
    fn round_trips_kept_and_omitted_bodies() {
        let kept = sample();
        assert_eq!(decode(&encode(&kept)).unwrap(), kept);
        let omitted = StoredResponse::omitted(StatusCode::OK);
        assert_eq!(decode(&encode(&omitted)).unwrap(), omitted);
    }

    #[test]
    fn version_byte_comes_first() {
        let bytes = encode(&sample());
        assert_eq!(bytes[0], 1);
        let mut future = bytes.clone();
        future[0] = 2;
        assert_eq!(decode(&future), Err(DecodeError::UnknownVersion(2)));
    }

    #[test]
    fn truncated_or_padded_records_are_malformed() {
        let bytes = encode(&sample());
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

    proptest! {
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
            prop_assert_eq!(decode(&encode(&response)).unwrap(), response);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode(&bytes);
        }
    }
}
