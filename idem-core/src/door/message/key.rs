//! [`MessageKey`]: where a message's idempotency key is: a header of the message, or a member
//! of its JSON body.

use std::fmt;

use http::{HeaderMap, HeaderName};
use serde_json::Value;

/// Where a message handler finds the key of a message.
///
/// ```
/// use idem::message::MessageKey;
///
/// // The publisher's message id: NATS `Nats-Msg-Id`, AMQP `message-id`.
/// const BY_MESSAGE_ID: MessageKey = MessageKey::header("Nats-Msg-Id");
/// // A business identifier inside the event: the same payment published twice, under two
/// // message ids, is still one key.
/// const BY_PAYMENT: MessageKey = MessageKey::json("/paymentId");
/// # let _ = (BY_MESSAGE_ID, BY_PAYMENT);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MessageKey {
    /// A header of the message, by name (case-insensitive): NATS `Nats-Msg-Id`, AMQP
    /// `message-id` (the property) or any header of the message.
    Header(&'static str),
    /// A member of the JSON body, named by a JSON Pointer (RFC 6901): `/order_id`,
    /// `/payment/id`. A string member is the key as it is; a number is its JSON text.
    Json(&'static str),
}

/// Why a message's key could not be read: the message is refused for good (it will not get
/// a key by being delivered again).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MessageKeyError {
    /// The key source names no valid header.
    InvalidHeaderName(&'static str),
    /// The JSON Pointer is neither empty nor starts with `/`.
    InvalidPointer(&'static str),
    /// The header is there but is not text.
    HeaderNotText(&'static str),
    /// The body is not JSON, so the pointer finds nothing.
    BodyNotJson(&'static str),
    /// The member is there, but is neither a string nor a number.
    NotAScalar(&'static str),
}

impl fmt::Display for MessageKeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidHeaderName(name) => write!(f, "`{name}` is not a header name"),
            Self::InvalidPointer(pointer) => write!(
                f,
                "`{pointer}` is not a JSON Pointer: it must start with `/`, as in `/order_id`"
            ),
            Self::HeaderNotText(name) => write!(f, "the header `{name}` is not text"),
            Self::BodyNotJson(pointer) => {
                write!(
                    f,
                    "the body is not JSON, so `{pointer}` names no member of it"
                )
            }
            Self::NotAScalar(pointer) => {
                write!(f, "the member `{pointer}` is neither a string nor a number")
            }
        }
    }
}

impl std::error::Error for MessageKeyError {}

impl MessageKey {
    /// The key is the header `name` of the message.
    pub const fn header(name: &'static str) -> Self {
        Self::Header(name)
    }

    /// The key is the member of the JSON body at `pointer` (RFC 6901).
    pub const fn json(pointer: &'static str) -> Self {
        Self::Json(pointer)
    }

    /// Checks the source itself: a header name that is one, a pointer that is one.
    pub fn check(&self) -> Result<(), MessageKeyError> {
        match *self {
            Self::Header(name) => HeaderName::from_bytes(name.as_bytes())
                .map(drop)
                .map_err(|_| MessageKeyError::InvalidHeaderName(name)),
            Self::Json(pointer) if pointer.is_empty() || pointer.starts_with('/') => Ok(()),
            Self::Json(pointer) => Err(MessageKeyError::InvalidPointer(pointer)),
        }
    }

    /// The key of a message with `headers` and `body`: `None` when it has none.
    pub fn find(
        &self,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<Option<String>, MessageKeyError> {
        self.check()?;
        match *self {
            Self::Header(name) => headers
                .get(name)
                .map(|value| value.to_str().map(str::to_owned))
                .transpose()
                .map_err(|_| MessageKeyError::HeaderNotText(name)),
            Self::Json(pointer) => {
                let body: Value = serde_json::from_slice(body)
                    .map_err(|_| MessageKeyError::BodyNotJson(pointer))?;
                match body.pointer(pointer) {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::String(text)) => Ok(Some(text.clone())),
                    Some(Value::Number(number)) => Ok(Some(number.to_string())),
                    Some(_) => Err(MessageKeyError::NotAScalar(pointer)),
                }
            }
        }
    }

    /// Where the key comes from, for logs and errors: `header Nats-Msg-Id`, `JSON /id`.
    pub fn describe(&self) -> String {
        match self {
            Self::Header(name) => format!("header {name}"),
            Self::Json(pointer) => format!("JSON member {pointer}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(name, value)| {
                (
                    HeaderName::from_bytes(name.as_bytes()).unwrap(),
                    HeaderValue::from_str(value).unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn a_header_is_found_whatever_its_case() {
        let found =
            MessageKey::header("Nats-Msg-Id").find(&headers(&[("nats-msg-id", "m-1")]), b"");
        assert_eq!(found, Ok(Some("m-1".to_owned())));
        assert_eq!(
            MessageKey::header("Nats-Msg-Id").find(&HeaderMap::new(), b""),
            Ok(None)
        );
    }

    #[test]
    fn a_json_member_is_a_string_or_the_text_of_a_number() {
        let body = br#"{"order":{"id":"ord_1","n":42,"list":[1]},"none":null}"#;
        let find = |pointer| MessageKey::json(pointer).find(&HeaderMap::new(), body);
        assert_eq!(find("/order/id"), Ok(Some("ord_1".to_owned())));
        assert_eq!(find("/order/n"), Ok(Some("42".to_owned())));
        assert_eq!(find("/missing"), Ok(None));
        assert_eq!(find("/none"), Ok(None));
        assert_eq!(
            find("/order/list"),
            Err(MessageKeyError::NotAScalar("/order/list"))
        );
        assert_eq!(
            MessageKey::json("/id").find(&HeaderMap::new(), b"not json"),
            Err(MessageKeyError::BodyNotJson("/id"))
        );
        assert_eq!(
            MessageKey::json("id").check(),
            Err(MessageKeyError::InvalidPointer("id"))
        );
    }
}
