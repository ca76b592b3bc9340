//! Keys a client makes: one per logical operation, random or derived from what the operation
//! is.
//!
//! ```
//! use idem_protocol::key::{IdempotencyKey, KeyForm};
//!
//! // A key that names the operation: the same user id gives the same key, in any process.
//! let key = IdempotencyKey::derive("customer-create", ["user-42"])?;
//! assert_eq!(key.as_str(), "customer-create:user-42");
//! assert_eq!(KeyForm::Quoted.header_value(&key), r#""customer-create:user-42""#);
//! assert_eq!(KeyForm::Bare.header_value(&key), "customer-create:user-42");
//!
//! // A key for an operation with nothing to name it by: a random UUID.
//! assert_eq!(IdempotencyKey::random().as_str().len(), 36);
//! # Ok::<(), idem_protocol::key::DeriveError>(())
//! ```
//!
//! # The derivation
//!
//! A derived key is a pure function of its namespace and parts, written down here so that a
//! program in another language can make the same key:
//!
//! 1. The namespace is 1 to 64 characters of `A-Z a-z 0-9 - _ .`; anything else is refused.
//! 2. Each part is encoded: every byte of its UTF-8 form that is an ASCII letter, digit, `-`,
//!    `_` or `.` stays; every other byte becomes `%` and two upper-case hex digits
//!    (`:` → `%3A`, `%` → `%25`, `é` → `%C3%A9`).
//! 3. The full form is the namespace followed by `:` and the encoded part, for each part in
//!    order: `customer-create:user-42`, `transfer:alice:k%3A1`. No parts: the namespace alone.
//! 4. If the full form is at most 255 characters, it is the key. Otherwise the key is its first
//!    190 characters, `~`, and the 64 lower-case hex digits of the SHA-256 of the whole full form
//!    (255 characters in all).
//!
//! A full form never contains `~` (it is encoded), and a `:` only between parts, so two
//! different operations never share a full form, and a hashed key never equals an unhashed
//! one. Every character is visible ASCII and none is `"`, `\` or `,`, so the key reads the same
//! in either [`KeyForm`](super::KeyForm), under the strict syntax of an idem server or Stripe's.
//!
//! This derivation is frozen: a change would give every operation a new key, and an operation
//! retried across the upgrade would run twice.

use std::fmt::{self, Write as _};

use crate::sha256::Sha256;

use super::{IdempotencyKey, MAX_KEY_LEN};

/// The longest namespace, in characters.
pub const MAX_NAMESPACE_LEN: usize = 64;

/// How many characters of the full form a hashed key keeps before `~` and the digest.
const HASHED_PREFIX_LEN: usize = MAX_KEY_LEN - 1 - 64;

/// Why a key could not be derived.
#[derive(Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeriveError {
    /// The namespace is empty, too long, or has a character outside `A-Z a-z 0-9 - _ .`.
    InvalidNamespace {
        /// The namespace as given.
        namespace: String,
    },
}

impl fmt::Display for DeriveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidNamespace { namespace } => write!(
                f,
                "the key namespace {namespace:?} must be 1 to {MAX_NAMESPACE_LEN} characters of \
                 ASCII letters, digits, `-`, `_` and `.`"
            ),
        }
    }
}

impl std::error::Error for DeriveError {}

impl IdempotencyKey {
    /// A new random key: a UUID v4, lower-case and hyphenated, as
    /// `8e03978e-40d5-43e8-bc93-6894a57f9324`. Use it for an operation that nothing else
    /// names (a payment from a form), and keep it for every retry of that operation.
    #[must_use]
    pub fn random() -> Self {
        let mut bytes = random_bytes();
        bytes[6] = (bytes[6] & 0x0F) | 0x40; // version 4
        bytes[8] = (bytes[8] & 0x3F) | 0x80; // the RFC 9562 variant
        let hex = hex::encode(bytes);
        let uuid = format!(
            "{}-{}-{}-{}-{}",
            &hex[..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..]
        );
        Self::new(uuid).expect("a UUID is a valid key")
    }

    /// The key of the operation that `namespace` and `parts` name: the same namespace and parts
    /// give the same key in every process and every version of this crate, and different ones
    /// give different keys. The [module documentation](crate::key::derive) spells out the
    /// derivation.
    ///
    /// A part is written with its `Display` form, so numbers and strings both serve.
    ///
    /// ```
    /// use idem_protocol::key::IdempotencyKey;
    ///
    /// let user_id = 42;
    /// let key = IdempotencyKey::derive("customer-create", [user_id])?;
    /// assert_eq!(key.as_str(), "customer-create:42");
    ///
    /// // Parts are encoded, so they can hold anything, and never run into one another.
    /// let a = IdempotencyKey::derive("transfer", ["alice:1", "2"])?;
    /// let b = IdempotencyKey::derive("transfer", ["alice", "1:2"])?;
    /// assert_eq!(a.as_str(), "transfer:alice%3A1:2");
    /// assert_ne!(a, b);
    ///
    /// // Long parts are hashed: a key never exceeds 255 characters.
    /// let long = IdempotencyKey::derive("report", ["x".repeat(1000)])?;
    /// assert_eq!(long.as_str().len(), 255);
    /// # Ok::<(), idem_protocol::key::DeriveError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`DeriveError::InvalidNamespace`] when the namespace is not 1 to 64 characters of
    /// `A-Z a-z 0-9 - _ .`.
    pub fn derive<I>(namespace: &str, parts: I) -> Result<Self, DeriveError>
    where
        I: IntoIterator,
        I::Item: fmt::Display,
    {
        let valid =
            (1..=MAX_NAMESPACE_LEN).contains(&namespace.len()) && namespace.bytes().all(is_kept);
        if !valid {
            return Err(DeriveError::InvalidNamespace {
                namespace: namespace.to_owned(),
            });
        }
        let mut full = namespace.to_owned();
        let mut part = String::new();
        for item in parts {
            part.clear();
            // Writing to a `String` fails only if the `Display` impl itself reports an error;
            // what it wrote until then is still the part's text.
            let _ = write!(part, "{item}");
            full.push(':');
            encode_into(&mut full, &part);
        }
        let key = if full.len() <= MAX_KEY_LEN {
            full
        } else {
            let digest: [u8; 32] = Sha256::digest(full.as_bytes());
            format!("{}~{}", &full[..HASHED_PREFIX_LEN], hex::encode(digest))
        };
        Ok(Self::new(key).expect("a derived key is 1 to 255 visible ASCII characters"))
    }
}

/// The bytes a part keeps as they are: RFC 3986's unreserved characters without `~`, which
/// marks a hashed key.
fn is_kept(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.')
}

fn encode_into(out: &mut String, part: &str) {
    for byte in part.bytes() {
        if is_kept(byte) {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
}

/// 16 bytes from the operating system's generator. Should it fail (it does not on the systems
/// Rust supports, short of a broken sandbox), the time, the process and a counter, hashed:
/// unique, if not unpredictable.
fn random_bytes() -> [u8; 16] {
    use std::sync::atomic::{AtomicU64, Ordering};

    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_ok() {
        return bytes;
    }
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let digest = Sha256::new()
        .chain_update(now.to_le_bytes())
        .chain_update(std::process::id().to_le_bytes())
        .chain_update(COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes())
        .finalize();
    bytes.copy_from_slice(&digest[..16]);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_random_key_is_a_version_4_uuid() {
        let key = IdempotencyKey::random();
        let text = key.as_str();
        assert_eq!(text.len(), 36);
        let groups: Vec<&str> = text.split('-').collect();
        assert_eq!(
            groups.iter().map(|group| group.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(groups[2].starts_with('4'), "{text}");
        assert!(matches!(&groups[3][..1], "8" | "9" | "a" | "b"), "{text}");
        assert_ne!(IdempotencyKey::random(), key);
    }

    #[test]
    fn namespaces_are_checked() {
        for bad in ["", "has space", "colon:", "tilde~", "é", &"n".repeat(65)] {
            assert_eq!(
                IdempotencyKey::derive(bad, ["x"]),
                Err(DeriveError::InvalidNamespace {
                    namespace: bad.to_owned()
                }),
                "{bad:?}"
            );
        }
        assert!(IdempotencyKey::derive(&"n".repeat(64), ["x"]).is_ok());
        assert!(IdempotencyKey::derive("a.B_c-9", ["x"]).is_ok());
    }

    #[test]
    fn the_hashed_form_keeps_a_readable_prefix() {
        let key = IdempotencyKey::derive("ns", ["a".repeat(300)]).unwrap();
        let text = key.as_str();
        assert_eq!(text.len(), MAX_KEY_LEN);
        assert!(text.starts_with("ns:aaaa"), "{text}");
        assert_eq!(text.as_bytes()[HASHED_PREFIX_LEN], b'~');
        // The boundary: 255 characters stay as they are, 256 are hashed.
        let exact = IdempotencyKey::derive("ns", ["a".repeat(252)]).unwrap();
        assert_eq!(exact.as_str().len(), 255);
        assert!(!exact.as_str().contains('~'));
        let over = IdempotencyKey::derive("ns", ["a".repeat(253)]).unwrap();
        assert!(over.as_str().contains('~'));
    }
}
