//! What happens to a message, read from the flow's answer: the table of
//! [the module docs](super#what-happens-to-a-message), in code.
//!
//! The flow answers a message as it answers a request. Whether its handler was called
//! (`ran`), whether the answer is a replay, its status, a `NoStore` mark, the
//! [`Failure`] of a `MessageError`, and the kind of a Problem the flow answered instead of the
//! handler say everything the runner needs: ack, redeliver later, or end the message.

use axum::response::Response;
use http::StatusCode;
use http_body_util::BodyExt;

use super::error::Failure;
use crate::{door::presented, problem::ProblemKind, replay::NoStore};

/// What becomes of one delivery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Settlement {
    /// Acknowledge: the handler's result is stored, or was stored before (`duplicate`), or
    /// the message ran without a record as its policy allows.
    Ack { duplicate: bool },
    /// The result is this process's alone until the store takes it: wait, then ask again.
    AwaitStore,
    /// Do not acknowledge; have the broker deliver it again after a delay.
    Redeliver { after: Later, why: String },
    /// End the message without acknowledging it as handled: JetStream `Term`, RabbitMQ reject
    /// (to the dead-letter exchange).
    End { why: String },
}

/// How long a redelivery waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Later {
    /// Another delivery holds the key: wait for its lease, the longest it can block the key
    /// if its holder died.
    InFlight,
    /// The store did not answer: back off, without counting an attempt of the handler.
    StoreDown,
    /// The handler failed in a way a later delivery may get past: back off, and count an
    /// attempt.
    Failed,
}

impl Settlement {
    /// The settlement that `response` calls for, the flow's answer to a message; `ran` says whether the
    /// handler was called, `pending` whether the result waits in this process for the store.
    pub(crate) async fn of(response: Response, ran: bool, pending: impl FnOnce() -> bool) -> Self {
        if let Some(failure) = response.extensions().get::<Failure>() {
            return Self::failed(failure);
        }
        let status = response.status();
        let replayed = response.headers().contains_key("idempotent-replayed");
        let not_stored = response.extensions().get::<NoStore>().is_some();
        if replayed
            || (ran && !not_stored && !status.is_server_error() && status != StatusCode::CONFLICT)
        {
            return if pending() {
                Self::AwaitStore
            } else {
                Self::Ack {
                    duplicate: replayed,
                }
            };
        }
        if ran && not_stored && !status.is_server_error() {
            return if status.is_client_error() {
                Self::End {
                    why: format!(
                        "the handler's extractors refused the payload ({status}): {}",
                        text(response).await
                    ),
                }
            } else {
                // `NoStore` from the handler: it ran, and chose to keep no record.
                Self::Ack { duplicate: false }
            };
        }
        Self::refused(status, ran, response).await
    }

    /// A `MessageError`'s settlement.
    fn failed(failure: &Failure) -> Self {
        if failure.terminal {
            Self::End {
                why: format!("the handler failed terminally: {}", failure.reason),
            }
        } else {
            Self::Redeliver {
                after: Later::Failed,
                why: format!("the handler failed: {}", failure.reason),
            }
        }
    }

    /// The settlement of an answer that is neither a result nor a replay.
    async fn refused(status: StatusCode, ran: bool, response: Response) -> Self {
        let kind = presented::problem_kind(&response);
        let detail = text(response).await;
        let why = |what: &str| format!("{what} ({status}): {detail}");
        let is = |kind_of: ProblemKind| kind == Some(kind_of);
        if is(ProblemKind::RequestInFlight) && !ran {
            Self::Redeliver {
                after: Later::InFlight,
                why: why("another delivery holds its key"),
            }
        } else if is(ProblemKind::KeyReused) {
            Self::End {
                why: why("a poison message: its key was first used with another payload"),
            }
        } else if is(ProblemKind::StoreUnavailable) {
            Self::Redeliver {
                after: Later::StoreDown,
                why: why("the idempotency store is unavailable"),
            }
        } else if status.is_server_error() || status == StatusCode::CONFLICT {
            Self::Redeliver {
                after: Later::Failed,
                why: why("the handler failed"),
            }
        } else {
            Self::End {
                why: why("refused"),
            }
        }
    }
}

/// The body as text, for a log line.
async fn text(response: Response) -> String {
    match response.into_body().collect().await {
        Ok(body) => String::from_utf8_lossy(&body.to_bytes()).into_owned(),
        Err(_) => String::from("(no body)"),
    }
}

#[cfg(test)]
mod tests {
    use axum::response::IntoResponse;

    use super::*;
    use crate::{message::MessageError, problem::Problem};

    async fn settlement(response: Response, ran: bool) -> Settlement {
        Settlement::of(response, ran, || false).await
    }

    fn problem(kind: ProblemKind) -> Response {
        Problem::new(kind, "detail").into_response()
    }

    #[tokio::test]
    async fn results_and_replays_are_acknowledged() {
        assert_eq!(
            settlement(().into_response(), true).await,
            Settlement::Ack { duplicate: false }
        );
        let replay = ([("idempotent-replayed", "true")], ()).into_response();
        assert_eq!(
            settlement(replay, false).await,
            Settlement::Ack { duplicate: true }
        );
        let stored_4xx = StatusCode::NOT_FOUND.into_response();
        assert_eq!(
            settlement(stored_4xx, true).await,
            Settlement::Ack { duplicate: false }
        );
        let waiting = Settlement::of(().into_response(), true, || true).await;
        assert_eq!(
            waiting,
            Settlement::AwaitStore,
            "not acknowledged until stored"
        );
    }

    #[tokio::test]
    async fn the_flows_refusals_become_redeliveries_or_ends() {
        let later = |response| async move {
            match settlement(response, false).await {
                Settlement::Redeliver { after, .. } => Some(after),
                _ => None,
            }
        };
        assert_eq!(
            later(problem(ProblemKind::RequestInFlight)).await,
            Some(Later::InFlight)
        );
        assert_eq!(
            later(problem(ProblemKind::StoreUnavailable)).await,
            Some(Later::StoreDown)
        );
        for ends in [
            ProblemKind::KeyReused,
            ProblemKind::KeyMissing,
            ProblemKind::BodyTooLarge,
        ] {
            assert!(
                matches!(
                    settlement(problem(ends), false).await,
                    Settlement::End { .. }
                ),
                "{ends:?}"
            );
        }
    }

    #[tokio::test]
    async fn the_handlers_failures_are_retried_or_ended() {
        let retry = MessageError::retry("down").into_response();
        assert!(matches!(
            settlement(retry, true).await,
            Settlement::Redeliver {
                after: Later::Failed,
                ..
            }
        ));
        let terminal = MessageError::terminal("never").into_response();
        assert!(matches!(
            settlement(terminal, true).await,
            Settlement::End { .. }
        ));
        let panicked = problem(ProblemKind::HandlerFailed);
        assert!(matches!(
            settlement(panicked, true).await,
            Settlement::Redeliver {
                after: Later::Failed,
                ..
            }
        ));
        let refused = (StatusCode::BAD_REQUEST, NoStore, ()).into_response();
        assert!(
            matches!(settlement(refused, true).await, Settlement::End { .. }),
            "a bad payload"
        );
    }
}
