//! Request fingerprints (see [docs/contract.md](https://github.com/idem-rs/idem/blob/main/docs/contract.md), *The fingerprint*): is a retry the same request as the first attempt?
//!
//! ```
//! use http::{header, HeaderMap, Method};
//! use idem::fingerprint::{Fingerprint, FingerprintAlgorithm, FingerprintMode};
//!
//! let mut headers = HeaderMap::new();
//! headers.insert(header::CONTENT_TYPE, "application/json".parse().unwrap());
//! let fingerprint = |body: &str| {
//!     Fingerprint::compute(&Method::POST, "/orders", &headers, body.as_bytes(), FingerprintMode::Json)
//! };
//!
//! // Member order and whitespace do not matter; values do.
//! let first = fingerprint(r#"{"sku":"A-1","quantity":2}"#);
//! assert_eq!(first, fingerprint("{ \"quantity\": 2,\n  \"sku\": \"A-1\" }"));
//! assert_ne!(first, fingerprint(r#"{"sku":"A-1","quantity":3}"#));
//! assert_eq!(first.algorithm(), FingerprintAlgorithm::JcsSha256V1);
//!
//! // Stores keep 33 bytes and get the same fingerprint back.
//! assert_eq!(Fingerprint::from_bytes(&first.to_bytes()), Some(first));
//! assert!(first.to_string().starts_with("jcs-sha256-v1:"));
//! ```
//!
//! # What is hashed
//!
//! SHA-256 over, in this order:
//!
//! 1. the domain `idem-fingerprint`, so these digests cannot be mistaken for another protocol's;
//! 2. the [algorithm](FingerprintAlgorithm) tag byte, so two algorithms never produce the same
//!    digest, even for a body whose bytes are already canonical;
//! 3. the method, as written (`POST`);
//! 4. the request target as the caller passes it: the runtime passes the path and query the
//!    request was sent to (`/orders/42/pay?notify=1`), not the route template: the template is
//!    already part of the store key (see [docs/contract.md](https://github.com/idem-rs/idem/blob/main/docs/contract.md), *Scope*), and the concrete target is
//!    stricter: the same key and body sent to `/orders/1/pay` and then `/orders/2/pay` is
//!    answered 422 instead of replaying order 1's result;
//! 5. the body: its raw bytes, or its canonical JSON form, or the parts of a multipart body.
//!
//! Every field but the tag byte carries its length as a big-endian `u64`, so that no two different
//! requests feed the same bytes (`("a", "bc")` against `("ab", "c")`). The domain, method and
//! target are prefixed with their length; a raw or canonical body is followed by it. (The first
//! implementation streamed the canonical form into the hasher and knew its length only at the
//! end; the layout stays as it was, see [Stability](#stability).) A multipart body is, for each
//! part in order, a `1` byte, the part's length and its bytes, then a `0` byte, the length of
//! what follows the close delimiter (nothing, or a CRLF) and those bytes.
//!
//! # Members left out
//!
//! A route may leave named JSON members out of its fingerprint, or fingerprint only the members
//! it names ([`Members`], JSON Pointers): a client timestamp or a trace id that changes with
//! each retry is then not a different request. [`members`] says what is hashed then, and what
//! it risks.
//!
//! # Which bodies are canonicalized
//!
//! In [`FingerprintMode::Json`] a body is canonicalized when its `Content-Type` is
//! `application/json` or any `type/subtype+json` (`application/problem+json`), compared without
//! regard to case and ignoring parameters such as `; charset=utf-8`, and the body parses as
//! I-JSON: JSON whose objects never name a member twice. A `multipart/form-data` body is read
//! by its parts under [`FingerprintAlgorithm::MultipartSha256V1`] when it is in the plain form
//! described [below](#multipart-bodies). Anything else (another media type, no `Content-Type`,
//! an empty body, a body that is not JSON, an object with a repeated member name, a multipart
//! body in another form) is hashed as bytes under [`FingerprintAlgorithm::RawSha256V1`], exactly
//! as in [`FingerprintMode::Raw`]; a body of another media type pays for nothing more than the
//! look at `Content-Type`. A JSON body that fails to parse thus still gets a fingerprint and
//! leaves the rejection to the handler.
//!
//! # Multipart bodies
//!
//! A client that rebuilds a form for its retry picks a new random boundary, so the same form
//! arrives as other bytes, and as bytes it would be answered 422 "different body". Its parts
//! are what the handler reads, so they are what is hashed: each part's bytes as sent, its header
//! lines (`Content-Disposition` with the field's name and file name, `Content-Type`, any other)
//! and its content, in order, without the boundary. Two forms therefore share a fingerprint
//! exactly when their bodies are the same bytes but for the boundary; a change of a part's
//! content, name, file name, type or place in the form changes it. Header lines are compared as
//! written rather than interpreted: a client rebuilding a request writes them the same way, and
//! a part header the runtime would interpret differently from the handler's parser (a quoted
//! file name, an RFC 2231 `filename*`, a folded line) could make two different forms look alike.
//!
//! The boundary comes from the one `Content-Type` header, in the plain form clients write:
//! `multipart/form-data`, then parameters, each a `;`, spaces and `name=value`, exactly one of
//! them `boundary`, 1 to 70 characters of those RFC 2046 allows (quoted without backslashes, or
//! not quoted). Parsers disagree about the rest of what RFC 9110 allows (a space before a `;`,
//! a tab, an empty parameter), and a header the handler's parser refuses must not pass for one
//! it reads. The body must be in the plain form that clients write: the first delimiter
//! (`--` and the boundary) at the very start, a CRLF after each delimiter, every part ending in
//! CRLF before the next one, the close delimiter (the boundary followed by `--`), then nothing
//! or one CRLF. And the boundary must occur nowhere else, not inside a part, not even without
//! the CRLF and dashes of a delimiter: then every multipart parser, however strict or lenient
//! about what makes a delimiter, splits the body at the same places, and equal parts mean equal
//! forms to the handler. Anything else (a preamble, transport padding after a delimiter, a bare
//! LF, an epilogue, a boundary missing or given twice, a truncated body) is hashed as bytes, as
//! before. A nested `multipart/mixed` part is compared as bytes, its own boundary included.
//!
//! The parts are hashed where they lie, without a copy; finding the boundary (memchr's
//! substring search) is the extra cost. On the benchmark's forms (`cargo bench -p idem-core
//! --bench idempotency -- fingerprint_form`, a JSON document as the one field), in three runs on
//! two shared cores, reading by parts took 11–16 % longer than hashing as bytes at 64 KiB (9 to
//! 14 µs more than 66–86 µs) and 0.35–0.85 µs longer at 1 KiB.
//!
//! # Canonical JSON
//!
//! [`canonicalize_json`] writes the RFC 8785 (JCS) form of a [`serde_json::Value`], and
//! [`canonicalize_json_bytes`] the same bytes straight from JSON text, which is what fingerprints
//! use. Member names are sorted by their UTF-16 code units, strings are escaped as ECMAScript's
//! `JSON.stringify` escapes them, numbers are written as ECMAScript's `Number.prototype.toString`
//! writes them (via `ryu-js`, with shortcuts for integral doubles and short decimals that give the
//! same text), and there is no whitespace. So `1.0`, `1` and `1e0` are the same number, and so are
//! `-0` and `0`.
//!
//! **One deviation, for integers.** RFC 8785 treats every number as an IEEE 754 double, so
//! `9007199254740993` and `9007199254740992` (2<sup>53</sup> + 1 and 2<sup>53</sup>) would both be
//! written `9007199254740992`, and a retry that changed an order id or an amount in minor units
//! would keep its fingerprint. Here an integer that serde_json parsed as an integer (it fits `u64`
//! or `i64`) is written with its exact decimal digits. For integers within ±2<sup>53</sup> that is
//! byte for byte what RFC 8785 produces; beyond, the fingerprint changes with any change of the
//! value. Numbers written with a fraction or an exponent, and integers beyond the 64-bit range,
//! are doubles as in RFC 8785.
//!
//! Parsing goes through serde_json's `float_roundtrip` feature, which this crate's manifest turns
//! on. Without it serde_json rounds some 16 and 17 digit numbers to a neighbouring double,
//! so the canonical text would not be RFC 8785's, and since cargo unifies features, a fingerprint
//! would change the day another crate in the build turned the feature on.
//!
//! The input is whatever serde_json accepts into a `Value`, read as a `Value` reads it, except
//! that an object naming a member twice (at any depth, `"a"` and `"\u0061"` being one name) has
//! no canonical form. RFC 8785 takes I-JSON, which forbids such objects, and a `Value` would keep
//! only the last value, so `{"amount":1,"amount":9800}` would share the fingerprint of
//! `{"amount":9800}`, and a body that a stricter handler refuses, or reads as `1`, would replay
//! the result of the clean one. Hashed as bytes, such a body matches only itself. An object
//! whose first member is named `$serde_json::private::Number` or `$serde_json::private::RawValue`
//! is read through a `Value` itself (after a first reading that refuses repeated names),
//! because what a `Value` makes of it depends on serde_json
//! features (`arbitrary_precision`, `raw_value`) that any crate in the build can turn on; no
//! client has a reason to send such a name. serde_json refuses a string with an unpaired surrogate
//! escape (`"\ud800"`) and nesting 128 levels deep or more, so such a body is hashed as bytes;
//! that also bounds the canonicalizer's recursion.
//!
//! # Performance
//!
//! A JSON body is read once: serde_json's parser drives a visitor that writes the canonical form
//! into a buffer as it goes ([`canonicalize_json_bytes`]). There is no `Value`, no allocation per
//! string or member, and an object's members are reordered in place only when they are out of
//! order (members already in order, as most serializers write them, are never moved). The
//! header, the canonical body and its length are then hashed in one call: SHA-256 costs far more
//! per call than per byte for the short pieces a canonical form is made of. The buffers stay with
//! the thread for the next request, except any that grew past 1 MiB, so that one large request
//! does not pin its memory.
//!
//! Measured on the payment bodies of `benches/idempotency.rs` (members in canonical order, as
//! serde_json writes them) and on the same documents with every object's members reversed, before
//! (parse into a `Value`, stream the canonical form into the hasher) and after. Instructions per
//! [`Fingerprint::compute`] are counted with `valgrind --tool=callgrind` on a loop of calls, as the
//! difference between two loop lengths, so they are exact and repeatable. Valgrind hides SHA-NI,
//! so they include sha2's portable block function, about 55,000 instructions per KiB hashed
//! either way; the figure without it is in parentheses.
//!
//! | body                 | before              | after              |
//! |----------------------|---------------------|--------------------|
//! | 1 KiB, in order      | 195,000 (135,000)   | 121,000 (61,000)   |
//! | 1 KiB, reversed      | 211,000 (150,000)   | 131,000 (70,000)   |
//! | 64 KiB, in order     | 12.6 M (9.1 M)      | 7.1 M (3.7 M)      |
//! | 64 KiB, reversed     | 12.7 M (9.2 M)      | 7.8 M (4.4 M)      |
//!
//! In time (`cargo bench -p idem-core --bench idempotency -- fingerprint`, the in-order bodies,
//! SHA-NI in use), on two cores shared with other builds and so only roughly: 1 KiB went from
//! 15–27 µs to 4.3–9.7 µs, 64 KiB from 1.25–1.43 ms to 0.32–0.55 ms, and in each of five
//! back-to-back pairs of runs the new code took 2.3 to 3.9 times less. Most of what remains is
//! serde_json's own parsing (UTF-8 validation of each string, exact float parsing), kept so that
//! the fingerprint accepts and reads exactly the bodies that a handler using serde_json does.
//!
//! The digest has since moved from `sha2` to idem's own portable SHA-256
//! ([`idem_protocol::sha256`]): the same digest, without `sha2` and the six crates under it in
//! every service's build. On this machine it hashes about 140 MiB/s where `sha2` with SHA-NI
//! hashed 1.2 GiB/s, which adds about 6 µs to the fingerprint of 1 KiB and 0.4 ms to that of
//! 64 KiB. The feature `sha2` hashes with `sha2` again
//! ([docs/benchmarks.md](https://github.com/idem-rs/idem/blob/main/docs/benchmarks.md),
//! *SHA-256*).
//!
//! # Stability
//!
//! Stores keep [`Fingerprint::to_bytes`] and compare it with the fingerprint of every retry, for as
//! long as a key lives. Anything that changes the digest of a request (the layout above, the
//! canonical form, a tag byte) therefore needs a new [`FingerprintAlgorithm`] variant with a new
//! tag, never an edit of an existing one.
//!
//! Moving a kind of body from one algorithm to another changes its digest too, and did twice:
//! JSON bodies with a repeated member name were canonicalized (keeping the last value) before
//! they were hashed as bytes, and `multipart/form-data` bodies were hashed as bytes before they
//! were read by parts. A key first used with such a body by an earlier build is answered 422 when
//! it is retried after the upgrade, for the rest of its TTL; every other key is unaffected.

mod jcs;
pub mod members;
mod multipart;

use std::fmt;

use http::{HeaderMap, Method, header::CONTENT_TYPE};
use idem_protocol::sha256::Sha256;

pub use self::{
    jcs::{canonicalize_json, canonicalize_json_bytes},
    members::{Members, MembersError},
};

/// Separates these digests from any other SHA-256 use of the same bytes.
const DOMAIN: &[u8] = b"idem-fingerprint";

/// How the request body enters the fingerprint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FingerprintMode {
    /// JSON bodies (`application/json`, `*/*+json`) are canonicalized (RFC 8785) first, so key order
    /// and whitespace do not matter, and `multipart/form-data` bodies are read by their parts,
    /// so that a new boundary does not matter; other bodies are hashed as bytes. See the
    /// [module docs](self#which-bodies-are-canonicalized).
    #[default]
    Json,
    /// Every body is hashed as bytes.
    Raw,
}

/// The algorithm a fingerprint was computed with; stored with it so that a future change of
/// algorithm is detected instead of silently mismatching.
///
/// Each algorithm has a tag byte, the first byte of [`Fingerprint::to_bytes`]. Stores persist it,
/// so the values are stable: a tag is never reused or renumbered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FingerprintAlgorithm {
    /// SHA-256 over method, target and the RFC 8785 canonical form of a JSON body. Tag byte `1`.
    JcsSha256V1,
    /// SHA-256 over method, target and the body bytes. Tag byte `2`.
    RawSha256V1,
    /// SHA-256 over method, target and the parts of a `multipart/form-data` body, without its
    /// boundary. Tag byte `3`.
    MultipartSha256V1,
    /// SHA-256 over method, target, a selection of JSON members and the canonical form of
    /// what it selects (see [`members`]). Tag byte `4`.
    JcsMembersSha256V1,
}

impl FingerprintAlgorithm {
    /// The name used in the text form of a fingerprint: `jcs-sha256-v1`, `raw-sha256-v1`,
    /// `multipart-sha256-v1` or `jcs-members-sha256-v1`.
    ///
    /// ```
    /// use idem::fingerprint::FingerprintAlgorithm;
    ///
    /// assert_eq!(FingerprintAlgorithm::RawSha256V1.as_str(), "raw-sha256-v1");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::JcsSha256V1 => "jcs-sha256-v1",
            Self::RawSha256V1 => "raw-sha256-v1",
            Self::MultipartSha256V1 => "multipart-sha256-v1",
            Self::JcsMembersSha256V1 => "jcs-members-sha256-v1",
        }
    }

    const fn tag(self) -> u8 {
        match self {
            Self::JcsSha256V1 => 1,
            Self::RawSha256V1 => 2,
            Self::MultipartSha256V1 => 3,
            Self::JcsMembersSha256V1 => 4,
        }
    }

    const fn from_tag(tag: u8) -> Option<Self> {
        match tag {
            1 => Some(Self::JcsSha256V1),
            2 => Some(Self::RawSha256V1),
            3 => Some(Self::MultipartSha256V1),
            4 => Some(Self::JcsMembersSha256V1),
            _ => None,
        }
    }
}

impl fmt::Display for FingerprintAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A SHA-256 fingerprint of a request, tagged with its algorithm.
///
/// Its text form (`Display` and `Debug`) is the algorithm name, a colon and the digest in lowercase
/// hex: `jcs-sha256-v1:3f0a…`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint {
    algorithm: FingerprintAlgorithm,
    digest: [u8; 32],
}

impl Fingerprint {
    /// Fingerprints a request from its method, target (path and query), headers (for
    /// `Content-Type`) and body.
    ///
    /// See the [module docs](self) for what is hashed and when a body is canonicalized.
    ///
    /// ```
    /// use http::{HeaderMap, Method};
    /// use idem::fingerprint::{Fingerprint, FingerprintAlgorithm, FingerprintMode};
    ///
    /// // Without a JSON content type the body is hashed as bytes.
    /// let fingerprint = Fingerprint::compute(
    ///     &Method::PUT,
    ///     "/carts/{id}",
    ///     &HeaderMap::new(),
    ///     b"{\"a\":1}",
    ///     FingerprintMode::Json,
    /// );
    /// assert_eq!(fingerprint.algorithm(), FingerprintAlgorithm::RawSha256V1);
    /// ```
    pub fn compute(
        method: &Method,
        target: &str,
        headers: &HeaderMap,
        body: &[u8],
        mode: FingerprintMode,
    ) -> Self {
        Self::compute_members(method, target, headers, body, mode, &Members::All)
    }

    /// [`compute`](Self::compute), covering only the JSON `members` selected of a JSON body
    /// (see [`members`]). Any other body, and every body under [`FingerprintMode::Raw`], is
    /// fingerprinted as [`compute`](Self::compute) does.
    pub fn compute_members(
        method: &Method,
        target: &str,
        headers: &HeaderMap,
        body: &[u8],
        mode: FingerprintMode,
        members: &Members,
    ) -> Self {
        jcs::with_buffers(|buffers| {
            let json = mode == FingerprintMode::Json && !body.is_empty() && is_json(headers);
            if json
                && *members != Members::All
                && let Some(fingerprint) = selected(method, target, body, members, buffers)
            {
                return fingerprint;
            }
            let jcs::Buffers { out, scratch } = buffers;
            if json && *members == Members::All {
                let algorithm = FingerprintAlgorithm::JcsSha256V1;
                write_header(algorithm, method, target, out);
                let body_start = out.len();
                if jcs::canonicalize_bytes(body, out, scratch).is_ok() {
                    let body_len = (out.len() - body_start) as u64;
                    out.extend_from_slice(&body_len.to_be_bytes());
                    // The whole input in one call: the hasher's cost per call is far above its
                    // cost per byte for the short pieces a canonical form is made of.
                    return Self {
                        algorithm,
                        digest: Sha256::digest(&out),
                    };
                }
                out.clear();
            } else if mode == FingerprintMode::Json
                && let Some(boundary) = multipart::form_data_boundary(headers)
            {
                let algorithm = FingerprintAlgorithm::MultipartSha256V1;
                write_header(algorithm, method, target, out);
                // The parts are hashed where they lie: a form with files is not copied.
                let mut hasher = Sha256::new();
                hasher.update(&out);
                if multipart::hash_parts(boundary, body, &mut hasher) {
                    return Self {
                        algorithm,
                        digest: hasher.finalize(),
                    };
                }
                out.clear();
            }
            let algorithm = FingerprintAlgorithm::RawSha256V1;
            write_header(algorithm, method, target, out);
            // The body is not copied: it is already one piece.
            let mut hasher = Sha256::new();
            hasher.update(&out);
            hasher.update(body);
            hasher.update((body.len() as u64).to_be_bytes());
            Self {
                algorithm,
                digest: hasher.finalize(),
            }
        })
    }

    /// The algorithm this fingerprint was computed with.
    pub fn algorithm(&self) -> FingerprintAlgorithm {
        self.algorithm
    }

    /// The SHA-256 digest.
    pub fn digest(&self) -> &[u8; 32] {
        &self.digest
    }

    /// A compact encoding for stores: one tag byte, then the digest.
    ///
    /// The tag byte is `1` for [`FingerprintAlgorithm::JcsSha256V1`], `2` for
    /// [`FingerprintAlgorithm::RawSha256V1`], `3` for
    /// [`FingerprintAlgorithm::MultipartSha256V1`] and `4` for
    /// [`FingerprintAlgorithm::JcsMembersSha256V1`]; these values are stored and will not change.
    pub fn to_bytes(&self) -> [u8; 33] {
        let mut bytes = [0; 33];
        bytes[0] = self.algorithm.tag();
        bytes[1..].copy_from_slice(&self.digest);
        bytes
    }

    /// Decodes [`Fingerprint::to_bytes`]; `None` for an unknown tag or a wrong length.
    ///
    /// ```
    /// use idem::fingerprint::Fingerprint;
    ///
    /// assert!(Fingerprint::from_bytes(&[2; 33]).is_some());
    /// assert!(Fingerprint::from_bytes(&[9; 33]).is_none());
    /// assert!(Fingerprint::from_bytes(&[2; 32]).is_none());
    /// ```
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let (&tag, digest) = bytes.split_first()?;
        Some(Self {
            algorithm: FingerprintAlgorithm::from_tag(tag)?,
            digest: digest.try_into().ok()?,
        })
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut hex = [0; 64];
        hex::encode_to_slice(self.digest, &mut hex).map_err(|_| fmt::Error)?;
        f.write_str(self.algorithm.as_str())?;
        f.write_str(":")?;
        f.write_str(std::str::from_utf8(&hex).map_err(|_| fmt::Error)?)
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The fingerprint of a JSON body under a selection of its members, or `None` when the body
/// has no canonical form (it is then hashed as bytes, as without a selection).
fn selected(
    method: &Method,
    target: &str,
    body: &[u8],
    members: &Members,
    buffers: &mut jcs::Buffers,
) -> Option<Fingerprint> {
    let jcs::Buffers { out, scratch } = buffers;
    out.clear();
    // The canonicalizer refuses what has no canonical form (a repeated member name); what it
    // writes reads back as the document.
    let document: Option<serde_json::Value> = jcs::canonicalize_bytes(body, out, scratch)
        .ok()
        .and_then(|()| serde_json::from_slice(out).ok());
    out.clear();
    let document = document?;
    let algorithm = FingerprintAlgorithm::JcsMembersSha256V1;
    write_header(algorithm, method, target, out);
    members.write(document, out)?;
    Some(Fingerprint {
        algorithm,
        digest: Sha256::digest(&out),
    })
}

/// Writes what precedes the body in the hashed input: the domain, the tag byte, the method and
/// the target, each but the tag after its length.
fn write_header(algorithm: FingerprintAlgorithm, method: &Method, target: &str, out: &mut Vec<u8>) {
    write_with_length(DOMAIN, out);
    out.push(algorithm.tag());
    write_with_length(method.as_str().as_bytes(), out);
    write_with_length(target.as_bytes(), out);
}

fn write_with_length(field: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&(field.len() as u64).to_be_bytes());
    out.extend_from_slice(field);
}

/// Whether the `Content-Type` is `application/json` or `type/subtype+json`, in any case and with
/// any parameters.
fn is_json(headers: &HeaderMap) -> bool {
    let Some(content_type) = headers.get(CONTENT_TYPE) else {
        return false;
    };
    // Bytes, not `to_str`: a parameter with non-ASCII bytes must not hide a JSON media type.
    let value = content_type.as_bytes();
    let media_type = match value.iter().position(|&byte| byte == b';') {
        Some(semicolon) => &value[..semicolon],
        None => value,
    }
    .trim_ascii();
    let Some(slash) = media_type.iter().position(|&byte| byte == b'/') else {
        return false;
    };
    let (kind, subtype) = (&media_type[..slash], &media_type[slash + 1..]);
    if kind.is_empty() {
        return false;
    }
    let suffixed = subtype.len() > b"+json".len()
        && subtype[subtype.len() - b"+json".len()..].eq_ignore_ascii_case(b"+json");
    suffixed || (kind.eq_ignore_ascii_case(b"application") && subtype.eq_ignore_ascii_case(b"json"))
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn with_content_type(value: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(value));
        headers
    }

    #[test]
    fn json_media_types() {
        for json in [
            "application/json",
            "application/json; charset=utf-8",
            "application/json;charset=UTF-8",
            "APPLICATION/JSON",
            "Application/Json ; foo=bar",
            "  application/json  ",
            "application/problem+json",
            "application/vnd.api+json; ext=bulk",
            "text/x-thing+JSON",
        ] {
            assert!(is_json(&with_content_type(json)), "{json:?} is JSON");
        }
        for other in [
            "text/plain",
            "application/jsonx",
            "application/x-json",
            "application/+json",
            "/json",
            "application",
            "json",
            "text/json",
            "application/json-seq",
            "multipart/form-data; boundary=json",
            "",
        ] {
            assert!(!is_json(&with_content_type(other)), "{other:?} is not JSON");
        }
        assert!(!is_json(&HeaderMap::new()));
    }

    #[test]
    fn a_non_ascii_parameter_does_not_hide_json() {
        let mut headers = HeaderMap::new();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_bytes(b"application/json; note=\xE9").unwrap(),
        );
        assert!(is_json(&headers));
    }

    #[test]
    fn tags_round_trip() {
        for algorithm in [
            FingerprintAlgorithm::JcsSha256V1,
            FingerprintAlgorithm::RawSha256V1,
            FingerprintAlgorithm::MultipartSha256V1,
            FingerprintAlgorithm::JcsMembersSha256V1,
        ] {
            assert_eq!(
                FingerprintAlgorithm::from_tag(algorithm.tag()),
                Some(algorithm)
            );
        }
        assert_eq!(FingerprintAlgorithm::MultipartSha256V1.tag(), 3);
        assert_eq!(FingerprintAlgorithm::JcsMembersSha256V1.tag(), 4);
        assert_eq!(FingerprintAlgorithm::from_tag(0), None);
        assert_eq!(FingerprintAlgorithm::from_tag(5), None);
    }
}
