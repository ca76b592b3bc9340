//! The operator's side of the runtime: what is held for a key, and removing it.
//!
//! An operator names a record by the parts a request has ([`RecordAddress`]: the scope and
//! its principal, the method, the route template and the `Idempotency-Key`), never by the
//! store's key derivation. [`Idempotency::look_up`] says what is held; [`Idempotency::remove`]
//! removes it, so that the next request with the key runs again, and fences a request that
//! still runs under it: its result is not stored (its client gets it; a transactional
//! handler's writes roll back and its client gets 409). Every removal is logged with who
//! asked, and counted.
//!
//! ```
//! use http::Method;
//! use idem::{IdempotencyKey, Idempotency, MemoryStore, Principal, RecordAddress, Scope};
//! use idem::store::Held;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let idem = Idempotency::new(MemoryStore::default());
//! let address = RecordAddress::new(
//!     Scope::User,
//!     Some(Principal::new("alice")),
//!     Method::POST,
//!     "/payments",
//!     IdempotencyKey::new("8e03978e-40d5-43e8-bc93-6894a57f9324")?,
//! )?;
//! match idem.look_up(&address).await? {
//!     Some(Held::Completed(record)) => println!("{} until {:?}", record.status, record.expires_at),
//!     Some(Held::InFlight(record)) => println!("running, {:?} of lease left", record.lease_left()),
//!     Some(_) | None => println!("nothing is held: the next request runs"),
//! }
//! idem.remove(&address, "ops: ticket 4711").await?;
//! # Ok(()) }
//! ```
//!
//! A result that this process keeps because the store did not take it (see
//! [`pending_completions`](Idempotency::pending_completions)) is in flight to a look-up until
//! the store has it; a removal forgets it here too. An operation this process was to resume
//! itself is not resumed once removed. A resumption already under way on another instance
//! when its record is removed claims the key afresh and runs the operation from its start.

use std::{fmt, time::SystemTime};

use http::Method;
use idem_protocol::key::IdempotencyKey;

use super::Idempotency;
use crate::{
    observe,
    scope::{Principal, Scope, StoreKey},
    store::{Held, RecordState, StoreError},
};

/// The parts of a request that name its record: the scope and its principal, the method, the
/// matched route template (`/payments/{id}`, not `/payments/7`) and the `Idempotency-Key`.
/// For a message handler, the method is `POST` and the route its consumer's
/// (`/jetstream/<stream>/<consumer>`, `/amqp/<queue>`).
#[derive(Clone, PartialEq, Eq)]
pub struct RecordAddress {
    scope: Scope,
    principal: Option<Principal>,
    method: Method,
    route: String,
    key: IdempotencyKey,
}

/// Why a [`RecordAddress`] names no record a request could have.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AddressError {
    /// The scope's keys belong to a principal, and none was given.
    PrincipalMissing(&'static str),
    /// A global scope has no principal, and one was given.
    PrincipalInGlobalScope,
    /// The route is not a route template: it does not start with `/`.
    InvalidRoute(String),
}

impl fmt::Display for AddressError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::PrincipalMissing(scope) => write!(
                f,
                "the scope `{scope}` keeps each principal's keys apart: name the principal"
            ),
            Self::PrincipalInGlobalScope => {
                f.write_str("the global scope has no principals: name none")
            }
            Self::InvalidRoute(route) => write!(
                f,
                "the route `{route}` is not a route template, as in `/payments/{{id}}`"
            ),
        }
    }
}

impl std::error::Error for AddressError {}

impl RecordAddress {
    /// The record of the request `method route` with `key`, in `scope` for `principal`.
    ///
    /// # Errors
    ///
    /// When the principal is missing for a scope that needs one, given for the global scope,
    /// or the route does not start with `/`.
    pub fn new(
        scope: Scope,
        principal: Option<Principal>,
        method: Method,
        route: impl Into<String>,
        key: IdempotencyKey,
    ) -> Result<Self, AddressError> {
        let route = route.into();
        match (scope.needs_principal(), &principal) {
            (true, None) => return Err(AddressError::PrincipalMissing(scope.name())),
            (false, Some(_)) => return Err(AddressError::PrincipalInGlobalScope),
            _ => {}
        }
        if !route.starts_with('/') {
            return Err(AddressError::InvalidRoute(route));
        }
        Ok(Self {
            scope,
            principal,
            method,
            route,
            key,
        })
    }

    /// The route template.
    pub fn route(&self) -> &str {
        &self.route
    }

    /// The key the record is stored under, as a request with these parts would derive it.
    pub fn store_key(&self) -> StoreKey {
        StoreKey::new(
            &self.scope,
            self.principal.as_ref(),
            &self.method,
            &self.route,
            &self.key,
        )
    }
}

/// Never shows the key or the principal, which may be a client's secrets: only the scope,
/// the method, the route and the store key's prefix, as the logs do.
impl fmt::Debug for RecordAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordAddress")
            .field("scope", &self.scope.name())
            .field("method", &self.method)
            .field("route", &self.route)
            .field(
                "key",
                &format_args!("{}", observe::KeyPrefix(&self.store_key())),
            )
            .finish_non_exhaustive()
    }
}

impl Idempotency {
    /// What is held for the record `address` names: `None` when the next request with its key
    /// would run. Changes nothing. For an operation of several steps that this process will
    /// resume itself, [`resumes_at`](crate::store::held::InFlightRecord::resumes_at) says
    /// when.
    ///
    /// # Errors
    ///
    /// When the store fails, or does not answer within the store timeout.
    pub async fn look_up(&self, address: &RecordAddress) -> Result<Option<Held>, StoreError> {
        let key = address.store_key();
        let mut held = self.look_up_in_store(&key).await?;
        if let Some(Held::InFlight(record)) = &mut held
            && record.resumes_at.is_none()
            && let Some(due) = self.state.schedule.due_at(&key)
        {
            let now = tokio::time::Instant::now();
            let from_now = due.saturating_duration_since(now);
            record.resumes_at = Some(SystemTime::now() + from_now);
        }
        Ok(held)
    }

    /// Removes the record `address` names, whatever holds it, and answers what it removed
    /// (`None`: nothing was held). The next request with its key runs again. A request that
    /// runs under it now is fenced: its result is not stored. `by` says who asked; it is
    /// logged with the removal, at `warn` for a record in flight and `info` otherwise.
    ///
    /// # Errors
    ///
    /// When the store fails, or does not answer within the store timeout: then nothing is
    /// known to have been removed, and the call may be made again.
    pub async fn remove(
        &self,
        address: &RecordAddress,
        by: &str,
    ) -> Result<Option<RecordState>, StoreError> {
        let key = address.store_key();
        let removed = self.remove_from_store(&key).await;
        if removed.is_ok() {
            // Nothing in this process answers for the key any more.
            self.pending().forget(&key);
            self.state.schedule.forget(&key);
        }
        observe::removed(address.route(), &key, by, &removed);
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> IdempotencyKey {
        IdempotencyKey::new("k-1").unwrap()
    }

    #[test]
    fn an_address_names_a_record_a_request_could_have() {
        let alice = || Some(Principal::new("alice"));
        let address =
            RecordAddress::new(Scope::User, alice(), Method::POST, "/payments", key()).unwrap();
        assert_eq!(
            address.store_key(),
            StoreKey::new(
                &Scope::User,
                alice().as_ref(),
                &Method::POST,
                "/payments",
                &key()
            )
        );
        assert_eq!(
            RecordAddress::new(Scope::User, None, Method::POST, "/payments", key()),
            Err(AddressError::PrincipalMissing("user"))
        );
        assert_eq!(
            RecordAddress::new(Scope::Global, alice(), Method::POST, "/payments", key()),
            Err(AddressError::PrincipalInGlobalScope)
        );
        assert_eq!(
            RecordAddress::new(Scope::Global, None, Method::POST, "payments", key()),
            Err(AddressError::InvalidRoute("payments".into()))
        );
    }

    #[test]
    fn an_address_shows_neither_key_nor_principal() {
        let address = RecordAddress::new(
            Scope::User,
            Some(Principal::new("alice")),
            Method::POST,
            "/payments",
            IdempotencyKey::new("secret-key").unwrap(),
        )
        .unwrap();
        let shown = format!("{address:?}");
        assert!(
            !shown.contains("secret-key") && !shown.contains("alice"),
            "{shown}"
        );
        assert!(shown.contains("/payments"), "{shown}");
    }
}
