//! How a key is written into the `Idempotency-Key` header: the inverse of parsing it.

use http::HeaderValue;

use super::IdempotencyKey;

/// How a key is written into the `Idempotency-Key` header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KeyForm {
    /// An RFC 9651 sf-string, `"abc"`, as the IETF draft specifies. The default: an idem server
    /// takes it under either syntax, and so does any server that follows the draft.
    #[default]
    Quoted,
    /// The key as it is, `abc`, as Stripe's API and SDKs send it. A server that follows the IETF
    /// draft strictly refuses it.
    Bare,
}

impl KeyForm {
    /// The header value that carries `key` in this form.
    ///
    /// ```
    /// use idem_protocol::key::{IdempotencyKey, KeyForm};
    ///
    /// let key = IdempotencyKey::new(r#"a"b\c"#)?;
    /// assert_eq!(KeyForm::Quoted.header_value(&key), r#""a\"b\\c""#);
    /// # Ok::<(), idem_protocol::key::KeyError>(())
    /// ```
    #[must_use]
    pub fn header_value(self, key: &IdempotencyKey) -> HeaderValue {
        let text = match self {
            Self::Bare => key.as_str().to_owned(),
            Self::Quoted => {
                let mut quoted = String::with_capacity(key.as_str().len() + 2);
                quoted.push('"');
                for c in key.as_str().chars() {
                    if matches!(c, '"' | '\\') {
                        quoted.push('\\');
                    }
                    quoted.push(c);
                }
                quoted.push('"');
                quoted
            }
        };
        HeaderValue::from_str(&text).expect("a key is visible ASCII, and so is its quoted form")
    }
}
