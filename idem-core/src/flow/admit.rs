//! The checks that need no store: the key, the bounded body, the fingerprint, and then the
//! principal and the store key made from it.

use axum::{RequestExt, extract::Request, response::Response};
use bytes::Bytes;
use http::{HeaderMap, request::Parts};
use http_body_util::{BodyExt, LengthLimitError};
use idem_protocol::key::IdempotencyKey;

use super::{body_limit, problems};
use crate::{
    fingerprint::Fingerprint,
    policy::Policy,
    replay::capture::BodyBuffer,
    runtime::Idempotency,
    scope::{Principal, Route, StoreKey},
    steps::resumption::Resumption,
    store::operation::KeptRequest,
};

/// A request that passed the checks that need no store.
pub(super) enum Admission {
    /// It has no key and the policy lets it run without one.
    WithoutKey(Request),
    /// It has a key, and its body is buffered and fingerprinted.
    Keyed(Keyed),
}

/// A keyed request, ready for its principal to be resolved.
pub(super) struct Keyed {
    pub(super) parts: Parts,
    pub(super) body: Bytes,
    pub(super) key: IdempotencyKey,
    pub(super) fingerprint: Fingerprint,
}

/// The key, the bounded body and the fingerprint, or the Problem that refuses them.
pub(super) async fn admit(
    idem: &Idempotency,
    policy: &Policy,
    request: Request,
    route: &Route,
) -> Result<Admission, Response> {
    let key = match IdempotencyKey::from_headers(request.headers(), policy.key_syntax) {
        Ok(Some(key)) => key,
        Ok(None) if !policy.required => return Ok(Admission::WithoutKey(request)),
        Ok(None) => return Err(problems::key_missing(idem, route)),
        Err(error) => return Err(problems::key_malformed(idem, route, &error)),
    };
    // The body limit is axum's `DefaultBodyLimit`, read the way axum's own extractors do.
    let (parts, body) = request.with_limited_body().into_parts();
    let body = match read_body(body).await {
        Ok(body) => body,
        Err(error) if is_length_limit(&error) => {
            let limit = body_limit::of(&parts.extensions);
            return Err(problems::body_too_large(idem, route, limit));
        }
        Err(error) => return Err(problems::body_unreadable(idem, route, &error)),
    };
    // The concrete target, not the route template: a key reused for another resource is a
    // different request (see the fingerprint module docs).
    let target = parts
        .uri
        .path_and_query()
        .map_or("/", |target| target.as_str());
    let fingerprint = Fingerprint::compute_members(
        &parts.method,
        target,
        &parts.headers,
        &body,
        policy.fingerprint,
        &policy.fingerprint_members,
    );
    Ok(Admission::Keyed(Keyed {
        parts,
        body,
        key,
        fingerprint,
    }))
}

/// The whole body, in one `Bytes` without a copy when it came in one frame (as `to_bytes`
/// would read it, without its list of frames).
async fn read_body(mut body: axum::body::Body) -> Result<Bytes, axum::Error> {
    let mut read = BodyBuffer::default();
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            read.push(data);
        }
    }
    Ok(read.into_bytes())
}

fn is_length_limit(error: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = source {
        if error.is::<LengthLimitError>() {
            return true;
        }
        source = error.source();
    }
    false
}

/// Whose key it is: the principal, when the scope has one, and the store key made from it.
pub(super) struct Scoped {
    pub(super) key: StoreKey,
    pub(super) principal: Option<Principal>,
}

/// The principal of the request and the store key made from it, or 500 `principal-missing`.
///
/// A run of the resumer is scoped to the principal its operation's record was, whatever the
/// resolver would say of a request without credentials, and must map to that very record.
pub(super) fn store_key(
    idem: &Idempotency,
    policy: &Policy,
    parts: &Parts,
    key: &IdempotencyKey,
    route: &Route,
) -> Result<Scoped, Response> {
    let scope = &policy.scope;
    let resumption = parts.extensions.get::<Resumption>();
    let principal = if scope.needs_principal() {
        let resolved = match resumption {
            Some(resumption) => resumption.principal.clone(),
            None => idem.resolver().resolve(scope, parts),
        };
        match resolved {
            Some(principal) => Some(principal),
            None => return Err(problems::principal_missing(idem, scope, route)),
        }
    } else {
        None
    };
    let store_key = StoreKey::new(
        scope,
        principal.as_ref(),
        &parts.method,
        route.as_str(),
        key,
    );
    if let Some(resumption) = resumption
        && resumption.key != store_key
    {
        return Err(problems::resumed_elsewhere(idem, route, &resumption.key));
    }
    Ok(Scoped {
        key: store_key,
        principal,
    })
}

/// What a resumable route keeps of a request, to run it again without its client: the method,
/// the target, the key, the principal, `Content-Type` and the headers the route names (never
/// credentials), and the body.
pub(super) fn kept_request(
    policy: &Policy,
    parts: &Parts,
    body: &Bytes,
    key: &IdempotencyKey,
    principal: Option<&Principal>,
) -> KeptRequest {
    let mut headers = HeaderMap::new();
    let names = std::iter::once(&http::header::CONTENT_TYPE).chain(policy.keep_headers);
    for name in names {
        for value in parts.headers.get_all(name) {
            headers.append(name.clone(), value.clone());
        }
    }
    let target = parts
        .uri
        .path_and_query()
        .map_or("/", |target| target.as_str());
    KeptRequest::new(
        parts.method.clone(),
        target,
        key.clone(),
        principal.cloned(),
        headers,
        body.clone(),
    )
}
