//! What to check and what the server declares: the endpoint, its variants, and the knobs
//! that unlock more cases.
//!
//! ```
//! use idem_check::{KeyStyle, Settings};
//!
//! let mut settings = Settings::post("http://127.0.0.1:3000/payments", r#"{"amount":9800,"currency":"JPY"}"#)?;
//! settings.add_header("Authorization: Bearer alice")?;
//! settings.add_other_header("Authorization: Bearer bob")?;
//! settings.count_url = Some("http://127.0.0.1:3000/payments".parse()?);
//! settings.key_style = Some(KeyStyle::Both);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method};
use reqwest::Url;

/// How the checker writes its keys into `Idempotency-Key`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyStyle {
    /// An RFC 9651 sf-string, `"abc"`, as the IETF draft specifies.
    SfString,
    /// The key as it is, `abc`, as Stripe's API takes it; the key-forms case then sends the
    /// draft's sf-string of a key it sent bare.
    Bare,
    /// sf-strings for every case, and the key-forms case sends a key it sent as an
    /// sf-string bare.
    Both,
}

impl KeyStyle {
    /// `sf-string`, `bare` or `both`, as the flag spells it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SfString => "sf-string",
            Self::Bare => "bare",
            Self::Both => "both",
        }
    }
}

/// What the server does with a key whose request ended in a 5xx, as its documentation says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnServerError {
    /// The key is released and a retry runs again (idem's default).
    #[default]
    Rerun,
    /// The 5xx is stored and replayed to every retry (Stripe, idem's `store_server_errors`).
    Stored,
}

/// The request under test: method, URL, the headers sent with every request (the
/// credentials), and the JSON body, as bytes that are sent exactly as given.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// The method: `POST` unless said otherwise.
    pub method: Method,
    /// The URL.
    pub url: Url,
    /// Headers sent with every request to the target and to the count URL.
    pub headers: HeaderMap,
    /// The body, JSON.
    pub body: Bytes,
}

/// Another version of the request: another URL, another body, or more headers, with the
/// endpoint's method and credentials.
#[derive(Clone, Debug)]
pub struct Variant {
    /// The URL; the endpoint's when `None`.
    pub url: Option<Url>,
    /// The body; the endpoint's when `None`.
    pub body: Option<Bytes>,
    /// Headers added to (or replacing those of) the endpoint's.
    pub headers: HeaderMap,
    /// A listing that counts what this variant creates: the endpoint's count URL when `None`
    /// and the variant has the endpoint's URL.
    pub count_url: Option<Url>,
}

/// Everything a check needs: the endpoint, what the server declares, and the bounds.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The request under test.
    pub endpoint: Endpoint,
    /// The body of case 2 (same key, other body); derived from the endpoint's body by
    /// changing one member when `None`.
    pub other_body: Option<Bytes>,
    /// The second principal's headers, each replacing the endpoint header of the same name:
    /// enables the scope case.
    pub other_headers: HeaderMap,
    /// A listing of what the endpoint creates, for the first principal: answers a JSON array,
    /// or an object whose only array-valued member lists them. Enables "exactly one effect".
    pub count_url: Option<Url>,
    /// How keys are written. `None`: as sf-strings, the draft's form, unless the preflight
    /// finds that the server refuses them and takes bare keys; then bare, and the report
    /// says so.
    pub key_style: Option<KeyStyle>,
    /// Whether the server requires a key (case 4 expects 400 then).
    pub key_required: bool,
    /// A request the server takes seconds to answer: enables the in-flight and
    /// timeout-then-retry cases.
    pub slow: Option<Variant>,
    /// How long the client waits for the slow request before it gives up; half the slow
    /// request's measured time when `None`.
    pub give_up_after: Option<Duration>,
    /// The retention the server declares for its keys.
    pub ttl: Option<Duration>,
    /// Whether to wait out the retention (case 6).
    pub wait_ttl: bool,
    /// A request the server answers 5xx (at least the first time for a key): enables case 7.
    pub failing: Option<Variant>,
    /// What the server declares it does after a 5xx.
    pub on_server_error: OnServerError,
    /// How many requests the concurrent case sends at once.
    pub concurrency: usize,
    /// The longest any one request may take before it counts as unanswered.
    pub request_timeout: Duration,
    /// The longest the whole check may take, waits included; derived from the settings
    /// when `None`.
    pub max_time: Option<Duration>,
}

/// A setting that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct SettingsError(pub(crate) String);

impl SettingsError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

impl Settings {
    /// The default number of simultaneous requests of the concurrent case.
    pub const DEFAULT_CONCURRENCY: usize = 8;
    /// The default bound of one request.
    pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

    /// Checks `POST url` with the JSON `body`, with the defaults for everything else.
    ///
    /// # Errors
    ///
    /// When `url` is not an http(s) URL or `body` is not JSON.
    pub fn post(url: &str, body: impl Into<Bytes>) -> Result<Self, SettingsError> {
        Self::new(Method::POST, url, body)
    }

    /// Checks `method url` with the JSON `body`, with the defaults for everything else.
    ///
    /// # Errors
    ///
    /// When `url` is not an http(s) URL or `body` is not JSON.
    pub fn new(method: Method, url: &str, body: impl Into<Bytes>) -> Result<Self, SettingsError> {
        let body = body.into();
        json_body("--body", &body)?;
        Ok(Self {
            endpoint: Endpoint {
                method,
                url: http_url("--url", url)?,
                headers: HeaderMap::new(),
                body,
            },
            other_body: None,
            other_headers: HeaderMap::new(),
            count_url: None,
            key_style: None,
            key_required: true,
            slow: None,
            give_up_after: None,
            ttl: None,
            wait_ttl: false,
            failing: None,
            on_server_error: OnServerError::default(),
            concurrency: Self::DEFAULT_CONCURRENCY,
            request_timeout: Self::DEFAULT_REQUEST_TIMEOUT,
            max_time: None,
        })
    }

    /// Adds a header (`Name: value`) to every request; one of the same name is replaced.
    ///
    /// # Errors
    ///
    /// When the text is not `Name: value` with a valid name and value.
    pub fn add_header(&mut self, line: &str) -> Result<(), SettingsError> {
        let (name, value) = header_line("-H", line)?;
        self.endpoint.headers.insert(name, value);
        Ok(())
    }

    /// Adds a header (`Name: value`) that the second principal sends instead of the
    /// endpoint's header of the same name.
    ///
    /// # Errors
    ///
    /// When the text is not `Name: value` with a valid name and value.
    pub fn add_other_header(&mut self, line: &str) -> Result<(), SettingsError> {
        let (name, value) = header_line("--other-header", line)?;
        self.other_headers.insert(name, value);
        Ok(())
    }

    /// The settings' remaining checks, made before anything is sent.
    pub(crate) fn validate(&self) -> Result<(), SettingsError> {
        if let Some(body) = &self.other_body {
            json_body("--other-body", body)?;
            if body == &self.endpoint.body {
                return Err(SettingsError::new(
                    "--other-body is the same as --body; case 2 needs another request",
                ));
            }
        }
        for (flag, variant) in [("--slow", &self.slow), ("--fail", &self.failing)] {
            if let Some(body) = variant.as_ref().and_then(|variant| variant.body.as_ref()) {
                json_body(&format!("{flag}-body"), body)?;
            }
        }
        if !(2..=64).contains(&self.concurrency) {
            return Err(SettingsError::new(format!(
                "--concurrency {} is out of range; send 2 to 64 requests at once",
                self.concurrency
            )));
        }
        if self.wait_ttl && self.ttl.is_none() {
            return Err(SettingsError::new(
                "--wait-ttl needs --ttl, the retention the server declares",
            ));
        }
        if self.give_up_after.is_some_and(|after| after.is_zero()) {
            return Err(SettingsError::new("--timeout-ms must be 1 or more"));
        }
        Ok(())
    }
}

/// Reads an http:// or https:// URL given to `flag`.
pub(crate) fn http_url(flag: &str, text: &str) -> Result<Url, SettingsError> {
    let url = Url::parse(text.trim()).map_err(|error| {
        SettingsError::new(format!(
            "{flag} {text:?} is not a URL ({error}); write it whole, as in http://127.0.0.1:3000/payments"
        ))
    })?;
    match url.scheme() {
        "http" => Ok(url),
        "https" if cfg!(feature = "tls") => Ok(url),
        "https" => Err(SettingsError::new(format!(
            "{flag} {text:?}: this idem-check was built without TLS; install it with \
             `cargo install --path idem-check --features tls` to check https:// APIs"
        ))),
        _ => Err(SettingsError::new(format!(
            "{flag} {text:?} is not an http:// or https:// URL; write it whole, as in \
             http://127.0.0.1:3000/payments"
        ))),
    }
}

/// Checks that a body given to `flag` is JSON.
pub(crate) fn json_body(flag: &str, body: &[u8]) -> Result<(), SettingsError> {
    serde_json::from_slice::<serde::de::IgnoredAny>(body)
        .map(drop)
        .map_err(|error| {
            let shown = String::from_utf8_lossy(&body[..body.len().min(80)]).into_owned();
            SettingsError::new(format!(
                "{flag} is not JSON ({error}): {shown:?}; idem-check sends JSON bodies, as in \
                 '{{\"amount\":9800,\"currency\":\"JPY\"}}'"
            ))
        })
}

/// Reads a `Name: value` header line given to `flag`.
pub(crate) fn header_line(
    flag: &str,
    line: &str,
) -> Result<(HeaderName, HeaderValue), SettingsError> {
    let invalid = |why: &str| {
        SettingsError::new(format!(
            "{flag} {line:?} {why}; write 'Name: value', as in 'Authorization: Bearer alice'"
        ))
    };
    let (name, value) = line
        .split_once(':')
        .ok_or_else(|| invalid("has no colon"))?;
    let name = HeaderName::from_bytes(name.trim().as_bytes())
        .map_err(|_| invalid("does not start with a valid header name"))?;
    if name == idem_client::IDEMPOTENCY_KEY {
        return Err(invalid(
            "sets Idempotency-Key, which idem-check chooses for each case",
        ));
    }
    let value = HeaderValue::from_str(value.trim()).map_err(|_| invalid("has an invalid value"))?;
    Ok((name, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_bodies_and_headers_are_checked() {
        assert!(Settings::post("http://127.0.0.1:1/x", "{}").is_ok());
        for (url, body, says) in [
            ("127.0.0.1:1/x", "{}", "not a URL"),
            ("ftp://h/x", "{}", "not an http://"),
            ("http://h/x", "amount=1", "not JSON"),
            ("http://h/x", "", "not JSON"),
        ] {
            let error = Settings::post(url, body.to_owned()).unwrap_err();
            assert!(error.to_string().contains(says), "{url} {body}: {error}");
        }
        let mut settings = Settings::post("http://h/x", "{}").unwrap();
        settings.add_header("Authorization: Bearer a").unwrap();
        assert_eq!(settings.endpoint.headers["authorization"], "Bearer a");
        for bad in [
            "Authorization",
            "Bad Name: x",
            "Idempotency-Key: k",
            "X: a\nb",
        ] {
            assert!(settings.add_header(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn inconsistent_settings_are_refused_before_anything_is_sent() {
        let base = Settings::post("http://h/x", r#"{"a":1}"#).unwrap();
        let mut same = base.clone();
        same.other_body = Some(Bytes::from_static(br#"{"a":1}"#));
        assert!(
            same.validate()
                .unwrap_err()
                .0
                .contains("the same as --body")
        );
        let mut wait = base.clone();
        wait.wait_ttl = true;
        assert!(wait.validate().unwrap_err().0.contains("needs --ttl"));
        let mut many = base.clone();
        many.concurrency = 1000;
        assert!(many.validate().is_err());
        assert!(base.validate().is_ok());
    }
}
