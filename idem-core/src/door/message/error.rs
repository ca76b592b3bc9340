//! [`MessageError`]: how a message handler says that it failed, and whether a later delivery
//! may succeed.

use std::{error::Error, fmt};

use axum::response::{IntoResponse, Response};
use http::StatusCode;

use crate::replay::NoStore;

/// The error of a message handler: a failure that a later delivery may get past (the
/// default: a database that is down, a service that timed out), or a terminal one (a payload
/// the handler will never accept).
///
/// Either way the key is released, nothing is stored, and the message is not acknowledged: a
/// retryable failure is delivered again after a backoff (up to the runner's
/// [`max_attempts`](super::Runner::max_attempts)); a terminal one is ended at once (JetStream
/// `Term`, RabbitMQ reject to the dead-letter exchange), and the reason is logged. Released
/// rather than stored, a terminal failure can be run again by republishing the message from
/// the dead-letter queue once its cause is fixed.
///
/// `?` turns any error into a retryable `MessageError`:
///
/// ```
/// use idem::message::MessageError;
///
/// fn charge(amount: i64) -> Result<(), MessageError> {
///     if amount <= 0 {
///         return Err(MessageError::terminal(format!("the amount {amount} is not positive")));
///     }
///     let _parsed: u64 = "42".parse()?; // a ParseIntError would be retried
///     Ok(())
/// }
/// assert!(charge(-1).unwrap_err().is_terminal());
/// ```
pub struct MessageError {
    terminal: bool,
    error: Box<dyn Error + Send + Sync>,
}

impl MessageError {
    /// A failure that a later delivery of the message may get past.
    pub fn retry(error: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        Self {
            terminal: false,
            error: error.into(),
        }
    }

    /// A failure that no later delivery will get past: the message is ended (dead-lettered).
    pub fn terminal(error: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        Self {
            terminal: true,
            error: error.into(),
        }
    }

    /// Whether the failure is terminal.
    pub fn is_terminal(&self) -> bool {
        self.terminal
    }
}

impl<E: Error + Send + Sync + 'static> From<E> for MessageError {
    fn from(error: E) -> Self {
        Self::retry(error)
    }
}

impl fmt::Debug for MessageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MessageError")
            .field("terminal", &self.terminal)
            .field("error", &self.error)
            .finish()
    }
}

impl fmt::Display for MessageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.terminal {
            "terminal"
        } else {
            "retryable"
        };
        write!(f, "{kind}: {}", crate::observe::Chain(&*self.error))
    }
}

/// What a [`MessageError`] becomes on its way through the flow: a response that is not
/// stored (its key is released), carrying the failure for the runner to read.
#[derive(Clone, Debug)]
pub(crate) struct Failure {
    pub(crate) terminal: bool,
    pub(crate) reason: String,
}

impl IntoResponse for MessageError {
    fn into_response(self) -> Response {
        let status = if self.terminal {
            StatusCode::UNPROCESSABLE_ENTITY
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        };
        let failure = Failure {
            terminal: self.terminal,
            reason: crate::observe::Chain(&*self.error).to_string(),
        };
        (status, NoStore, axum::Extension(failure)).into_response()
    }
}
