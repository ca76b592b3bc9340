//! The `Idempotency-Key` request header (SPEC §2).
//!
//! INTERFACE STUB: to be implemented. The public surface below is fixed; the bodies are not.

use http::{HeaderMap, HeaderName};

/// The `Idempotency-Key` header name.
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// The longest key accepted, in characters.
pub const MAX_KEY_LEN: usize = 255;

/// Which spellings of the header value are accepted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KeySyntax {
    /// An RFC 9651 sf-string (`"abc"`, the IETF draft) or a bare token (`abc`, Stripe's form).
    #[default]
    Lenient,
    /// Only an RFC 9651 sf-string, as the IETF draft specifies.
    Strict,
}

/// A parsed idempotency key: 1 to 255 visible ASCII characters, unquoted.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(Box<str>);

impl IdempotencyKey {
    /// The key without quotes or escapes.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Reads the key from request headers: `Ok(None)` when the header is absent.
    pub fn from_headers(headers: &HeaderMap, syntax: KeySyntax) -> Result<Option<Self>, KeyError> {
        let _ = (headers, syntax);
        unimplemented!()
    }
}

/// Why a header value is not a valid key. Each variant becomes a 400 Problem Details answer whose
/// `detail` is this error's message.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyError {
    /// The header carried several values.
    #[error("the Idempotency-Key header must appear once, with a single value")]
    Multiple,
}
