//! [`Steps::at_most_once`]: a foreign step that is never called twice for one operation, for
//! an API that cannot tell a repeated call from a new one (an email, an SMS, a payment API
//! without keys).
//!
//! The step records a *start mark* before it calls ([`RecordedStep::start_mark`]), and its
//! output after the mark when it ends: two step records, through the store calls every store
//! already has. A later run that finds the mark without the end knows the call was sent, or
//! may have been, and that nobody learned what it did. It does not call again: the operation
//! ends with 502 `step-outcome-unknown`, or a step of the handler's finds the outcome out.

use std::{borrow::Cow, future::Future};

use idem_protocol::key::IdempotencyKey;
use serde::{Serialize, de::DeserializeOwned};

use super::{StepError, StepErrorKind, Steps, foreign_key, journal::Next};
use crate::{problem::ProblemKind, store::operation::RecordedStep};

/// The `ask` of a step that has none.
type NoAsk<T> = fn(IdempotencyKey) -> std::future::Ready<Result<T, StepError>>;

impl Steps {
    /// A step that calls another API **at most once** per operation: `call` gets the key of
    /// [`call`](Self::call), and the step records that it started before it calls. A run
    /// that finds it started by an earlier run and not ended (the process died, or the answer
    /// never came) does not call again: the operation completes with 502
    /// `step-outcome-unknown`, replayed to every retry. For an API that cannot deduplicate
    /// by a key, where a second call is worse than an unknown outcome; see
    /// [docs/steps.md](https://github.com/idem-rs/idem/blob/main/docs/steps.md#at-least-once-or-at-most-once) for when to choose which.
    ///
    /// A failure of the call, of either kind, is its end for this purpose: after a
    /// [retryable](StepError::retryable) one the operation resumes, and its next run finds
    /// the step started and not ended (whether the failed call reached the other API is
    /// what idem cannot know). A step whose start mark the store did not take is not called.
    ///
    /// ```
    /// # use idem::steps::{StepError, Steps};
    /// # async fn send_sms(_: &str, _: &str) -> Result<String, StepError> { Ok("sm_1".into()) }
    /// # async fn handler(mut steps: Steps) -> Result<String, StepError> {
    /// // The SMS gateway has no idempotency keys: a second call sends a second SMS.
    /// let sent: String = steps
    ///     .at_most_once("sms", |key| async move {
    ///         send_sms("+4412345678", &format!("your code; ref {}", key.as_str())).await
    ///     })
    ///     .await?;
    /// # Ok(sent) }
    /// ```
    ///
    /// # Errors
    ///
    /// The step's own failure, [`StepErrorKind::OutcomeUnknown`] when an earlier run started
    /// it, or the runtime's (see [`StepErrorKind`]).
    pub async fn at_most_once<T, F, Fut>(
        &mut self,
        name: impl Into<Cow<'static, str>>,
        call: F,
    ) -> Result<T, StepError>
    where
        T: Serialize + DeserializeOwned,
        F: FnOnce(IdempotencyKey) -> Fut,
        Fut: Future<Output = Result<T, StepError>>,
    {
        self.once(name.into(), call, None::<NoAsk<T>>).await
    }

    /// [`at_most_once`](Self::at_most_once), and when an earlier run started the step and
    /// did not end it, `ask` finds its outcome out instead of the operation ending unknown:
    /// it gets the same key the call sent (send it as the call's reference), asks the other
    /// API what became of it, and gives the step's output (it may call again, if the other
    /// API says nothing arrived), a retryable failure (ask again later), or a terminal one.
    /// Its output is recorded as the step's.
    ///
    /// ```
    /// # use idem::steps::{StepError, Steps};
    /// # async fn charge(_: &str) -> Result<String, StepError> { Ok("ch_1".into()) }
    /// # async fn find_charge(_: &str) -> Result<Option<String>, StepError> { Ok(None) }
    /// # async fn handler(mut steps: Steps) -> Result<String, StepError> {
    /// let charge_id: String = steps
    ///     .at_most_once_or_ask(
    ///         "charge",
    ///         |key| async move { charge(key.as_str()).await },
    ///         // Was a charge made under our reference? If not, make it now.
    ///         |key| async move {
    ///             match find_charge(key.as_str()).await? {
    ///                 Some(found) => Ok(found),
    ///                 None => charge(key.as_str()).await,
    ///             }
    ///         },
    ///     )
    ///     .await?;
    /// # Ok(charge_id) }
    /// ```
    ///
    /// # Errors
    ///
    /// As for [`at_most_once`](Self::at_most_once), with `ask`'s failure in place of
    /// [`StepErrorKind::OutcomeUnknown`].
    pub async fn at_most_once_or_ask<T, F, Fut, A, AskFut>(
        &mut self,
        name: impl Into<Cow<'static, str>>,
        call: F,
        ask: A,
    ) -> Result<T, StepError>
    where
        T: Serialize + DeserializeOwned,
        F: FnOnce(IdempotencyKey) -> Fut,
        Fut: Future<Output = Result<T, StepError>>,
        A: FnOnce(IdempotencyKey) -> AskFut,
        AskFut: Future<Output = Result<T, StepError>>,
    {
        self.once(name.into(), call, Some(ask)).await
    }

    async fn once<T, F, Fut, A, AskFut>(
        &mut self,
        name: Cow<'static, str>,
        call: F,
        ask: Option<A>,
    ) -> Result<T, StepError>
    where
        T: Serialize + DeserializeOwned,
        F: FnOnce(IdempotencyKey) -> Fut,
        Fut: Future<Output = Result<T, StepError>>,
        A: FnOnce(IdempotencyKey) -> AskFut,
        AskFut: Future<Output = Result<T, StepError>>,
    {
        let (index, held) = match self.next(&name)? {
            Next::Recorded(output) => return self.read(&name, &output),
            Next::Started { index, held } => {
                found_started(&name, ask.is_some());
                let Some(ask) = ask else {
                    return Err(self.outcome_unknown(&name));
                };
                let output = ask(foreign_key(held, &name))
                    .await
                    .map_err(|error| self.failed(error))?;
                self.record(&name, index, held, &output).await?;
                return Ok(output);
            }
            Next::Run { index, held } => (index, held),
        };
        // The mark first: once the call may have been sent, no run calls again.
        if let Some(held) = held {
            self.write(index, held, RecordedStep::start_mark(name.as_ref()))
                .await?;
        }
        let output = call(foreign_key(held, &name))
            .await
            .map_err(|error| self.failed(error))?;
        self.record(&name, index + 1, held, &output).await?;
        Ok(output)
    }

    /// Ends the operation with 502 `step-outcome-unknown`, for the step `name`.
    fn outcome_unknown(&self, name: &str) -> StepError {
        let answer = self.error(
            StepErrorKind::OutcomeUnknown,
            ProblemKind::StepOutcomeUnknown,
            format!(
                "the step `{name}` of this operation calls another service at most once; an \
                 earlier run started it and did not learn its outcome, so it is not called \
                 again"
            ),
        );
        self.failed(answer)
    }
}

/// Logs a step found started and not ended; `asking` when a step of the handler's finds its
/// outcome out.
fn found_started(name: &str, asking: bool) {
    tracing::warn!(
        step = name,
        asking,
        "idempotency: a step called at most once was started by an earlier run that did not \
         record its end; it is not called again"
    );
}
