//! RFC 9457 Problem Details, as a client reads them from any server.

use serde_json::{Map, Value};

/// The media type of a Problem Details body.
const PROBLEM_JSON: &str = "application/problem+json";

/// The `type` of a problem that names none (RFC 9457 §4.2.1).
pub(crate) const ABOUT_BLANK: &str = "about:blank";

/// An RFC 9457 Problem Details body: the standard members, and every other member as an
/// extension.
///
/// A member whose value has the wrong JSON type is ignored, as RFC 9457 §3.1 asks: a `status`
/// of `"409"` (a string) leaves [`status`](Self::status) empty, and a missing `type` is
/// `about:blank`.
///
/// ```
/// use idem_client::ProblemDetails;
///
/// let body = br#"{"type":"https://example.com/probs/out-of-credit","title":"You do not have enough credit.","status":"403","balance":30}"#;
/// let problem = ProblemDetails::from_json(body).expect("a JSON object");
/// assert_eq!(problem.type_uri(), "https://example.com/probs/out-of-credit");
/// assert_eq!(problem.title(), Some("You do not have enough credit."));
/// assert_eq!(problem.status(), None, "a string is not a status");
/// assert_eq!(problem.extension("balance"), Some(&serde_json::json!(30)));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct ProblemDetails {
    type_uri: String,
    title: Option<String>,
    status: Option<u16>,
    detail: Option<String>,
    instance: Option<String>,
    extensions: Map<String, Value>,
}

impl ProblemDetails {
    /// Reads a Problem Details body: `None` unless it is a JSON object.
    #[must_use]
    pub fn from_json(body: &[u8]) -> Option<Self> {
        let Ok(Value::Object(mut members)) = serde_json::from_slice::<Value>(body) else {
            return None;
        };
        let mut string = |name: &str| match members.remove(name) {
            Some(Value::String(text)) => Some(text),
            _ => None,
        };
        let type_uri = string("type").unwrap_or_else(|| ABOUT_BLANK.to_owned());
        let title = string("title");
        let detail = string("detail");
        let instance = string("instance");
        let status = match members.remove("status") {
            Some(Value::Number(number)) => number
                .as_u64()
                .and_then(|status| u16::try_from(status).ok())
                .filter(|status| (100..=599).contains(status)),
            _ => None,
        };
        Some(Self {
            type_uri,
            title,
            status,
            detail,
            instance,
            extensions: members,
        })
    }

    /// Reads the body of an answer whose `Content-Type` is `application/problem+json`;
    /// `None` for any other answer.
    pub fn from_answer(headers: &http::HeaderMap, body: &[u8]) -> Option<Self> {
        let media_type = headers
            .get(http::header::CONTENT_TYPE)?
            .to_str()
            .ok()?
            .split(';')
            .next()?
            .trim();
        if !media_type.eq_ignore_ascii_case(PROBLEM_JSON) {
            return None;
        }
        Self::from_json(body)
    }

    /// The `type` member: a URI that names the kind of problem; `about:blank` when absent.
    #[must_use]
    pub fn type_uri(&self) -> &str {
        &self.type_uri
    }

    /// The `title` member: a short summary of the kind of problem.
    #[must_use]
    pub fn title(&self) -> Option<&str> {
        self.title.as_deref()
    }

    /// The `status` member, when it is a status code (100 to 599).
    #[must_use]
    pub fn status(&self) -> Option<u16> {
        self.status
    }

    /// The `detail` member: what went wrong with this request.
    #[must_use]
    pub fn detail(&self) -> Option<&str> {
        self.detail.as_deref()
    }

    /// The `instance` member: a URI reference for this occurrence.
    #[must_use]
    pub fn instance(&self) -> Option<&str> {
        self.instance.as_deref()
    }

    /// An extension member (`errors`, `balance`, idem's `originalStatus`).
    #[must_use]
    pub fn extension(&self, name: &str) -> Option<&Value> {
        self.extensions.get(name)
    }

    /// Every extension member.
    #[must_use]
    pub fn extensions(&self) -> &Map<String, Value> {
        &self.extensions
    }
}

#[cfg(test)]
mod tests {
    use http::{HeaderMap, HeaderValue, header::CONTENT_TYPE};

    use super::*;

    #[test]
    fn members_of_the_wrong_type_are_ignored() {
        let problem = ProblemDetails::from_json(
            br#"{"type":7,"title":["x"],"status":4090,"detail":null,"instance":"/a","n":1}"#,
        )
        .unwrap();
        assert_eq!(problem.type_uri(), ABOUT_BLANK);
        assert_eq!(problem.title(), None);
        assert_eq!(problem.status(), None);
        assert_eq!(problem.detail(), None);
        assert_eq!(problem.instance(), Some("/a"));
        assert_eq!(problem.extensions().len(), 1);
        for body in [&b"[]"[..], b"\"x\"", b"", b"{", b"\xff"] {
            assert_eq!(ProblemDetails::from_json(body), None, "{body:?}");
        }
    }

    #[test]
    fn only_problem_json_answers_are_read_as_problems() {
        let body = br#"{"title":"t","status":400}"#;
        let mut headers = HeaderMap::new();
        assert_eq!(ProblemDetails::from_answer(&headers, body), None);
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        assert_eq!(ProblemDetails::from_answer(&headers, body), None);
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("Application/Problem+JSON; charset=utf-8"),
        );
        let problem = ProblemDetails::from_answer(&headers, body).unwrap();
        assert_eq!(problem.status(), Some(400));
    }
}
