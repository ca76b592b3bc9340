//! [`Steps::transaction`]: a local step whose writes commit with its recorded output, in a
//! database transaction of its own, on a store with transactions.

use std::{any::Any, borrow::Cow};

use futures_util::future::BoxFuture;
use serde::{Serialize, de::DeserializeOwned};

use super::{
    StepError, StepErrorKind, Steps,
    journal::{Next, Stop},
};
use crate::{
    problem::ProblemKind,
    store::{StoreError, StoreTransaction},
};

impl Steps {
    /// A local step in a database transaction of its own: `run` writes on its connection,
    /// and its output is recorded in the same transaction, which then commits. The step is
    /// all or nothing: a process that dies before the commit leaves neither its writes nor its
    /// record, and the next run does it again. `C` is the store's connection type
    /// (`sqlx::PgConnection` for the PostgreSQL store), named by the closure's argument.
    ///
    /// The transaction lasts for this step only: none is held open across another step (a
    /// 10 s call to a bank holds no connection and no row lock).
    ///
    /// ```no_run
    /// use idem::steps::{StepError, Steps};
    /// use sqlx::PgConnection;
    ///
    /// # async fn handler(mut steps: Steps, amount: i64) -> Result<i64, StepError> {
    /// let row: i64 = steps
    ///     .transaction("ledger", |conn: &mut PgConnection| Box::pin(async move {
    ///         sqlx::query_scalar("INSERT INTO ledger (amount) VALUES ($1) RETURNING id")
    ///             .bind(amount)
    ///             .fetch_one(conn)
    ///             .await
    ///             .map_err(|_| StepError::retryable(axum::http::StatusCode::SERVICE_UNAVAILABLE))
    ///     }))
    ///     .await?;
    /// # Ok(row) }
    /// ```
    ///
    /// # Errors
    ///
    /// The step's own failure (its writes roll back), or the runtime's (see
    /// [`StepErrorKind`]); 500 `misconfigured` when the runtime's store has no transactions,
    /// or its connection is not a `C`.
    pub async fn transaction<C, T, F>(
        &mut self,
        name: impl Into<Cow<'static, str>>,
        run: F,
    ) -> Result<T, StepError>
    where
        C: Any + Send,
        T: Serialize + DeserializeOwned + Send,
        F: for<'c> FnOnce(&'c mut C) -> BoxFuture<'c, Result<T, StepError>>,
    {
        let name = name.into();
        let (index, held) = match self.next(&name)? {
            Next::Recorded(output) => return self.read(&name, &output),
            // A start mark under this name: this step runs whatever an earlier run did.
            Next::Run { index, held } | Next::Started { index, held } => (index, held),
        };
        let mut transaction = self.begin().await?;
        let Some(connection) = transaction.connection().downcast_mut::<C>() else {
            let _ = self.context.runtime().rollback(transaction).await;
            return Err(self.misconfigured(std::any::type_name::<C>()));
        };
        let output = match run(connection).await {
            Ok(output) => output,
            Err(error) => {
                // Whatever the step wrote goes; a failed rollback ends the connection, which
                // rolls back as well.
                let _ = self.context.runtime().rollback(transaction).await;
                return Err(self.failed(error));
            }
        };
        let idem = self.context.runtime().clone();
        let Some(held) = held else {
            // No record to keep the output in: the step's writes commit on their own.
            return match idem.commit(transaction).await {
                Ok(()) => Ok(output),
                Err(error) => Err(self.not_recorded(&name, &error)),
            };
        };
        let step = match self.encode(&name, &output, held.max_output) {
            Ok(step) => step,
            Err(error) => {
                let _ = idem.rollback(transaction).await;
                return Err(error);
            }
        };
        let recorded = idem
            .record_step_in(transaction, &held.key, held.token, index, &step)
            .await;
        if let Err(StoreError::RolledBack(why)) = &recorded {
            // Nothing committed, and the outcome is known: the next run does the step again.
            self.context.journal().stop(Stop::Retryable);
            return Err(self.not_recorded(&name, &**why));
        }
        self.recorded(step, recorded).map(|()| output)
    }

    /// The step's transaction, or the answer when there is none.
    async fn begin(&self) -> Result<Box<dyn StoreTransaction>, StepError> {
        match self.context.runtime().begin().await {
            Ok(transaction) => Ok(transaction),
            Err(StoreError::Unsupported(_)) => Err(self.misconfigured("a transaction")),
            Err(error) => {
                self.context.journal().stop(Stop::Retryable);
                Err(self.not_recorded("", &error))
            }
        }
    }

    /// A step that asked for what the store does not give: a transaction, or a connection
    /// of the type `asked`.
    fn misconfigured(&self, asked: &str) -> StepError {
        tracing::error!(
            asked,
            "Steps::transaction asked the idempotency store for a connection it does not give: \
             the store has no transactions, or its connection is of another type"
        );
        self.context.journal().stop(Stop::Retryable);
        self.error(
            StepErrorKind::Misconfigured,
            ProblemKind::Misconfigured,
            "a step of this route needs a database transaction that its idempotency store \
             does not give",
        )
    }

    /// A step whose transaction did not commit: it resumes from that step.
    fn not_recorded(&self, name: &str, error: &(dyn std::error::Error + 'static)) -> StepError {
        tracing::warn!(
            step = name,
            error = %crate::observe::Chain(error),
            "idempotency: a step's transaction did not commit; the operation resumes from it"
        );
        self.context.journal().stop(Stop::Retryable);
        self.error(
            StepErrorKind::Store,
            ProblemKind::StoreUnavailable,
            "a step of this request could not commit its writes; retry with the same \
             Idempotency-Key after the time in Retry-After",
        )
    }
}
