//! The call: send, judge the outcome, wait, send the same bytes again.

use std::time::{Duration, SystemTime};

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, StatusCode};
use reqwest::{Client, Request, RequestBuilder, Response};
use tokio::time::Instant;

use crate::{
    client::{
        Answer, ClientError, ErrorAnswer, ErrorKind, GaveUp, ProblemDetails, RetryPolicy,
        answer::is_replayed,
        backoff,
        decide::{self, Verdict},
        error::humanize,
        retry_after::retry_after,
    },
    key::{IDEMPOTENCY_KEY, IdempotencyKey},
};

/// What one attempt met.
enum Outcome {
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
        let started = Instant::now();
        match request.build_split() {
            (client, Ok(request)) => self.execute(&client, key, request).await,
            (_, Err(error)) => Err(self.unsent(key, started, ErrorKind::InvalidRequest(error))),
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
        let started = Instant::now();
        let deadline = started + self.deadline;
        if request.headers().contains_key(IDEMPOTENCY_KEY) {
            return Err(self.unsent(key, started, ErrorKind::KeyAlreadySet));
        }
        request
            .headers_mut()
            .insert(IDEMPOTENCY_KEY, self.key_form.header_value(key));
        let method = request.method().clone();
        let path = request.url().path().to_owned();
        let mut attempts = 0;
        loop {
            // Every attempt sends a copy of the same request: the same key, the same bytes.
            let Some(copy) = request.try_clone() else {
                return Err(self.unsent(key, started, ErrorKind::BodyNotReplayable));
            };
            attempts += 1;
            let timeout = self
                .attempt_timeout
                .min(deadline.saturating_duration_since(Instant::now()));
            let outcome = tokio::time::timeout(timeout, self.attempt(client, copy))
                .await
                .unwrap_or(Outcome::TimedOut(timeout));
            let (kind, after) = match outcome {
                Outcome::Success {
                    status,
                    headers,
                    body,
                } => {
                    tracing::debug!(%method, path, attempts, %status, replayed = is_replayed(&headers), "idempotent request answered");
                    return Ok(Answer {
                        status,
                        headers,
                        body,
                        key: key.clone(),
                        attempts,
                        elapsed: started.elapsed(),
                    });
                }
                Outcome::TooLarge(status) => {
                    let limit = self.max_response_body;
                    return Err(self.failed(
                        key,
                        started,
                        attempts,
                        ErrorKind::ResponseTooLarge { status, limit },
                    ));
                }
                Outcome::Error(answer) => {
                    let verdict = decide::on_status(answer.status, answer.is_replayed());
                    let after = retry_after(&answer.headers, SystemTime::now());
                    let kind = if decide::is_key_reused(answer.status, answer.problem()) {
                        ErrorKind::KeyReused(answer)
                    } else {
                        ErrorKind::Status(answer)
                    };
                    if verdict != Verdict::Retry {
                        tracing::debug!(%method, path, attempts, error = %kind, "idempotent request refused");
                        return Err(self.failed(key, started, attempts, kind));
                    }
                    (kind, after)
                }
                Outcome::Transport(error) => {
                    if decide::on_error(&error) != Verdict::Retry {
                        let kind = ErrorKind::Transport(error);
                        return Err(self.failed(key, started, attempts, kind));
                    }
                    (ErrorKind::Transport(error), None)
                }
                Outcome::TimedOut(timeout) => (ErrorKind::TimedOut(timeout), None),
            };
            if attempts >= self.max_attempts {
                return Err(self.give_up(key, started, attempts, kind, GaveUp::Attempts));
            }
            // The server's Retry-After is a minimum; the backoff spreads clients that failed
            // together, and grows when the server asks for nothing.
            let ceiling = backoff::ceiling(self.initial_backoff, self.max_backoff, attempts);
            let wait = after.unwrap_or_default().max(backoff::jittered(ceiling));
            if Instant::now() + wait >= deadline {
                return Err(self.give_up(key, started, attempts, kind, GaveUp::Deadline));
            }
            tracing::info!(%method, path, attempts, met = %brief(&kind), wait = %humanize(wait), "retrying with the same Idempotency-Key");
            tokio::time::sleep(wait).await;
        }
    }

    /// Sends one copy and reads its answer, within the bounds of this policy.
    async fn attempt(&self, client: &Client, request: Request) -> Outcome {
        let response = match client.execute(request).await {
            Ok(response) => response,
            Err(error) => return Outcome::Transport(error),
        };
        let status = response.status();
        let headers = response.headers().clone();
        if status.as_u16() < 400 {
            if response
                .content_length()
                .is_some_and(|length| length > self.max_response_body as u64)
            {
                return Outcome::TooLarge(status);
            }
            match read_at_most(response, self.max_response_body).await {
                Ok((body, false)) => Outcome::Success {
                    status,
                    headers,
                    body,
                },
                Ok((_, true)) => Outcome::TooLarge(status),
                Err(error) => Outcome::Transport(error),
            }
        } else {
            match read_at_most(response, self.max_error_body).await {
                Ok((body, truncated)) => {
                    let problem = if truncated {
                        None
                    } else {
                        ProblemDetails::from_answer(&headers, &body)
                    };
                    Outcome::Error(ErrorAnswer {
                        status,
                        headers,
                        body,
                        truncated,
                        problem,
                    })
                }
                Err(error) => Outcome::Transport(error),
            }
        }
    }

    fn failed(
        &self,
        key: &IdempotencyKey,
        started: Instant,
        attempts: u32,
        kind: ErrorKind,
    ) -> ClientError {
        ClientError {
            kind,
            key: key.clone(),
            attempts,
            elapsed: started.elapsed(),
            gave_up: None,
        }
    }

    fn give_up(
        &self,
        key: &IdempotencyKey,
        started: Instant,
        attempts: u32,
        kind: ErrorKind,
        gave_up: GaveUp,
    ) -> ClientError {
        tracing::warn!(attempts, error = %kind, ?gave_up, "giving up on an idempotent request");
        ClientError {
            gave_up: Some(gave_up),
            ..self.failed(key, started, attempts, kind)
        }
    }

    fn unsent(&self, key: &IdempotencyKey, started: Instant, kind: ErrorKind) -> ClientError {
        self.failed(key, started, 0, kind)
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
