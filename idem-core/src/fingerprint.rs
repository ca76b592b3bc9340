//! Request fingerprints (SPEC §4).
//!
//! INTERFACE STUB: to be implemented. The public surface below is fixed; the bodies are not.

use http::{HeaderMap, Method};

/// How the request body enters the fingerprint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FingerprintMode {
    /// JSON bodies (`application/json`, `*/*+json`) are canonicalized (RFC 8785) first, so key order
    /// and whitespace do not matter; other bodies are hashed as bytes.
    #[default]
    Json,
    /// Every body is hashed as bytes.
    Raw,
}

/// The algorithm a fingerprint was computed with; stored with it so that a future change of
/// algorithm is detected instead of silently mismatching.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FingerprintAlgorithm {
    /// SHA-256 over method, route and the RFC 8785 canonical form of a JSON body.
    JcsSha256V1,
    /// SHA-256 over method, route and the body bytes.
    RawSha256V1,
}

/// A SHA-256 fingerprint of a request, tagged with its algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fingerprint {
    algorithm: FingerprintAlgorithm,
    digest: [u8; 32],
}

impl Fingerprint {
    /// Fingerprints a request from its method, matched route template, headers (for
    /// `Content-Type`) and body.
    pub fn compute(
        method: &Method,
        route: &str,
        headers: &HeaderMap,
        body: &[u8],
        mode: FingerprintMode,
    ) -> Self {
        let _ = (method, route, headers, body, mode);
        unimplemented!()
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
    pub fn to_bytes(&self) -> [u8; 33] {
        unimplemented!()
    }

    /// Decodes [`Fingerprint::to_bytes`]; `None` for an unknown tag or a wrong length.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let _ = bytes;
        unimplemented!()
    }
}
