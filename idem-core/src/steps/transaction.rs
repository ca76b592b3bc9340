//! [`Steps::transaction`]: a local step whose writes commit with its recorded output, in a
//! PostgreSQL transaction of its own (feature `postgres`).

use std::borrow::Cow;

use futures_util::future::BoxFuture;
use serde::{Serialize, de::DeserializeOwned};
use sqlx::PgConnection;

use super::{
    StepError, StepErrorKind, Steps,
    journal::{Next, Stop},
};
use crate::{
    problem::ProblemKind,
    store::{StoreError, StoreTransaction, postgres::PostgresTransaction},
};

impl Steps {
    /// A local step in a PostgreSQL transaction of its own: `run` writes on its connection,
    /// and its output is recorded in the same transaction, which then commits. The step is
    /// all or nothing: a process that dies before the commit leaves neither its writes nor its
    /// record, and the next run does it again.
    ///
    /// The transaction lasts for this step only: none is held open across another step (a
    /// 10 s call to a bank holds no connection and no row lock).
    ///
    /// ```no_run
    /// use idem_core::steps::{StepError, Steps};
    ///
    /// # async fn handler(mut steps: Steps, amount: i64) -> Result<i64, StepError> {
    /// let row: i64 = steps
    ///     .transaction("ledger", |conn| Box::pin(async move {
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
    /// [`StepErrorKind`]); 500 `misconfigured` when the runtime's store is not a
    /// [`PostgresStore`](crate::store::PostgresStore).
    pub async fn transaction<T, F>(
        &mut self,
        name: impl Into<Cow<'static, str>>,
        run: F,
    ) -> Result<T, StepError>
    where
        T: Serialize + DeserializeOwned + Send,
        F: for<'c> FnOnce(&'c mut PgConnection) -> BoxFuture<'c, Result<T, StepError>>,
    {
        let name = name.into();
        let (index, held) = match self.next(&name)? {
            Next::Recorded(output) => return self.read(&name, &output),
            Next::Run { index, held } => (index, held),
        };
        let mut transaction = self.begin().await?;
        let Some(postgres) = transaction
            .as_any_mut()
            .downcast_mut::<PostgresTransaction>()
        else {
            let _ = self.context.runtime().rollback(transaction).await;
            return Err(self.misconfigured());
        };
        let output = match run(postgres.connection()).await {
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
            Err(StoreError::Unsupported(_)) => Err(self.misconfigured()),
            Err(error) => {
                self.context.journal().stop(Stop::Retryable);
                Err(self.not_recorded("", &error))
            }
        }
    }

    fn misconfigured(&self) -> StepError {
        tracing::error!(
            "Steps::transaction needs a PostgresStore as the idempotency store, and the \
             runtime's store is another"
        );
        self.context.journal().stop(Stop::Retryable);
        self.error(
            StepErrorKind::Misconfigured,
            ProblemKind::Misconfigured,
            "a step of this route needs a PostgreSQL transaction, and its idempotency store \
             has none",
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
