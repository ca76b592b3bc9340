//! An annotated handler, whichever door it is called through: what `#[idempotent]` makes of
//! an async function, and the machinery both of its doors share, the HTTP one
//! ([`attribute`](crate::door::attribute), an axum handler) and the message one
//! ([`message`](crate::message), a broker's consumer).
//!
//! An annotated handler becomes a constant of type [`Idempotent<F>`], where `F` is a `fn`
//! pointer type: the handler's argument types and its output, boxed
//! (`fn(State<Db>, Json<New>) -> HandlerFuture<Payment>`). It dereferences to `F`, so a test
//! calls it as it would call the function: `create_payment(State(db), Json(new)).await`.
//!
//! - [`handler`]: the handler's boxed future, and calling it through its `fn` pointer.
//! - [`arguments`]: extracting its arguments in two steps around the claim of the key.
//! - [`last_argument`]: whether its last argument is a guard that runs before every replay.
//! - [`door`]: the annotated handler's [`Door`](crate::flow::Door), what it supplies to the
//!   flow.
//!
//! Nothing here is public API: the expansion names these items through `__private`.

// A refusal or an extractor's rejection is a `Response`, returned once per request; boxing it
// would cost an allocation on every refused request to save stack space nobody misses.
#![allow(clippy::result_large_err)]

pub(crate) mod arguments;
pub(crate) mod door;
pub(crate) mod handler;
pub(crate) mod last_argument;

use std::{fmt, ops::Deref};

use crate::policy::Policy;

/// An annotated handler: its policy and its original body, called through the `fn` pointer
/// `F`.
pub struct Idempotent<F> {
    policy: Policy,
    call: F,
    last_runs_on_replay: fn() -> bool,
}

impl<F> Idempotent<F> {
    /// The handler for `policy`, running `call` once its arguments are extracted.
    /// `last_runs_on_replay` says whether the last argument is extracted before the claim,
    /// on every request (see [`LastArgument::runs_on_replay`](last_argument::LastArgument)).
    ///
    /// An invalid policy is a compile error where the constant is defined: this is where
    /// `#[idempotent]` and [`Policy::validate`] share their rules.
    pub const fn new(policy: Policy, call: F, last_runs_on_replay: fn() -> bool) -> Self {
        if let Err(error) = policy.validate() {
            panic!("{}", error.summary());
        }
        Self {
            policy,
            call,
            last_runs_on_replay,
        }
    }

    /// The handler's policy, for tests of what the attribute expands to.
    pub const fn policy(&self) -> Policy {
        self.policy
    }

    /// Whether the last argument runs before every replay (a guard or a parts extractor)
    /// rather than only before the handler (a [`PureBody`](crate::extract::PureBody)).
    pub fn last_runs_on_replay(&self) -> bool {
        (self.last_runs_on_replay)()
    }
}

/// A test calls the handler as the function it was written as.
impl<F> Deref for Idempotent<F> {
    type Target = F;

    fn deref(&self) -> &F {
        &self.call
    }
}

impl<F: Copy> Clone for Idempotent<F> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<F: Copy> Copy for Idempotent<F> {}

impl<F> fmt::Debug for Idempotent<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Idempotent")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}
