//! Who is calling: demo-grade authentication by `Authorization: Bearer <user-id>`.
//!
//! **This is not authentication.** The token *is* the user id, unchecked, so that a
//! newcomer can be `alice` or `bob` with curl. A real service verifies a signed token or a
//! session here; what matters for idempotency is only what this module does with the result:
//! it inserts [`idem::Principal`], the documented hook through which the runtime scopes
//! keys to a user (`#[idempotent(scope = "user")]`).
//!
//! A user id is 1 to 64 characters of `[A-Za-z0-9_-]`. A missing or malformed header is
//! answered 401 Problem Details with `WWW-Authenticate: Bearer`.
//!
//! A run the shop makes itself, to finish a transfer its user abandoned, carries no
//! credentials (none are kept): it is marked with idem's `Resumption`, which only code in the
//! process can insert, and is the user its idempotency record is scoped to.

use axum::{
    extract::FromRequestParts,
    http::{HeaderMap, header, request::Parts},
};
use idem::{Principal, steps::Resumption};

use crate::problem::{ShopProblem, ShopProblemKind};

/// The longest user id.
pub const MAX_USER_ID_LEN: usize = 64;

/// The authenticated caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    id: String,
}

impl User {
    /// The user with this id, if it is a valid one.
    pub fn new(id: &str) -> Option<Self> {
        let valid = (1..=MAX_USER_ID_LEN).contains(&id.len())
            && id
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-');
        valid.then(|| Self { id: id.to_owned() })
    }

    /// The user id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The user named by the request's `Authorization` header.
    pub fn from_headers(headers: &HeaderMap) -> Result<Self, ShopProblem> {
        let unauthenticated = |detail| ShopProblem::new(ShopProblemKind::Unauthenticated, detail);
        let mut values = headers.get_all(header::AUTHORIZATION).iter();
        let value = match (values.next(), values.next()) {
            (None, _) => {
                return Err(unauthenticated(
                    "send `Authorization: Bearer <user-id>` (this demo takes any user id)",
                ));
            }
            (Some(_), Some(_)) => {
                return Err(unauthenticated(
                    "send one Authorization header, not several",
                ));
            }
            (Some(value), None) => value,
        };
        let token = value
            .to_str()
            .ok()
            .and_then(|value| {
                let (scheme, token) = value.trim().split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
            })
            .ok_or_else(|| {
                unauthenticated("the Authorization header must be `Bearer <user-id>`")
            })?;
        Self::new(token).ok_or_else(|| {
            unauthenticated(
                "the user id must be 1 to 64 characters of letters, digits, `_` and `-`",
            )
        })
    }
}

impl<S: Send + Sync> FromRequestParts<S> for User {
    type Rejection = ShopProblem;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        // The router's authentication layer runs this extractor before any handler; a
        // handler that takes a `User` finds it here rather than parsing the header again.
        if let Some(user) = parts.extensions.get::<Self>() {
            return Ok(user.clone());
        }
        // The shop finishing a transfer its user abandoned: the run carries no credentials,
        // and is the operation's own user's, as its idempotency record says.
        let resumed =
            Resumption::principal_of(parts).and_then(|principal| Self::new(principal.as_str()));
        let user = match resumed {
            Some(user) => user,
            None => Self::from_headers(&parts.headers)?,
        };
        // The hook of `scope = "user"`: the runtime reads the principal from the request's
        // extensions once the handler's parts extractors have run.
        parts.extensions.insert(Principal::new(user.id.as_str()));
        parts.extensions.insert(user.clone());
        Ok(user)
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn headers(values: &[&'static str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(header::AUTHORIZATION, HeaderValue::from_static(value));
        }
        headers
    }

    #[test]
    fn a_bearer_token_names_the_user() {
        assert_eq!(
            User::from_headers(&headers(&["Bearer alice"]))
                .unwrap()
                .id(),
            "alice"
        );
        assert_eq!(
            User::from_headers(&headers(&["bearer  bob_2-x "]))
                .unwrap()
                .id(),
            "bob_2-x"
        );
    }

    #[test]
    fn missing_or_malformed_credentials_are_refused() {
        for values in [
            &[][..],
            &["Basic YWxpY2U6"],
            &["Bearer"],
            &["Bearer "],
            &["Bearer al ice"],
            &["Bearer alice!"],
            &["Bearer alice", "Bearer bob"],
        ] {
            let refused = User::from_headers(&headers(values)).unwrap_err();
            assert_eq!(
                refused.kind(),
                ShopProblemKind::Unauthenticated,
                "{values:?}"
            );
        }
        let long = "a".repeat(MAX_USER_ID_LEN + 1);
        assert!(User::new(&long).is_none());
        assert!(User::new(&long[1..]).is_some());
    }
}
