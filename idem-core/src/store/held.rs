//! What a store holds for one key, as an operator sees it: the answer of
//! [`Store::look_up`](super::Store::look_up) and of [`Store::remove`](super::Store::remove)
//! (store rules 14 and 15).
//!
//! A look-up says what a claim of the key would find, and no more: whether the key is in
//! flight (since when, until when its lease holds, the steps an operation of several steps has
//! recorded) or completed (the status, when it was stored, when it expires, its size). It
//! never carries the stored body, the recorded steps' outputs, the fingerprint or the lease
//! token: what it says may be shown to an operator, and those may be a client's secrets.
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use http::StatusCode;
//! use idem::store::held::{CompletedRecord, InFlightRecord};
//!
//! let at = SystemTime::now();
//! let paid = CompletedRecord {
//!     status: StatusCode::CREATED,
//!     stored_at: Some(at - Duration::from_secs(60)),
//!     expires_at: at + Duration::from_secs(86_340),
//!     bytes: 212,
//!     body_kept: true,
//!     at,
//! };
//! assert_eq!(paid.expires_in(), Duration::from_secs(86_340));
//!
//! // An operation of several steps whose lease ended before it completed: the next claim of
//! // the same request resumes it after its two steps.
//! let transfer = InFlightRecord {
//!     since: Some(at - Duration::from_secs(30)),
//!     lease_expires_at: at - Duration::from_secs(5),
//!     expires_at: at + Duration::from_secs(86_370),
//!     steps: vec!["bank-order".into(), "ledger".into()],
//!     suspensions: 1,
//!     resumes_at: Some(at + Duration::from_secs(10)),
//!     at,
//! };
//! assert_eq!(transfer.lease_left(), Duration::ZERO);
//! assert!(transfer.is_suspended());
//! ```

use std::time::{Duration, SystemTime};

use http::StatusCode;

/// What a store holds for a key: a record in flight, or a completed one.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Held {
    /// A request holds the key, or held it and stopped part-way.
    InFlight(InFlightRecord),
    /// The operation ran; its response is replayed to every retry.
    Completed(CompletedRecord),
}

impl Held {
    /// The record's state.
    pub fn state(&self) -> RecordState {
        match self {
            Self::InFlight(_) => RecordState::InFlight,
            Self::Completed(_) => RecordState::Completed,
        }
    }
}

/// A record in flight, as [`Store::look_up`](super::Store::look_up) finds it. Times are on
/// the store's clock, as is [`at`](Self::at), the moment the store answered: compare them
/// with it rather than with the caller's clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InFlightRecord {
    /// When the key was first claimed: a takeover of a lapsed lease and a resumption keep
    /// it, so this is how long the key has been blocked. `None` when the store did not keep
    /// it (a Redis record claimed by a build of idem that did not write it).
    pub since: Option<SystemTime>,
    /// When the holder's lease lapses (or lapsed: a suspended operation's is in the past).
    pub lease_expires_at: SystemTime,
    /// When the record is forgotten if nothing completes it.
    pub expires_at: SystemTime,
    /// The names of the steps the operation recorded, in order (empty for a request of one
    /// step). Their outputs are not given.
    pub steps: Vec<String>,
    /// How many times the operation stopped before completing.
    pub suspensions: u32,
    /// When the service resumes it on its own, if it will: a store of
    /// [`StepSupport::Durable`](super::StepSupport::Durable) knows it for a route that
    /// resumes; the runtime adds what this process has scheduled.
    pub resumes_at: Option<SystemTime>,
    /// The store's clock when it answered.
    pub at: SystemTime,
}

impl InFlightRecord {
    /// How long the lease has left: zero once it lapsed.
    pub fn lease_left(&self) -> Duration {
        self.lease_expires_at
            .duration_since(self.at)
            .unwrap_or_default()
    }

    /// Whether a live lease holds the key: a request is running its operation.
    pub fn is_held(&self) -> bool {
        self.lease_expires_at > self.at
    }

    /// Whether it is an operation of several steps that stopped part-way: nobody holds its
    /// lease, and it keeps steps or was suspended, so that the next claim of the same request
    /// resumes it after its recorded steps.
    pub fn is_suspended(&self) -> bool {
        !self.is_held() && (!self.steps.is_empty() || self.suspensions > 0)
    }
}

/// A completed record, as [`Store::look_up`](super::Store::look_up) finds it. Times are on
/// the store's clock, as for [`InFlightRecord`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompletedRecord {
    /// The stored response's status code.
    pub status: StatusCode,
    /// When the response was stored. `None` when the store did not keep it (a Redis record
    /// completed by a build of idem that did not write it).
    pub stored_at: Option<SystemTime>,
    /// When the record is forgotten, and the key is new again.
    pub expires_at: SystemTime,
    /// The size of the stored response as a store that keeps bytes holds it
    /// ([`StoredResponse::as_bytes`](crate::replay::StoredResponse::as_bytes)'s length).
    pub bytes: u64,
    /// Whether the body was kept; `false` for a body too large to keep, whose retries are
    /// answered 410.
    pub body_kept: bool,
    /// The store's clock when it answered.
    pub at: SystemTime,
}

impl CompletedRecord {
    /// How long the record has left.
    pub fn expires_in(&self) -> Duration {
        self.expires_at.duration_since(self.at).unwrap_or_default()
    }
}

/// The state of a record, as [`Store::remove`](super::Store::remove) reports what it removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RecordState {
    /// A record in flight: its holder is fenced, and an operation's steps went with it.
    InFlight,
    /// A completed record: the next request with its key runs again.
    Completed,
    /// A record the store could not read (store rule 9), which removing is the way out of.
    Unreadable,
}

impl RecordState {
    /// `in_flight`, `completed` or `unreadable`, as logged.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::InFlight => "in_flight",
            Self::Completed => "completed",
            Self::Unreadable => "unreadable",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_flight(lease_from_now: i64, steps: &[&str], suspensions: u32) -> InFlightRecord {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let lease = Duration::from_secs(lease_from_now.unsigned_abs());
        InFlightRecord {
            since: Some(at - Duration::from_secs(100)),
            lease_expires_at: if lease_from_now >= 0 {
                at + lease
            } else {
                at - lease
            },
            expires_at: at + Duration::from_secs(3_600),
            steps: steps.iter().map(|step| (*step).to_owned()).collect(),
            suspensions,
            resumes_at: None,
            at,
        }
    }

    #[test]
    fn a_live_lease_holds_and_a_lapsed_one_with_steps_is_suspended() {
        let running = in_flight(20, &["bank"], 0);
        assert!(running.is_held() && !running.is_suspended());
        assert_eq!(running.lease_left(), Duration::from_secs(20));
        let stopped = in_flight(-1, &["bank"], 0);
        assert!(!stopped.is_held() && stopped.is_suspended());
        assert!(in_flight(-1, &[], 2).is_suspended());
        // A lapsed lease that kept nothing is taken over and run afresh: not suspended.
        let lapsed = in_flight(-1, &[], 0);
        assert!(!lapsed.is_held() && !lapsed.is_suspended());
        assert_eq!(lapsed.lease_left(), Duration::ZERO);
    }

    #[test]
    fn states_are_named_as_logged() {
        assert_eq!(RecordState::InFlight.as_str(), "in_flight");
        assert_eq!(RecordState::Completed.as_str(), "completed");
        assert_eq!(RecordState::Unreadable.as_str(), "unreadable");
    }
}
