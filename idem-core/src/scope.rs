//! Whose key is it (see [docs/contract.md](https://github.com/idem-rs/idem/blob/main/docs/contract.md), *Scope*): the principal a key belongs to, and the store key made from it.
//!
//! A record is never looked up by the client's key alone. The [`StoreKey`] is a SHA-256 over
//! the scope, its principal, the method, the matched route template and the key, so two users
//! who send the same key never see each other's results and client bytes never become store
//! keys.
//!
//! The principal comes from the application's own authentication. By default idem reads the
//! [`Principal`] request extension, which the application's authentication middleware (or an
//! extractor that runs before the handler's body extractor) inserts:
//!
//! ```
//! use axum::{extract::Request, middleware::Next, response::Response};
//! use idem::Principal;
//!
//! async fn authenticate(mut request: Request, next: Next) -> Response {
//!     // ... verify the caller, then tell idem whose keys this request uses:
//!     request.extensions_mut().insert(Principal::new("user-42"));
//!     next.run(request).await
//! }
//! ```
//!
//! For custom scopes (a tenant, an API key) install a [`ResolvePrincipal`] on the runtime with
//! [`IdempotencyBuilder::principal_resolver`](crate::runtime::IdempotencyBuilder::principal_resolver).

use std::{fmt, sync::Arc};

use axum::extract::MatchedPath;
use http::{Extensions, Method, Uri, request::Parts};
use idem_protocol::sha256::Sha256;

use idem_protocol::key::IdempotencyKey;

/// Whose keys a route's records belong to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Each authenticated user has their own keys (the default). A request without a
    /// principal is answered 500 `principal-missing`: the service's authentication did not
    /// name the user.
    #[default]
    User,
    /// One key space for all callers, for machine-to-machine APIs where the caller is not
    /// identified. Any client that knows a key gets its result: use it only where keys are
    /// secret or results are not.
    Global,
    /// A scope of the application's own (`"tenant"`, `"api-key"`): the principal comes from
    /// the runtime's [`ResolvePrincipal`], and the name keeps its keys apart from other scopes.
    Custom(&'static str),
}

impl Scope {
    /// The scope's name: `user`, `global`, or the custom name.
    pub const fn name(&self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Global => "global",
            Self::Custom(name) => name,
        }
    }

    /// Whether keys in this scope belong to a principal.
    pub const fn needs_principal(&self) -> bool {
        !matches!(self, Self::Global)
    }
}

/// The identity a scoped key belongs to: a user id, a tenant id.
///
/// Insert it as a request extension from your authentication, or return it from a
/// [`ResolvePrincipal`].
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Principal(Arc<str>);

impl Principal {
    /// A principal with this identifier.
    pub fn new(id: impl Into<Arc<str>>) -> Self {
        Self(id.into())
    }

    /// The identifier.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Principal").field(&&*self.0).finish()
    }
}

/// The hook through which the application names the principal of a request.
///
/// Implemented for closures `Fn(&Scope, &Parts) -> Option<Principal>`. The default,
/// [`PrincipalExtension`], reads the [`Principal`] extension for [`Scope::User`].
///
/// ```
/// use http::request::Parts;
/// use idem::{Idempotency, MemoryStore, Principal, Scope};
///
/// #[derive(Clone)]
/// struct Tenant(String);
///
/// let idem = Idempotency::builder(MemoryStore::default())
///     .principal_resolver(|scope: &Scope, parts: &Parts| match scope {
///         Scope::Custom("tenant") => parts.extensions.get::<Tenant>().map(|t| Principal::new(t.0.as_str())),
///         _ => parts.extensions.get::<Principal>().cloned(),
///     })
///     .build();
/// # drop(idem);
/// ```
pub trait ResolvePrincipal: Send + Sync + 'static {
    /// The principal of this request in `scope`, or `None` when it has none (answered 401).
    fn resolve(&self, scope: &Scope, parts: &Parts) -> Option<Principal>;
}

impl<F> ResolvePrincipal for F
where
    F: Fn(&Scope, &Parts) -> Option<Principal> + Send + Sync + 'static,
{
    fn resolve(&self, scope: &Scope, parts: &Parts) -> Option<Principal> {
        self(scope, parts)
    }
}

/// The default [`ResolvePrincipal`]: the [`Principal`] request extension is the user; custom
/// scopes have no principal until the application installs its own resolver.
#[derive(Clone, Copy, Debug, Default)]
pub struct PrincipalExtension;

impl ResolvePrincipal for PrincipalExtension {
    fn resolve(&self, scope: &Scope, parts: &Parts) -> Option<Principal> {
        match scope {
            Scope::User => parts.extensions.get::<Principal>().cloned(),
            Scope::Global | Scope::Custom(_) => None,
        }
    }
}

/// The route a request matched: axum's route template (`/payments/{id}`) when the router
/// has set it, or else the request path.
pub fn route_of(parts: &Parts) -> &str {
    match parts.extensions.get::<MatchedPath>() {
        Some(matched) => matched.as_str(),
        None => parts.uri.path(),
    }
}

/// The route of a request, kept for logs and metrics while it runs. Cheap to clone: axum's
/// `MatchedPath` shares its template.
#[derive(Clone, Debug)]
pub(crate) enum Route {
    Matched(MatchedPath),
    Path(Arc<str>),
}

impl Route {
    pub(crate) fn of(extensions: &Extensions, uri: &Uri) -> Self {
        match extensions.get::<MatchedPath>() {
            Some(matched) => Self::Matched(matched.clone()),
            None => Self::Path(uri.path().into()),
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        match self {
            Self::Matched(matched) => matched.as_str(),
            Self::Path(path) => path,
        }
    }
}

/// The key a record is stored under: SHA-256 over scope, principal, method, route and key.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct StoreKey([u8; 32]);

/// A store key is already a uniform hash: its first eight bytes are as good a hash as any,
/// and hashing the other 24 again would only cost time on every lookup.
impl std::hash::Hash for StoreKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let (prefix, _) = self.0.split_first_chunk::<8>().expect("32 bytes");
        state.write_u64(u64::from_le_bytes(*prefix));
    }
}

impl StoreKey {
    /// Hashes the parts of a composite key. Each part is length-prefixed, so no two different
    /// combinations hash the same input.
    pub fn new(
        scope: &Scope,
        principal: Option<&Principal>,
        method: &Method,
        route: &str,
        key: &IdempotencyKey,
    ) -> Self {
        let fields: [&[u8]; 6] = [
            b"idem-store-key-v1",
            scope.name().as_bytes(),
            principal.map_or(&[][..], |p| p.as_str().as_bytes()),
            method.as_str().as_bytes(),
            route.as_bytes(),
            key.as_str().as_bytes(),
        ];
        Self(hash_fields(&fields))
    }

    /// A store key from its 32 bytes, as a store reads it back.
    pub const fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The 32 bytes of the hash.
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The hash as 64 lowercase hex digits, for stores whose keys are text.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
}

/// The input of a usual store key fits this buffer: the hasher's cost per call is far above
/// its cost per byte, so the fields are joined and hashed in one call when they fit.
const JOINED_FIELDS: usize = 512;

/// SHA-256 over the fields, each prefixed with its length as eight big-endian bytes.
fn hash_fields(fields: &[&[u8]]) -> [u8; 32] {
    let joined_len: usize = fields.iter().map(|field| 8 + field.len()).sum();
    if joined_len <= JOINED_FIELDS {
        let mut joined = [0; JOINED_FIELDS];
        let mut at = 0;
        for field in fields {
            joined[at..at + 8].copy_from_slice(&(field.len() as u64).to_be_bytes());
            joined[at + 8..at + 8 + field.len()].copy_from_slice(field);
            at += 8 + field.len();
        }
        return Sha256::digest(&joined[..at]);
    }
    let mut hasher = Sha256::new();
    for field in fields {
        hasher.update((field.len() as u64).to_be_bytes());
        hasher.update(field);
    }
    hasher.finalize()
}

impl fmt::Debug for StoreKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StoreKey({})", self.to_hex())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(value: &str) -> IdempotencyKey {
        IdempotencyKey::new(value).unwrap()
    }

    fn store_key(
        scope: Scope,
        principal: Option<&str>,
        method: Method,
        route: &str,
        k: &str,
    ) -> StoreKey {
        let principal = principal.map(Principal::new);
        StoreKey::new(&scope, principal.as_ref(), &method, route, &key(k))
    }

    #[test]
    fn every_part_of_the_composite_changes_the_store_key() {
        let base = store_key(Scope::User, Some("alice"), Method::POST, "/payments", "k1");
        assert_eq!(
            base,
            store_key(Scope::User, Some("alice"), Method::POST, "/payments", "k1")
        );
        let others = [
            store_key(Scope::User, Some("bob"), Method::POST, "/payments", "k1"),
            store_key(
                Scope::Custom("tenant"),
                Some("alice"),
                Method::POST,
                "/payments",
                "k1",
            ),
            store_key(Scope::User, Some("alice"), Method::PATCH, "/payments", "k1"),
            store_key(Scope::User, Some("alice"), Method::POST, "/transfers", "k1"),
            store_key(Scope::User, Some("alice"), Method::POST, "/payments", "k2"),
            store_key(Scope::Global, None, Method::POST, "/payments", "k1"),
        ];
        for other in others {
            assert_ne!(base, other);
        }
    }

    /// Stores keep records under these keys across versions and restarts: the way a store
    /// key is made can never change (these digests are SHA-256 over the length-prefixed
    /// fields, computed outside the crate).
    #[test]
    fn store_keys_are_the_same_in_every_version() {
        let cases = [
            (
                store_key(
                    Scope::User,
                    Some("alice"),
                    Method::POST,
                    "/payments",
                    "order-42",
                ),
                "3ccef942409065822108e166fbe3c82552d3118558c3ee0bc670036d98a65c79",
            ),
            (
                store_key(Scope::Global, None, Method::POST, "/payments", "order-42"),
                "e3024aa85b5ebdc3b336caa3836bf81df261c2819acf0a4a506776b367888371",
            ),
            // Longer than the fields hashed in one call: the same key, hashed piece by piece.
            (
                store_key(
                    Scope::User,
                    Some(&"a".repeat(600)),
                    Method::POST,
                    "/payments",
                    "order-42",
                ),
                "0148c723865ec84c1343879b71e2344a30ff6f4590c348324a10e291de3c8104",
            ),
        ];
        for (key, expected) in cases {
            assert_eq!(key.to_hex(), expected);
        }
    }

    #[test]
    fn fields_are_length_prefixed() {
        // Without prefixes, principal "ab" + route "c" would hash like principal "a" + route "bc".
        let one = store_key(Scope::User, Some("ab"), Method::POST, "/c", "k");
        let two = store_key(Scope::User, Some("a"), Method::POST, "b/c", "k");
        assert_ne!(one, two);
    }

    #[test]
    fn hex_is_64_lowercase_digits_and_round_trips() {
        let key = store_key(Scope::Global, None, Method::POST, "/x", "k");
        let hex = key.to_hex();
        assert_eq!(hex.len(), 64);
        assert!(
            hex.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        );
        assert_eq!(StoreKey::from_bytes(*key.as_bytes()), key);
    }

    #[test]
    fn default_resolver_reads_the_extension_for_users_only() {
        let (mut parts, ()) = http::Request::new(()).into_parts();
        assert_eq!(PrincipalExtension.resolve(&Scope::User, &parts), None);
        parts.extensions.insert(Principal::new("u1"));
        assert_eq!(
            PrincipalExtension.resolve(&Scope::User, &parts),
            Some(Principal::new("u1"))
        );
        assert_eq!(
            PrincipalExtension.resolve(&Scope::Custom("tenant"), &parts),
            None
        );
    }

    #[test]
    fn route_prefers_the_matched_template() {
        let (parts, ()) = http::Request::builder()
            .uri("/payments/42?x=1")
            .body(())
            .unwrap()
            .into_parts();
        assert_eq!(route_of(&parts), "/payments/42");
    }
}
