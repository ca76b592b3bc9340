//! Operations of several steps (see [docs/steps.md](https://github.com/idem-rs/idem/blob/main/docs/steps.md)): each named step of an idempotent handler
//! runs once per operation, and a run that resumes an interrupted operation gets the outputs
//! of the steps that ended instead of running them again.
//!
//! A transfer calls a bank (a *foreign* step, under a key derived from the operation), then
//! writes a ledger row (a *local* step). If the process dies between the two, the bank has
//! moved the money and the ledger knows nothing of it. With [`Steps`], the bank's answer is
//! recorded with the operation's record as soon as it comes; the next run of the operation
//! (the client's retry, or the service's own resumption with
//! [`Policy::resume_after`](crate::Policy::resume_after)) gets it back without calling the
//! bank, and writes the row.
//!
//! ```
//! use axum::{Extension, Json, Router, http::StatusCode, routing::post};
//! use idem::{Idempotency, MemoryStore, idempotent, steps::{StepError, Steps}};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize)]
//! struct BankTransfer { id: String }
//!
//! #[idempotent(scope = "global", resume_after = "5s")]
//! async fn transfer(mut steps: Steps, Json(order): Json<serde_json::Value>)
//!     -> Result<(StatusCode, Json<BankTransfer>), StepError>
//! {
//!     // The bank sees the same key on every run of this operation, and moves the money once.
//!     let moved: BankTransfer = steps
//!         .call("bank-order", |key| async move {
//!             // bank.transfer(&key, &order).await, mapping its failures to
//!             // StepError::retryable (down, timed out) or StepError::terminal (refused).
//!             Ok(BankTransfer { id: format!("bt_for_{}", key.as_str().len()) })
//!         })
//!         .await?;
//!     let row: u64 = steps.local("ledger", || async { Ok(7) }).await?;
//!     # let _ = (row, order);
//!     Ok((StatusCode::CREATED, Json(moved)))
//! }
//!
//! let idem = Idempotency::new(MemoryStore::default());
//! let app: Router = Router::new()
//!     .route("/transfers", post(transfer))
//!     .layer(Extension(idem.clone()));
//! // After the server starts: `idem.resume(app.clone())?` resumes abandoned operations.
//! ```
//!
//! # The rules
//!
//! - A step is named, and each name is reached once per run. Steps run one after another
//!   (`&mut self`), and are recorded in the order they end.
//! - A later run reaches the same steps, in the same order: a step whose output is recorded
//!   gives that output without running. A step under another name, in another place, or an
//!   output that does not read back as the run's type, stops the run with 500 Problem Details
//!   `steps-changed` and an `error` event; the operation is not resumed on its own, and no
//!   output is reused or skipped.
//! - A step's own failure says whether it may pass ([`StepError::retryable`]: the operation
//!   stays open and resumes from that step) or not ([`StepError::terminal`]: the operation
//!   completes with that answer, replayed to every retry).
//! - An operation that has begun a step is never released: when its run ends without a
//!   result (a retryable failure, a 5xx, a panic), its record stays in flight with its steps
//!   and a free lease, so that the next run resumes it.
//! - A handler that runs without a record (no key on a route that does not require one, or a
//!   store failure under `on_store_error = "run"`) runs its steps as plain code.

// A step's error carries the `Response` it answers, returned once per failed step.
#![allow(clippy::result_large_err)]

mod at_most_once;
mod error;
pub(crate) mod journal;
pub(crate) mod lease;
mod local_transaction;
pub(crate) mod resumption;

use std::{borrow::Cow, future::Future};

use axum::{
    extract::FromRequestParts,
    response::{IntoResponse, Response},
};
use http::request::Parts;
use idem_protocol::key::IdempotencyKey;
use serde::{Serialize, de::DeserializeOwned};

use self::journal::{Holder, Next, Stop};
pub use self::{
    error::{StepError, StepErrorKind},
    lease::{LeaseStanding, LeaseView},
    resumption::Resumption,
};
use crate::{
    context::IdempotencyContext,
    problem::ProblemKind,
    scope::StoreKey,
    store::{
        StepSupport, StoreError,
        operation::{MAX_STEP_NAME_LEN, RecordedStep},
    },
};

/// The namespace of the keys foreign steps send: `idem-step:<store key>:<step name>`.
const STEP_KEY_NAMESPACE: &str = "idem-step";

/// The steps of one run of an idempotent handler, as an extractor. See the
/// [module docs](self).
///
/// It reads only the request's parts and the runtime's context, so under `#[idempotent]` it
/// may stand anywhere before the body extractor. A route without idempotency, or whose store
/// keeps no steps, is answered 500 `misconfigured`.
pub struct Steps {
    context: IdempotencyContext,
    resumption: Option<Resumption>,
}

impl Steps {
    /// A step that calls another API: `call` gets the key to send it, derived from the
    /// operation and the step's name (`idem-step:<store key>:<name>`), the same on every run
    /// of this operation in any process, so that the other API runs it once too. Its output
    /// is recorded when it ends.
    ///
    /// # Errors
    ///
    /// The step's own failure, or the runtime's (see [`StepErrorKind`]).
    pub async fn call<T, F, Fut>(
        &mut self,
        name: impl Into<Cow<'static, str>>,
        call: F,
    ) -> Result<T, StepError>
    where
        T: Serialize + DeserializeOwned,
        F: FnOnce(IdempotencyKey) -> Fut,
        Fut: Future<Output = Result<T, StepError>>,
    {
        let name = name.into();
        let (index, held) = match self.next(&name)? {
            Next::Recorded(output) => return self.read(&name, &output),
            // An at-least-once step runs whatever an earlier run's start mark says.
            Next::Run { index, held } | Next::Started { index, held } => (index, held),
        };
        let output = call(foreign_key(held, &name))
            .await
            .map_err(|error| self.failed(error))?;
        self.record(&name, index, held, &output).await?;
        Ok(output)
    }

    /// A local step: `run`'s output is recorded when it ends. Its writes and its record are
    /// two writes, so a process that dies between them runs the step again: make its writes
    /// idempotent, or use [`transaction`](Self::transaction) on PostgreSQL.
    ///
    /// # Errors
    ///
    /// The step's own failure, or the runtime's (see [`StepErrorKind`]).
    pub async fn local<T, F, Fut>(
        &mut self,
        name: impl Into<Cow<'static, str>>,
        run: F,
    ) -> Result<T, StepError>
    where
        T: Serialize + DeserializeOwned,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, StepError>>,
    {
        let name = name.into();
        let (index, held) = match self.next(&name)? {
            Next::Recorded(output) => return self.read(&name, &output),
            // An at-least-once step runs whatever an earlier run's start mark says.
            Next::Run { index, held } | Next::Started { index, held } => (index, held),
        };
        let output = run().await.map_err(|error| self.failed(error))?;
        self.record(&name, index, held, &output).await?;
        Ok(output)
    }

    /// The key a foreign step called `name` sends, for a step that calls the other API
    /// outside [`call`](Self::call). Random when the handler runs without a record.
    pub fn key_for(&self, name: &str) -> IdempotencyKey {
        foreign_key(self.context.journal().held(), name)
    }

    /// The mark of the resumer's run, when the service runs this operation itself.
    pub fn resumption(&self) -> Option<&Resumption> {
        self.resumption.as_ref()
    }

    /// The run's lease, as this process's clock sees it: whether it still holds, for how
    /// long, and its token. `None` when the handler runs without a record.
    ///
    /// A step checks it before it starts (see [docs/steps.md](https://github.com/idem-rs/idem/blob/main/docs/steps.md#a-lease-in-doubt)); a handler asks
    /// before work of its own that a second run must not repeat, and hands the token to a
    /// resource that checks it. The token is fresh at every claim and random, not
    /// increasing: it tells which run wrote, not which is newer. With a conditional write on
    /// a version column, of two runs that read the same version only the first writes, and
    /// the other finds the token of the run that did:
    ///
    /// ```
    /// # use idem::steps::Steps;
    /// # struct Db;
    /// # impl Db {
    /// #     async fn read(&self, _: u64) -> (u64, [u8; 16]) { (1, [0; 16]) }
    /// #     async fn write(&self, _: &str, _: &[&dyn std::fmt::Debug]) -> u64 { 1 }
    /// # }
    /// # async fn reserve(steps: &Steps, db: &Db, order: u64) -> Result<(), &'static str> {
    /// let Some(lease) = steps.lease() else { return Ok(()) }; // no record: nothing to fence
    /// if !lease.holds() {
    ///     return Err("the lease is in doubt: leave the work to the run that takes over");
    /// }
    /// let token = lease.token().to_bytes();
    /// let (version, written_by) = db.read(order).await; // SELECT version, fence ...
    /// if written_by == token {
    ///     return Ok(()); // this run wrote it already
    /// }
    /// let written = db
    ///     .write(
    ///         "UPDATE stock SET reserved = reserved + 1, version = version + 1, fence = $1 \
    ///          WHERE order_id = $2 AND version = $3",
    ///         &[&token, &order, &version],
    ///     )
    ///     .await;
    /// if written == 0 {
    ///     return Err("another run of this operation wrote first");
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn lease(&self) -> Option<LeaseView> {
        self.context.journal().lease()
    }

    /// The journal's next step, or the run's stop as an error.
    fn next(&self, name: &str) -> Result<Next, StepError> {
        if name.is_empty() || name.len() > MAX_STEP_NAME_LEN {
            let why = format!("a step name is 1 to {MAX_STEP_NAME_LEN} bytes long: `{name}`");
            return Err(self.stop(Stop::Changed(why)));
        }
        let next = self.context.journal().next(name);
        let next = next.map_err(|stop| self.answer(&stop))?;
        if let Next::Run { held: Some(_), .. } | Next::Started { held: Some(_), .. } = next {
            self.may_start(name)?;
        }
        Ok(next)
    }

    /// Whether a step that has not started may start: not on a lease in doubt or lost. Two
    /// reads of the clock and a lock, on a step that is about to call or write anyway.
    fn may_start(&self, name: &str) -> Result<(), StepError> {
        let Some(lease) = self.lease() else {
            return Ok(());
        };
        match lease.standing() {
            LeaseStanding::Holds => Ok(()),
            LeaseStanding::Lost => Err(self.stop(Stop::Fenced)),
            LeaseStanding::InDoubt => {
                self.context.journal().stop(Stop::Retryable);
                tracing::warn!(
                    step = name,
                    left_ms = lease.left().as_millis() as u64,
                    "idempotency: a step did not start: the store has not confirmed the run's \
                     lease for long enough; the operation resumes from it"
                );
                Err(self.error(
                    StepErrorKind::LeaseInDoubt,
                    ProblemKind::StoreUnavailable,
                    "the idempotency store has not confirmed this request's hold on its key \
                     recently enough to start its next step; retry with the same \
                     Idempotency-Key after the time in Retry-After",
                ))
            }
        }
    }

    /// A recorded output, read back as the run's type.
    fn read<T: DeserializeOwned>(&self, name: &str, output: &[u8]) -> Result<T, StepError> {
        serde_json::from_slice(output).map_err(|error| {
            self.stop(Stop::Changed(format!(
                "the output recorded for the step `{name}` does not read back as this run's \
                 type: {error}"
            )))
        })
    }

    /// Records the output of the step that just ran.
    async fn record<T: Serialize>(
        &self,
        name: &str,
        index: usize,
        held: Option<Holder>,
        output: &T,
    ) -> Result<(), StepError> {
        let Some(held) = held else {
            return Ok(());
        };
        let step = self.encode(name, output, held.max_output)?;
        self.write(index, held, step).await
    }

    /// Records `step` as step `index` of the record the run holds.
    async fn write(&self, index: usize, held: Holder, step: RecordedStep) -> Result<(), StepError> {
        let recorded = self
            .context
            .runtime()
            .record_step(&held.key, held.token, index, &step)
            .await;
        self.recorded(step, recorded)
    }

    /// The step's output, ready to record, or why it cannot be.
    fn encode<T: Serialize>(
        &self,
        name: &str,
        output: &T,
        max: usize,
    ) -> Result<RecordedStep, StepError> {
        let bytes = serde_json::to_vec(output).map_err(|error| {
            self.stop(Stop::Changed(format!(
                "the output of the step `{name}` cannot be recorded: {error}"
            )))
        })?;
        if bytes.len() > max {
            return Err(self.stop(Stop::Changed(format!(
                "the output of the step `{name}` is {} bytes, more than the route's \
                 max_stored_body ({max})",
                bytes.len()
            ))));
        }
        Ok(RecordedStep::new(name, bytes.into()))
    }

    /// What the store's answer to a step's record leaves to do.
    fn recorded(
        &self,
        step: RecordedStep,
        recorded: Result<(), StoreError>,
    ) -> Result<(), StepError> {
        match recorded {
            Ok(()) => {
                self.context.journal().recorded(step);
                Ok(())
            }
            Err(StoreError::LeaseLost) => Err(self.stop(Stop::Fenced)),
            Err(error) => {
                self.context.journal().stop(Stop::Retryable);
                tracing::warn!(
                    step = step.name(),
                    error = %crate::observe::Chain(&error),
                    "idempotency: a step ran and its output could not be recorded; the \
                     operation resumes from it"
                );
                Err(self.error(
                    StepErrorKind::Store,
                    ProblemKind::StoreUnavailable,
                    "a step of this request ran, and the idempotency store could not record \
                     it; retry with the same Idempotency-Key after the time in Retry-After",
                ))
            }
        }
    }

    /// A step's own failure: the run stops as it says.
    fn failed(&self, error: StepError) -> StepError {
        let stop = match error.kind() {
            StepErrorKind::Terminal | StepErrorKind::OutcomeUnknown => Stop::Terminal,
            StepErrorKind::Changed => Stop::Changed("a step said so".to_owned()),
            StepErrorKind::TakenOver => Stop::Fenced,
            StepErrorKind::Retryable
            | StepErrorKind::Store
            | StepErrorKind::LeaseInDoubt
            | StepErrorKind::Misconfigured => Stop::Retryable,
        };
        self.context.journal().stop(stop);
        error
    }

    /// Stops the run for `stop`, and answers it.
    fn stop(&self, stop: Stop) -> StepError {
        let stop = self.context.journal().stop(stop);
        self.answer(&stop)
    }

    /// The answer of a run that stopped.
    fn answer(&self, stop: &Stop) -> StepError {
        match stop {
            Stop::Changed(why) => self.error(
                StepErrorKind::Changed,
                ProblemKind::StepsChanged,
                format!(
                    "this operation was interrupted and run again, and this run does not match \
                     the steps recorded for it: {why}"
                ),
            ),
            Stop::Fenced => self.error(
                StepErrorKind::TakenOver,
                ProblemKind::RequestInFlight,
                "another request with this Idempotency-Key took the operation over while this \
                 one ran; retry after the time in Retry-After to get its result",
            ),
            // A step already said how it failed; the handler should have stopped.
            Stop::Retryable | Stop::Terminal => self.error(
                StepErrorKind::Changed,
                ProblemKind::StepsChanged,
                "a step was reached after an earlier step of the same run had failed",
            ),
        }
    }

    fn error(
        &self,
        kind: StepErrorKind,
        problem: ProblemKind,
        detail: impl Into<Cow<'static, str>>,
    ) -> StepError {
        let mut answer = self.context.runtime().problem(problem, detail);
        if matches!(
            problem,
            ProblemKind::RequestInFlight | ProblemKind::StoreUnavailable
        ) {
            answer = answer.with_retry_after(self.context.retry_after());
        }
        StepError::new(kind, answer.into_response())
    }
}

/// The key the step `name` of the operation recorded at `operation` sends another API
/// ([`Steps::call`]): `idem-step:<the store key in hex>:<name>`, by
/// [`IdempotencyKey::derive`]. For an operator who looks an operation up at the other API.
///
/// ```
/// use idem::{IdempotencyKey, Principal, Scope, StoreKey, steps::step_key};
///
/// let client_key = IdempotencyKey::new("8e03978e-40d5-43e8-bc93-6894a57f9324")?;
/// let operation = StoreKey::new(&Scope::User, Some(&Principal::new("alice")),
///     &http::Method::POST, "/transfers", &client_key);
/// let sent = step_key(&operation, "bank-order");
/// assert!(sent.as_str().starts_with("idem-step:"));
/// assert!(sent.as_str().ends_with(":bank-order"));
/// # Ok::<(), idem::key::KeyError>(())
/// ```
pub fn step_key(operation: &StoreKey, name: &str) -> IdempotencyKey {
    IdempotencyKey::derive(STEP_KEY_NAMESPACE, [operation.to_hex().as_str(), name])
        .expect("the namespace is a valid constant")
}

/// The key a foreign step sends: [`step_key`], or random when there is no record.
fn foreign_key(held: Option<Holder>, name: &str) -> IdempotencyKey {
    match held {
        Some(held) => step_key(&held.key, name),
        None => IdempotencyKey::random(),
    }
}

impl std::fmt::Debug for Steps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Steps")
            .field("resumption", &self.resumption.is_some())
            .finish_non_exhaustive()
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Steps {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Response> {
        let Some(context) = parts.extensions.get::<IdempotencyContext>().cloned() else {
            tracing::error!("the Steps extractor is used on a route without idempotency");
            return Err(crate::problem::Problem::new(
                ProblemKind::Misconfigured,
                "the Steps extractor is used on a route without idempotency",
            )
            .into_response());
        };
        if context.runtime().store().step_support() == StepSupport::None {
            tracing::error!(
                "the Steps extractor needs a store that keeps steps, and the runtime's store \
                 keeps none (Store::step_support)"
            );
            return Err(context
                .runtime()
                .problem(
                    ProblemKind::Misconfigured,
                    "this route's idempotency store cannot keep the steps of an operation",
                )
                .into_response());
        }
        Ok(Self {
            context,
            resumption: Resumption::of(parts).cloned(),
        })
    }
}
