//! [`Tx`]: the request's database transaction, as an extractor, on a store with
//! transactions (the PostgreSQL, SQLite and MySQL stores).

use std::{any::Any, borrow::Cow, fmt, time::Duration};

use axum::{
    extract::FromRequestParts,
    response::{IntoResponse, Response},
};
use http::request::Parts;

use crate::{
    context::{IdempotencyContext, TransactionGuard},
    policy::Policy,
    problem::{Problem, ProblemKind},
    runtime::Idempotency,
    store::StoreError,
};

/// An extractor that gives a handler the request's database transaction: the handler's
/// writes commit together with the idempotency record, or not at all. It needs a store with
/// transactions ([`Store::begin`](crate::store::Store::begin)): the PostgreSQL store's
/// connection is a `sqlx::PgConnection`.
///
/// Extracting it does not touch the database: the transaction begins on the first call of
/// [`conn`](Self::conn), in the handler's body. With `#[idempotent]` a handler's parts
/// extractors run before the key is claimed, so that replays and rejected requests pass
/// through them; beginning there would hold a connection for requests that never run.
///
/// The runtime ends the transaction once the handler has returned: it completes the record in
/// it and commits when the response is the operation's result; it rolls back when the key is
/// released (a 5xx response by default, [`NoStore`](crate::replay::NoStore), a panic). If the process
/// dies first, the database rolls back, the lease lapses, and a retry runs the handler again.
///
/// ```no_run
/// use axum::{Json, Router, http::StatusCode, routing::post};
/// use idem::{Idempotency, IdempotencyLayer, Policy, Scope, extract::Tx, postgres::PostgresStore};
/// use serde_json::{Value, json};
/// use sqlx::PgConnection;
///
/// async fn create_payment(
///     mut tx: Tx,
///     Json(body): Json<Value>,
/// ) -> Result<(StatusCode, Json<Value>), AppError> {
///     let id: i64 = sqlx::query_scalar("INSERT INTO payments (amount) VALUES ($1) RETURNING id")
///         .bind(body["amount"].as_i64())
///         .fetch_one(tx.conn::<PgConnection>().await?)
///         .await?;
///     Ok((StatusCode::CREATED, Json(json!({ "id": id }))))
/// }
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let store = PostgresStore::connect("postgres://localhost/app").await?;
/// store.migrate().await?;
/// let idem = Idempotency::new(store);
/// let app: Router = Router::new()
///     .route("/payments", post(create_payment))
///     .route_layer(IdempotencyLayer::new(idem, Policy::new().scope(Scope::Global)));
/// # drop(app); Ok(()) }
///
/// /// The application's error type: a `TxError` answers its own Problem Details.
/// enum AppError {
///     Tx(idem::extract::TxError),
///     Database(sqlx::Error),
/// }
/// # impl From<idem::extract::TxError> for AppError {
/// #     fn from(error: idem::extract::TxError) -> Self { Self::Tx(error) }
/// # }
/// # impl From<sqlx::Error> for AppError {
/// #     fn from(error: sqlx::Error) -> Self { Self::Database(error) }
/// # }
/// # impl axum::response::IntoResponse for AppError {
/// #     fn into_response(self) -> axum::response::Response {
/// #         match self {
/// #             Self::Tx(error) => error.into_response(),
/// #             Self::Database(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
/// #         }
/// #     }
/// # }
/// ```
pub struct Tx {
    context: IdempotencyContext,
    guard: Option<TransactionGuard>,
}

impl Tx {
    /// The transaction's connection, for the handler's queries
    /// (`.execute(tx.conn::<PgConnection>().await?)`), beginning the transaction on first use.
    /// `C` is the store's connection type: `sqlx::PgConnection` for the PostgreSQL store.
    ///
    /// Errors are [`TxError`]s, which answer Problem Details: 503 when the database cannot be
    /// reached (the key is then released, so a retry runs again), 500 when the store has no
    /// transactions or its connection is not a `C`.
    pub async fn conn<C: Any + Send>(&mut self) -> Result<&mut C, TxError> {
        if self.guard.is_none() {
            let guard =
                self.context.transaction().await.map_err(|error| {
                    TxError::new(TxErrorKind::Begin(error), Some(&self.context))
                })?;
            self.guard = Some(guard);
        }
        let transaction = self
            .guard
            .as_mut()
            .and_then(|guard| guard.as_deref_mut())
            .ok_or_else(|| TxError::new(TxErrorKind::Ended, Some(&self.context)))?;
        transaction.connection().downcast_mut::<C>().ok_or_else(|| {
            let kind = TxErrorKind::OtherConnection {
                asked: std::any::type_name::<C>(),
            };
            TxError::new(kind, Some(&self.context))
        })
    }
}

impl Tx {
    /// The transaction of the call whose extensions are `extensions`: what a gRPC method
    /// under `#[idempotent]` or `GrpcIdempotencyLayer` writes in
    /// (`Tx::from_extensions(request.extensions())?`), as an axum handler takes `Tx` as an
    /// argument. Fails with [`TxErrorKind::NoContext`] where the call has no idempotency.
    pub fn from_extensions(extensions: &http::Extensions) -> Result<Self, TxError> {
        let context = extensions
            .get::<IdempotencyContext>()
            .cloned()
            .ok_or_else(|| TxError::new(TxErrorKind::NoContext, None))?;
        Ok(Self {
            context,
            guard: None,
        })
    }
}

impl fmt::Debug for Tx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tx")
            .field("begun", &self.guard.is_some())
            .finish_non_exhaustive()
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Tx {
    type Rejection = TxError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Self::from_extensions(&parts.extensions)
    }
}

/// Why [`Tx`] could not give the handler its transaction. Answers Problem Details, with the
/// route's `Retry-After` and the runtime's problem type URIs.
///
/// ```no_run
/// use axum::response::IntoResponse;
/// use idem::extract::{Tx, TxError, TxErrorKind};
/// use sqlx::PgConnection;
///
/// async fn handler(mut tx: Tx) -> axum::response::Response {
///     match tx.conn::<PgConnection>().await {
///         Ok(_connection) => axum::http::StatusCode::CREATED.into_response(),
///         // 503 with Retry-After when the database cannot be reached; 500 when the route or
///         // the store is set up wrong.
///         Err(error) if matches!(error.kind(), TxErrorKind::Begin(_)) => error.into_response(),
///         Err(error) => error.into_response(),
///     }
/// }
/// ```
#[derive(Debug)]
pub struct TxError {
    kind: TxErrorKind,
    /// The runtime and the route's `Retry-After`, when the request has them.
    answers: Option<(Idempotency, Duration)>,
}

impl fmt::Display for TxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.kind)
    }
}

impl std::error::Error for TxError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.kind)
    }
}

/// What went wrong, in a [`TxError`].
#[derive(Debug)]
#[non_exhaustive]
pub enum TxErrorKind {
    /// The transaction could not be begun: the database is unreachable, the pool exhausted.
    /// Answers 503 with `Retry-After`; 500 when the store has no transactions at all (the
    /// memory and Redis stores).
    Begin(StoreError),
    /// The route has no idempotency runtime (no `IdempotencyLayer`, no `#[idempotent]`).
    /// Answers 500.
    NoContext,
    /// The store's connection is not the type the handler asked for (a handler written for
    /// `sqlx::PgConnection` on another store). Answers 500.
    OtherConnection {
        /// The type the handler asked for.
        asked: &'static str,
    },
    /// The runtime already ended the transaction (a task kept the `Tx` past the handler).
    /// Answers 500.
    Ended,
}

impl fmt::Display for TxErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Begin(_) => f.write_str("the database transaction could not be begun"),
            Self::NoContext => {
                f.write_str("the Tx extractor is used on a route without idempotency")
            }
            Self::OtherConnection { asked } => write!(
                f,
                "the Tx extractor was asked for a `{asked}`, and the idempotency store's \
                 connection is another type"
            ),
            Self::Ended => f.write_str("the request's transaction has already ended"),
        }
    }
}

impl std::error::Error for TxErrorKind {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Begin(error) => Some(error),
            Self::NoContext | Self::OtherConnection { .. } | Self::Ended => None,
        }
    }
}

impl TxError {
    fn new(kind: TxErrorKind, context: Option<&IdempotencyContext>) -> Self {
        Self {
            kind,
            answers: context.map(|context| (context.runtime().clone(), context.retry_after())),
        }
    }

    /// What went wrong.
    pub fn kind(&self) -> &TxErrorKind {
        &self.kind
    }

    fn problem(&self, kind: ProblemKind, detail: impl Into<Cow<'static, str>>) -> Problem {
        match &self.answers {
            Some((idem, _)) => idem.problem(kind, detail),
            None => Problem::new(kind, detail),
        }
    }
}

impl TxError {
    /// The Problem this error answers, logged as it is made.
    pub(crate) fn into_problem(self) -> Problem {
        match &self.kind {
            // A store without transactions is a misconfiguration, not an outage.
            TxErrorKind::Begin(StoreError::Unsupported(_)) => {
                tracing::error!(
                    "the Tx extractor needs an idempotency store with transactions (PostgreSQL, \
                     SQLite, MySQL), and the runtime's store has none"
                );
                self.problem(
                    ProblemKind::Misconfigured,
                    "the Tx extractor needs an idempotency store with transactions",
                )
            }
            TxErrorKind::Begin(error) => {
                tracing::warn!(
                    error = %crate::observe::Chain(error),
                    "the request's transaction could not be begun"
                );
                let retry_after = self
                    .answers
                    .as_ref()
                    .map_or(Policy::new().retry_after, |(_, after)| *after);
                self.problem(
                    ProblemKind::StoreUnavailable,
                    "the database could not be reached, so the request was not run; retry \
                     with the same Idempotency-Key",
                )
                .with_retry_after(retry_after)
            }
            misconfigured => {
                tracing::error!(error = %misconfigured, "Tx extractor misconfigured");
                self.problem(ProblemKind::Misconfigured, misconfigured.to_string())
            }
        }
    }
}

impl IntoResponse for TxError {
    fn into_response(self) -> Response {
        self.into_problem().into_response()
    }
}
