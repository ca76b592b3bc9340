//! What a store keeps of an operation of several steps (see [docs/steps.md](https://github.com/idem-rs/idem/blob/main/docs/steps.md)): the output of
//! each step that ended, and, for a route the service resumes itself, the request to run it
//! again.
//!
//! A handler's [`Steps`](crate::steps::Steps) record each step's output with the operation's
//! in-flight record ([`Store::record_step`](super::Store::record_step)). When the operation
//! stops before it completes (a step failed and may pass later, the handler panicked, the
//! process died), its record stays in flight with its steps: the runtime *suspends* it
//! ([`Store::suspend`](super::Store::suspend)) rather than releasing it, and whichever run
//! takes the key over next (the client's retry, or the service's own resumption) gets the
//! steps back from its claim ([`ClaimOutcome::Resumed`](super::ClaimOutcome::Resumed)) and
//! skips every step that already ended.
//!
//! ```
//! use bytes::Bytes;
//! use idem::store::operation::{RecordedStep, decode_steps};
//!
//! let bank = RecordedStep::new("bank-order", Bytes::from_static(br#"{"id":"bt_1"}"#));
//! let ledger = RecordedStep::new("ledger", Bytes::from_static(br#"{"row":7}"#));
//! // A store that keeps bytes keeps the steps one after another.
//! let mut kept = bank.encode();
//! kept.extend_from_slice(&ledger.encode());
//! assert_eq!(decode_steps(&kept)?, vec![bank, ledger]);
//! # Ok::<(), idem::replay::DecodeError>(())
//! ```
//!
//! # Encodings
//!
//! One step (integers big-endian), for stores that keep bytes:
//!
//! ```text
//! u8  version = 1
//! u16 name length, name (UTF-8)
//! u32 output length, output (the step's output as JSON)
//! ```
//!
//! A step called at most once is recorded twice: before it is called, with an empty output (its
//! *start mark*: a JSON output is never empty), then, when it ends, with its output under the
//! same name at the next index. A record that ends with a start mark holds a step whose
//! outcome is unknown. A list of steps is their encodings one after another. The kept request of a resumable
//! route is [`KeptRequest::encode`]'s layout.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method};
use idem_protocol::key::IdempotencyKey;

use crate::{
    replay::{DecodeError, codec::Reader},
    scope::{Principal, StoreKey},
};

const STEP_VERSION: u8 = 1;
const REQUEST_VERSION: u8 = 1;

/// The longest step name, in bytes: a name is part of the key a foreign step sends, and of
/// every record that holds the step.
pub const MAX_STEP_NAME_LEN: usize = 128;

/// What a store keeps of operations of several steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StepSupport {
    /// The store keeps no steps: a handler that uses [`Steps`](crate::steps::Steps) is
    /// answered 500 `misconfigured`, and the resumer refuses to start.
    None,
    /// The store keeps each step's output with its record, so that any run that takes the
    /// key over resumes the operation where it stopped; an operation its client abandoned is
    /// resumed by the process that suspended it, for as long as that process runs.
    Steps,
    /// The store also keeps the request of a resumable route with its claim, and finds the
    /// operations due for resumption ([`Store::due`](super::Store::due)), so that any
    /// instance resumes an abandoned operation, after a crash too.
    Durable,
}

/// The output of one step that ended, as the operation's record keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedStep {
    name: String,
    output: Bytes,
}

impl RecordedStep {
    /// A step called `name` that ended with `output` (its serialized output).
    pub fn new(name: impl Into<String>, output: Bytes) -> Self {
        Self {
            name: name.into(),
            output,
        }
    }

    /// The mark of a step called at most once, recorded before it is called: its name and
    /// an empty output.
    pub fn start_mark(name: impl Into<String>) -> Self {
        Self::new(name, Bytes::new())
    }

    /// Whether this is a [start mark](Self::start_mark) rather than a step's output.
    pub fn is_start_mark(&self) -> bool {
        self.output.is_empty()
    }

    /// The step's name, as the handler gave it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The step's output, as JSON.
    pub fn output(&self) -> &Bytes {
        &self.output
    }

    /// The step in the layout of the [module docs](self).
    ///
    /// # Panics
    ///
    /// When the name is longer than 65,535 bytes or the output than 4 GiB − 1: the runtime
    /// records neither (names are at most [`MAX_STEP_NAME_LEN`], outputs at most the route's
    /// `max_stored_body`).
    pub fn encode(&self) -> Vec<u8> {
        let name = u16::try_from(self.name.len()).expect("a step name fits in u16");
        let output = u32::try_from(self.output.len()).expect("a step output fits in u32");
        let mut out = Vec::with_capacity(7 + self.name.len() + self.output.len());
        out.push(STEP_VERSION);
        out.extend_from_slice(&name.to_be_bytes());
        out.extend_from_slice(self.name.as_bytes());
        out.extend_from_slice(&output.to_be_bytes());
        out.extend_from_slice(&self.output);
        out
    }

    fn read(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let version = reader.u8()?;
        if version != STEP_VERSION {
            return Err(DecodeError::UnknownVersion(version));
        }
        let name_len = usize::from(reader.u16()?);
        let name = std::str::from_utf8(reader.take(name_len)?)
            .map_err(|_| DecodeError::Malformed("a step name is not UTF-8"))?
            .to_owned();
        let output_len = reader.u32()? as usize;
        let output = Bytes::copy_from_slice(reader.take(output_len)?);
        Ok(Self { name, output })
    }
}

/// Decodes a list of steps: their encodings one after another, as a store keeps them.
///
/// # Errors
///
/// When the bytes are not such a list.
pub fn decode_steps(bytes: &[u8]) -> Result<Vec<RecordedStep>, DecodeError> {
    let mut reader = Reader::new(bytes);
    let mut steps = Vec::new();
    while !reader.is_empty() {
        steps.push(RecordedStep::read(&mut reader)?);
    }
    Ok(steps)
}

/// What a run that takes over an interrupted operation finds of it: the steps that ended, in
/// order, and how many times the operation was suspended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// The steps recorded so far, in the order they ended.
    pub steps: Vec<RecordedStep>,
    /// How many times the operation stopped before completing (each
    /// [`suspend`](super::Store::suspend)).
    pub suspensions: u32,
}

/// The request of a resumable route, kept with its claim by a [`StepSupport::Durable`] store,
/// so that the service can run the operation again without its client.
///
/// It holds what the run needs and nothing that authenticates: the method, the path and
/// query, the `Idempotency-Key`, the principal the record is scoped to, `Content-Type` and
/// the headers the route names, and the body. `Authorization`, `Proxy-Authorization` and
/// `Cookie` are never kept, whatever the route names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeptRequest {
    method: Method,
    target: String,
    key: IdempotencyKey,
    principal: Option<Principal>,
    headers: HeaderMap,
    body: Bytes,
}

/// The headers never kept: they carry credentials.
const CREDENTIALS: [HeaderName; 3] = [
    http::header::AUTHORIZATION,
    http::header::PROXY_AUTHORIZATION,
    http::header::COOKIE,
];

/// Whether a header carries credentials, and is therefore never kept.
pub fn is_credential(name: &HeaderName) -> bool {
    CREDENTIALS.contains(name)
}

impl KeptRequest {
    /// The request `method target` with `key`, scoped to `principal`, with `headers` (those
    /// that carry credentials are dropped) and `body`.
    pub fn new(
        method: Method,
        target: impl Into<String>,
        key: IdempotencyKey,
        principal: Option<Principal>,
        mut headers: HeaderMap,
        body: Bytes,
    ) -> Self {
        for name in &CREDENTIALS {
            headers.remove(name);
        }
        Self {
            method,
            target: target.into(),
            key,
            principal,
            headers,
            body,
        }
    }

    /// The request's method.
    pub fn method(&self) -> &Method {
        &self.method
    }

    /// The request's path and query, as it was sent.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The request's `Idempotency-Key`.
    pub fn key(&self) -> &IdempotencyKey {
        &self.key
    }

    /// The principal the record is scoped to, when its scope has one.
    pub fn principal(&self) -> Option<&Principal> {
        self.principal.as_ref()
    }

    /// The headers kept: `Content-Type` and those the route names.
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The request's body.
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// The request in bytes, for stores that keep bytes:
    ///
    /// ```text
    /// u8  version = 1
    /// u8  method length, method
    /// u32 target length, target
    /// u16 key length, key
    /// u8  principal: 0 none, 1 one; then u32 length, principal
    /// u16 header count, then per header: u16 name length, name, u32 value length, value
    /// u64 body length, body
    /// ```
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.target.len() + self.body.len());
        out.push(REQUEST_VERSION);
        let method = self.method.as_str().as_bytes();
        // A method longer than 255 bytes is cut: no server routes one.
        out.push(u8::try_from(method.len()).unwrap_or(u8::MAX));
        out.extend_from_slice(&method[..method.len().min(255)]);
        put_u32_prefixed(&mut out, self.target.as_bytes());
        let key = self.key.as_str().as_bytes();
        out.extend_from_slice(&(key.len() as u16).to_be_bytes());
        out.extend_from_slice(key);
        match &self.principal {
            Some(principal) => {
                out.push(1);
                put_u32_prefixed(&mut out, principal.as_str().as_bytes());
            }
            None => out.push(0),
        }
        let count = u16::try_from(self.headers.len()).unwrap_or(u16::MAX);
        out.extend_from_slice(&count.to_be_bytes());
        for (name, value) in self.headers.iter().take(usize::from(count)) {
            out.extend_from_slice(&(name.as_str().len() as u16).to_be_bytes());
            out.extend_from_slice(name.as_str().as_bytes());
            put_u32_prefixed(&mut out, value.as_bytes());
        }
        out.extend_from_slice(&(self.body.len() as u64).to_be_bytes());
        out.extend_from_slice(&self.body);
        out
    }

    /// Reads back what [`encode`](Self::encode) wrote.
    ///
    /// # Errors
    ///
    /// When the bytes are not such a request, in a version this build knows.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let malformed = DecodeError::Malformed;
        let mut reader = Reader::new(bytes);
        let version = reader.u8()?;
        if version != REQUEST_VERSION {
            return Err(DecodeError::UnknownVersion(version));
        }
        let method_len = usize::from(reader.u8()?);
        let method = Method::from_bytes(reader.take(method_len)?)
            .map_err(|_| malformed("an invalid method"))?;
        let target_len = reader.u32()? as usize;
        let target = std::str::from_utf8(reader.take(target_len)?)
            .map_err(|_| malformed("a target that is not UTF-8"))?
            .to_owned();
        let key_len = usize::from(reader.u16()?);
        let key = std::str::from_utf8(reader.take(key_len)?)
            .ok()
            .and_then(|key| IdempotencyKey::new(key).ok())
            .ok_or(malformed("an invalid Idempotency-Key"))?;
        let principal = match reader.u8()? {
            0 => None,
            1 => {
                let len = reader.u32()? as usize;
                let id = std::str::from_utf8(reader.take(len)?)
                    .map_err(|_| malformed("a principal that is not UTF-8"))?;
                Some(Principal::new(id))
            }
            _ => return Err(malformed("an invalid principal flag")),
        };
        let count = usize::from(reader.u16()?);
        let mut headers = HeaderMap::new();
        for _ in 0..count {
            let name_len = usize::from(reader.u16()?);
            let name = HeaderName::from_bytes(reader.take(name_len)?)
                .map_err(|_| malformed("an invalid header name"))?;
            let value_len = reader.u32()? as usize;
            let value = HeaderValue::from_bytes(reader.take(value_len)?)
                .map_err(|_| malformed("an invalid header value"))?;
            headers
                .try_append(name, value)
                .map_err(|_| malformed("too many headers"))?;
        }
        let body_len = usize::try_from(reader.u64()?).map_err(|_| malformed("a body too long"))?;
        let body = Bytes::copy_from_slice(reader.take(body_len)?);
        if !reader.is_empty() {
            return Err(malformed("bytes after the body"));
        }
        Ok(Self::new(method, target, key, principal, headers, body))
    }
}

fn put_u32_prefixed(out: &mut Vec<u8>, bytes: &[u8]) {
    let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&bytes[..len as usize]);
}

/// What a claim of a resumable route gives a [`StepSupport::Durable`] store to keep.
#[derive(Clone, Copy, Debug)]
pub struct Resumable<'a> {
    /// The request, to run the operation again.
    pub request: &'a KeptRequest,
    /// How long after its lease lapses an operation that nobody took over is due for
    /// resumption by the service.
    pub after: Duration,
}

/// An operation due for resumption, as [`Store::due`](super::Store::due) finds it.
#[derive(Debug)]
pub struct DueOperation {
    /// The record's key.
    pub key: StoreKey,
    /// The request to run again, or why it cannot be read back.
    pub request: Result<KeptRequest, DecodeError>,
    /// How many times the operation was suspended so far.
    pub suspensions: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> KeptRequest {
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::CONTENT_TYPE,
            "application/json".parse().unwrap(),
        );
        headers.insert(
            http::header::AUTHORIZATION,
            "Bearer secret".parse().unwrap(),
        );
        headers.append("x-trace", "1".parse().unwrap());
        headers.append("x-trace", "2".parse().unwrap());
        KeptRequest::new(
            Method::POST,
            "/transfers?dry=no",
            IdempotencyKey::new("k-1").unwrap(),
            Some(Principal::new("alice")),
            headers,
            Bytes::from_static(br#"{"amount":1}"#),
        )
    }

    #[test]
    fn a_kept_request_has_no_credentials_and_reads_back_the_same() {
        let kept = request();
        assert!(kept.headers().get(http::header::AUTHORIZATION).is_none());
        assert_eq!(kept.headers().get_all("x-trace").iter().count(), 2);
        assert_eq!(KeptRequest::decode(&kept.encode()), Ok(kept));
    }

    #[test]
    fn a_kept_request_without_a_principal_reads_back_the_same() {
        let mut kept = request();
        kept.principal = None;
        assert_eq!(KeptRequest::decode(&kept.encode()), Ok(kept));
    }

    #[test]
    fn a_truncated_or_extended_request_is_an_error() {
        let bytes = request().encode();
        for cut in 0..bytes.len() {
            assert!(KeptRequest::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(KeptRequest::decode(&longer).is_err());
        let mut other = bytes;
        other[0] = 9;
        assert_eq!(
            KeptRequest::decode(&other),
            Err(DecodeError::UnknownVersion(9))
        );
    }

    #[test]
    fn steps_read_back_in_order_and_a_cut_list_is_an_error() {
        let steps = [
            RecordedStep::new("bank-order", Bytes::from_static(b"{\"id\":1}")),
            RecordedStep::new("ledger", Bytes::new()),
        ];
        let mut bytes = Vec::new();
        for step in &steps {
            bytes.extend_from_slice(&step.encode());
        }
        assert_eq!(decode_steps(&bytes).unwrap(), steps);
        assert_eq!(decode_steps(&[]).unwrap(), []);
        for cut in 1..bytes.len() {
            let first = steps[0].encode().len();
            if cut != first {
                assert!(decode_steps(&bytes[..cut]).is_err(), "cut at {cut}");
            }
        }
    }
}
