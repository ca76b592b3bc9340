//! An endpoint: a method on a path template, as a document or a router names it, and the
//! concrete path a probe of it is sent to.

use std::fmt;

use http::Method;
use utoipa::openapi::{PathItem, path::Operation};

/// A method on a path template (`POST /payments/{id}/refunds`): an operation of an OpenAPI
/// document, or a route of a router.
///
/// ```
/// use http::Method;
/// use idem::openapi::Endpoint;
///
/// let refunds = Endpoint::new(Method::POST, "/payments/{id}/refunds");
/// assert_eq!(refunds.to_string(), "POST /payments/{id}/refunds");
/// assert_eq!(refunds.method(), Method::POST);
/// assert_eq!(refunds.path(), "/payments/{id}/refunds");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Endpoint {
    method: Method,
    path: String,
}

impl Endpoint {
    /// `method` on the path template `path`, whose parameters are written `{name}` (as both
    /// OpenAPI and axum write them).
    pub fn new(method: Method, path: impl Into<String>) -> Self {
        Self {
            method,
            path: path.into(),
        }
    }

    /// The method.
    pub fn method(&self) -> Method {
        self.method.clone()
    }

    /// The path template.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The path a probe is sent to: the template with a value for each parameter.
    pub(crate) fn probe_path(&self) -> String {
        map_parameters(&self.path, |_| PROBE_SEGMENT)
    }

    /// Whether `template`, a router's, is this endpoint's path whatever its parameters are
    /// named (`/payments/{id}` and `/payments/{payment}` are one route).
    pub(crate) fn is_route(&self, template: &str) -> bool {
        shape(&self.path) == shape(template)
    }

    /// The path with its parameters unnamed: two templates of one shape are one route.
    pub(crate) fn shape(&self) -> String {
        shape(&self.path)
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.method, self.path)
    }
}

/// The value a probe gives every path parameter: one no route is likely to spell out.
const PROBE_SEGMENT: &str = "idem-probe";

/// The methods idem guards, for which a document's operations are probed. The layer never
/// guards a safe method (GET, HEAD, OPTIONS, TRACE), and probing one would call its handler.
pub(crate) const GUARDED: [Method; 4] = [Method::POST, Method::PUT, Method::PATCH, Method::DELETE];

/// The operation of `item` for `method`, if it has one.
pub(crate) fn operation_mut<'a>(
    item: &'a mut PathItem,
    method: &Method,
) -> Option<&'a mut Operation> {
    match *method {
        Method::POST => item.post.as_mut(),
        Method::PUT => item.put.as_mut(),
        Method::PATCH => item.patch.as_mut(),
        Method::DELETE => item.delete.as_mut(),
        _ => None,
    }
}

/// The operation of `item` for `method`, if it has one.
pub(crate) fn operation<'a>(item: &'a PathItem, method: &Method) -> Option<&'a Operation> {
    match *method {
        Method::POST => item.post.as_ref(),
        Method::PUT => item.put.as_ref(),
        Method::PATCH => item.patch.as_ref(),
        Method::DELETE => item.delete.as_ref(),
        _ => None,
    }
}

fn shape(template: &str) -> String {
    map_parameters(template, |_| "{}")
}

/// `template` with each `{parameter}` replaced by what `value` makes of its name.
fn map_parameters<'a>(template: &'a str, value: impl Fn(&'a str) -> &'a str) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        out.push_str(&rest[..open]);
        out.push_str(value(&rest[open + 1..open + close]));
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_fills_every_parameter() {
        let endpoint = Endpoint::new(Method::POST, "/payments/{id}/refunds/{refund}");
        assert_eq!(
            endpoint.probe_path(),
            "/payments/idem-probe/refunds/idem-probe"
        );
        assert_eq!(Endpoint::new(Method::POST, "/a").probe_path(), "/a");
    }

    #[test]
    fn routes_are_compared_whatever_their_parameters_are_named() {
        let endpoint = Endpoint::new(Method::POST, "/payments/{id}/refunds");
        assert!(endpoint.is_route("/payments/{payment}/refunds"));
        assert!(!endpoint.is_route("/payments/{id}"));
        assert!(!endpoint.is_route("/payments/idem-probe/refunds"));
        // An unclosed brace is text.
        assert!(Endpoint::new(Method::POST, "/a{b").is_route("/a{b"));
    }
}
