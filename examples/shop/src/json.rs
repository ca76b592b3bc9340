//! [`ValidJson`]: the body extractor of every POST, which refuses a bad body before the
//! handler runs.
//!
//! It checks the media type (415), reads the body under axum's `DefaultBodyLimit` (413),
//! deserializes it with the path of the failing field (400), and runs the type's
//! [`Validate`] rules (400). Every refusal is Problem Details naming the field, in `detail`
//! and as a JSON Pointer in `errors`, in JSON's words rather than Rust's (`must be an
//! integer`, not `expected i64`). A body that lacks members is told each of them, from the
//! `required` list of the type's schema, the one the OpenAPI document publishes: serde stops
//! at the first.
//!
//! Under `#[idempotent]` a body refused here stores nothing (the runtime releases the key it
//! claimed for the request): the client fixes the body and sends it again with the same
//! `Idempotency-Key`, as the seed article advises.
//!
//! [`ValidJson`] implements [`idem::PureBody`]: its verdict depends on nothing but the
//! body and its `Content-Type`, so a replay, whose body the fingerprint has already found
//! equal to the first request's, skips parsing it. Authentication is not its job: it is the
//! shop's middleware's, which runs before every request.

use axum::{
    body::Bytes,
    extract::{FromRequest, Request},
    http::{HeaderMap, StatusCode, header},
};
use idem::{Problem, ProblemKind};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use serde_path_to_error::Segment;
use utoipa::{
    PartialSchema,
    openapi::{RefOr, schema::Schema},
};

use crate::problem::{FieldError, ShopProblem, ShopProblemKind};

mod words;

/// A JSON body of type `T`, deserialized and validated.
#[derive(Debug, Clone)]
pub struct ValidJson<T>(pub T);

/// Parsing and validating a body reads the body alone; a replay skips it.
impl<T> idem::PureBody for ValidJson<T> {}

/// The rules a request body must keep beyond its types: ranges, formats. They see the
/// value alone, never the request or the state: a replay skips them (see [`ValidJson`]).
pub trait Validate {
    /// Every field that breaks a rule, or `Ok` when none does.
    fn validate(&self) -> Result<(), Vec<FieldError>>;
}

/// Why a body was refused: the shop's own 400 or 415, or the runtime's 413.
#[derive(Debug)]
pub enum BodyRejection {
    /// Not JSON, not the right shape, or out of range.
    Invalid(ShopProblem),
    /// Larger than the router's `DefaultBodyLimit`.
    TooLarge,
    /// The body could not be read.
    Unreadable(String),
}

impl axum::response::IntoResponse for BodyRejection {
    fn into_response(self) -> axum::response::Response {
        match self {
            Self::Invalid(problem) => problem.into_response(),
            // The same problem the runtime answers for a keyed request over the limit, so a
            // client sees one kind of 413 whether it sent a key or not.
            Self::TooLarge => Problem::new(
                ProblemKind::BodyTooLarge,
                "the request body is larger than this endpoint accepts",
            )
            .into_response(),
            Self::Unreadable(why) => Problem::new(ProblemKind::BodyUnreadable, why).into_response(),
        }
    }
}

impl<T, S> FromRequest<S> for ValidJson<T>
where
    T: DeserializeOwned + Validate + PartialSchema,
    S: Send + Sync,
{
    type Rejection = BodyRejection;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        if !is_json(request.headers()) {
            return Err(BodyRejection::Invalid(ShopProblem::new(
                ShopProblemKind::UnsupportedMediaType,
                "send the body as JSON, with `Content-Type: application/json`",
            )));
        }
        let body =
            Bytes::from_request(request, state)
                .await
                .map_err(|rejection| match rejection.status() {
                    StatusCode::PAYLOAD_TOO_LARGE => BodyRejection::TooLarge,
                    _ => BodyRejection::Unreadable(rejection.body_text()),
                })?;
        parse(&body).map(ValidJson).map_err(BodyRejection::Invalid)
    }
}

/// Whether the request says its body is JSON: `application/json` or `application/*+json`.
pub fn is_json(headers: &HeaderMap) -> bool {
    let Some(content_type) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
    else {
        return false;
    };
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || essence
            .strip_prefix("application/")
            .is_some_and(|subtype| subtype.ends_with("+json"))
}

/// Deserializes and validates `body`, or the 400 that names what is wrong. `T`'s schema says
/// which members a body must have.
pub fn parse<T>(body: &[u8]) -> Result<T, ShopProblem>
where
    T: DeserializeOwned + Validate + PartialSchema,
{
    // serde would take a struct from a JSON array too (`[9800, "JPY"]`): only an object is
    // a body here.
    if body.iter().find(|byte| !byte.is_ascii_whitespace()) != Some(&b'{') {
        let error = match serde_json::from_slice::<serde::de::IgnoredAny>(body) {
            Err(error) => field_error([], &error),
            Ok(_) => FieldError::new("", "the body must be a JSON object"),
        };
        return Err(ShopProblem::invalid_fields(vec![error]));
    }
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let value: T = serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        let first = field_error(error.path().iter(), error.inner());
        ShopProblem::invalid_fields(with_every_missing_member::<T>(first, body))
    })?;
    // Characters after the value are an error too.
    deserializer
        .end()
        .map_err(|error| ShopProblem::invalid_fields(vec![field_error([], &error)]))?;
    value.validate().map_err(ShopProblem::invalid_fields)?;
    Ok(value)
}

/// `first`, the one error serde reports, then every member `T` requires that `body` lacks.
fn with_every_missing_member<T: PartialSchema>(first: FieldError, body: &[u8]) -> Vec<FieldError> {
    let mut errors = vec![first];
    // A body serde could not read as an object has nothing more to tell.
    let Ok(members) = serde_json::from_slice::<Map<String, Value>>(body) else {
        return errors;
    };
    for name in required_members::<T>() {
        let missing = FieldError::new(&pointer_token(&name), "is required");
        if !members.contains_key(&name) && !errors.contains(&missing) {
            errors.push(missing);
        }
    }
    errors
}

/// The members `T`'s schema says a body must have, in their order.
fn required_members<T: PartialSchema>() -> Vec<String> {
    match T::schema() {
        RefOr::T(Schema::Object(object)) => object.required,
        _ => Vec::new(),
    }
}

/// `key` as one token of a JSON Pointer (RFC 6901).
fn pointer_token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn field_error<'a>(
    path: impl IntoIterator<Item = &'a Segment>,
    error: &serde_json::Error,
) -> FieldError {
    if error.is_syntax() || error.is_eof() {
        return FieldError::new("", format!("the body is not valid JSON: {error}"));
    }
    let mut pointer = path
        .into_iter()
        .map(|segment| match segment {
            Segment::Seq { index } => index.to_string(),
            Segment::Map { key } => pointer_token(key),
            Segment::Enum { variant } => variant.clone(),
            Segment::Unknown => "?".to_owned(),
        })
        .collect::<Vec<_>>()
        .join("/");
    let message = strip_position(&error.to_string());
    // serde reports a missing field at its parent; name the field itself.
    if let Some(name) = message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.strip_suffix('`'))
    {
        if !pointer.is_empty() {
            pointer.push('/');
        }
        pointer.push_str(name);
        return FieldError::new(&pointer, "is required");
    }
    FieldError::new(&pointer, words::in_plain_words(&message))
}

/// serde_json ends a message with " at line 1 column 27": true, but of no use to a client
/// that is told the field.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(at) => message[..at].to_owned(),
        None => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize, utoipa::ToSchema)]
    #[serde(deny_unknown_fields)]
    struct Order {
        amount: i64,
        currency: String,
    }

    impl Validate for Order {
        fn validate(&self) -> Result<(), Vec<FieldError>> {
            let mut errors = Vec::new();
            if self.amount < 1 {
                errors.push(FieldError::new("amount", "must be at least 1"));
            }
            if self.currency.len() != 3 {
                errors.push(FieldError::new("currency", "must be 3 letters"));
            }
            if errors.is_empty() {
                Ok(())
            } else {
                Err(errors)
            }
        }
    }

    fn refused(body: &str) -> Vec<FieldError> {
        parse::<Order>(body.as_bytes())
            .unwrap_err()
            .errors()
            .to_vec()
    }

    #[test]
    fn each_kind_of_bad_body_names_its_field() {
        let cases = [
            (
                r#"{"amount": "9800", "currency": "JPY"}"#,
                "#/amount",
                "invalid type",
            ),
            (r#"{"currency": "JPY"}"#, "#/amount", "is required"),
            (
                r#"{"amount": 1, "currency": "JPY", "amout": 2}"#,
                "#/amout",
                "unknown field",
            ),
            (
                r#"{"amount": 0, "currency": "JPY"}"#,
                "#/amount",
                "at least 1",
            ),
            (
                r#"{"amount": 1.5, "currency": "JPY"}"#,
                "#/amount",
                "invalid type",
            ),
            (r#"{"amount": 1, "#, "#", "not valid JSON"),
            (
                r#"{"amount": 1, "currency": "JPY"} x"#,
                "#",
                "not valid JSON",
            ),
            (r#"[9800, "JPY"]"#, "#", "must be a JSON object"),
            (r#""#, "#", "not valid JSON"),
        ];
        for (body, pointer, says) in cases {
            let errors = refused(body);
            assert_eq!(errors[0].pointer, pointer, "{body}");
            assert!(
                errors[0].detail.contains(says),
                "{body}: {}",
                errors[0].detail
            );
            // The position helps with broken JSON; a field's name says more than its column.
            let positioned = says == "not valid JSON";
            assert_eq!(
                errors[0].detail.contains("at line"),
                positioned,
                "{}",
                errors[0].detail
            );
        }
    }

    #[test]
    fn every_failed_rule_is_reported() {
        let errors = refused(r#"{"amount": 0, "currency": "JPYX"}"#);
        let pointers: Vec<_> = errors.iter().map(|error| error.pointer.as_str()).collect();
        assert_eq!(pointers, ["#/amount", "#/currency"]);
    }

    fn pointers(errors: &[FieldError]) -> Vec<&str> {
        errors.iter().map(|error| error.pointer.as_str()).collect()
    }

    #[test]
    fn every_missing_member_is_named() {
        let problem = parse::<Order>(b"{}").unwrap_err();
        assert_eq!(pointers(problem.errors()), ["#/amount", "#/currency"]);
        assert_eq!(
            problem.detail(),
            "amount: is required; currency: is required"
        );
        // The shop's own bodies, with their members named as a client sends them.
        let problem = parse::<crate::transfers::NewTransfer>(br#"{"amount": 1}"#).unwrap_err();
        assert_eq!(pointers(problem.errors()), ["#/currency", "#/toAccount"]);
    }

    #[test]
    fn a_wrong_type_and_the_missing_members_are_named_together() {
        let errors = refused(r#"{"amount": "9800"}"#);
        assert_eq!(pointers(&errors), ["#/amount", "#/currency"]);
        assert_eq!(
            errors[0].detail,
            r#"invalid type: must be an integer, not the string "9800""#
        );
        assert_eq!(errors[1].detail, "is required");
        let errors = refused(r#"{"amout": 9800}"#);
        assert_eq!(pointers(&errors), ["#/amout", "#/amount", "#/currency"]);
    }

    #[test]
    fn types_are_named_as_json_names_them() {
        for (body, detail) in [
            (
                r#"{"amount": 1.5, "currency": "JPY"}"#,
                "invalid type: must be an integer, not 1.5",
            ),
            (
                r#"{"amount": 1, "currency": 392}"#,
                "invalid type: must be a string, not 392",
            ),
            (
                r#"{"amount": null, "currency": "JPY"}"#,
                "invalid type: must be an integer, not null",
            ),
        ] {
            let errors = refused(body);
            assert_eq!(errors.len(), 1, "{body}: {errors:?}");
            assert_eq!(errors[0].detail, detail, "{body}");
        }
    }

    #[test]
    fn json_media_types() {
        let with = |value: &'static str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::CONTENT_TYPE, value.parse().unwrap());
            is_json(&headers)
        };
        assert!(with("application/json"));
        assert!(with("Application/JSON; charset=utf-8"));
        assert!(with("application/merge-patch+json"));
        assert!(!with("text/plain"));
        assert!(!with("application/x-www-form-urlencoded"));
        assert!(!is_json(&HeaderMap::new()));
    }
}
