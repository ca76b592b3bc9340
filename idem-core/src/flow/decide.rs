//! Step 5, the decision: one atomic claim of the store gives the key to this request, or
//! answers with the record that is already there (a replay, 409, 422).

use std::time::Duration;

use axum::response::Response;
use tokio::time::Instant;

use super::problems;
use crate::{
    fingerprint::{Fingerprint, FingerprintAlgorithm},
    observe::{self, Outcome},
    policy::{OnConflict, OnStoreError, Policy},
    replay::StoredResponse,
    runtime::Idempotency,
    scope::{Route, StoreKey},
    store::{
        Claim, ClaimOutcome, LeaseToken, StepSupport, StoreError,
        operation::{KeptRequest, Progress, Resumable},
    },
};

/// What becomes of a request, once the store has answered its claim.
pub(super) enum Decision {
    /// The key is this request's: run the handler.
    Run(Lease),
    /// Answer this instead of running the handler: a replay or a refusal.
    Respond(Response),
    /// The store failed and the policy says to run the handler without a record.
    RunWithoutRecord,
}

/// The key as this request holds it.
#[derive(Debug)]
pub(super) struct Lease {
    /// The token the claim holds the key under; every later write of the key is fenced by it.
    pub(super) token: LeaseToken,
    /// Until when the claim holds the key by this process's clock: when it was sent, plus
    /// the lease.
    pub(super) confirmed_until: tokio::time::Instant,
    /// How long the in-flight record lives in the store ([`Claim::in_flight_lifetime`]):
    /// past it, a write that never landed has nothing left to settle.
    pub(super) lifetime: Duration,
    /// What the claim found of an operation that stopped part-way, when it resumes one.
    pub(super) progress: Option<Box<Progress>>,
}

/// How long a waiting request sleeps between claims, at first and at most.
const FIRST_PAUSE: Duration = Duration::from_millis(5);
const LONGEST_PAUSE: Duration = Duration::from_millis(100);

/// Claims `key` for a request with `fingerprint`. With `OnConflict::Wait`, a key in flight is
/// claimed again, with a growing pause, until it is free or completed or the wait is over.
pub(super) async fn decide(
    idem: &Idempotency,
    policy: &Policy,
    key: &StoreKey,
    fingerprint: &Fingerprint,
    route: &Route,
    kept: Option<&KeptRequest>,
) -> Decision {
    // A store that keeps requests keeps a resumable route's with its claim; for the others
    // the runtime keeps it, should the operation stop part-way.
    let resumable = kept
        .zip(policy.resume_after)
        .filter(|_| idem.store().step_support() == StepSupport::Durable)
        .map(|(request, after)| Resumable { request, after });
    // A result this process ran, which the store has not taken yet: the store still shows its
    // key in flight, and the process knows better.
    match idem.own_copy(key, fingerprint) {
        Some(ClaimOutcome::Completed(stored)) => {
            let source = "from this process's copy; the store has not taken it yet";
            return replay(idem, stored, route, key, source);
        }
        Some(ClaimOutcome::Mismatch { stored_algorithm }) => {
            return Decision::Respond(mismatch(idem, route, key, fingerprint, stored_algorithm));
        }
        _ => {}
    }
    let deadline = match policy.on_conflict {
        OnConflict::Reject => None,
        OnConflict::Wait(wait) => Some(Instant::now() + wait),
    };
    let mut pause = FIRST_PAUSE;
    loop {
        // A waiting request claims again rather than only looking: if the first request
        // released its key or its lease lapsed meanwhile, this one takes over at once.
        match attempt(idem, policy, key, fingerprint, route, resumable).await {
            Some(decision) => return decision,
            None => {
                let now = Instant::now();
                match deadline {
                    Some(deadline) if now < deadline => {
                        tokio::time::sleep(pause.min(deadline - now)).await;
                        pause = (pause * 2).min(LONGEST_PAUSE);
                    }
                    _ => {
                        record(
                            route,
                            key,
                            Outcome::Conflict,
                            &"the first request is in flight",
                        );
                        return Decision::Respond(problems::in_flight(idem, policy));
                    }
                }
            }
        }
    }
}

/// One claim of the store: the decision it leads to, or `None` while another request holds
/// the key (a waiting request claims again).
async fn attempt(
    idem: &Idempotency,
    policy: &Policy,
    key: &StoreKey,
    fingerprint: &Fingerprint,
    route: &Route,
    resumable: Option<Resumable<'_>>,
) -> Option<Decision> {
    let claim = Claim {
        key,
        fingerprint,
        token: LeaseToken::random(),
        lease: policy.lease,
        ttl: policy.ttl,
        resumable,
    };
    let unanswered = UnansweredClaim::new(idem, &claim, route);
    // The store's answer may come late, never early: the lease is counted from here.
    let confirmed_until = tokio::time::Instant::now() + policy.lease;
    let outcome = match idem.claim(claim).await {
        Ok(outcome) => {
            unanswered.answered();
            outcome
        }
        Err(error) => {
            // Timed out or failed on the way: the claim may have landed under a token nobody
            // holds. Dropping the guard releases under it, which frees the key as soon as the
            // store answers again if it did, and is harmless if not.
            if error.outcome_unknown() {
                drop(unanswered);
            } else {
                unanswered.answered();
            }
            observe::record_error(
                Outcome::StoreError,
                route.as_str(),
                Some(key),
                "the claim failed",
                &error,
            );
            return Some(match (&error, policy.on_store_error) {
                // The store answered, and released the claim: running without a record would
                // be the loss its durability setting is there to prevent.
                (StoreError::NotDurable(_), _) => {
                    Decision::Respond(problems::claim_not_durable(idem, policy))
                }
                (_, OnStoreError::Fail) => Decision::Respond(problems::claim_failed(idem, policy)),
                (_, OnStoreError::RunWithoutRecord) => Decision::RunWithoutRecord,
            });
        }
    };
    match outcome {
        ClaimOutcome::Claimed => {
            record(route, key, Outcome::Claimed, &"running the handler");
            Some(Decision::Run(Lease {
                token: claim.token,
                confirmed_until,
                lifetime: claim.in_flight_lifetime(),
                progress: None,
            }))
        }
        ClaimOutcome::Resumed(progress) => {
            let detail = format_args!(
                "resuming an operation that stopped part-way, after {} recorded steps and {} \
                 suspensions",
                progress.steps.len(),
                progress.suspensions
            );
            record(route, key, Outcome::Resumed, &detail);
            Some(Decision::Run(Lease {
                token: claim.token,
                confirmed_until,
                lifetime: claim.in_flight_lifetime(),
                progress: Some(Box::new(progress)),
            }))
        }
        ClaimOutcome::InFlight => None,
        ClaimOutcome::Completed(stored) => Some(replay(idem, stored, route, key, "from the store")),
        ClaimOutcome::Mismatch { stored_algorithm } => Some(Decision::Respond(mismatch(
            idem,
            route,
            key,
            fingerprint,
            stored_algorithm,
        ))),
    }
}

/// The replay of a completed record; `source` says where it was found, for the log.
fn replay(
    idem: &Idempotency,
    stored: StoredResponse,
    route: &Route,
    key: &StoreKey,
    source: &str,
) -> Decision {
    let status = stored.status();
    record(
        route,
        key,
        Outcome::Replayed,
        &format_args!("{status}, {source}"),
    );
    Decision::Respond(stored.into_replay_with(|kind, detail| idem.problem(kind, detail)))
}

/// A claim sent to the store and not answered yet: its outcome is unknown until the store
/// answers.
///
/// If the store's answer is lost (the call fails or times out, or the request is dropped
/// while it waits, because its client disconnected), the claim may have landed under a token
/// that nobody holds, blocking its key until the lease lapses. Dropping this guard before
/// [`answered`](Self::answered) releases the key under that token in the background, retried
/// until the store answers: that frees the key if the claim landed and is harmless if not.
struct UnansweredClaim<'a> {
    idem: &'a Idempotency,
    key: StoreKey,
    token: LeaseToken,
    lifetime: Duration,
    route: &'a Route,
    armed: bool,
}

impl<'a> UnansweredClaim<'a> {
    fn new(idem: &'a Idempotency, claim: &Claim<'_>, route: &'a Route) -> Self {
        Self {
            idem,
            key: *claim.key,
            token: claim.token,
            lifetime: claim.in_flight_lifetime(),
            route,
            armed: true,
        }
    }

    /// The store answered: the outcome is known.
    fn answered(mut self) {
        self.armed = false;
    }
}

impl Drop for UnansweredClaim<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.idem.release_unanswered_claim(
                self.key,
                self.token,
                self.lifetime,
                self.route.clone(),
            );
        }
    }
}

/// 422, logged with what differs.
fn mismatch(
    idem: &Idempotency,
    route: &Route,
    key: &StoreKey,
    fingerprint: &Fingerprint,
    stored: Option<FingerprintAlgorithm>,
) -> Response {
    let ours = fingerprint.algorithm();
    let detail = match stored {
        Some(stored) if stored == ours => "the request differs from the first one".to_owned(),
        Some(stored) => format!(
            "the request differs from the first one: fingerprinted {ours}, the first {stored}"
        ),
        None => format!(
            "the request cannot be matched to the first one, whose fingerprint algorithm this \
             build does not know (this one: {ours})"
        ),
    };
    record(route, key, Outcome::Mismatch, &detail);
    problems::key_reused(idem, ours, stored)
}

fn record(route: &Route, key: &StoreKey, outcome: Outcome, detail: &dyn std::fmt::Display) {
    observe::record(outcome, route.as_str(), Some(key), detail);
}
