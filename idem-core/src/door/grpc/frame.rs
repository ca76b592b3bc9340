//! gRPC's framing: each message is a flag byte (1: compressed), its length in four bytes
//! (big-endian), and its bytes. And the one frame gRPC-Web adds, flag `0x80`, which carries a
//! response's trailers inside its body as `name: value\r\n` lines: the form in which the
//! runtime stores a whole gRPC response (initial metadata as headers, the message, the
//! trailers with the status) as one body, and splits it again to replay it.

use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderMap, HeaderName, HeaderValue};

/// The flag byte and the length before each message.
pub(crate) const PREFIX: usize = 5;
/// The flag of gRPC-Web's trailers frame.
const TRAILERS: u8 = 0x80;

/// Why a unary request's body is not the one message it must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FrameError {
    /// No message at all.
    Empty,
    /// The body ends inside a message.
    Truncated,
    /// The message is compressed (flag 1), or the flag is not one gRPC knows.
    Compressed,
    /// More than one message for a method that takes one.
    Several,
    /// A message longer than the limit: its declared length.
    TooLarge(usize),
}

/// The length a message's prefix declares, once the prefix is there.
pub(crate) fn declared_length(body: &[u8]) -> Option<usize> {
    let prefix: [u8; 4] = body.get(1..PREFIX)?.try_into().ok()?;
    Some(u32::from_be_bytes(prefix) as usize)
}

/// The one uncompressed message of a unary request's whole `body`, at most `limit` bytes.
pub(crate) fn single_message(body: &[u8], limit: usize) -> Result<&[u8], FrameError> {
    let Some(length) = declared_length(body) else {
        return Err(if body.is_empty() {
            FrameError::Empty
        } else {
            FrameError::Truncated
        });
    };
    if length > limit {
        return Err(FrameError::TooLarge(length));
    }
    if body[0] != 0 {
        return Err(FrameError::Compressed);
    }
    let end = PREFIX + length;
    match body.len().cmp(&end) {
        std::cmp::Ordering::Less => Err(FrameError::Truncated),
        std::cmp::Ordering::Greater => Err(FrameError::Several),
        std::cmp::Ordering::Equal => Ok(&body[PREFIX..end]),
    }
}

/// `message` framed, uncompressed.
pub(crate) fn encode(message: &[u8]) -> Bytes {
    let mut framed = BytesMut::with_capacity(PREFIX + message.len());
    framed.put_u8(0);
    framed.put_u32(u32::try_from(message.len()).expect("a gRPC message is under 4 GiB"));
    framed.put_slice(message);
    framed.freeze()
}

/// `data` (the message frames of a response) followed by `trailers` as gRPC-Web's trailers
/// frame.
pub(crate) fn with_trailers(data: &[u8], trailers: &HeaderMap) -> Bytes {
    let mut block = Vec::new();
    for (name, value) in trailers {
        block.extend_from_slice(name.as_str().as_bytes());
        block.extend_from_slice(b": ");
        block.extend_from_slice(value.as_bytes());
        block.extend_from_slice(b"\r\n");
    }
    let mut body = BytesMut::with_capacity(data.len() + PREFIX + block.len());
    body.put_slice(data);
    body.put_u8(TRAILERS);
    body.put_u32(u32::try_from(block.len()).expect("trailers are under 4 GiB"));
    body.put_slice(&block);
    body.freeze()
}

/// A stored body split again: the message frames, and the trailers if it has them. `None`
/// when the body is not in that form (a record this door did not write).
pub(crate) fn split(body: &Bytes) -> Option<(Bytes, Option<HeaderMap>)> {
    let mut at = 0;
    while at < body.len() {
        let length = declared_length(&body[at..])?;
        let end = at.checked_add(PREFIX)?.checked_add(length)?;
        if end > body.len() {
            return None;
        }
        if body[at] == TRAILERS {
            // The trailers frame is the last.
            if end != body.len() {
                return None;
            }
            let trailers = parse_trailers(&body[at + PREFIX..end])?;
            return Some((body.slice(..at), Some(trailers)));
        }
        at = end;
    }
    Some((body.clone(), None))
}

fn parse_trailers(block: &[u8]) -> Option<HeaderMap> {
    let mut trailers = HeaderMap::new();
    for line in block.split(|byte| *byte == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            continue;
        }
        let colon = line.iter().position(|byte| *byte == b':')?;
        let name = HeaderName::from_bytes(&line[..colon]).ok()?;
        let value = line[colon + 1..]
            .strip_prefix(b" ")
            .unwrap_or(&line[colon + 1..]);
        trailers.append(name, HeaderValue::from_bytes(value).ok()?);
    }
    Some(trailers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unary_body_is_exactly_one_uncompressed_message() {
        let framed = encode(b"hello");
        assert_eq!(single_message(&framed, 10), Ok(&b"hello"[..]));
        assert_eq!(single_message(&framed, 4), Err(FrameError::TooLarge(5)));
        assert_eq!(single_message(b"", 10), Err(FrameError::Empty));
        assert_eq!(single_message(&framed[..3], 10), Err(FrameError::Truncated));
        assert_eq!(single_message(&framed[..7], 10), Err(FrameError::Truncated));
        let twice = [&framed[..], &framed[..]].concat();
        assert_eq!(single_message(&twice, 10), Err(FrameError::Several));
        let mut compressed = framed.to_vec();
        compressed[0] = 1;
        assert_eq!(single_message(&compressed, 10), Err(FrameError::Compressed));
        assert_eq!(single_message(&encode(b""), 10), Ok(&b""[..]));
    }

    #[test]
    fn a_stored_response_splits_into_its_frames_and_trailers() {
        let mut trailers = HeaderMap::new();
        trailers.insert("grpc-status", HeaderValue::from_static("0"));
        trailers.append("x-note", HeaderValue::from_static("a: b"));
        trailers.append("x-note", HeaderValue::from_static("c"));
        let data = encode(b"message");
        let body = with_trailers(&data, &trailers);
        let (split_data, split_trailers) = split(&body).unwrap();
        assert_eq!(split_data, data);
        assert_eq!(split_trailers, Some(trailers));
        assert_eq!(split(&data), Some((data.clone(), None)));
        assert_eq!(split(&body.slice(..body.len() - 1)), None, "a cut record");
    }
}
