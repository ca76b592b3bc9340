//! The route a broker's consumer is scoped to, as a path the flow can take.

use std::fmt::Write as _;

/// `name` (a stream, a consumer, a queue) as one path segment: unreserved characters as they are, the rest percent-encoded.
pub fn path_segment(name: &str) -> String {
    let mut segment = String::with_capacity(name.len());
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            segment.push(char::from(byte));
        } else {
            let _ = write!(segment, "%{byte:02X}");
        }
    }
    segment
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_path_segments() {
        assert_eq!(path_segment("SHOP"), "SHOP");
        assert_eq!(path_segment("a b/c"), "a%20b%2Fc");
    }
}
