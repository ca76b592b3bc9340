//! Where idempotency records live (see [docs/contract.md](https://github.com/idem-rs/idem/blob/main/docs/contract.md), *The flow*, *In flight, expiry, store failures* and *Stores*): the [`Store`] trait and its contract.
//!
//! A record is the state of one key: **in flight** (claimed by a request that is running the
//! operation, under a lease) or **completed** (the stored response). The runtime drives a
//! store through five calls: [`claim`](Store::claim) before the handler, [`renew`](Store::renew)
//! while it runs, then [`complete`](Store::complete) or [`release`](Store::release). An
//! operator reaches a record through two more: [`look_up`](Store::look_up) and
//! [`remove`](Store::remove) (see [`held`]).
//!
//! ```
//! use std::{sync::Arc, time::Duration};
//! use idem::store::{Claim, ClaimOutcome, LeaseToken, MemoryStore, Store};
//! # use idem::{fingerprint::{Fingerprint, FingerprintMode}, IdempotencyKey, Scope, StoreKey};
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), idem::store::StoreError> {
//! # let key = StoreKey::new(&Scope::Global, None, &http::Method::POST, "/payments", &IdempotencyKey::new("k").unwrap());
//! # let fingerprint = Fingerprint::compute(&http::Method::POST, "/payments", &http::HeaderMap::new(), b"{}", FingerprintMode::Json);
//! let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
//! let token = LeaseToken::random();
//! let claim = Claim { key: &key, fingerprint: &fingerprint, token, lease: Duration::from_secs(60), ttl: Duration::from_secs(3600), resumable: None };
//! assert!(matches!(store.claim(claim).await?, ClaimOutcome::Claimed));
//! // A second claim with another token finds the first one running.
//! let again = Claim { token: LeaseToken::random(), ..claim };
//! assert!(matches!(store.claim(again).await?, ClaimOutcome::InFlight));
//! # Ok(()) }
//! ```
//!
//! # What a store must guarantee
//!
//! Users write their own stores; the runtime's promise (a handler runs once per key) holds
//! only if every store keeps these rules. The conformance suite, the crate `idem-conformance`,
//! checks them: every store of the idem family runs it, and a store of your own can too.
//!
//! 1. **Atomic claim.** Of any number of concurrent claims of one key, from any number of
//!    processes, at most one answers [`ClaimOutcome::Claimed`]. Checking for a record and
//!    writing the claim are one atomic step (a unique constraint, `SET NX`, a lock).
//! 2. **Visible at once.** When `claim` returns `Claimed`, every later claim of the key, from
//!    anywhere, sees the record. A claim is committed on its own, never inside the handler's
//!    transaction, so a concurrent duplicate sees [`ClaimOutcome::InFlight`] instead of
//!    blocking on a lock.
//! 3. **One fingerprint per key.** A record keeps the fingerprint it was claimed with. A claim
//!    with another fingerprint answers [`ClaimOutcome::Mismatch`] whatever the record's state,
//!    until the record expires or is released.
//! 4. **Leases lapse, and only a takeover fences.** An in-flight record whose lease has lapsed
//!    (its holder died, or stopped renewing) is claimed again by a claim with the same
//!    fingerprint, which replaces the token: the old holder is fenced out. Until such a claim
//!    comes, the holder's token still holds the key: the in-flight record outlives its lease
//!    (rule 6), and the holder's late completion lands.
//! 5. **Fenced writes.** [`complete`](Store::complete), [`renew`](Store::renew) and
//!    [`release`](Store::release) act only while the record is in flight under the caller's
//!    token, and answer [`StoreError::LeaseLost`] otherwise. A holder that lost its lease can
//!    never overwrite or delete the record of the request that took over. One exception makes
//!    completion safe to retry: the holder's completion sent again after the record was
//!    completed under its token (the answer to the first was lost) answers `Ok` and changes
//!    nothing.
//! 6. **TTL.** A record expires `ttl` after its completion (an in-flight record `max(ttl,
//!    lease)` after its claim or last renewal) and then behaves as if it never existed.
//! 7. **Honest errors.** A store answers an error when it does not know the outcome (a
//!    timeout, a dropped connection), never a guess: the runtime fails closed on errors.
//! 8. **Faithful replay.** [`ClaimOutcome::Completed`] carries the stored response exactly as
//!    it was given to `complete`: status, headers in order, body bytes.
//! 9. **Unreadable records are errors.** A record the store cannot read back (a response that
//!    does not decode, a record format version this build does not know, another type at its
//!    key) is answered [`StoreError::Corrupt`], every time: never a panic, never a guess, and
//!    the store does not overwrite it.
//! 10. **No claim a failover could lose.** A store that promises its claims more durability
//!     than its primary's memory (replicas, a synced log) answers `Claimed` only once the claim
//!     has it. A claim that falls short is released by the store and answered
//!     [`StoreError::NotDurable`], so the handler never runs on a claim that a failover could
//!     take back and hand to a retry.
//!
//!
//! A store that keeps the steps of operations of several steps ([`Store::step_support`],
//! see [`operation`] and [docs/steps.md](https://github.com/idem-rs/idem/blob/main/docs/steps.md)) keeps three more:
//!
//! 11. **Steps in order.** [`record_step`](Store::record_step) appends the step at `index` to
//!     the record in flight under the caller's token, and only if the record holds exactly
//!     `index` steps; fenced like rule 5. The same step sent again by its holder (its first
//!     answer was lost) answers `Ok` and changes nothing. A step's output is kept byte for
//!     byte, an empty one too (the [start mark](operation::RecordedStep::start_mark) of a
//!     step called at most once).
//! 12. **Suspended, not released.** [`suspend`](Store::suspend) (fenced) ends the holder's
//!     lease at once and keeps the record in flight with its fingerprint and steps, counting
//!     one suspension more. A claim with the same fingerprint then takes the key over at once
//!     and answers [`ClaimOutcome::Resumed`] with the steps in order and the count of
//!     suspensions; so does a takeover (rule 4) of a record that holds steps. Such a takeover
//!     keeps the record's expiry (at least its lease from now): an operation that never
//!     completes is forgotten a TTL after its first claim, however often it is resumed.
//! 13. **Durable resumption** (stores of [`StepSupport::Durable`] only). A claim's
//!     [`Resumable`] request is kept with the in-flight record until it
//!     completes or is released, and [`due`](Store::due) answers the in-flight records that
//!     keep one, whose lease has lapsed, and whose time has come: `resume_in` after their
//!     last suspension, or `after` past the lapse of a lease that was never suspended. `due`
//!     defers each record it answers by `hold`, so that concurrent calls, from any instance,
//!     do not answer it twice within that time.
//!
//! Every store keeps two more, for the operator's side:
//!
//! 14. **Faithful look-up.** [`look_up`](Store::look_up) answers what a claim of the key would
//!     find, with the store's clock at that moment: nothing for an absent or expired record
//!     (rule 6); a record in flight with when it was first claimed (kept by takeovers and
//!     resumptions), when its lease lapses, when it expires, the names of its steps, its
//!     suspensions and, for a durable store, when it is due for resumption; a completed
//!     record with its status, when it was stored, when it expires, its size and whether its
//!     body was kept. It changes nothing: no lease, expiry or record is touched. A record
//!     whose state, times, steps or response head it cannot read is [`StoreError::Corrupt`]
//!     (rule 9). It never answers the stored body, the steps' outputs or the token.
//! 15. **Removal fences.** [`remove`](Store::remove) deletes the key's record whatever its
//!     state and token, in one atomic step with respect to every other call, and answers what
//!     it removed ([`RecordState`]; nothing for an absent or expired record), an unreadable
//!     record included. From then on the key is as if never claimed: the next claim answers
//!     [`ClaimOutcome::Claimed`] (an operation's steps and kept request went with it, and
//!     [`due`](Store::due) never answers it), and every fenced write under a token that held
//!     it answers [`StoreError::LeaseLost`] (rule 5), its holder's repeated completion
//!     included.
//!
//! A store keeps time on its own clock (the memory store on tokio's, Redis and PostgreSQL on
//! the server's), so leases and TTLs are consistent across every process that shares it.

mod connect;
pub mod held;
pub mod memory;
pub mod operation;
pub mod sweep;

use std::{any::Any, error::Error as StdError, fmt, time::Duration};

use async_trait::async_trait;

pub use self::connect::ConnectError;
pub use self::held::{Held, RecordState};
pub use self::memory::MemoryStore;
pub use self::operation::StepSupport;
use self::operation::{DueOperation, Progress, RecordedStep, Resumable};
use crate::{
    fingerprint::{Fingerprint, FingerprintAlgorithm},
    replay::StoredResponse,
    scope::StoreKey,
};

/// The boxed error a store wraps.
pub type BoxError = Box<dyn StdError + Send + Sync>;

/// A random 128-bit token that names one holder of a key's lease.
///
/// The runtime draws a fresh token for every claim; fenced writes compare it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeaseToken(u128);

impl LeaseToken {
    /// A fresh random token.
    pub fn random() -> Self {
        Self(crate::random::u128())
    }

    /// A token from its 128 bits, as a store reads it back.
    pub const fn from_u128(bits: u128) -> Self {
        Self(bits)
    }

    /// The token's 128 bits.
    pub const fn as_u128(self) -> u128 {
        self.0
    }

    /// The token's 16 bytes, big-endian.
    pub const fn to_bytes(self) -> [u8; 16] {
        self.0.to_be_bytes()
    }
}

impl fmt::Debug for LeaseToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LeaseToken({:032x})", self.0)
    }
}

/// One claim of a key: what [`Store::claim`] is asked to do.
#[derive(Clone, Copy, Debug)]
pub struct Claim<'a> {
    /// The record's key.
    pub key: &'a StoreKey,
    /// The fingerprint of the request that claims it.
    pub fingerprint: &'a Fingerprint,
    /// The token the claim will hold the lease under.
    pub token: LeaseToken,
    /// How long the lease lasts unless renewed.
    pub lease: Duration,
    /// The policy's TTL; an in-flight record lives `max(ttl, lease)`.
    pub ttl: Duration,
    /// The request of a route the service resumes itself, for a store of
    /// [`StepSupport::Durable`] to keep (rule 13); other stores ignore it.
    pub resumable: Option<Resumable<'a>>,
}

impl Claim<'_> {
    /// How long an in-flight record lives in the store: at least its lease, at least the TTL.
    pub fn in_flight_lifetime(&self) -> Duration {
        self.ttl.max(self.lease)
    }
}

/// The answer to a claim.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ClaimOutcome {
    /// The key is now in flight under the claim's token: run the operation.
    Claimed,
    /// The key was taken over from an operation that stopped part-way (rule 12): it is in
    /// flight under the claim's token, and the operation resumes after the steps that ended.
    Resumed(Progress),
    /// The operation already ran: replay this response.
    Completed(StoredResponse),
    /// Another request holds the key and its lease is alive.
    InFlight,
    /// The key was claimed with another fingerprint. Carries the stored fingerprint's
    /// algorithm (`None` when this build does not know it), so a change of algorithm is told
    /// apart from a changed body.
    Mismatch {
        /// The algorithm of the stored fingerprint.
        stored_algorithm: Option<FingerprintAlgorithm>,
    },
}

/// A store failed, or refused a fenced write.
#[derive(Debug)]
#[non_exhaustive]
pub enum StoreError {
    /// The record is not in flight under this token any more: the lease lapsed and another
    /// request took over, the record expired or was completed, or an operator removed it.
    LeaseLost,
    /// The store did not answer in time; the outcome of the call is unknown.
    Timeout(Duration),
    /// The store could not be reached or failed; the outcome of the call is unknown.
    Backend(BoxError),
    /// A transaction could not commit, and the store knows that nothing of it was committed
    /// (a serialization failure, a deferred constraint): the handler's writes and the record's
    /// completion are both gone. Unlike [`Backend`](Self::Backend), the outcome is known, so
    /// the runtime releases the key and a retry runs the operation again.
    RolledBack(BoxError),
    /// A stored record could not be read back.
    Corrupt(BoxError),
    /// The store does not offer this operation.
    Unsupported(&'static str),
    /// A claim reached the store but not the durability the store was configured for (the
    /// replicas that must acknowledge it, a synced append-only file) in time, so a failover or
    /// a crash could lose it (rule 10). The store released it: the outcome is known, the key
    /// is free, and the operation must not run on this claim. The runtime answers 503 with
    /// `Retry-After`, whatever the route's `on_store_error` says: the store is there, and
    /// running without a record would be the very loss the durability setting guards against.
    NotDurable(BoxError),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::LeaseLost => {
                f.write_str("the lease on this key is no longer held by this request")
            }
            Self::Timeout(after) => write!(f, "the store did not answer within {after:?}"),
            Self::Backend(_) => f.write_str("the store failed"),
            Self::RolledBack(_) => f.write_str("the transaction was rolled back"),
            Self::Corrupt(_) => f.write_str("a stored record is corrupt"),
            Self::Unsupported(operation) => write!(f, "this store does not support {operation}"),
            Self::NotDurable(_) => {
                f.write_str("the claim did not reach its durability target, and was released")
            }
        }
    }
}

impl StdError for StoreError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            Self::Backend(error)
            | Self::RolledBack(error)
            | Self::Corrupt(error)
            | Self::NotDurable(error) => Some(&**error),
            Self::LeaseLost | Self::Timeout(_) | Self::Unsupported(_) => None,
        }
    }
}

impl StoreError {
    /// Whether the call may or may not have been applied: a timeout or a backend failure.
    /// The runtime retries such a write until the store answers (or, for a claim, releases
    /// under its token, in case it landed).
    pub fn outcome_unknown(&self) -> bool {
        matches!(self, Self::Timeout(_) | Self::Backend(_))
    }

    /// Wraps a backend error.
    pub fn backend(error: impl Into<BoxError>) -> Self {
        Self::Backend(error.into())
    }

    /// Wraps the error of a transaction known to have rolled back.
    pub fn rolled_back(error: impl Into<BoxError>) -> Self {
        Self::RolledBack(error.into())
    }

    /// Wraps a decoding error.
    pub fn corrupt(error: impl Into<BoxError>) -> Self {
        Self::Corrupt(error.into())
    }
}

/// A pluggable, shared store of idempotency records. See the [module docs](self) for the
/// guarantees an implementation must give.
///
/// The trait is object safe: the runtime holds an `Arc<dyn Store>`.
#[async_trait]
pub trait Store: Send + Sync + fmt::Debug + 'static {
    /// Claims `claim.key` for `claim.token`, or reports the record that is already there.
    async fn claim(&self, claim: Claim<'_>) -> Result<ClaimOutcome, StoreError>;

    /// Stores the response of the operation that holds the key under `token`; the record
    /// then lives for `ttl`. [`StoreError::LeaseLost`] when `token` does not hold the key.
    async fn complete(
        &self,
        key: &StoreKey,
        token: LeaseToken,
        response: &StoredResponse,
        ttl: Duration,
    ) -> Result<(), StoreError>;

    /// Deletes the in-flight record held under `token`, so the key can be claimed afresh.
    /// [`StoreError::LeaseLost`] when `token` does not hold the key.
    async fn release(&self, key: &StoreKey, token: LeaseToken) -> Result<(), StoreError>;

    /// Extends the lease held under `token` to `lease` from now.
    /// [`StoreError::LeaseLost`] when `token` does not hold the key.
    async fn renew(
        &self,
        key: &StoreKey,
        token: LeaseToken,
        lease: Duration,
    ) -> Result<(), StoreError>;

    /// Answers a claim at once, without a future, when the store can: an in-process store
    /// (the memory store) answers here, and the runtime then skips the future's allocation and
    /// the timeout around it. The default answers `None`, and the runtime awaits
    /// [`claim`](Self::claim). A store that answers here answers exactly as `claim` would.
    fn claim_now(&self, claim: Claim<'_>) -> Option<Result<ClaimOutcome, StoreError>> {
        let _ = claim;
        None
    }

    /// [`complete`](Self::complete) at once, as [`claim_now`](Self::claim_now) is for claims.
    fn complete_now(
        &self,
        key: &StoreKey,
        token: LeaseToken,
        response: &StoredResponse,
        ttl: Duration,
    ) -> Option<Result<(), StoreError>> {
        let _ = (key, token, response, ttl);
        None
    }

    /// Opens a transaction in which the handler's own writes and the completion of the record
    /// commit together. Stores without transactions keep the default, which answers
    /// [`StoreError::Unsupported`].
    async fn begin(&self) -> Result<Box<dyn StoreTransaction>, StoreError> {
        Err(StoreError::Unsupported("transactions"))
    }

    /// What the store keeps of operations of several steps (rules 11 to 13). The default,
    /// [`StepSupport::None`], keeps the defaults of the three calls below, which answer
    /// [`StoreError::Unsupported`].
    fn step_support(&self) -> StepSupport {
        StepSupport::None
    }

    /// Records the output of the step at `index` of the operation held under `token` (rule
    /// 11). [`StoreError::LeaseLost`] when `token` does not hold the key, or the record does
    /// not hold exactly `index` steps.
    async fn record_step(
        &self,
        key: &StoreKey,
        token: LeaseToken,
        index: usize,
        step: &RecordedStep,
    ) -> Result<(), StoreError> {
        let _ = (key, token, index, step);
        Err(StoreError::Unsupported("steps"))
    }

    /// Suspends the operation held under `token` (rule 12): its lease ends now, its steps
    /// stay, and a durable store makes it due for resumption `resume_in` from now (never,
    /// with `None`). [`StoreError::LeaseLost`] when `token` does not hold the key.
    async fn suspend(
        &self,
        key: &StoreKey,
        token: LeaseToken,
        resume_in: Option<Duration>,
    ) -> Result<(), StoreError> {
        let _ = (key, token, resume_in);
        Err(StoreError::Unsupported("steps"))
    }

    /// At most `limit` operations due for resumption, each deferred by `hold` (rule 13).
    async fn due(&self, limit: usize, hold: Duration) -> Result<Vec<DueOperation>, StoreError> {
        let _ = (limit, hold);
        Err(StoreError::Unsupported("durable resumption"))
    }

    /// What is held for `key`, changing nothing (rule 14): `None` when a claim would find no
    /// record.
    async fn look_up(&self, key: &StoreKey) -> Result<Option<Held>, StoreError>;

    /// Removes `key`'s record, whatever holds it (rule 15), and answers what it removed:
    /// `None` when there was none. The next claim of the key runs the operation again, and
    /// the holder of a record in flight is fenced.
    async fn remove(&self, key: &StoreKey) -> Result<Option<RecordState>, StoreError>;
}

/// A transaction of a transactional store, shared by the handler's writes and the record's
/// completion. The runtime ends it: with [`complete`](Self::complete) when the response is to
/// be stored, [`commit`](Self::commit) when the request runs without a record, and
/// [`rollback`](Self::rollback) when the handler failed.
#[async_trait]
pub trait StoreTransaction: Send + 'static {
    /// Completes the record held under `token` inside this transaction, then commits.
    /// Fenced like [`Store::complete`]. [`StoreError::RolledBack`] when the commit failed and
    /// nothing was committed; another error leaves the outcome unknown.
    async fn complete(
        self: Box<Self>,
        key: &StoreKey,
        token: LeaseToken,
        response: &StoredResponse,
        ttl: Duration,
    ) -> Result<(), StoreError>;

    /// Commits the handler's writes without a record (the request ran without idempotency).
    async fn commit(self: Box<Self>) -> Result<(), StoreError>;

    /// Rolls the handler's writes back.
    async fn rollback(self: Box<Self>) -> Result<(), StoreError>;

    /// Records the step at `index` inside this transaction, then commits: the step's writes
    /// and its output commit together. Fenced like [`Store::record_step`]; errors as for
    /// [`complete`](Self::complete). The default answers [`StoreError::Unsupported`].
    async fn record_step(
        self: Box<Self>,
        key: &StoreKey,
        token: LeaseToken,
        index: usize,
        step: &RecordedStep,
    ) -> Result<(), StoreError> {
        let _ = (key, token, index, step);
        Err(StoreError::Unsupported("steps in a transaction"))
    }

    /// The connection the handler writes on, for [`Tx`](crate::extract::Tx) and
    /// [`Steps::transaction`](crate::steps::Steps::transaction) to hand it over: the store's
    /// own type (`sqlx::PgConnection` for the PostgreSQL store), which they downcast to the
    /// type the handler asks for.
    fn connection(&mut self) -> &mut (dyn Any + Send);
}

impl fmt::Debug for dyn StoreTransaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StoreTransaction")
    }
}
