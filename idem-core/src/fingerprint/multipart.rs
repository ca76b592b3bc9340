//! `multipart/form-data` bodies fingerprinted by their parts, without the boundary (see the
//! [module docs](super#multipart-bodies)).
//!
//! Only a body in the plain form that clients write is read by parts: the first delimiter at
//! the very start, every part between two delimiters, the close delimiter, then nothing or one
//! CRLF. Anything else is left to the raw algorithm. The one rule that keeps this safe: the
//! boundary occurs nowhere but in the delimiter lines. Then every multipart parser, strict or
//! lenient about what it takes for a delimiter, splits the body at the same places, so two
//! bodies whose parts are the same bytes are the same form to the handler, whatever their
//! boundaries.

use http::{HeaderMap, header::CONTENT_TYPE};
use idem_protocol::sha256::Sha256;
use memchr::memmem;

/// The boundary of a `multipart/form-data` request, when its one `Content-Type` names exactly
/// one boundary, spelled as RFC 2046 allows (1 to 70 characters of its set, not ending in a
/// space), in the plain form clients write: `multipart/form-data`, then parameters, each a
/// `;`, spaces, and `name=value`. `None` for any other request, at the cost of comparing the
/// media type for most.
///
/// RFC 9110 allows more (whitespace before a `;`, tabs, empty parameters); parsers differ on
/// that, and a Content-Type the handler's parser refuses must not make a form look like one it
/// accepts.
pub(super) fn form_data_boundary(headers: &HeaderMap) -> Option<&[u8]> {
    const MEDIA_TYPE: &[u8] = b"multipart/form-data";
    let mut values = headers.get_all(CONTENT_TYPE).iter();
    let value = values.next()?.as_bytes();
    if value.len() < MEDIA_TYPE.len() || !value[..MEDIA_TYPE.len()].eq_ignore_ascii_case(MEDIA_TYPE)
    {
        return None;
    }
    // Two Content-Type lines: which one the handler reads is its parser's choice.
    if values.next().is_some() {
        return None;
    }
    let mut parameters = &value[MEDIA_TYPE.len()..];
    let mut boundary = None;
    while let Some(rest) = parameters.strip_prefix(b";") {
        let rest = &rest[rest.iter().take_while(|&&byte| byte == b' ').count()..];
        let name_len = rest.iter().take_while(|&&byte| is_tchar(byte)).count();
        let (name, rest) = rest.split_at(name_len);
        let rest = rest.strip_prefix(b"=")?;
        if name.is_empty() {
            return None;
        }
        let (value, rest) = parameter_value(rest)?;
        parameters = rest;
        if name.eq_ignore_ascii_case(b"boundary") {
            if boundary.is_some() {
                // Two boundaries: parsers disagree on which one counts.
                return None;
            }
            boundary = Some(value);
        }
    }
    if !parameters.is_empty() {
        return None;
    }
    boundary.filter(|boundary| is_boundary(boundary))
}

/// A parameter value, token or quoted string, and what follows it. A quoted string with a
/// backslash is refused: no boundary needs one, and unescaping is where parsers differ.
fn parameter_value(text: &[u8]) -> Option<(&[u8], &[u8])> {
    if let Some(quoted) = text.strip_prefix(b"\"") {
        let end = quoted
            .iter()
            .position(|&byte| byte == b'"' || byte == b'\\')?;
        if quoted[end] != b'"' {
            return None;
        }
        return Some((&quoted[..end], &quoted[end + 1..]));
    }
    let len = text.iter().take_while(|&&byte| is_tchar(byte)).count();
    (len > 0).then(|| text.split_at(len))
}

/// RFC 9110 `tchar`.
fn is_tchar(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

/// RFC 2046 §5.1.1: `0*69<bchars> bcharsnospace`. None of these is CR or LF, which the parser
/// below relies on.
fn is_boundary(boundary: &[u8]) -> bool {
    (1..=70).contains(&boundary.len())
        && boundary.last() != Some(&b' ')
        && boundary
            .iter()
            .all(|&byte| byte.is_ascii_alphanumeric() || b"'()+_,-./:=? ".contains(&byte))
}

/// Feeds the parts of `body`, split at `boundary`, to `hasher`: for each part a `1` byte, its
/// length as a big-endian `u64` and its bytes (headers and content as sent), then a `0` byte and
/// the epilogue after its length. `false`, with `hasher` to be discarded, when the body is not
/// in the plain form of the [module docs](self).
pub(super) fn hash_parts(boundary: &[u8], body: &[u8], hasher: &mut Sha256) -> bool {
    let finder = memmem::Finder::new(boundary);
    let Some(mut rest) = body
        .strip_prefix(b"--")
        .and_then(|rest| rest.strip_prefix(boundary))
    else {
        return false;
    };
    loop {
        if let Some(epilogue) = rest.strip_prefix(b"--") {
            // After the close delimiter: nothing, or the line end most clients write.
            if !epilogue.is_empty() && epilogue != b"\r\n" {
                return false;
            }
            hasher.update([0]);
            hasher.update((epilogue.len() as u64).to_be_bytes());
            hasher.update(epilogue);
            return true;
        }
        let Some(part_and_rest) = rest.strip_prefix(b"\r\n") else {
            // Transport padding or anything else after a delimiter: parsers differ on it.
            return false;
        };
        // The next occurrence of the boundary must be the next delimiter, `CRLF--boundary`;
        // one anywhere else would be read as a delimiter by some parser and not by another.
        let Some(found) = finder.find(part_and_rest) else {
            return false;
        };
        let Some(part) = part_and_rest[..found].strip_suffix(b"\r\n--") else {
            return false;
        };
        hasher.update([1]);
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part);
        rest = &part_and_rest[found + boundary.len()..];
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn boundary_of(content_type: &'static [u8]) -> Option<Vec<u8>> {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_bytes(content_type).unwrap());
        form_data_boundary(&headers).map(<[u8]>::to_vec)
    }

    #[test]
    fn boundaries_are_read_from_form_data_content_types() {
        for (content_type, boundary) in [
            (&b"multipart/form-data; boundary=abc"[..], &b"abc"[..]),
            (b"multipart/form-data;boundary=abc", b"abc"),
            (b"Multipart/Form-Data; BOUNDARY=abc", b"abc"),
            (b"multipart/form-data; boundary=\"a b:c\"", b"a b:c"),
            (b"multipart/form-data; charset=utf-8; boundary=x-1", b"x-1"),
            (b"multipart/form-data;  boundary=x;charset=\"utf-8\"", b"x"),
            (
                b"multipart/form-data; boundary=----WebKitFormBoundary7MA4YWxkTrZu0gW",
                b"----WebKitFormBoundary7MA4YWxkTrZu0gW",
            ),
        ] {
            assert_eq!(
                boundary_of(content_type).as_deref(),
                Some(boundary),
                "{}",
                String::from_utf8_lossy(content_type)
            );
        }
    }

    #[test]
    fn doubtful_boundaries_are_refused() {
        let long = format!("multipart/form-data; boundary={}", "b".repeat(71)).into_bytes();
        let longest = format!("multipart/form-data; boundary={}", "b".repeat(70)).into_bytes();
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_bytes(&long).unwrap());
        assert_eq!(form_data_boundary(&headers), None);
        headers.insert(CONTENT_TYPE, HeaderValue::from_bytes(&longest).unwrap());
        assert!(form_data_boundary(&headers).is_some());
        for content_type in [
            &b"multipart/form-data"[..],
            b"multipart/form-data; boundary=",
            b"multipart/form-data; boundary=\"\"",
            b"multipart/form-data; boundary=a; boundary=b",
            b"multipart/form-data; boundary=a; BOUNDARY=a",
            b"multipart/form-data; boundary=\"a\\\"b\"",
            b"multipart/form-data; boundary=\"ab",
            b"multipart/form-data; boundary=\"ends in space \"",
            b"multipart/form-data; boundary=a*b",
            b"multipart/form-data; boundary=a b",
            b"multipart/form-data; boundary",
            b"multipart/form-data; =a",
            b"multipart/form-data boundary=a",
            b"multipart/mixed; boundary=a",
            b"application/json; boundary=a",
            b"multipart/form-data; boundary=caf\xC3\xA9",
            // Whitespace and separators beyond the plain form.
            b"multipart/form-data ; boundary=x",
            b"multipart/form-data; boundary=x ",
            b"multipart/form-data; boundary=x;",
            b"multipart/form-data;; boundary=x",
            b"multipart/form-data;\tboundary=x",
            b"multipart/form-data; boundary = x",
            b"multipart/form-data; foo; boundary=x",
            b" multipart/form-data; boundary=x",
            b"multipart/form-datax; boundary=x",
        ] {
            assert_eq!(
                boundary_of(content_type),
                None,
                "{}",
                String::from_utf8_lossy(content_type)
            );
        }
        let mut two = HeaderMap::new();
        two.append(
            CONTENT_TYPE,
            HeaderValue::from_static("multipart/form-data; boundary=a"),
        );
        two.append(
            CONTENT_TYPE,
            HeaderValue::from_static("multipart/form-data; boundary=a"),
        );
        assert_eq!(form_data_boundary(&two), None);
    }

    /// The parts `hash_parts` reads, by hashing them the documented way; `None` if it refuses.
    fn digest(boundary: &str, body: &[u8]) -> Option<[u8; 32]> {
        let mut hasher = Sha256::new();
        hash_parts(boundary.as_bytes(), body, &mut hasher).then(|| hasher.finalize())
    }

    fn expected(parts: &[&[u8]], epilogue: &[u8]) -> [u8; 32] {
        let mut hasher = Sha256::new();
        for part in parts {
            hasher.update([1]);
            hasher.update((part.len() as u64).to_be_bytes());
            hasher.update(part);
        }
        hasher.update([0]);
        hasher.update((epilogue.len() as u64).to_be_bytes());
        hasher.update(epilogue);
        hasher.finalize()
    }

    #[test]
    fn plain_bodies_are_read_by_parts() {
        let a = &b"Content-Disposition: form-data; name=\"a\"\r\n\r\n1"[..];
        let b = &b"Content-Disposition: form-data; name=\"b\"; filename=\"b.txt\"\r\nContent-Type: text/plain\r\n\r\nline\r\n--not the boundary\r\n"[..];
        let body = [
            &b"--XyZ\r\n"[..],
            a,
            b"\r\n--XyZ\r\n",
            b,
            b"\r\n--XyZ--\r\n",
        ]
        .concat();
        assert_eq!(digest("XyZ", &body), Some(expected(&[a, b], b"\r\n")));
        assert_eq!(
            digest("XyZ", &body[..body.len() - 2]),
            Some(expected(&[a, b], b""))
        );
        assert_eq!(digest("XyZ", b"--XyZ--"), Some(expected(&[], b"")));
        // An empty part and a part without headers are parts like any other.
        assert_eq!(
            digest("q", b"--q\r\n\r\n--q\r\n\r\nx\r\n--q--"),
            Some(expected(&[b"", b"\r\nx"], b""))
        );
    }

    #[test]
    fn anything_but_the_plain_form_is_refused() {
        for body in [
            &b""[..],
            b"--XyZ",
            b"--XyZ\r\n",
            b"--XyZ\r\npart",
            b"--XyZ\r\npart\r\n--XyZ",
            b"--XyZ\r\npart\r\n--XyZ\r\n",
            // A preamble, transport padding, a line end that is not CRLF.
            b"preamble\r\n--XyZ\r\npart\r\n--XyZ--",
            b"\r\n--XyZ\r\npart\r\n--XyZ--",
            b"--XyZ \r\npart\r\n--XyZ--",
            b"--XyZ\r\npart\r\n--XyZ \r\n--XyZ--",
            b"--XyZ\npart\n--XyZ--",
            // The boundary inside a part, however it is surrounded.
            b"--XyZ\r\npa XyZ rt\r\n--XyZ--",
            b"--XyZ\r\npart\n--XyZ\r\nmore\r\n--XyZ--",
            b"--XyZ\r\npart\r\n--XyZW\r\n--XyZ--",
            b"--XyZ\r\npart\r\n---XyZ\r\n--XyZ--",
            // An epilogue, or more after the close delimiter.
            b"--XyZ\r\npart\r\n--XyZ--epilogue",
            b"--XyZ\r\npart\r\n--XyZ--\r\n\r\n",
            b"--XyZ\r\npart\r\n--XyZ--\r\n--XyZ\r\nhidden\r\n--XyZ--",
            // Not this boundary.
            b"--XYZ\r\npart\r\n--XYZ--",
        ] {
            assert_eq!(
                digest("XyZ", body),
                None,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }
}
