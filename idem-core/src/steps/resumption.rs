//! [`Resumption`]: the mark of a request that the service runs itself, to finish an operation
//! its client abandoned.

use std::convert::Infallible;

use axum::extract::OptionalFromRequestParts;
use http::request::Parts;

use crate::scope::{Principal, StoreKey};

/// A request extension on a run the runtime's resumer makes to finish an operation whose
/// client did not come back (see [`Policy::resume_after`](crate::Policy::resume_after)).
///
/// The run carries no credentials: none were kept. It is authorized as the principal the
/// operation's record is scoped to, and an application's authentication lets it through by
/// reading this extension, which no client can send (it is not a header; only code in the
/// process inserts extensions):
///
/// ```
/// use axum::{extract::FromRequestParts, http::{StatusCode, request::Parts}};
/// use idem::steps::Resumption;
///
/// struct User(String);
///
/// impl<S: Send + Sync> FromRequestParts<S> for User {
///     type Rejection = StatusCode;
///
///     async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, StatusCode> {
///         // The service finishing an operation of this user's.
///         if let Some(principal) = Resumption::principal_of(parts) {
///             return Ok(Self(principal.as_str().to_owned()));
///         }
///         // Otherwise, the usual check of the credentials.
///         # let bearer: Option<&str> = None;
///         bearer.map(|id| Self(id.to_owned())).ok_or(StatusCode::UNAUTHORIZED)
///     }
/// }
/// ```
///
/// The runtime also inserts the principal as the [`Principal`] extension, and resolves the
/// record's key with the kept principal whatever the application's resolver says, then checks
/// that the run maps to the operation's record: a run can never land on another key.
#[derive(Clone, Debug)]
pub struct Resumption {
    pub(crate) key: StoreKey,
    pub(crate) principal: Option<Principal>,
    pub(crate) suspensions: u32,
}

impl Resumption {
    /// The principal the operation's record is scoped to; `None` in a global scope.
    pub fn principal(&self) -> Option<&Principal> {
        self.principal.as_ref()
    }

    /// How often the operation stopped before this run.
    pub fn suspensions(&self) -> u32 {
        self.suspensions
    }

    /// The resumption mark of a request, if it is a resumption.
    pub fn of(parts: &Parts) -> Option<&Self> {
        parts.extensions.get::<Self>()
    }

    /// The principal of a resumption, if the request is one and its record has a principal.
    pub fn principal_of(parts: &Parts) -> Option<&Principal> {
        Self::of(parts).and_then(Self::principal)
    }
}

/// `Option<Resumption>` as an extractor: `Some` on a run of the resumer.
impl<S: Send + Sync> OptionalFromRequestParts<S> for Resumption {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Option<Self>, Infallible> {
        Ok(Self::of(parts).cloned())
    }
}
