//! Store calls that outlive their request: a release or a completion that the store did not
//! take the first time, retried until it gives a definite answer.
//!
//! A fenced write whose call failed or timed out has an unknown outcome (store rule 7): it may
//! have been applied, or not. Given up on, a release leaves its key blocked until the lease
//! lapses, and a completion leaves the key in flight until the lease lapses, after which a
//! retry runs the operation again although its first result was already sent. So each is
//! retried here, in a task of the runtime's, with a backoff capped at [`LONGEST_PAUSE`] so that
//! it lands within about that long of the store answering again, until the store answers `Ok`
//! or [`LeaseLost`](StoreError::LeaseLost), or the record's lifetime has passed. Both answers
//! are definite: completion is idempotent for the token that holds the key, so a retried
//! completion whose first attempt did land answers `Ok`, and `LeaseLost` means that the key is
//! not held under this token any more (released, completed or taken over).
//!
//! These tasks are not the request's: a client that disconnects does not cancel them. At
//! shutdown, [`Idempotency::shutdown`] waits for them for a bounded time, then stops them and
//! logs each one that did not land.
//!
//! A completion retried here keeps its result in the runtime's own copies meanwhile
//! ([`Pending`](super::pending::Pending)), from which this process answers retries of its key.

use std::time::Duration;

use tokio::time::Instant;

use super::Idempotency;
use crate::{
    fingerprint::Fingerprint,
    observe::{self, Outcome},
    replay::StoredResponse,
    scope::{Route, StoreKey},
    store::{LeaseToken, StoreError},
};

/// The first pause between two attempts, and the longest.
const FIRST_PAUSE: Duration = Duration::from_millis(50);
pub(crate) const LONGEST_PAUSE: Duration = Duration::from_secs(1);

/// What a background call is for.
enum Write {
    /// Release a key whose claim was not answered: it may land after the first release
    /// attempt (a statement still running on another connection of a pool), so "not held"
    /// is only believed once `settled_at` has passed.
    ReleaseUnanswered {
        settled_at: Instant,
    },
    Release,
    Complete {
        record: StoredResponse,
        ttl: Duration,
    },
}

impl Write {
    async fn attempt(
        &self,
        idem: &Idempotency,
        key: &StoreKey,
        token: LeaseToken,
    ) -> Result<(), StoreError> {
        match self {
            Self::ReleaseUnanswered { .. } | Self::Release => idem.release(key, token).await,
            Self::Complete { record, ttl } => idem.complete(key, token, record, *ttl).await,
        }
    }
}

impl Idempotency {
    /// Releases `key` under `token`, a claim whose answer was lost, in the background.
    ///
    /// The claim may have landed or not, and may still be landing: the store is asked until it
    /// has had the runtime's store timeout to finish it, then until it answers. `lifetime`
    /// bounds the retries: after it the in-flight record has expired in the store anyway.
    pub(crate) fn release_unanswered_claim(
        &self,
        key: StoreKey,
        token: LeaseToken,
        lifetime: Duration,
        route: Route,
    ) {
        let settled_at = Instant::now() + self.store_timeout();
        let write = Write::ReleaseUnanswered { settled_at };
        spawn(self, key, token, write, lifetime, route);
    }

    /// Releases `key` under `token` in the background, retrying until the store answers.
    ///
    /// `lifetime` bounds the retries: after it the in-flight record has expired in the store
    /// anyway. Used for a release that failed after the handler, and to settle a commit whose
    /// outcome is unknown.
    pub(crate) fn release_later(
        &self,
        key: StoreKey,
        token: LeaseToken,
        lifetime: Duration,
        route: Route,
    ) {
        spawn(self, key, token, Write::Release, lifetime, route);
    }

    /// Keeps `record`, the result of the request with `fingerprint` that holds `key` under
    /// `token`, as this process's own copy, and completes the key with it in the background,
    /// retrying until the store takes it or `ttl` has passed. Until then the runtime answers
    /// retries of the key in this process from its copy ([`own_copy`](Self::own_copy)).
    pub(crate) fn complete_later(
        &self,
        key: StoreKey,
        token: LeaseToken,
        fingerprint: Fingerprint,
        record: StoredResponse,
        ttl: Duration,
        route: Route,
    ) {
        self.pending()
            .insert(key, token, fingerprint, record.clone());
        let write = Write::Complete { record, ttl };
        spawn(self, key, token, write, ttl, route);
    }
}

fn spawn(
    idem: &Idempotency,
    key: StoreKey,
    token: LeaseToken,
    write: Write,
    lifetime: Duration,
    route: Route,
) {
    let route_for_log = route.as_str().to_owned();
    let owner = idem.clone();
    let stop = idem.background_stop();
    let work = async move {
        let deadline = Instant::now() + lifetime;
        let outcome = tokio::select! {
            outcome = retry(&owner, &key, token, &write, deadline) => Some(outcome),
            () = stop.stopped() => None,
        };
        if let Write::Complete { .. } = write {
            owner.pending().remove(&key, token);
        }
        report(&write, outcome, route.as_str(), &key);
    };
    // A flow dropped outside a tokio runtime (it shut down) lands here from a guard's drop:
    // there is nothing left to spawn on, and panicking in a drop would abort.
    match tokio::runtime::Handle::try_current() {
        Ok(tokio_handle) => drop(idem.background().spawn_on(work, &tokio_handle)),
        Err(_) => tracing::error!(
            route = route_for_log,
            "idempotency: a store write was abandoned: no tokio runtime is left to run it"
        ),
    }
}

/// How a background write ended.
enum WriteEnd {
    /// The store took it.
    Done,
    /// The key is not held under this token any more.
    NotHeld,
    /// The store refused it for good (a corrupt record, say).
    Refused(StoreError),
    /// The record's lifetime passed before the store answered.
    Expired(StoreError),
}

async fn retry(
    idem: &Idempotency,
    key: &StoreKey,
    token: LeaseToken,
    write: &Write,
    deadline: Instant,
) -> WriteEnd {
    let mut pause = FIRST_PAUSE;
    loop {
        let error = match write.attempt(idem, key, token).await {
            Ok(()) => return WriteEnd::Done,
            Err(StoreError::LeaseLost) => match write {
                Write::ReleaseUnanswered { settled_at } if Instant::now() < *settled_at => {
                    StoreError::LeaseLost
                }
                _ => return WriteEnd::NotHeld,
            },
            Err(error) if !error.outcome_unknown() => return WriteEnd::Refused(error),
            Err(error) => error,
        };
        let now = Instant::now();
        if now + pause >= deadline {
            return WriteEnd::Expired(error);
        }
        tokio::time::sleep(jittered(pause)).await;
        pause = (pause * 2).min(LONGEST_PAUSE);
    }
}

/// `pause` give or take a quarter, so that the retries of many keys spread out.
fn jittered(pause: Duration) -> Duration {
    pause.mul_f64(0.75 + crate::random::unit() / 2.0)
}

fn report(write: &Write, outcome: Option<WriteEnd>, route: &str, key: &StoreKey) {
    let record = |outcome, detail: &dyn std::fmt::Display| {
        observe::record(outcome, route, Some(key), detail);
    };
    let record_error = |outcome, what, error: &StoreError| {
        observe::record_error(outcome, route, Some(key), what, error);
    };
    match (write, outcome) {
        (Write::ReleaseUnanswered { .. }, Some(WriteEnd::Done)) => record(
            Outcome::Released,
            &"released a claim whose answer was lost, once the store answered",
        ),
        (Write::ReleaseUnanswered { .. }, Some(WriteEnd::NotHeld)) => record(
            Outcome::Released,
            &"a claim whose answer was lost had not landed: nothing to release",
        ),
        (Write::Release, Some(WriteEnd::Done)) => record(
            Outcome::Released,
            &"released in the background once the store answered",
        ),
        (Write::Release, Some(WriteEnd::NotHeld)) => record(
            Outcome::Released,
            &"nothing to release: the key was not held under this request's token any more",
        ),
        (Write::Complete { record: stored, .. }, Some(WriteEnd::Done)) => record(
            Outcome::Completed,
            &format_args!(
                "stored in the background once the store answered ({})",
                stored.status()
            ),
        ),
        (Write::Complete { .. }, Some(WriteEnd::NotHeld)) => record(
            Outcome::Fenced,
            &"another request took the key over (or an operator removed it) before this result \
                  could be stored; the result was not stored",
        ),
        (
            Write::Release | Write::ReleaseUnanswered { .. },
            Some(WriteEnd::Refused(error) | WriteEnd::Expired(error)),
        ) => record_error(
            Outcome::StoreError,
            "the key could not be released; it stays blocked until its lease lapses",
            &error,
        ),
        (Write::Complete { .. }, Some(WriteEnd::Refused(error) | WriteEnd::Expired(error))) => {
            record_error(
                Outcome::Lost,
                "the result of a request that ran could not be stored; once its lease lapses, \
                 a retry of its key runs it again",
                &error,
            );
        }
        (Write::Release | Write::ReleaseUnanswered { .. }, None) => record(
            Outcome::StoreError,
            &"shutdown came before the key could be released; it stays blocked until its \
              lease lapses",
        ),
        (Write::Complete { .. }, None) => record(
            Outcome::Lost,
            &"shutdown came before the result of a request that ran could be stored; once its \
              lease lapses, a retry of its key runs it again",
        ),
    }
}
