//! [`RetryPolicy`]: how often, how long and how patiently a call retries.

use std::time::Duration;

use crate::KeyForm;

/// How a call retries: attempts, backoff, deadline, and how the key is written.
///
/// The defaults and why they differ from the Stripe SDKs' (0.5 s doubling, 5 s cap, 2 retries)
/// are in [the module documentation](crate#defaults).
///
/// ```
/// use std::time::Duration;
/// use idem_client::{KeyForm, RetryPolicy};
///
/// let policy = RetryPolicy::new()
///     .max_attempts(5)
///     .attempt_timeout(Duration::from_secs(3))
///     .deadline(Duration::from_secs(20))
///     .key_form(KeyForm::Bare);
/// assert_eq!(policy.get_max_attempts(), 5);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub struct RetryPolicy {
    pub(crate) max_attempts: u32,
    pub(crate) initial_backoff: Duration,
    pub(crate) max_backoff: Duration,
    pub(crate) attempt_timeout: Duration,
    pub(crate) deadline: Duration,
    pub(crate) key_form: KeyForm,
    pub(crate) max_error_body: usize,
    pub(crate) max_response_body: usize,
}

impl RetryPolicy {
    /// The default number of requests a call sends at most: 10.
    pub const DEFAULT_MAX_ATTEMPTS: u32 = 10;
    /// The default ceiling of the first retry's backoff: 500 ms, as the Stripe SDKs.
    pub const DEFAULT_INITIAL_BACKOFF: Duration = Duration::from_millis(500);
    /// The default cap of a backoff: 5 s, as the Stripe SDKs.
    pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(5);
    /// The default time one attempt may take, answer read: 30 s.
    pub const DEFAULT_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);
    /// The default time a whole call may take, waits included: 60 s.
    pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(60);
    /// The default amount of an error answer's body that is read: 64 KiB.
    pub const DEFAULT_MAX_ERROR_BODY: usize = 64 * 1024;
    /// The default largest successful body: 8 MiB.
    pub const DEFAULT_MAX_RESPONSE_BODY: usize = 8 * 1024 * 1024;

    /// The defaults.
    pub const fn new() -> Self {
        Self {
            max_attempts: Self::DEFAULT_MAX_ATTEMPTS,
            initial_backoff: Self::DEFAULT_INITIAL_BACKOFF,
            max_backoff: Self::DEFAULT_MAX_BACKOFF,
            attempt_timeout: Self::DEFAULT_ATTEMPT_TIMEOUT,
            deadline: Self::DEFAULT_DEADLINE,
            key_form: KeyForm::Quoted,
            max_error_body: Self::DEFAULT_MAX_ERROR_BODY,
            max_response_body: Self::DEFAULT_MAX_RESPONSE_BODY,
        }
    }

    /// Sends at most `attempts` requests per call (at least 1: 1 never retries).
    pub const fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = if attempts == 0 { 1 } else { attempts };
        self
    }

    /// The ceiling of the first retry's backoff; each further retry doubles it, up to
    /// [`max_backoff`](Self::max_backoff). The wait is drawn uniformly below the ceiling.
    pub const fn initial_backoff(mut self, backoff: Duration) -> Self {
        self.initial_backoff = backoff;
        self
    }

    /// The largest ceiling of a backoff. A server's `Retry-After` may ask for longer, and is
    /// honoured up to the deadline.
    pub const fn max_backoff(mut self, backoff: Duration) -> Self {
        self.max_backoff = backoff;
        self
    }

    /// How long one attempt may take, from sending the request to reading its answer. An
    /// attempt that takes longer is abandoned and retried with the same key: an idem server
    /// goes on running the first one, and the retry gets its result.
    pub const fn attempt_timeout(mut self, timeout: Duration) -> Self {
        self.attempt_timeout = timeout;
        self
    }

    /// How long a whole call may take, attempts and waits included. No attempt starts, and no
    /// wait begins, that would end after it.
    pub const fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// How the key is written into the header.
    pub const fn key_form(mut self, form: KeyForm) -> Self {
        self.key_form = form;
        self
    }

    /// How much of an error answer's body is read, in bytes; the rest is not. Bounds what a
    /// misbehaving server can make the client hold.
    pub const fn max_error_body(mut self, bytes: usize) -> Self {
        self.max_error_body = bytes;
        self
    }

    /// The largest successful body read, in bytes. A longer one ends the call with
    /// [`ErrorKind::ResponseTooLarge`](crate::ErrorKind::ResponseTooLarge).
    pub const fn max_response_body(mut self, bytes: usize) -> Self {
        self.max_response_body = bytes;
        self
    }

    /// The most requests a call sends.
    #[must_use]
    pub const fn get_max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The time one attempt may take.
    #[must_use]
    pub const fn get_attempt_timeout(&self) -> Duration {
        self.attempt_timeout
    }

    /// The time a whole call may take.
    #[must_use]
    pub const fn get_deadline(&self) -> Duration {
        self.deadline
    }

    /// How the key is written.
    #[must_use]
    pub const fn get_key_form(&self) -> KeyForm {
        self.key_form
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_documented_ones() {
        let policy = RetryPolicy::default();
        assert_eq!(policy.max_attempts, 10);
        assert_eq!(policy.initial_backoff, Duration::from_millis(500));
        assert_eq!(policy.max_backoff, Duration::from_secs(5));
        assert_eq!(policy.attempt_timeout, Duration::from_secs(30));
        assert_eq!(policy.deadline, Duration::from_secs(60));
        assert_eq!(policy.key_form, KeyForm::Quoted);
        assert_eq!(policy.max_error_body, 64 * 1024);
        assert_eq!(policy.max_response_body, 8 * 1024 * 1024);
        assert_eq!(RetryPolicy::new().max_attempts(0).max_attempts, 1);
    }
}
