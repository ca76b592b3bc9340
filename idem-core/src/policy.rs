//! The per-route policy: how long records live, whose keys they are, what happens on conflict.
//!
//! A [`Policy`] is a small `Copy` value built with `const fn`s, so an annotated handler
//! carries its policy as a constant and the layer form takes the same value.
//!
//! ```
//! use std::time::Duration;
//! use idem::{OnConflict, Policy, Scope};
//!
//! const PAYMENTS: Policy = Policy::new()
//!     .ttl(Duration::from_secs(24 * 60 * 60))
//!     .scope(Scope::User)
//!     .on_conflict(OnConflict::Wait(Duration::from_secs(5)));
//! assert!(PAYMENTS.validate().is_ok());
//! ```

use std::{fmt, time::Duration};

use http::HeaderName;

use crate::{
    fingerprint::{FingerprintMode, Members, MembersError},
    key::KeySyntax,
    scope::Scope,
};

/// What a request does when the first request with its key is still in flight.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnConflict {
    /// Answer 409 Problem Details with `Retry-After` at once (the default).
    #[default]
    Reject,
    /// Wait up to this long for the first request to finish and replay its result; 409 if it
    /// is still running then.
    Wait(Duration),
}

/// What a request does when the idempotency store fails or times out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnStoreError {
    /// Refuse with 503 Problem Details and `Retry-After` (the default): no operation runs
    /// without the guarantee.
    #[default]
    Fail,
    /// Run the handler without an idempotency record, and log that it did
    /// (`on_store_error = "run"` in `#[idempotent]`). For operations where running twice is
    /// cheaper than not running.
    RunWithoutRecord,
}

impl OnStoreError {
    /// The former name of [`OnStoreError::RunWithoutRecord`].
    #[deprecated(note = "renamed `OnStoreError::RunWithoutRecord`")]
    #[allow(non_upper_case_globals)]
    pub const Run: Self = Self::RunWithoutRecord;
}

/// The idempotency policy of a route. Every setting has the default the documentation names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub struct Policy {
    pub(crate) ttl: Duration,
    pub(crate) lease: Duration,
    pub(crate) scope: Scope,
    pub(crate) required: bool,
    pub(crate) on_conflict: OnConflict,
    pub(crate) on_store_error: OnStoreError,
    pub(crate) store_server_errors: bool,
    pub(crate) fingerprint: FingerprintMode,
    pub(crate) fingerprint_members: Members,
    pub(crate) key_syntax: KeySyntax,
    pub(crate) max_stored_body: usize,
    pub(crate) replay_set_cookie: bool,
    pub(crate) exclude_headers: &'static [HeaderName],
    pub(crate) retry_after: Duration,
    pub(crate) resume_after: Option<Duration>,
    pub(crate) keep_headers: &'static [HeaderName],
}

/// A [`Policy`] that cannot work.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PolicyError {
    /// A duration that must be positive is zero.
    Zero(&'static str),
    /// The TTL is shorter than the lease, so a completed record would outlive its result
    /// for less time than a crashed request blocks its key: almost certainly swapped values.
    TtlShorterThanLease {
        /// The configured TTL.
        ttl: Duration,
        /// The configured lease.
        lease: Duration,
    },
    /// A custom scope name that is empty or has a character other than a lowercase ASCII
    /// letter, a digit, `_` or `-`.
    InvalidScopeName(&'static str),
    /// A custom scope named `user` or `global`, whose keys would be those of the built-in
    /// scope of that name.
    ReservedScopeName(&'static str),
    /// A selection of the fingerprint's JSON members that cannot do what it says (see
    /// [`Members::validate`]).
    Members(MembersError),
    /// A selection of JSON members on a route whose fingerprint hashes every body as bytes.
    MembersOfRawBody,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Zero(name) => write!(f, "`{name}` must be greater than zero"),
            Self::TtlShorterThanLease { ttl, lease } => {
                write!(f, "`ttl` ({ttl:?}) is shorter than `lease` ({lease:?})")
            }
            Self::InvalidScopeName(name) => write!(
                f,
                "invalid custom scope name `{name}`: use lowercase letters, digits, `_` and `-`"
            ),
            Self::ReservedScopeName(name) => write!(
                f,
                "the custom scope name `{name}` is reserved: use `Scope::User` or \
                 `Scope::Global`, or another name"
            ),
            Self::Members(error) => write!(f, "the fingerprint's members: {error}"),
            Self::MembersOfRawBody => f.write_str(
                "`fingerprint_omit` and `fingerprint_only` select JSON members, and \
                 `fingerprint` is `raw`, which hashes every body as bytes: use one or the other",
            ),
        }
    }
}

impl std::error::Error for PolicyError {}

impl PolicyError {
    /// What is wrong, without the values: the message a constant that holds an invalid
    /// policy fails to compile with, where no formatting is available.
    pub const fn summary(&self) -> &'static str {
        match self {
            Self::Zero(name) if is(name.as_bytes(), b"ttl") => {
                "invalid idempotency policy: `ttl` must be greater than zero"
            }
            Self::Zero(name) if is(name.as_bytes(), b"lease") => {
                "invalid idempotency policy: `lease` must be greater than zero"
            }
            Self::Zero(name) if is(name.as_bytes(), b"resume_after") => {
                "invalid idempotency policy: `resume_after` must be greater than zero"
            }
            Self::Zero(_) => {
                "invalid idempotency policy: the `on_conflict` wait must be greater than zero"
            }
            Self::TtlShorterThanLease { .. } => {
                "invalid idempotency policy: `ttl` is shorter than `lease`, so a result would be \
                 forgotten sooner than an interrupted request blocks its key; make `ttl` at least \
                 as long as `lease`"
            }
            Self::InvalidScopeName(_) => {
                "invalid idempotency policy: a custom scope name is made of lowercase letters, \
                 digits, `_` and `-`, as in `custom(tenant)`"
            }
            Self::ReservedScopeName(_) => {
                "invalid idempotency policy: the custom scope names `user` and `global` are \
                 reserved; use the built-in scope of that name, or another name"
            }
            Self::Members(error) => error.summary(),
            Self::MembersOfRawBody => {
                "invalid idempotency policy: `fingerprint_omit` and `fingerprint_only` select \
                 JSON members, and `fingerprint = \"raw\"` hashes every body as bytes: use one \
                 or the other"
            }
        }
    }
}

impl Policy {
    /// The default TTL of a completed record: 24 hours, as Stripe keeps keys.
    pub const DEFAULT_TTL: Duration = Duration::from_secs(24 * 60 * 60);
    /// The default lease of an in-flight record: 60 seconds.
    pub const DEFAULT_LEASE: Duration = Duration::from_secs(60);
    /// The default cap on a stored response body: 1 MiB.
    pub const DEFAULT_MAX_STORED_BODY: usize = 1024 * 1024;

    /// The default policy: TTL 24h, lease 60s, user scope, key required, reject conflicts,
    /// fail closed on store errors, release 5xx, canonical JSON fingerprints, lenient key
    /// syntax, a 1 MiB cap on stored bodies, `Set-Cookie` not replayed.
    pub const fn new() -> Self {
        Self {
            ttl: Self::DEFAULT_TTL,
            lease: Self::DEFAULT_LEASE,
            scope: Scope::User,
            required: true,
            on_conflict: OnConflict::Reject,
            on_store_error: OnStoreError::Fail,
            store_server_errors: false,
            fingerprint: FingerprintMode::Json,
            fingerprint_members: Members::All,
            key_syntax: KeySyntax::Lenient,
            max_stored_body: Self::DEFAULT_MAX_STORED_BODY,
            replay_set_cookie: false,
            exclude_headers: &[],
            retry_after: Duration::from_secs(1),
            resume_after: None,
            keep_headers: &[],
        }
    }

    /// How long a completed record is replayed, counted from its completion.
    pub const fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// How long an in-flight record blocks its key without a heartbeat. While the handler
    /// runs, the lease is renewed every third of it; a process that dies leaves a lease that
    /// lapses, after which a retry may run the operation again.
    pub const fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Whose keys these records are.
    pub const fn scope(mut self, scope: Scope) -> Self {
        self.scope = scope;
        self
    }

    /// Whether a request without a key is refused with 400 (`true`, the default) or runs
    /// without idempotency.
    pub const fn required(mut self, required: bool) -> Self {
        self.required = required;
        self
    }

    /// What a request does while the first request with its key is in flight.
    pub const fn on_conflict(mut self, on_conflict: OnConflict) -> Self {
        self.on_conflict = on_conflict;
        self
    }

    /// What a request does when the store fails.
    pub const fn on_store_error(mut self, on_store_error: OnStoreError) -> Self {
        self.on_store_error = on_store_error;
        self
    }

    /// Whether 5xx responses are stored and replayed, as Stripe does (`true`), or the key is
    /// released so a retry runs the operation again (`false`, the default).
    pub const fn store_server_errors(mut self, store: bool) -> Self {
        self.store_server_errors = store;
        self
    }

    /// How the request body enters the fingerprint.
    pub const fn fingerprint(mut self, mode: FingerprintMode) -> Self {
        self.fingerprint = mode;
        self
    }

    /// Leaves the JSON members these pointers (RFC 6901) name out of the fingerprint: a
    /// request that differs from the first only there is the same request, and is replayed.
    /// For members that are not the request, as a client's timestamp or a trace id; a change
    /// of a member left out is ignored without a word (see
    /// [`fingerprint::members`](crate::fingerprint::members), which says what it risks).
    /// Replaces a selection set before.
    ///
    /// ```
    /// use idem::Policy;
    ///
    /// const PAYMENTS: Policy = Policy::new().fingerprint_omit(&["/clientTimestamp", "/trace/id"]);
    /// assert!(PAYMENTS.validate().is_ok());
    /// // A pointer that cannot name a member is refused.
    /// assert!(Policy::new().fingerprint_omit(&["clientTimestamp"]).validate().is_err());
    /// ```
    pub const fn fingerprint_omit(mut self, pointers: &'static [&'static str]) -> Self {
        self.fingerprint_members = Members::Omit(pointers);
        self
    }

    /// Fingerprints only the JSON members these pointers name, as Powertools' payload
    /// validation does: a request that differs from the first anywhere else is the same
    /// request. Everything else is ignored, a member the API gains later included. Replaces
    /// a selection set before.
    pub const fn fingerprint_only(mut self, pointers: &'static [&'static str]) -> Self {
        self.fingerprint_members = Members::Only(pointers);
        self
    }

    /// Which spellings of the key are accepted.
    pub const fn key_syntax(mut self, syntax: KeySyntax) -> Self {
        self.key_syntax = syntax;
        self
    }

    /// The largest response body kept for replay. A larger response still reaches the first
    /// caller in full; the operation is never run again for its key, and a retry is answered
    /// 410 Problem Details ([`ProblemKind::ResponseNotReplayable`](crate::problem::ProblemKind)).
    pub const fn max_stored_body(mut self, bytes: usize) -> Self {
        self.max_stored_body = bytes;
        self
    }

    /// Whether `Set-Cookie` is stored and replayed (`false` by default: a replay must not hand
    /// the first caller's session to whoever retries).
    pub const fn replay_set_cookie(mut self, replay: bool) -> Self {
        self.replay_set_cookie = replay;
        self
    }

    /// Further response headers never stored nor replayed. Hop-by-hop headers, `Date` and
    /// `Content-Length` are never stored whatever this says.
    pub const fn exclude_headers(mut self, headers: &'static [HeaderName]) -> Self {
        self.exclude_headers = headers;
        self
    }

    /// The `Retry-After` sent with 409 and 503 answers (1 second by default).
    pub const fn retry_after(mut self, after: Duration) -> Self {
        self.retry_after = after;
        self
    }

    /// Makes the service finish an operation its client abandoned (see [docs/steps.md](https://github.com/idem-rs/idem/blob/main/docs/steps.md)): an
    /// operation of several [`Steps`](crate::steps::Steps) that stopped part-way (the process
    /// died, a step failed and may pass later) and that no request took over within `after`
    /// of its lease lapsing is run again by the runtime's resumer, as its recorded principal,
    /// until it completes or a step ends it. Off by default: then only the client's retry
    /// resumes an operation.
    ///
    /// It keeps each request of the route with its record to run it again: the method, the
    /// path and query, the body, the key, the principal, `Content-Type` and the headers named
    /// by [`keep_headers`](Self::keep_headers); never `Authorization`, `Proxy-Authorization`
    /// or `Cookie`.
    pub const fn resume_after(mut self, after: Duration) -> Self {
        self.resume_after = Some(after);
        self
    }

    /// Request headers kept, besides `Content-Type`, for the service to run an abandoned
    /// operation again ([`resume_after`](Self::resume_after)). Headers that carry credentials
    /// are never kept, whatever this says.
    pub const fn keep_headers(mut self, headers: &'static [HeaderName]) -> Self {
        self.keep_headers = headers;
        self
    }

    /// Checks that the policy can work: positive TTL, lease and wait, a TTL no shorter than
    /// the lease, a custom scope name of lowercase letters, digits, `_` and `-` that is
    /// neither `user` nor `global` (`Scope::Custom("user")` would share its keys with
    /// `Scope::User`), and a selection of the fingerprint's members whose every pointer can
    /// name a member ([`Members::validate`]), on a route whose fingerprint reads JSON.
    ///
    /// These are the rules of `#[idempotent]` too: an annotated handler with an invalid
    /// policy does not compile, and `IdempotencyLayer::new` refuses one.
    ///
    /// ```
    /// use idem::{Policy, Scope, policy::PolicyError};
    ///
    /// assert!(Policy::new().scope(Scope::Custom("tenant")).validate().is_ok());
    /// assert_eq!(
    ///     Policy::new().scope(Scope::Custom("user")).validate(),
    ///     Err(PolicyError::ReservedScopeName("user"))
    /// );
    /// assert_eq!(
    ///     Policy::new().scope(Scope::Custom("Tenant")).validate(),
    ///     Err(PolicyError::InvalidScopeName("Tenant"))
    /// );
    /// ```
    pub const fn validate(&self) -> Result<(), PolicyError> {
        if self.ttl.is_zero() {
            return Err(PolicyError::Zero("ttl"));
        }
        if self.lease.is_zero() {
            return Err(PolicyError::Zero("lease"));
        }
        if let OnConflict::Wait(wait) = self.on_conflict
            && wait.is_zero()
        {
            return Err(PolicyError::Zero("on_conflict wait"));
        }
        if let Some(after) = self.resume_after
            && after.is_zero()
        {
            return Err(PolicyError::Zero("resume_after"));
        }
        if self.ttl.as_nanos() < self.lease.as_nanos() {
            return Err(PolicyError::TtlShorterThanLease {
                ttl: self.ttl,
                lease: self.lease,
            });
        }
        if let Err(error) = self.fingerprint_members.validate() {
            return Err(PolicyError::Members(error));
        }
        if !matches!(self.fingerprint_members, Members::All)
            && matches!(self.fingerprint, FingerprintMode::Raw)
        {
            return Err(PolicyError::MembersOfRawBody);
        }
        if let Scope::Custom(name) = self.scope {
            return validate_scope_name(name);
        }
        Ok(())
    }
}

/// The rules of a custom scope name, in a `const fn` so that a policy constant is checked
/// where it is compiled.
const fn validate_scope_name(name: &'static str) -> Result<(), PolicyError> {
    let bytes = name.as_bytes();
    if bytes.is_empty() {
        return Err(PolicyError::InvalidScopeName(name));
    }
    let mut index = 0;
    while index < bytes.len() {
        let byte = bytes[index];
        if !(byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'_' || byte == b'-') {
            return Err(PolicyError::InvalidScopeName(name));
        }
        index += 1;
    }
    if is(bytes, b"user") || is(bytes, b"global") {
        return Err(PolicyError::ReservedScopeName(name));
    }
    Ok(())
}

/// `a == b` for byte strings, which `const fn`s cannot write yet.
const fn is(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut index = 0;
    while index < a.len() {
        if a[index] != b[index] {
            return false;
        }
        index += 1;
    }
    true
}

impl Default for Policy {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_documented_ones() {
        let policy = Policy::default();
        assert_eq!(policy.ttl, Duration::from_secs(86_400));
        assert_eq!(policy.lease, Duration::from_secs(60));
        assert_eq!(policy.scope, Scope::User);
        assert!(policy.required);
        assert_eq!(policy.on_conflict, OnConflict::Reject);
        assert_eq!(policy.on_store_error, OnStoreError::Fail);
        assert!(!policy.store_server_errors);
        assert_eq!(policy.fingerprint, FingerprintMode::Json);
        assert_eq!(policy.fingerprint_members, Members::All);
        assert_eq!(policy.key_syntax, KeySyntax::Lenient);
        assert!(!policy.replay_set_cookie);
        assert_eq!(policy.resume_after, None);
        assert_eq!(policy.validate(), Ok(()));
    }

    #[test]
    fn validate_rejects_what_cannot_work() {
        assert_eq!(
            Policy::new().ttl(Duration::ZERO).validate(),
            Err(PolicyError::Zero("ttl"))
        );
        assert_eq!(
            Policy::new().lease(Duration::ZERO).validate(),
            Err(PolicyError::Zero("lease"))
        );
        assert_eq!(
            Policy::new()
                .on_conflict(OnConflict::Wait(Duration::ZERO))
                .validate(),
            Err(PolicyError::Zero("on_conflict wait"))
        );
        assert_eq!(
            Policy::new().resume_after(Duration::ZERO).validate(),
            Err(PolicyError::Zero("resume_after"))
        );
        let swapped = Policy::new()
            .ttl(Duration::from_secs(30))
            .lease(Duration::from_secs(60));
        assert_eq!(
            swapped.validate(),
            Err(PolicyError::TtlShorterThanLease {
                ttl: Duration::from_secs(30),
                lease: Duration::from_secs(60)
            })
        );
    }

    #[test]
    fn validate_checks_the_fingerprint_members() {
        assert_eq!(Policy::new().fingerprint_omit(&["/ts"]).validate(), Ok(()));
        assert_eq!(
            Policy::new().fingerprint_only(&["/a", "/a"]).validate(),
            Err(PolicyError::Members(MembersError::Repeated("/a")))
        );
        assert_eq!(
            Policy::new()
                .fingerprint(FingerprintMode::Raw)
                .fingerprint_omit(&["/ts"])
                .validate(),
            Err(PolicyError::MembersOfRawBody)
        );
        let last = Policy::new()
            .fingerprint_omit(&["/ts"])
            .fingerprint_only(&["/amount"]);
        assert_eq!(last.fingerprint_members, Members::Only(&["/amount"]));
    }

    #[test]
    fn validate_checks_custom_scope_names() {
        let with = |name| Policy::new().scope(Scope::Custom(name)).validate();
        for valid in ["tenant", "api-key_2", "users", "0"] {
            assert_eq!(with(valid), Ok(()), "{valid}");
        }
        for invalid in ["", "Tenant", "api key", "tenant:1", "é", "user\n"] {
            assert_eq!(with(invalid), Err(PolicyError::InvalidScopeName(invalid)));
        }
        for reserved in ["user", "global"] {
            assert_eq!(
                with(reserved),
                Err(PolicyError::ReservedScopeName(reserved))
            );
            assert_eq!(
                with(reserved).unwrap_err().to_string(),
                format!(
                    "the custom scope name `{reserved}` is reserved: use `Scope::User` or \
                     `Scope::Global`, or another name"
                )
            );
        }
    }
}
