//! The call: send, judge what it met, wait, send the same bytes again.

use std::time::{Duration, SystemTime};

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, Method, StatusCode};
use reqwest::{Client, Request, RequestBuilder, Response};
use tokio::time::Instant;

use idem_protocol::key::IDEMPOTENCY_KEY;

use crate::{
    Answer, ClientError, ErrorAnswer, ErrorKind, GaveUp, IdempotencyKey, ProblemDetails,
    RetryPolicy,
    answer::is_replayed,
    backoff,
    decide::{self, Ruling},
    error::humanize,
    retry_after::retry_after,
};

/// What one attempt met.
enum Met {
    Success {
        status: StatusCode,
        headers: HeaderMap,
        body: Bytes,
    },
    Error(ErrorAnswer),
    TooLarge(StatusCode),
    Transport(reqwest::Error),
    TimedOut(Duration),
}

impl RetryPolicy {
    /// Sends `request` under a new random key ([`IdempotencyKey::random`]), retrying it with
    /// that key and the same body as this policy says. One call is one operation: call again
    /// for another.
    ///
    /// # Errors
    ///
    /// A [`ClientError`] when no successful answer came: its [`kind`](ClientError::kind) says
    /// what the last attempt met.
    pub async fn send(&self, request: RequestBuilder) -> Result<Answer, ClientError> {
        self.send_with_key(&IdempotencyKey::random(), request).await
    }

    /// Sends `request` under `key` (a derived one, say, or one kept from an earlier call),
    /// retrying it with that key and the same body as this policy says.
    ///
    /// # Errors
    ///
    /// As [`send`](Self::send).
    pub async fn send_with_key(
        &self,
        key: &IdempotencyKey,
        request: RequestBuilder,
    ) -> Result<Answer, ClientError> {
        match request.build_split() {
            (client, Ok(request)) => self.execute(&client, key, request).await,
            (_, Err(error)) => Err(ClientError {
                kind: ErrorKind::InvalidRequest(error),
                key: key.clone(),
                attempts: 0,
                elapsed: Duration::ZERO,
                gave_up: None,
            }),
        }
    }

    /// Sends a built `request` through `client` under `key`, retrying it as this policy says.
    ///
    /// # Errors
    ///
    /// As [`send`](Self::send).
    pub async fn execute(
        &self,
        client: &Client,
        key: &IdempotencyKey,
        mut request: Request,
    ) -> Result<Answer, ClientError> {
        let mut call = Call::new(key, self.deadline, &request);
        if request.headers().contains_key(IDEMPOTENCY_KEY) {
            return Err(call.failed(ErrorKind::KeyAlreadySet));
        }
        request
            .headers_mut()
            .insert(IDEMPOTENCY_KEY, self.key_form.header_value(key));
        loop {
            // Every attempt sends a copy of the same request: the same key, the same bytes.
            let Some(copy) = request.try_clone() else {
                return Err(call.failed(ErrorKind::BodyNotReplayable));
            };
            call.attempts += 1;
            let timeout = self
                .attempt_timeout
                .min(call.deadline.saturating_duration_since(Instant::now()));
            let met = tokio::time::timeout(timeout, self.attempt(client, copy))
                .await
                .unwrap_or(Met::TimedOut(timeout));
            match self.next(&call, met) {
                Next::Finish(result) => return result,
                Next::Retry(kind, after) => self.pause(&call, kind, after).await?,
            }
        }
    }

    /// What an attempt met leads to: the end of the call, or another attempt (the
    /// table of the crate documentation).
    fn next(&self, call: &Call<'_>, met: Met) -> Next {
        match met {
            Met::Success {
                status,
                headers,
                body,
            } => {
                call.log_answered(status, &headers);
                Next::Finish(Ok(call.answer(status, headers, body)))
            }
            Met::TooLarge(status) => {
                let limit = self.max_response_body;
                Next::Finish(Err(
                    call.failed(ErrorKind::ResponseTooLarge { status, limit })
                ))
            }
            Met::Error(answer) => {
                let ruling = decide::on_status(answer.status, answer.is_replayed());
                let after = retry_after(&answer.headers, SystemTime::now());
                let kind = if decide::is_key_reused(answer.status, answer.problem()) {
                    ErrorKind::KeyReused(answer)
                } else {
                    ErrorKind::Status(answer)
                };
                if ruling == Ruling::Retry {
                    return Next::Retry(kind, after);
                }
                call.log_refused(&kind);
                Next::Finish(Err(call.failed(kind)))
            }
            Met::Transport(error) if decide::on_error(&error) != Ruling::Retry => {
                Next::Finish(Err(call.failed(ErrorKind::Transport(error))))
            }
            Met::Transport(error) => Next::Retry(ErrorKind::Transport(error), None),
            Met::TimedOut(timeout) => Next::Retry(ErrorKind::TimedOut(timeout), None),
        }
    }

    /// Waits before the next attempt, or gives up when the budget would not allow one.
    async fn pause(
        &self,
        call: &Call<'_>,
        kind: ErrorKind,
        after: Option<Duration>,
    ) -> Result<(), ClientError> {
        if call.attempts >= self.max_attempts {
            return Err(call.give_up(kind, GaveUp::Attempts));
        }
        // The server's Retry-After is a minimum; the backoff spreads clients that failed
        // together, and grows when the server asks for nothing.
        let ceiling = backoff::ceiling(self.initial_backoff, self.max_backoff, call.attempts);
        let wait = after.unwrap_or_default().max(backoff::jittered(ceiling));
        if Instant::now() + wait >= call.deadline {
            return Err(call.give_up(kind, GaveUp::Deadline));
        }
        call.log_retry(&kind, wait);
        tokio::time::sleep(wait).await;
        Ok(())
    }

    /// Sends one copy and reads its answer, within the bounds of this policy.
    async fn attempt(&self, client: &Client, request: Request) -> Met {
        let response = match client.execute(request).await {
            Ok(response) => response,
            Err(error) => return Met::Transport(error),
        };
        let status = response.status();
        let headers = response.headers().clone();
        if status.as_u16() < 400 {
            if response
                .content_length()
                .is_some_and(|length| length > self.max_response_body as u64)
            {
                return Met::TooLarge(status);
            }
            match read_at_most(response, self.max_response_body).await {
                Ok((body, false)) => Met::Success {
                    status,
                    headers,
                    body,
                },
                Ok((_, true)) => Met::TooLarge(status),
                Err(error) => Met::Transport(error),
            }
        } else {
            match read_at_most(response, self.max_error_body).await {
                Ok((body, truncated)) => {
                    let problem = if truncated {
                        None
                    } else {
                        ProblemDetails::from_answer(&headers, &body)
                    };
                    Met::Error(ErrorAnswer {
                        status,
                        headers,
                        body,
                        truncated,
                        problem,
                    })
                }
                Err(error) => Met::Transport(error),
            }
        }
    }
}

/// What an attempt met leads to.
enum Next {
    /// The call is over.
    Finish(Result<Answer, ClientError>),
    /// Worth another attempt: what this one met, and the wait the server asked for.
    Retry(ErrorKind, Option<Duration>),
}

/// One call: one operation under one key, and how far it has got.
struct Call<'a> {
    key: &'a IdempotencyKey,
    started: Instant,
    deadline: Instant,
    /// For the logs: keys and query strings are never logged.
    method: Method,
    path: String,
    attempts: u32,
}

impl<'a> Call<'a> {
    fn new(key: &'a IdempotencyKey, budget: Duration, request: &Request) -> Self {
        let started = Instant::now();
        Self {
            key,
            started,
            deadline: started + budget,
            method: request.method().clone(),
            path: request.url().path().to_owned(),
            attempts: 0,
        }
    }

    fn answer(&self, status: StatusCode, headers: HeaderMap, body: Bytes) -> Answer {
        Answer {
            status,
            headers,
            body,
            key: self.key.clone(),
            attempts: self.attempts,
            elapsed: self.started.elapsed(),
        }
    }

    fn failed(&self, kind: ErrorKind) -> ClientError {
        ClientError {
            kind,
            key: self.key.clone(),
            attempts: self.attempts,
            elapsed: self.started.elapsed(),
            gave_up: None,
        }
    }

    fn give_up(&self, kind: ErrorKind, gave_up: GaveUp) -> ClientError {
        tracing::warn!(attempts = self.attempts, error = %kind, ?gave_up, "giving up on an idempotent request");
        ClientError {
            gave_up: Some(gave_up),
            ..self.failed(kind)
        }
    }

    fn log_answered(&self, status: StatusCode, headers: &HeaderMap) {
        let (method, path, attempts) = (&self.method, &self.path, self.attempts);
        tracing::debug!(%method, path, attempts, %status, replayed = is_replayed(headers), "idempotent request answered");
    }

    fn log_refused(&self, kind: &ErrorKind) {
        let (method, path, attempts) = (&self.method, &self.path, self.attempts);
        tracing::debug!(%method, path, attempts, error = %kind, "idempotent request refused");
    }

    fn log_retry(&self, kind: &ErrorKind, wait: Duration) {
        let (method, path, attempts) = (&self.method, &self.path, self.attempts);
        tracing::info!(%method, path, attempts, met = %brief(kind), wait = %humanize(wait), "retrying with the same Idempotency-Key");
    }
}

/// What an attempt met, in a few words for a log line: the status alone for an answer.
fn brief(kind: &ErrorKind) -> String {
    match kind {
        ErrorKind::Status(answer) | ErrorKind::KeyReused(answer) => answer.status.to_string(),
        other => other.to_string(),
    }
}

/// Reads at most `limit` bytes of the body: the bytes, and whether there were more. What is
/// left unread is dropped with the connection.
async fn read_at_most(mut response: Response, limit: usize) -> reqwest::Result<(Bytes, bool)> {
    let mut body = BytesMut::new();
    while let Some(chunk) = response.chunk().await? {
        let room = limit - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body.freeze(), true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body.freeze(), false))
}
