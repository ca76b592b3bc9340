//! The request flow of SPEC §5, shared by [`IdempotencyLayer`](crate::IdempotencyLayer) and
//! `#[idempotent]`:
//!
//! 1. [`admit`]: parse the key, buffer the body (bounded), fingerprint it.
//! 2. [`store_key`]: resolve the principal and hash the composite key.
//! 3. [`run`]: claim the key in one atomic store call, then replay, refuse, or run the
//!    handler in a task of its own ([`execute`]) that stores its result.
//!
//! The macro runs the handler's extractors between steps 1 and 3, so that a rejected request
//! never touches the store.

// A refusal is a `Response`, returned once per request; see `__private`.
#![allow(clippy::result_large_err)]

mod answer;
mod background;
mod detach;
mod execute;
pub(crate) mod pending;
mod stream;

use std::{future::Future, time::Duration};

use axum::{
    RequestExt,
    extract::Request,
    response::{IntoResponse, Response},
};
use bytes::Bytes;
use http::request::Parts;
use http_body_util::LengthLimitError;
use tokio::time::Instant;

use crate::{
    Idempotency,
    context::IdempotencyContext,
    fingerprint::{Fingerprint, FingerprintAlgorithm},
    key::IdempotencyKey,
    observe::{self, Outcome},
    policy::{OnConflict, OnStoreError, Policy},
    problem::{Problem, ProblemKind},
    replay::NoStore,
    scope::{self, Route, StoreKey, route_of},
    store::{Claim, ClaimOutcome, LeaseToken},
};

use self::pending::PendingAnswer;

/// A request that passed the checks that need no store.
pub(crate) enum Admission {
    /// It has no key and the policy lets it run without one.
    Unkeyed(Request),
    /// It has a key, and its body is buffered and fingerprinted.
    Keyed(Keyed),
}

/// A keyed request, ready for its principal to be resolved.
pub(crate) struct Keyed {
    pub(crate) parts: Parts,
    pub(crate) body: Bytes,
    pub(crate) key: IdempotencyKey,
    pub(crate) fingerprint: Fingerprint,
}

/// Step 1: the key, the bounded body and the fingerprint, or the Problem that refuses them.
pub(crate) async fn admit(policy: &Policy, request: Request) -> Result<Admission, Response> {
    let key = match IdempotencyKey::from_headers(request.headers(), policy.key_syntax) {
        Ok(Some(key)) => key,
        Ok(None) if !policy.required => return Ok(Admission::Unkeyed(request)),
        Ok(None) => {
            let detail = "this operation requires an Idempotency-Key header: send a new unique \
                          value for each operation, and the same value when you retry it";
            let route = scope::route(request.extensions(), request.uri());
            return Err(refuse(ProblemKind::KeyMissing, detail.into(), route));
        }
        Err(error) => {
            let route = scope::route(request.extensions(), request.uri());
            return Err(refuse(ProblemKind::KeyMalformed, error.to_string(), route));
        }
    };
    // The body limit is axum's `DefaultBodyLimit`, read the way axum's own extractors do.
    let (parts, body) = request.with_limited_body().into_parts();
    let body = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(body) => body,
        Err(error) if is_length_limit(&error) => {
            let detail = "the request body is larger than this endpoint accepts".to_owned();
            return Err(refuse(ProblemKind::BodyTooLarge, detail, route_of(&parts)));
        }
        Err(error) => {
            let detail = format!("the request body could not be read: {error}");
            return Err(refuse(
                ProblemKind::BodyUnreadable,
                detail,
                route_of(&parts),
            ));
        }
    };
    // The concrete target, not the route template: a key reused for another resource is a
    // different request (see the fingerprint module docs).
    let target = parts
        .uri
        .path_and_query()
        .map_or("/", |target| target.as_str());
    let fingerprint = Fingerprint::compute(
        &parts.method,
        target,
        &parts.headers,
        &body,
        policy.fingerprint,
    );
    Ok(Admission::Keyed(Keyed {
        parts,
        body,
        key,
        fingerprint,
    }))
}

fn is_length_limit(error: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = source {
        if error.is::<LengthLimitError>() {
            return true;
        }
        source = error.source();
    }
    false
}

/// Step 2: the principal of the request and the store key made from it.
pub(crate) fn store_key(
    idem: &Idempotency,
    policy: &Policy,
    parts: &Parts,
    key: &IdempotencyKey,
) -> Result<StoreKey, Response> {
    let scope = &policy.scope;
    let principal = if scope.needs_principal() {
        match idem.resolver().resolve(scope, parts) {
            Some(principal) => Some(principal),
            None => {
                let detail = format!(
                    "this Idempotency-Key is scoped to a principal ({}) and the request has none: \
                     authenticate the request",
                    scope.name()
                );
                return Err(refuse(
                    ProblemKind::PrincipalMissing,
                    detail,
                    route_of(parts),
                ));
            }
        }
    } else {
        None
    };
    Ok(StoreKey::new(
        scope,
        principal.as_ref(),
        &parts.method,
        route_of(parts),
        key,
    ))
}

fn refuse(kind: ProblemKind, detail: String, route: &str) -> Response {
    observe::record(Outcome::Refused, route, None, &kind.slug());
    Problem::new(kind, detail).into_response()
}

/// Step 3: claims the key and answers: a replay, a refusal, or the handler's response.
///
/// `handler` is called only when the handler is to run.
pub(crate) async fn run<F, Fut>(
    idem: &Idempotency,
    policy: &Policy,
    key: StoreKey,
    fingerprint: &Fingerprint,
    route: Route,
    context: IdempotencyContext,
    handler: F,
) -> Response
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Response> + Send + 'static,
{
    match acquire(idem, policy, &key, fingerprint, &route).await {
        Acquired::Claimed(token) => {
            let run = execute::Run {
                idem: idem.clone(),
                policy: *policy,
                key,
                fingerprint: *fingerprint,
                token,
                route,
                context,
            };
            run.run(handler()).await
        }
        Acquired::Answer(response) => response,
        Acquired::Unrecorded => run_unrecorded(policy, route.as_str(), context, handler()).await,
    }
}

/// Runs a handler without a record: there is no key, or the store failed and the policy
/// says to run anyway. A transaction the handler opened commits when its response would have
/// been stored, and rolls back otherwise, as on the recorded path.
pub(crate) async fn run_unrecorded(
    policy: &Policy,
    route: &str,
    context: IdempotencyContext,
    handler: impl Future<Output = Response>,
) -> Response {
    observe::record(
        Outcome::Unrecorded,
        route,
        None,
        &"ran without an idempotency record",
    );
    let response = handler.await;
    if let Some(transaction) = context.take_transaction().await {
        let idem = context.runtime();
        let ended = if counts_as_result(policy, &response) {
            idem.call_store(transaction.commit()).await
        } else {
            idem.call_store(transaction.rollback()).await
        };
        if let Err(error) = ended {
            observe::record_error(
                Outcome::StoreError,
                route,
                None,
                "the transaction of a request without a record could not be ended",
                &error,
            );
            return answer::store_unavailable(
                policy,
                "the transaction of this request could not be committed",
            );
        }
    }
    response
}

/// Whether a response is the operation's result, to be stored (and its transaction
/// committed), or a failure after which the key is released.
pub(crate) fn counts_as_result(policy: &Policy, response: &Response) -> bool {
    response.extensions().get::<NoStore>().is_none()
        && (policy.store_server_errors || !response.status().is_server_error())
}

enum Acquired {
    /// The key is ours under this token: run the handler.
    Claimed(LeaseToken),
    /// A replay or a refusal.
    Answer(Response),
    /// The store failed and the policy says to run without a record.
    Unrecorded,
}

/// How long a waiting request sleeps between claims, at first and at most.
const FIRST_PAUSE: Duration = Duration::from_millis(5);
const LONGEST_PAUSE: Duration = Duration::from_millis(100);

async fn acquire(
    idem: &Idempotency,
    policy: &Policy,
    key: &StoreKey,
    fingerprint: &Fingerprint,
    route: &Route,
) -> Acquired {
    // A result of this process that the store has not taken yet answers first: the store
    // still shows its key in flight.
    match idem.pending().answer(key, fingerprint) {
        Some(PendingAnswer::Replay(stored)) => {
            observe::record(
                Outcome::Replayed,
                route.as_str(),
                Some(key),
                &"replayed from this process's copy; the store has not taken it yet",
            );
            return Acquired::Answer(stored.into_replay());
        }
        Some(PendingAnswer::Mismatch(stored)) => {
            return Acquired::Answer(mismatch(route, key, fingerprint, Some(stored.algorithm())));
        }
        None => {}
    }
    let deadline = match policy.on_conflict {
        OnConflict::Reject => None,
        OnConflict::Wait(wait) => Some(Instant::now() + wait),
    };
    let mut pause = FIRST_PAUSE;
    loop {
        // A waiting request claims again rather than only looking: if the first request
        // released its key or its lease lapsed meanwhile, this one takes over at once.
        let claim = Claim {
            key,
            fingerprint,
            token: LeaseToken::random(),
            lease: policy.lease,
            ttl: policy.ttl,
        };
        let unanswered = UnansweredClaim::new(idem, &claim, route);
        let result = idem.call_store(idem.store().claim(claim)).await;
        let outcome = match result {
            Ok(outcome) => {
                unanswered.answered();
                outcome
            }
            Err(error) => {
                // Timed out or failed on the way: the claim may have landed under a token
                // nobody holds. Dropping the guard releases under it, which frees the key
                // as soon as the store answers again if it did, and is harmless if not.
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
                return match policy.on_store_error {
                    OnStoreError::Fail => Acquired::Answer(answer::claim_failed(policy)),
                    OnStoreError::Run => Acquired::Unrecorded,
                };
            }
        };
        match outcome {
            ClaimOutcome::Claimed => {
                observe::record(
                    Outcome::Claimed,
                    route.as_str(),
                    Some(key),
                    &"running the handler",
                );
                return Acquired::Claimed(claim.token);
            }
            ClaimOutcome::Completed(stored) => {
                observe::record(
                    Outcome::Replayed,
                    route.as_str(),
                    Some(key),
                    &stored.status(),
                );
                return Acquired::Answer(stored.into_replay());
            }
            ClaimOutcome::Mismatch { stored_algorithm } => {
                return Acquired::Answer(mismatch(route, key, fingerprint, stored_algorithm));
            }
            ClaimOutcome::InFlight => {
                let now = Instant::now();
                match deadline {
                    Some(deadline) if now < deadline => {
                        tokio::time::sleep(pause.min(deadline - now)).await;
                        pause = (pause * 2).min(LONGEST_PAUSE);
                    }
                    _ => {
                        observe::record(
                            Outcome::Conflict,
                            route.as_str(),
                            Some(key),
                            &"the first request is in flight",
                        );
                        return Acquired::Answer(answer::in_flight(policy));
                    }
                }
            }
        }
    }
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
            background::release_unanswered_claim(
                self.idem,
                self.key,
                self.token,
                self.lifetime,
                self.route.clone(),
            );
        }
    }
}

fn mismatch(
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
    observe::record(Outcome::Mismatch, route.as_str(), Some(key), &detail);
    answer::key_reused(ours, stored)
}
