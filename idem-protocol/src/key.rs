//! The `Idempotency-Key` request header (see [docs/contract.md](https://github.com/idem-rs/idem/blob/main/docs/contract.md), *The key*).
//!
//! ```
//! use http::{HeaderMap, HeaderValue};
//! use idem_protocol::key::{IDEMPOTENCY_KEY, IdempotencyKey, KeyError, KeySyntax};
//!
//! let mut headers = HeaderMap::new();
//! headers.insert(
//!     IDEMPOTENCY_KEY,
//!     HeaderValue::from_static(r#""8e03978e-40d5-43e8-bc93-6894a57f9324""#),
//! );
//! let key = IdempotencyKey::from_headers(&headers, KeySyntax::Lenient)?.expect("header is set");
//! assert_eq!(key.as_str(), "8e03978e-40d5-43e8-bc93-6894a57f9324");
//!
//! // Stripe's bare spelling names the same key.
//! let bare = HeaderValue::from_static("8e03978e-40d5-43e8-bc93-6894a57f9324");
//! assert_eq!(IdempotencyKey::parse(&bare, KeySyntax::Lenient)?, key);
//!
//! // The strict syntax accepts only the quoted spelling of the IETF draft.
//! assert_eq!(
//!     IdempotencyKey::parse(&bare, KeySyntax::Strict),
//!     Err(KeyError::Unquoted),
//! );
//!
//! // No header, no key: whether that is an error is the caller's decision.
//! assert_eq!(IdempotencyKey::from_headers(&HeaderMap::new(), KeySyntax::Lenient)?, None);
//! # Ok::<(), KeyError>(())
//! ```
//!
//! # Spellings
//!
//! - **Quoted** (the IETF draft): an RFC 9651 sf-string, `"abc"`. The key is the string's content,
//!   with the escapes `\"` and `\\` resolved. Parameters after the string (`"abc";v=1`) are
//!   ignored, as RFC 9651 asks of parameters a field does not define.
//! - **Bare** (Stripe): the header value taken verbatim, `abc`. Nothing in a bare value is special
//!   except a comma, so `abc;v=1` is the seven-character key `abc;v=1`. Single quotes are not
//!   quotes here (an sf-string is written with double quotes only): `'abc'` is the five-character
//!   key `'abc'`, a different key from `abc`.
//!
//! `"abc"` and `abc` are the same key. [`KeySyntax::Strict`] accepts only the quoted spelling.
//!
//! # Validation
//!
//! A key is 1 to [`MAX_KEY_LEN`] visible ASCII characters (`0x21..=0x7E`, so no spaces), counted
//! after unquoting. Whitespace (space or tab) around the header value is not part of the key.
//!
//! A request carries at most one key. Several `Idempotency-Key` header lines are rejected, and so
//! is a list in one line: a quoted value followed by more members (`"a", "b"`), or a bare value
//! containing a comma (`a,b`), which is how a proxy folds repeated lines into one. A bare key
//! therefore cannot contain a comma; a quoted one can (`"a,b"` is the key `a,b`).
//!
//! # Errors
//!
//! Each failure is a [`KeyError`] whose message is written for the client: it is the `detail` of the
//! 400 Problem Details answer. Positions in messages count characters from 1 in the header value,
//! after the surrounding whitespace is removed. When a request has several faults, the first one
//! found is reported, checked in this order: several header lines, a byte outside ASCII anywhere
//! in the value, an empty value, a bare value under the strict syntax, a list of values, a
//! malformed quoted string, then the characters of the key and its length.

pub mod derive;
mod form;
mod structured;

use std::borrow::Cow;
use std::fmt;

use http::{HeaderMap, HeaderName, HeaderValue};

pub use self::{
    derive::{DeriveError, MAX_NAMESPACE_LEN},
    form::KeyForm,
};

/// The `Idempotency-Key` header name.
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// The longest key accepted, in characters.
pub const MAX_KEY_LEN: usize = 255;

/// Which spellings of the header value are accepted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KeySyntax {
    /// An RFC 9651 sf-string (`"abc"`, the IETF draft) or a bare value (`abc`, Stripe's form).
    #[default]
    Lenient,
    /// Only an RFC 9651 sf-string, as the IETF draft specifies.
    Strict,
}

/// A parsed idempotency key: 1 to 255 visible ASCII characters, unquoted.
///
/// There is deliberately no `Display`, and `Debug` shows only the length, so that a key does not
/// end up in logs by accident: it is a client-chosen value that can be as sensitive as a token.
/// Use [`as_str`](Self::as_str) where the key itself is needed.
///
/// ```
/// use idem_protocol::key::IdempotencyKey;
///
/// let key = IdempotencyKey::new("8e03978e-40d5-43e8-bc93-6894a57f9324")?;
/// assert_eq!(format!("{key:?}"), "IdempotencyKey(len=36)");
/// # Ok::<(), idem_protocol::key::KeyError>(())
/// ```
#[derive(Clone)]
pub struct IdempotencyKey(Repr);

/// Where a key's characters are.
#[derive(Clone)]
enum Repr {
    /// A span of the header value it was parsed from: no copy, as a header value shares the
    /// request's buffer (the common case: a bare key, or a quoted one without escapes).
    InHeader {
        value: HeaderValue,
        start: usize,
        len: usize,
    },
    /// A key of its own: made with [`IdempotencyKey::new`], or unescaped from an sf-string.
    Owned(Box<str>),
}

impl IdempotencyKey {
    /// The key that `key`, a checked slice of `value`'s bytes, is.
    fn in_header(value: &HeaderValue, key: &str) -> Self {
        let start = key.as_ptr() as usize - value.as_bytes().as_ptr() as usize;
        Self(Repr::InHeader {
            value: value.clone(),
            start,
            len: key.len(),
        })
    }
}

impl PartialEq for IdempotencyKey {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for IdempotencyKey {}

impl std::hash::Hash for IdempotencyKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl IdempotencyKey {
    /// Makes a key from a string that is already the key itself, without quotes: it must be 1 to
    /// [`MAX_KEY_LEN`] visible ASCII characters.
    ///
    /// Unlike [`parse`](Self::parse), nothing is unquoted, trimmed or split on commas: `"a,b"` as a
    /// Rust string is the five-character key with its quotes.
    ///
    /// ```
    /// use idem_protocol::key::{IdempotencyKey, KeyError};
    ///
    /// assert_eq!(IdempotencyKey::new("order-42")?.as_str(), "order-42");
    /// assert_eq!(
    ///     IdempotencyKey::new("order 42"),
    ///     Err(KeyError::InvalidCharacter { position: 6, byte: b' ' }),
    /// );
    /// # Ok::<(), KeyError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`KeyError::Empty`], [`KeyError::InvalidCharacter`] or [`KeyError::TooLong`].
    pub fn new(key: impl Into<String>) -> Result<Self, KeyError> {
        let key = key.into();
        check_key(&key, |index| index + 1)?;
        Ok(Self(Repr::Owned(key.into_boxed_str())))
    }

    /// Parses one `Idempotency-Key` header value, in either spelling that `syntax` allows.
    ///
    /// ```
    /// use http::HeaderValue;
    /// use idem_protocol::key::{IdempotencyKey, KeyError, KeySyntax};
    ///
    /// let quoted = HeaderValue::from_static(r#""a\"b";v=1"#);
    /// assert_eq!(IdempotencyKey::parse(&quoted, KeySyntax::Strict)?.as_str(), r#"a"b"#);
    ///
    /// let folded = HeaderValue::from_static("abc, def");
    /// assert_eq!(IdempotencyKey::parse(&folded, KeySyntax::Lenient), Err(KeyError::List));
    /// # Ok::<(), KeyError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// Any [`KeyError`]; the [module documentation](self) lists the rules.
    pub fn parse(value: &HeaderValue, syntax: KeySyntax) -> Result<Self, KeyError> {
        // `HeaderValue` already excludes control characters other than tab, and `to_str` fails
        // exactly on the obs-text bytes (0x80..=0xFF) that remain.
        let Ok(text) = value.to_str() else {
            return Err(first_non_ascii(trim_ows(value.as_bytes())));
        };
        let text = text.trim_matches([' ', '\t']);
        if text.is_empty() {
            return Err(KeyError::Empty);
        }
        if text.starts_with('"') {
            return parse_quoted(value, text);
        }
        if syntax == KeySyntax::Strict {
            return Err(KeyError::Unquoted);
        }
        if text.contains(',') {
            return Err(KeyError::List);
        }
        check_key(text, |index| index + 1)?;
        Ok(Self::in_header(value, text))
    }

    /// The key without quotes or escapes.
    #[must_use]
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::InHeader { value, start, len } => {
                // The value was checked to be visible ASCII when the key was parsed.
                value
                    .to_str()
                    .map_or("", |text| &text[*start..*start + *len])
            }
            Repr::Owned(key) => key,
        }
    }

    /// Reads the key from request headers: `Ok(None)` when the header is absent.
    ///
    /// ```
    /// use http::{HeaderMap, HeaderValue};
    /// use idem_protocol::key::{IDEMPOTENCY_KEY, IdempotencyKey, KeyError, KeySyntax};
    ///
    /// let mut headers = HeaderMap::new();
    /// headers.append(IDEMPOTENCY_KEY, HeaderValue::from_static("a"));
    /// headers.append(IDEMPOTENCY_KEY, HeaderValue::from_static("b"));
    /// assert_eq!(
    ///     IdempotencyKey::from_headers(&headers, KeySyntax::Lenient),
    ///     Err(KeyError::Multiple),
    /// );
    /// ```
    ///
    /// # Errors
    ///
    /// [`KeyError::Multiple`] when the header appears more than once, whatever the lines hold;
    /// otherwise what [`parse`](Self::parse) returns for the one value.
    pub fn from_headers(headers: &HeaderMap, syntax: KeySyntax) -> Result<Option<Self>, KeyError> {
        let mut values = headers.get_all(IDEMPOTENCY_KEY).iter();
        let Some(value) = values.next() else {
            return Ok(None);
        };
        if values.next().is_some() {
            return Err(KeyError::Multiple);
        }
        Self::parse(value, syntax).map(Some)
    }
}

impl fmt::Debug for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IdempotencyKey(len={})", self.as_str().len())
    }
}

/// Why a header value is not a valid key. Each variant becomes a 400 Problem Details answer whose
/// `detail` is this error's message.
///
/// Positions count characters from 1 in the header value, after surrounding whitespace is removed.
#[derive(Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyError {
    /// The header appeared on several lines.
    Multiple,
    /// The one header line holds a list: values separated by commas, which is also how a proxy
    /// folds repeated lines into one.
    List,
    /// The value is empty: an empty header, or the empty quoted string `""`.
    Empty,
    /// The key is longer than [`MAX_KEY_LEN`] characters.
    TooLong {
        /// The key's length in characters, after unquoting.
        len: usize,
    },
    /// The key contains a character that is not visible ASCII: a space, a control character or a
    /// byte outside ASCII.
    InvalidCharacter {
        /// Where the character is, counting from 1.
        position: usize,
        /// The offending byte (for a character outside ASCII, the first byte of its encoding).
        byte: u8,
    },
    /// The strict syntax is in force and the value is not a quoted string.
    Unquoted,
    /// The value opens a quoted string that never closes.
    UnterminatedString,
    /// A backslash in a quoted value escapes something other than `"` or `\`.
    InvalidEscape {
        /// Where the backslash is, counting from 1.
        position: usize,
    },
    /// Something other than well-formed RFC 9651 parameters follows the closing quote.
    TrailingCharacters {
        /// Where the first unexpected character is, counting from 1.
        position: usize,
    },
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Multiple => f.write_str(
                "the Idempotency-Key header appears more than once; send it once, with a \
                 single key",
            ),
            Self::List => f.write_str(
                "the Idempotency-Key holds several values separated by commas; send a single key \
                 (a key that contains a comma must be sent as a quoted string, e.g. `\"a,b\"`)",
            ),
            Self::Empty => write!(
                f,
                "the Idempotency-Key is empty; a key is 1 to {MAX_KEY_LEN} visible ASCII characters"
            ),
            Self::TooLong { len } => write!(
                f,
                "the Idempotency-Key is {len} characters long; the maximum is {MAX_KEY_LEN}"
            ),
            Self::InvalidCharacter { position, byte } => write!(
                f,
                "character {position} of the Idempotency-Key is {}; a key may contain only visible \
                 ASCII characters: letters, digits and punctuation",
                describe_byte(*byte)
            ),
            Self::Unquoted => f.write_str(
                "the Idempotency-Key must be a quoted string, e.g. `Idempotency-Key: \"abc\"`",
            ),
            Self::UnterminatedString => f.write_str(
                "the Idempotency-Key starts with a quote but has no closing quote; a quoted key \
                 looks like `\"abc\"`",
            ),
            Self::InvalidEscape { position } => write!(
                f,
                "the Idempotency-Key has an invalid escape at character {position}; inside quotes \
                 a backslash may only precede `\"` or `\\`"
            ),
            Self::TrailingCharacters { position } => write!(
                f,
                "the Idempotency-Key has unexpected characters after its closing quote, at \
                 character {position}; send the quoted key alone, e.g. `\"abc\"`"
            ),
        }
    }
}

impl std::error::Error for KeyError {}

/// Names a byte a key may not contain instead of echoing it: a control character or a stray byte
/// would be invisible or mangled in the client's output.
fn describe_byte(byte: u8) -> &'static str {
    match byte {
        b' ' => "a space",
        b'\t' => "a tab",
        0x7F => "DEL, a control character",
        0x00..=0x1F => "a control character",
        0x80..=0xFF => "not ASCII",
        // Only reached if a visible character is ever reported by mistake; say something true.
        _ => "not allowed here",
    }
}

fn is_key_byte(byte: u8) -> bool {
    (0x21..=0x7E).contains(&byte)
}

fn trim_ows(mut bytes: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = bytes {
        bytes = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = bytes {
        bytes = rest;
    }
    bytes
}

fn first_non_ascii(bytes: &[u8]) -> KeyError {
    // Called once `to_str` has failed, so such a byte exists; the fallback only keeps this total.
    let (index, &byte) = bytes
        .iter()
        .enumerate()
        .find(|&(_, &byte)| !byte.is_ascii())
        .unwrap_or((0, &0x80));
    KeyError::InvalidCharacter {
        position: index + 1,
        byte,
    }
}

/// The character and length rules every key obeys, whatever its spelling. `position` maps an index
/// in `key` to the position reported to the client, which differs from it for a quoted key.
fn check_key(key: &str, position: impl FnOnce(usize) -> usize) -> Result<(), KeyError> {
    if key.is_empty() {
        return Err(KeyError::Empty);
    }
    if let Some((index, byte)) = key.bytes().enumerate().find(|&(_, b)| !is_key_byte(b)) {
        return Err(KeyError::InvalidCharacter {
            position: position(index),
            byte,
        });
    }
    // Every byte is ASCII by now, so the byte length is the character count the client sees.
    if key.len() > MAX_KEY_LEN {
        return Err(KeyError::TooLong { len: key.len() });
    }
    Ok(())
}

/// Parses a value that starts with `"` as an RFC 9651 sf-string item.
fn parse_quoted(value: &HeaderValue, text: &str) -> Result<IdempotencyKey, KeyError> {
    // The common case (no escapes) borrows the content, without an allocation.
    match structured::string_item(text) {
        Ok(content) => {
            check_key(&content, |index| quoted_position(text.as_bytes(), index))?;
            Ok(match content {
                Cow::Borrowed(content) => IdempotencyKey::in_header(value, content),
                Cow::Owned(content) => IdempotencyKey(Repr::Owned(content.into_boxed_str())),
            })
        }
        Err(malformed) => {
            // Only worth a second parse once the value is known to be invalid as a single item.
            if structured::is_list_of_several(text) {
                return Err(KeyError::List);
            }
            Err(diagnose_quoted(text.as_bytes(), Some(malformed.at)))
        }
    }
}

/// Maps an index in the unescaped content of a well-formed sf-string back to its position in the
/// raw value, so that the client is told where the character is in what it sent.
fn quoted_position(raw: &[u8], content_index: usize) -> usize {
    let mut raw_index = 1;
    for _ in 0..content_index {
        raw_index += if raw.get(raw_index) == Some(&b'\\') {
            2
        } else {
            1
        };
    }
    raw_index + 1
}

/// Explains why a value that starts with `"` is not an sf-string item, by walking the sf-string
/// grammar (RFC 9651 §4.2.5) to the first fault, in words fit to send to a client; `parsed_at`
/// is where the parse stopped.
fn diagnose_quoted(raw: &[u8], parsed_at: Option<usize>) -> KeyError {
    let mut index = 1;
    loop {
        match raw.get(index) {
            None => return KeyError::UnterminatedString,
            Some(b'"') => break,
            Some(b'\\') => match raw.get(index + 1) {
                None => return KeyError::UnterminatedString,
                Some(b'"' | b'\\') => index += 2,
                Some(_) => {
                    return KeyError::InvalidEscape {
                        position: index + 1,
                    };
                }
            },
            Some(&byte) if !is_key_byte(byte) => {
                return KeyError::InvalidCharacter {
                    position: index + 1,
                    byte,
                };
            }
            Some(_) => index += 1,
        }
    }
    // The string itself is well formed, so the fault lies after it. The parse stopped at the
    // character it could not take (past the end for a dangling `;`); the first one after the
    // quote will do if it does not say.
    let after_quote = index + 1;
    let at = parsed_at.map_or(after_quote, |at| at.max(after_quote).min(raw.len() - 1));
    KeyError::TrailingCharacters { position: at + 1 }
}
