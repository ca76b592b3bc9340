//! The client side of a gRPC door (feature `grpc`): one unary call as one operation, sent
//! with one key on every attempt and retried as [`RetryPolicy::send`] retries a POST.
//!
//! ```no_run
//! # async fn run(mut client: impl Clone) -> Result<(), idem_client::grpc::GrpcError> {
//! use idem_client::{IdempotencyKey, RetryPolicy};
//! # #[derive(Clone)] struct CreatePaymentRequest;
//! # async fn create_payment<C>(_: &mut C, _: tonic::Request<CreatePaymentRequest>)
//! #     -> Result<tonic::Response<()>, tonic::Status> { unimplemented!() }
//! let key = IdempotencyKey::random();
//! let answer = RetryPolicy::new()
//!     .call_grpc(&key, CreatePaymentRequest, |request| {
//!         let mut client = client.clone();
//!         async move { create_payment(&mut client, request).await }
//!     })
//!     .await?;
//! println!("after {} attempt(s), replayed: {}", answer.attempts(), answer.is_replayed());
//! # Ok(()) }
//! ```
//!
//! Every attempt carries the key as `idempotency-key` metadata (in the policy's
//! [`KeyForm`](crate::KeyForm)), a clone of the same message, and the attempt timeout as its
//! deadline (`grpc-timeout`).
//!
//! | the attempt met | retried | why |
//! | --- | --- | --- |
//! | `OK` | no: done | |
//! | `UNAVAILABLE` (the server, or no connection at all) | yes, after its `RetryInfo` if given | the call may or may not have run; the key makes sending it again safe |
//! | `ABORTED` | yes, after its `RetryInfo` | the first call with the key is still running; the retry gets its result |
//! | `DEADLINE_EXCEEDED`, or `CANCELLED` by the attempt's own timeout | yes | no answer in time: the server goes on, and the retry collects its result |
//! | `RESOURCE_EXHAUSTED` with a `RetryInfo` | yes, after it | the server asks the client to slow down, and says when to come back |
//! | a status marked `idempotent-replayed: true` | no | it is the stored result of the key: every retry gets it again |
//! | `FAILED_PRECONDITION` whose `ErrorInfo` reason is `KEY_REUSED` | no: [`GrpcError::is_key_reused`] | the key was used for another request: a bug in the caller |
//! | every other code | no | the request is wrong, or the server says a retry would not help |
//!
//! The wait before retry `n` is at least the `RetryInfo` delay and at least the policy's
//! jittered backoff; no wait begins that would end after the deadline.

use std::{future::Future, time::Duration};

use tokio::time::Instant;
use tonic::{Code, Request, Response, Status, metadata::MetadataValue};
use tonic_types::StatusExt;

use crate::{IdempotencyKey, ProblemKind, RetryPolicy, backoff};

/// The answer that ended a call: the response, and what it took.
#[derive(Debug)]
pub struct GrpcAnswer<R> {
    response: Response<R>,
    attempts: u32,
}

impl<R> GrpcAnswer<R> {
    /// The response.
    pub fn response(&self) -> &Response<R> {
        &self.response
    }

    /// The response, taken.
    pub fn into_response(self) -> Response<R> {
        self.response
    }

    /// How many attempts were sent.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Whether the server replayed a stored answer (`idempotent-replayed: true`).
    pub fn is_replayed(&self) -> bool {
        is_replayed(&self.response.metadata().clone().into_headers())
    }
}

/// Why a call ended without `OK`: the status of its last attempt, and what it took.
#[derive(Debug, thiserror::Error)]
#[error("{status} (after {attempts} attempt(s))")]
pub struct GrpcError {
    status: Status,
    attempts: u32,
}

impl GrpcError {
    /// The last attempt's status.
    pub fn status(&self) -> &Status {
        &self.status
    }

    /// How many attempts were sent.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The idem problem kind the status names in its `ErrorInfo`, if it is one of idem's.
    pub fn problem_kind(&self) -> Option<ProblemKind> {
        problem_kind(&self.status)
    }

    /// Whether the key had been used for another request: a bug in the caller.
    pub fn is_key_reused(&self) -> bool {
        self.problem_kind() == Some(ProblemKind::KeyReused)
    }

    /// Whether the status is a stored answer of the key, replayed.
    pub fn is_replayed(&self) -> bool {
        is_replayed(&self.status.metadata().clone().into_headers())
    }
}

fn problem_kind(status: &Status) -> Option<ProblemKind> {
    let info = status.get_details_error_info()?;
    (info.domain == idem_protocol::problem::GRPC_ERROR_DOMAIN)
        .then(|| ProblemKind::from_reason(&info.reason))
        .flatten()
}

fn is_replayed(headers: &http::HeaderMap) -> bool {
    headers
        .get("idempotent-replayed")
        .is_some_and(|value| value == "true")
}

/// What a status calls for, and the wait the server asked for.
fn verdict(status: &Status, timed_out: bool) -> (bool, Option<Duration>) {
    let asked = status
        .get_details_retry_info()
        .and_then(|retry| retry.retry_delay);
    if is_replayed(&status.metadata().clone().into_headers()) {
        return (false, None);
    }
    let retry = match status.code() {
        Code::Unavailable | Code::Aborted | Code::DeadlineExceeded => true,
        Code::Cancelled => timed_out,
        Code::ResourceExhausted => asked.is_some(),
        _ => false,
    };
    (retry, asked)
}

impl RetryPolicy {
    /// Calls a unary gRPC method as one operation under `key`: `call` sends one attempt
    /// (`client.create_payment(request)`), and is called again, with a request carrying the
    /// same key and a clone of the same `message`, for as long as the table of the [module
    /// docs](crate::grpc) says to retry, within the policy's attempts and deadline.
    ///
    /// A message with `map` fields encodes the same on every attempt only if its maps do:
    /// prost's `HashMap` fields keep their order in a clone, which is what this sends.
    pub async fn call_grpc<M, R, F, Fut>(
        &self,
        key: &IdempotencyKey,
        message: M,
        mut call: F,
    ) -> Result<GrpcAnswer<R>, GrpcError>
    where
        M: Clone,
        F: FnMut(Request<M>) -> Fut,
        Fut: Future<Output = Result<Response<R>, Status>>,
    {
        let started = Instant::now();
        let value = MetadataValue::try_from(self.key_form.header_value(key).as_bytes())
            .expect("a key is visible ASCII");
        let mut attempts = 0;
        loop {
            attempts += 1;
            let mut request = Request::new(message.clone());
            request
                .metadata_mut()
                .insert("idempotency-key", value.clone());
            request.set_timeout(self.attempt_timeout);
            let began = Instant::now();
            let (status, timed_out) =
                match tokio::time::timeout(self.attempt_timeout, call(request)).await {
                    Ok(Ok(response)) => {
                        tracing::debug!(attempts, "gRPC call answered OK");
                        return Ok(GrpcAnswer { response, attempts });
                    }
                    // tonic's client ends an attempt at its deadline with CANCELLED.
                    Ok(Err(status)) => (status, began.elapsed() >= self.attempt_timeout),
                    Err(_) => (
                        Status::deadline_exceeded("no answer within the attempt timeout"),
                        true,
                    ),
                };
            let (retry, asked) = verdict(&status, timed_out);
            if !retry || attempts >= self.max_attempts {
                return Err(GrpcError { status, attempts });
            }
            let ceiling = backoff::ceiling(self.initial_backoff, self.max_backoff, attempts);
            let wait = backoff::jittered(ceiling).max(asked.unwrap_or_default());
            if started.elapsed() + wait > self.deadline {
                tracing::warn!(attempts, code = ?status.code(), "gRPC call: the deadline ends before the next attempt");
                return Err(GrpcError { status, attempts });
            }
            tracing::info!(attempts, code = ?status.code(), wait = ?wait, "retrying the gRPC call with the same idempotency-key");
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use tonic_types::ErrorDetails;

    use super::*;

    #[test]
    fn the_retry_table() {
        for code in [Code::Unavailable, Code::Aborted, Code::DeadlineExceeded] {
            assert!(verdict(&Status::new(code, ""), false).0, "{code:?}");
        }
        for code in [
            Code::InvalidArgument,
            Code::FailedPrecondition,
            Code::Internal,
            Code::NotFound,
            Code::Cancelled,
        ] {
            assert!(!verdict(&Status::new(code, ""), false).0, "{code:?}");
        }
        assert!(verdict(&Status::cancelled("timeout"), true).0);
        let quota = Status::with_error_details(
            Code::ResourceExhausted,
            "slow down",
            ErrorDetails::with_retry_info(Some(Duration::from_secs(2))),
        );
        assert_eq!(verdict(&quota, false), (true, Some(Duration::from_secs(2))));
        assert!(!verdict(&Status::resource_exhausted("too large"), false).0);
        let mut stored = Status::unavailable("stored");
        stored
            .metadata_mut()
            .insert("idempotent-replayed", "true".parse().unwrap());
        assert!(
            !verdict(&stored, false).0,
            "a replayed status is the key's answer"
        );
    }
}
