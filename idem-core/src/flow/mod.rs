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

mod detach;
mod execute;

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
    observe::record(Outcome::Refused, route, &kind.slug());
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
    match acquire(idem, policy, &key, fingerprint, route.as_str()).await {
        Acquired::Claimed(token) => {
            let run = execute::Run {
                idem: idem.clone(),
                policy: *policy,
                key,
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
            observe::record(Outcome::StoreError, route, &error);
            return store_unavailable(
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

fn store_unavailable(policy: &Policy, detail: &'static str) -> Response {
    Problem::new(ProblemKind::StoreUnavailable, detail)
        .with_retry_after(policy.retry_after)
        .into_response()
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
    route: &str,
) -> Acquired {
    let deadline = match policy.on_conflict {
        OnConflict::Reject => None,
        OnConflict::Wait(wait) => Some(Instant::now() + wait),
    };
    let mut pause = FIRST_PAUSE;
    loop {
        // A waiting request claims again rather than only looking: if the first request
        // released its key or its lease lapsed meanwhile, this one takes over at once.
        let token = LeaseToken::random();
        let claim = Claim {
            key,
            fingerprint,
            token,
            lease: policy.lease,
            ttl: policy.ttl,
        };
        let outcome = match idem.call_store(idem.store().claim(claim)).await {
            Ok(outcome) => outcome,
            Err(error) => {
                observe::record(Outcome::StoreError, route, &error);
                release_abandoned_claim(idem, key, token);
                return match policy.on_store_error {
                    OnStoreError::Fail => Acquired::Answer(store_unavailable(
                        policy,
                        "the idempotency store could not be reached, so the request was not run; \
                         retry with the same Idempotency-Key",
                    )),
                    OnStoreError::Run => Acquired::Unrecorded,
                };
            }
        };
        match outcome {
            ClaimOutcome::Claimed => {
                observe::record(Outcome::Claimed, route, &"running the handler");
                return Acquired::Claimed(token);
            }
            ClaimOutcome::Completed(stored) => {
                observe::record(Outcome::Replayed, route, &stored.status());
                return Acquired::Answer(stored.into_replay());
            }
            ClaimOutcome::Mismatch { stored_algorithm } => {
                return Acquired::Answer(mismatch(
                    route,
                    fingerprint.algorithm(),
                    stored_algorithm,
                ));
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
                            route,
                            &"the first request is in flight",
                        );
                        let problem = Problem::new(
                            ProblemKind::RequestInFlight,
                            "the first request with this Idempotency-Key is still being processed; \
                             retry after the time in Retry-After to get its result",
                        );
                        return Acquired::Answer(
                            problem.with_retry_after(policy.retry_after).into_response(),
                        );
                    }
                }
            }
        }
    }
}

/// A claim that failed with a timeout or a lost reply may still have been applied, leaving the
/// key in flight under a token nobody holds until its lease lapses. Releasing under that token
/// is harmless if the claim never landed and frees the key at once if it did; it runs in the
/// background so the refused request is answered without waiting for a store that is failing.
fn release_abandoned_claim(idem: &Idempotency, key: &StoreKey, token: LeaseToken) {
    let (runtime, key) = (idem.clone(), *key);
    idem.tasks().spawn(async move {
        let _ = runtime
            .call_store(runtime.store().release(&key, token))
            .await;
    });
}

fn mismatch(
    route: &str,
    ours: FingerprintAlgorithm,
    stored: Option<FingerprintAlgorithm>,
) -> Response {
    let detail = if stored == Some(ours) {
        observe::record(
            Outcome::Mismatch,
            route,
            &"the request differs from the first one",
        );
        "this Idempotency-Key was already used for a request with a different body; use a new \
         key for a new operation"
    } else {
        // Not the client's fault as such: the server changed how it fingerprints (or the
        // route's fingerprint mode changed) since the key was first used.
        observe::record(
            Outcome::Mismatch,
            route,
            &format_args!("fingerprint algorithm changed: stored {stored:?}, request {ours:?}"),
        );
        "this Idempotency-Key was first used under another request fingerprint algorithm, so this \
         request cannot be matched to it; use a new key"
    };
    Problem::new(ProblemKind::KeyReused, detail).into_response()
}
