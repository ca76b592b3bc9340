//! The conformance suite of idem's [`Store`] trait: the rules in the
//! [`idem_core::store`] docs, as tests that any store must pass. Every store of the idem
//! family runs it (the memory store in `idem-core`, `idem-redis`, `idem-postgres`), and so can
//! yours: add this crate as a dev-dependency of your store's crate.
//!
//! [`store_conformance_tests!`](crate::store_conformance_tests) writes one `#[tokio::test]`
//! per rule. Give it an expression that makes a future of `Option<S>`, where `S` is an
//! `Arc<dyn Store>` or a [`StoreUnderTest`]: a fresh store (or a fresh namespace of a shared
//! one) per test, or `None` to skip the suite, for instance when the server it needs is not
//! configured.
//!
//! ```ignore
//! // tests/conformance.rs of a store's crate
//! use std::sync::Arc;
//! use idem_core::store::{MemoryStore, Store};
//!
//! idem_conformance::store_conformance_tests!(async {
//!     Some(Arc::new(MemoryStore::default()) as Arc<dyn Store>)
//! });
//! ```
//!
//! Attributes after the expression go on every test: a suite that needs a server can be
//! reported `ignored`, rather than passing without doing anything, in a build that was not
//! given one: `store_conformance_tests!(make_store(), #[cfg_attr(not(redis_configured),
//! ignore = "set REDIS_URL")])`.
//!
//! A store that keeps records as bytes should also show that it answers a record it cannot
//! read with [`StoreError::Corrupt`] rather than a panic or a guess (rule 9): give it a
//! [`StoreUnderTest`] with a [`corrupt`](StoreUnderTest::corrupt) hook that damages a stored
//! record the way the rule's test asks, in the store's own backend. Without the hook that
//! test says it was skipped.
//!
//! [`FaultyStore`] wraps any store and fails the calls a test chooses, to test what a
//! runtime does when its store fails.
//!
//! Needs `tokio` with the `macros` and `rt-multi-thread` features in the crate that uses it.
//! Tests of leases and TTLs sleep for a few hundred milliseconds of real time, because shared
//! stores keep time on their server's clock.

mod faulty;
mod operator;

use std::{fmt, future::Future, pin::Pin, sync::Arc, time::Duration};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, StatusCode};
use tokio::time::sleep;

use idem_core::store::{
    Claim, ClaimOutcome, LeaseToken, StepSupport, Store, StoreError,
    operation::{KeptRequest, Progress, RecordedStep, Resumable},
};
use idem_core::{
    fingerprint::{Fingerprint, FingerprintMode},
    replay::StoredResponse,
    scope::StoreKey,
};

pub use self::{
    faulty::{Call, Fault, FaultyStore},
    operator::{
        a_claimed_key_looks_up_in_flight, a_completed_key_looks_up_with_its_status_and_expiry,
        an_absent_or_expired_key_looks_up_as_nothing, an_operation_looks_up_with_its_steps,
        an_unreadable_record_can_be_removed, removing_a_completed_key_runs_the_next_request,
        removing_a_key_in_flight_fences_its_holder, removing_an_operation_forgets_its_steps,
    },
};

/// A lease long enough never to lapse during a test.
const LONG: Duration = Duration::from_secs(60);
/// A lease or TTL that lapses during a test, and how long to sleep for it to lapse.
const SHORT: Duration = Duration::from_millis(300);
const PAST_SHORT: Duration = Duration::from_millis(500);

/// Writes one test per conformance rule; see the [module docs](crate).
/// Its list of rules is [`every_rule`]'s: a rule added to one is added to the other.
#[macro_export]
macro_rules! store_conformance_tests {
    ($make_store:expr $(, #[$attribute:meta])* $(,)?) => {
        $crate::store_conformance_tests!(@tests [$(#[$attribute])*] ($make_store);
            an_absent_key_is_claimed,
            a_claimed_key_is_in_flight_for_the_same_request,
            a_claimed_key_refuses_another_fingerprint,
            a_completed_key_replays_the_exact_response,
            a_completed_key_refuses_another_fingerprint,
            a_response_too_large_to_keep_is_completed_without_body,
            a_large_body_round_trips,
            only_the_holder_completes,
            a_repeated_completion_by_the_holder_changes_nothing,
            release_frees_the_key_for_any_request,
            only_the_holder_releases,
            only_the_holder_renews,
            renewal_keeps_the_lease_alive,
            a_lapsed_lease_is_taken_over_and_the_old_holder_fenced,
            a_lapsed_lease_nobody_took_over_still_completes,
            a_lapsed_lease_still_refuses_another_fingerprint,
            a_completed_record_expires_after_its_ttl,
            an_abandoned_claim_expires,
            keys_are_independent,
            concurrent_claims_grant_the_key_once,
            an_unreadable_record_is_a_store_error,
            steps_are_recorded_in_order,
            a_suspended_operation_resumes_with_its_steps,
            a_lapsed_operation_with_steps_resumes,
            a_resumed_operation_keeps_its_expiry,
            completion_ends_the_steps,
            a_durable_store_answers_the_operations_due,
            an_absent_or_expired_key_looks_up_as_nothing,
            a_claimed_key_looks_up_in_flight,
            a_completed_key_looks_up_with_its_status_and_expiry,
            an_operation_looks_up_with_its_steps,
            removing_a_completed_key_runs_the_next_request,
            removing_a_key_in_flight_fences_its_holder,
            removing_an_operation_forgets_its_steps,
            an_unreadable_record_can_be_removed,
        );
    };
    (@tests $attributes:tt $make_store:tt; $($rule:ident),* $(,)?) => {
        $($crate::store_conformance_tests!(@test $attributes $make_store $rule);)*
    };
    (@test [$($attribute:tt)*] ($make_store:expr) $rule:ident) => {
        #[::tokio::test(flavor = "multi_thread", worker_threads = 4)]
        $($attribute)*
        async fn $rule() {
            match $make_store.await {
                ::core::option::Option::Some(store) => {
                    let store: $crate::StoreUnderTest =
                        ::core::convert::Into::into(store);
                    $crate::$rule(store).await
                }
                ::core::option::Option::None => {
                    ::std::eprintln!("skipped {}: no store configured", ::core::stringify!($rule))
                }
            }
        }
    };
}

/// Every rule of the suite, one after another, on one store: for a store whose every
/// instance is expensive to set up (a Redis Cluster of a test's own), where the
/// [macro](crate::store_conformance_tests)'s one test per rule would need one each. The same
/// rules as the macro, in the same order.
pub async fn every_rule(store: StoreUnderTest) {
    an_absent_key_is_claimed(store.clone()).await;
    a_claimed_key_is_in_flight_for_the_same_request(store.clone()).await;
    a_claimed_key_refuses_another_fingerprint(store.clone()).await;
    a_completed_key_replays_the_exact_response(store.clone()).await;
    a_completed_key_refuses_another_fingerprint(store.clone()).await;
    a_response_too_large_to_keep_is_completed_without_body(store.clone()).await;
    a_large_body_round_trips(store.clone()).await;
    only_the_holder_completes(store.clone()).await;
    a_repeated_completion_by_the_holder_changes_nothing(store.clone()).await;
    release_frees_the_key_for_any_request(store.clone()).await;
    only_the_holder_releases(store.clone()).await;
    only_the_holder_renews(store.clone()).await;
    renewal_keeps_the_lease_alive(store.clone()).await;
    a_lapsed_lease_is_taken_over_and_the_old_holder_fenced(store.clone()).await;
    a_lapsed_lease_nobody_took_over_still_completes(store.clone()).await;
    a_lapsed_lease_still_refuses_another_fingerprint(store.clone()).await;
    a_completed_record_expires_after_its_ttl(store.clone()).await;
    an_abandoned_claim_expires(store.clone()).await;
    keys_are_independent(store.clone()).await;
    concurrent_claims_grant_the_key_once(store.clone()).await;
    an_unreadable_record_is_a_store_error(store.clone()).await;
    steps_are_recorded_in_order(store.clone()).await;
    a_suspended_operation_resumes_with_its_steps(store.clone()).await;
    a_lapsed_operation_with_steps_resumes(store.clone()).await;
    a_resumed_operation_keeps_its_expiry(store.clone()).await;
    completion_ends_the_steps(store.clone()).await;
    a_durable_store_answers_the_operations_due(store.clone()).await;
    an_absent_or_expired_key_looks_up_as_nothing(store.clone()).await;
    a_claimed_key_looks_up_in_flight(store.clone()).await;
    a_completed_key_looks_up_with_its_status_and_expiry(store.clone()).await;
    an_operation_looks_up_with_its_steps(store.clone()).await;
    removing_a_completed_key_runs_the_next_request(store.clone()).await;
    removing_a_key_in_flight_fences_its_holder(store.clone()).await;
    removing_an_operation_forgets_its_steps(store.clone()).await;
    an_unreadable_record_can_be_removed(store).await;
}

/// How a rule's test asks the [`corrupt`](StoreUnderTest::corrupt) hook to damage a record.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Corruption {
    /// Replace the stored response of the completed record with these bytes, which
    /// [`StoredResponse::decode`] refuses.
    Response(Vec<u8>),
    /// Mark the record as written by this record format version, which this build does not
    /// know.
    FormatVersion(u16),
}

/// The future of a [`corrupt`](StoreUnderTest::corrupt) hook.
pub type CorruptFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The store a conformance test runs against, with the hooks some rules need.
///
/// An `Arc<dyn Store>` converts into one without hooks.
#[derive(Clone)]
pub struct StoreUnderTest {
    store: Arc<dyn Store>,
    corrupt: Option<Arc<dyn Fn(StoreKey, Corruption) -> CorruptFuture + Send + Sync>>,
}

impl StoreUnderTest {
    /// The store, without hooks.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            corrupt: None,
        }
    }

    /// A hook that damages the completed record of a key in the store's backend as
    /// [`Corruption`] says (for rule 9). A store that keeps no encoded records has nothing to
    /// damage and needs none.
    pub fn corrupt<F>(mut self, hook: F) -> Self
    where
        F: Fn(StoreKey, Corruption) -> CorruptFuture + Send + Sync + 'static,
    {
        self.corrupt = Some(Arc::new(hook));
        self
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }
}

impl From<Arc<dyn Store>> for StoreUnderTest {
    fn from(store: Arc<dyn Store>) -> Self {
        Self::new(store)
    }
}

impl fmt::Debug for StoreUnderTest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreUnderTest")
            .field("store", &self.store)
            .field("corrupt", &self.corrupt.is_some())
            .finish()
    }
}

/// A fresh random store key, for a store's own tests.
pub fn new_key() -> StoreKey {
    StoreKey::from_bytes(rand::random())
}

/// The fingerprint of a JSON `body` posted to `/conformance`, for a store's own tests: equal
/// bodies give equal fingerprints, different ones different fingerprints.
pub fn fingerprint(body: &str) -> Fingerprint {
    let mut headers = HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Fingerprint::compute(
        &Method::POST,
        "/conformance",
        &headers,
        body.as_bytes(),
        FingerprintMode::Json,
    )
}

fn claim<'a>(key: &'a StoreKey, fingerprint: &'a Fingerprint, token: LeaseToken) -> Claim<'a> {
    Claim {
        key,
        fingerprint,
        token,
        lease: LONG,
        ttl: LONG,
        resumable: None,
    }
}

fn response(body: &'static str) -> StoredResponse {
    let mut headers = HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.append("x-multi", HeaderValue::from_static("first"));
    headers.append("x-multi", HeaderValue::from_static("second"));
    headers.insert(
        http::header::LOCATION,
        HeaderValue::from_static("/payments/pay_1"),
    );
    StoredResponse::new(
        StatusCode::CREATED,
        &headers,
        &Bytes::from_static(body.as_bytes()),
    )
    .expect("an encodable response")
}

async fn claim_ok(store: &dyn Store, claim: Claim<'_>) -> ClaimOutcome {
    store.claim(claim).await.expect("claim failed")
}

fn assert_lease_lost(result: Result<(), StoreError>, what: &str) {
    assert!(
        matches!(result, Err(StoreError::LeaseLost)),
        "{what}: expected LeaseLost, got {result:?}"
    );
}

/// Rule 1: the first claim of a key gets it.
pub async fn an_absent_key_is_claimed(store: StoreUnderTest) {
    let store = Arc::clone(store.store());
    let (key, fp) = (new_key(), fingerprint("{}"));
    assert_eq!(
        claim_ok(&*store, claim(&key, &fp, LeaseToken::random())).await,
        ClaimOutcome::Claimed
    );
}

/// Rules 1 and 2: a second claim, same request, finds the first in flight.
pub async fn a_claimed_key_is_in_flight_for_the_same_request(store: StoreUnderTest) {
    let store = Arc::clone(store.store());
    let (key, fp) = (new_key(), fingerprint("{\"a\":1}"));
    claim_ok(&*store, claim(&key, &fp, LeaseToken::random())).await;
    assert_eq!(
        claim_ok(&*store, claim(&key, &fp, LeaseToken::random())).await,
        ClaimOutcome::InFlight
    );
}

/// Rule 3: while in flight, another fingerprint is a mismatch that names the algorithm.
pub async fn a_claimed_key_refuses_another_fingerprint(store: StoreUnderTest) {
    let store = Arc::clone(store.store());
    let (key, first, other) = (
        new_key(),
        fingerprint("{\"a\":1}"),
        fingerprint("{\"a\":2}"),
    );
    claim_ok(&*store, claim(&key, &first, LeaseToken::random())).await;
    assert_eq!(
        claim_ok(&*store, claim(&key, &other, LeaseToken::random())).await,
        ClaimOutcome::Mismatch {
            stored_algorithm: Some(first.algorithm())
        }
    );
}

/// Rule 8: a completed key answers with the response exactly as stored.
pub async fn a_completed_key_replays_the_exact_response(store: StoreUnderTest) {
    let store = Arc::clone(store.store());
    let (key, fp, token) = (new_key(), fingerprint("{}"), LeaseToken::random());
    claim_ok(&*store, claim(&key, &fp, token)).await;
    let stored = response("{\"id\":\"pay_1\"}");
    store
        .complete(&key, token, &stored, LONG)
        .await
        .expect("complete failed");
    match claim_ok(&*store, claim(&key, &fp, LeaseToken::random())).await {
        ClaimOutcome::Completed(replayed) => {
            assert_eq!(replayed, stored);
            let headers = replayed.headers();
            let multi: Vec<_> = headers.get_all("x-multi").iter().collect();
            assert_eq!(
                multi,
                ["first", "second"],
                "header values must keep their order"
            );
        }
        other => panic!("expected the completed response, got {other:?}"),
    }
}

/// Rule 3: a completed key refuses another fingerprint too.
pub async fn a_completed_key_refuses_another_fingerprint(store: StoreUnderTest) {
    let store = Arc::clone(store.store());
    let (key, first, token) = (new_key(), fingerprint("{\"a\":1}"), LeaseToken::random());
    claim_ok(&*store, claim(&key, &first, token)).await;
    store
        .complete(&key, token, &response("{}"), LONG)
        .await
        .unwrap();
    let other = fingerprint("{\"a\":2}");
    assert_eq!(
        claim_ok(&*store, claim(&key, &other, LeaseToken::random())).await,
        ClaimOutcome::Mismatch {
            stored_algorithm: Some(first.algorithm())
        }
    );
}

/// Rule 8: the record of a response too large to keep round-trips as such.
pub async fn a_response_too_large_to_keep_is_completed_without_body(store: StoreUnderTest) {
    let store = Arc::clone(store.store());
    let (key, fp, token) = (new_key(), fingerprint("{}"), LeaseToken::random());
    claim_ok(&*store, claim(&key, &fp, token)).await;
    let omitted = StoredResponse::omitted(StatusCode::OK);
    store.complete(&key, token, &omitted, LONG).await.unwrap();
    assert_eq!(
        claim_ok(&*store, claim(&key, &fp, LeaseToken::random())).await,
        ClaimOutcome::Completed(omitted)
    );
}

/// Rule 8: a large body (1 MiB of every byte value) round-trips unchanged.
pub async fn a_large_body_round_trips(store: StoreUnderTest) {
    let store = Arc::clone(store.store());
    let (key, fp, token) = (new_key(), fingerprint("{}"), LeaseToken::random());
    claim_ok(&*store, claim(&key, &fp, token)).await;
    let body: Vec<u8> = (0..1024 * 1024).map(|i: u32| (i % 251) as u8).collect();
    let stored = StoredResponse::new(StatusCode::OK, &HeaderMap::new(), &Bytes::from(body))
        .expect("an encodable response");
    store.complete(&key, token, &stored, LONG).await.unwrap();
    assert_eq!(
        claim_ok(&*store, claim(&key, &fp, LeaseToken::random())).await,
        ClaimOutcome::Completed(stored)
    );
}

/// Rule 5: another token cannot complete the record, which stays in flight for its holder.
pub async fn only_the_holder_completes(store: StoreUnderTest) {
    let store = Arc::clone(store.store());
    let (key, fp, holder) = (new_key(), fingerprint("{}"), LeaseToken::random());
    claim_ok(&*store, claim(&key, &fp, holder)).await;
    let intruder = store
        .complete(&key, LeaseToken::random(), &response("{\"x\":1}"), LONG)
        .await;
    assert_lease_lost(intruder, "complete with a foreign token");
    assert_eq!(
        claim_ok(&*store, claim(&key, &fp, LeaseToken::random())).await,
        ClaimOutcome::InFlight
    );
    store
        .complete(&key, holder, &response("{}"), LONG)
        .await
        .expect("the holder completes");
}

/// Rule 5: a completed record is no longer in flight. Its holder's completion sent again
/// (its first answer was lost) answers `Ok` and changes nothing; another token's is refused,
/// and so is a release.
pub async fn a_repeated_completion_by_the_holder_changes_nothing(store: StoreUnderTest) {
    let store = Arc::clone(store.store());
    let (key, fp, token) = (new_key(), fingerprint("{}"), LeaseToken::random());
    claim_ok(&*store, claim(&key, &fp, token)).await;
    store
        .complete(&key, token, &response("{\"n\":1}"), LONG)
        .await
        .unwrap();
    store
        .complete(&key, token, &response("{\"n\":2}"), LONG)
        .await
        .expect("the holder's repeated completion answers Ok");
    assert_lease_lost(
        store
            .complete(&key, LeaseToken::random(), &response("{\"n\":3}"), LONG)
            .await,
        "another token's completion",
    );
    assert_lease_lost(store.release(&key, token).await, "release after completion");
    assert_eq!(
        claim_ok(&*store, claim(&key, &fp, LeaseToken::random())).await,
        ClaimOutcome::Completed(response("{\"n\":1}"))
    );
}

/// Rules 3 and 5: a released key is free, for another fingerprint as well.
pub async fn release_frees_the_key_for_any_request(store: StoreUnderTest) {
    let store = Arc::clone(store.store());
    let (key, fp, token) = (new_key(), fingerprint("{\"a\":1}"), LeaseToken::random());
    claim_ok(&*store, claim(&key, &fp, token)).await;
    store.release(&key, token).await.expect("release failed");
    let fixed = fingerprint("{\"a\":2}");
    assert_eq!(
        claim_ok(&*store, claim(&key, &fixed, LeaseToken::random())).await,
        ClaimOutcome::Claimed
    );
}

/// Rule 5: another token cannot release the record.
pub async fn only_the_holder_releases(store: StoreUnderTest) {
    let store = Arc::clone(store.store());
    let (key, fp) = (new_key(), fingerprint("{}"));
    claim_ok(&*store, claim(&key, &fp, LeaseToken::random())).await;
    assert_lease_lost(
        store.release(&key, LeaseToken::random()).await,
        "release with a foreign token",
    );
    assert_eq!(
        claim_ok(&*store, claim(&key, &fp, LeaseToken::random())).await,
        ClaimOutcome::InFlight
    );
    assert_lease_lost(
        store.release(&new_key(), LeaseToken::random()).await,
        "release of an absent key",
    );
}

/// Rule 5: another token cannot renew the lease.
pub async fn only_the_holder_renews(store: StoreUnderTest) {
    let store = Arc::clone(store.store());
    let (key, fp, token) = (new_key(), fingerprint("{}"), LeaseToken::random());
    claim_ok(&*store, claim(&key, &fp, token)).await;
    assert_lease_lost(
        store.renew(&key, LeaseToken::random(), LONG).await,
        "renew with a foreign token",
    );
    store
        .renew(&key, token, LONG)
        .await
        .expect("the holder renews");
    assert_lease_lost(
        store.renew(&new_key(), token, LONG).await,
        "renew of an absent key",
    );
}

/// Rule 4: a lease renewed in time does not lapse.
pub async fn renewal_keeps_the_lease_alive(store: StoreUnderTest) {
    let store = Arc::clone(store.store());
    let (key, fp, token) = (new_key(), fingerprint("{}"), LeaseToken::random());
    let short = Claim {
        lease: SHORT,
        ..claim(&key, &fp, token)
    };
    claim_ok(&*store, short).await;
    for _ in 0..5 {
        sleep(SHORT / 3).await;
        store
            .renew(&key, token, SHORT)
            .await
            .expect("renewal failed");
    }
    // Five renewals took longer than one lease: without them the key would be free.
    assert_eq!(
        claim_ok(&*store, claim(&key, &fp, LeaseToken::random())).await,
        ClaimOutcome::InFlight
    );
}

/// Rules 4 and 5: once the lease lapses the same request takes the key over, and the old
/// holder can no longer complete, renew or release it.
pub async fn a_lapsed_lease_is_taken_over_and_the_old_holder_fenced(store: StoreUnderTest) {
    let store = Arc::clone(store.store());
    let (key, fp, old) = (new_key(), fingerprint("{}"), LeaseToken::random());
    claim_ok(
        &*store,
        Claim {
            lease: SHORT,
            ..claim(&key, &fp, old)
        },
    )
    .await;
    sleep(PAST_SHORT).await;
    let new = LeaseToken::random();
    assert_eq!(
        claim_ok(&*store, claim(&key, &fp, new)).await,
        ClaimOutcome::Claimed
    );
    assert_lease_lost(
        store
            .complete(&key, old, &response("{\"old\":1}"), LONG)
            .await,
        "late completion",
    );
    assert_lease_lost(store.renew(&key, old, LONG).await, "late renewal");
    assert_lease_lost(store.release(&key, old).await, "late release");
    store
        .complete(&key, new, &response("{\"new\":1}"), LONG)
        .await
        .expect("the new holder completes");
    assert_eq!(
        claim_ok(&*store, claim(&key, &fp, LeaseToken::random())).await,
        ClaimOutcome::Completed(response("{\"new\":1}"))
    );
}

/// Rules 4 and 5: only a takeover fences a holder, never the passing of its lease: a holder
/// whose lease lapsed while nobody claimed the key still completes it (the store was slow,
/// say, and the in-flight record outlives its lease).
pub async fn a_lapsed_lease_nobody_took_over_still_completes(store: StoreUnderTest) {
    let store = Arc::clone(store.store());
    let (key, fp, holder) = (new_key(), fingerprint("{}"), LeaseToken::random());
    claim_ok(
        &*store,
        Claim {
            lease: SHORT,
            ..claim(&key, &fp, holder)
        },
    )
    .await;
    sleep(PAST_SHORT).await;
    store
        .complete(&key, holder, &response("{\"late\":1}"), LONG)
        .await
        .expect("a late completion that nobody fenced lands");
    assert_eq!(
        claim_ok(&*store, claim(&key, &fp, LeaseToken::random())).await,
        ClaimOutcome::Completed(response("{\"late\":1}"))
    );
}

/// Rule 3: a lapsed lease frees the key for the same request only.
pub async fn a_lapsed_lease_still_refuses_another_fingerprint(store: StoreUnderTest) {
    let store = Arc::clone(store.store());
    let (key, first) = (new_key(), fingerprint("{\"a\":1}"));
    claim_ok(
        &*store,
        Claim {
            lease: SHORT,
            ..claim(&key, &first, LeaseToken::random())
        },
    )
    .await;
    sleep(PAST_SHORT).await;
    let other = fingerprint("{\"a\":2}");
    assert_eq!(
        claim_ok(&*store, claim(&key, &other, LeaseToken::random())).await,
        ClaimOutcome::Mismatch {
            stored_algorithm: Some(first.algorithm())
        }
    );
}

/// Rule 6: a completed record is forgotten after its TTL.
pub async fn a_completed_record_expires_after_its_ttl(store: StoreUnderTest) {
    let store = Arc::clone(store.store());
    let (key, fp, token) = (new_key(), fingerprint("{}"), LeaseToken::random());
    claim_ok(&*store, claim(&key, &fp, token)).await;
    store
        .complete(&key, token, &response("{}"), SHORT)
        .await
        .unwrap();
    assert!(matches!(
        claim_ok(&*store, claim(&key, &fp, LeaseToken::random())).await,
        ClaimOutcome::Completed(_)
    ));
    sleep(PAST_SHORT).await;
    let other = fingerprint("{\"new\":true}");
    assert_eq!(
        claim_ok(&*store, claim(&key, &other, LeaseToken::random())).await,
        ClaimOutcome::Claimed
    );
}

/// Rule 6: a claim that is never completed nor released is forgotten after max(ttl, lease).
pub async fn an_abandoned_claim_expires(store: StoreUnderTest) {
    let store = Arc::clone(store.store());
    let (key, first) = (new_key(), fingerprint("{\"a\":1}"));
    let abandoned = Claim {
        lease: SHORT,
        ttl: SHORT,
        ..claim(&key, &first, LeaseToken::random())
    };
    claim_ok(&*store, abandoned).await;
    sleep(PAST_SHORT).await;
    let other = fingerprint("{\"a\":2}");
    assert_eq!(
        claim_ok(&*store, claim(&key, &other, LeaseToken::random())).await,
        ClaimOutcome::Claimed
    );
}

/// Records of different keys do not affect each other.
pub async fn keys_are_independent(store: StoreUnderTest) {
    let store = Arc::clone(store.store());
    let fp = fingerprint("{}");
    let (one, two, token) = (new_key(), new_key(), LeaseToken::random());
    claim_ok(&*store, claim(&one, &fp, token)).await;
    assert_eq!(
        claim_ok(&*store, claim(&two, &fp, LeaseToken::random())).await,
        ClaimOutcome::Claimed
    );
    store
        .complete(&one, token, &response("{}"), LONG)
        .await
        .unwrap();
    assert_eq!(
        claim_ok(&*store, claim(&two, &fp, LeaseToken::random())).await,
        ClaimOutcome::InFlight
    );
}

/// Rule 1: of 1,000 claims racing on one key from many tasks, exactly one gets it.
pub async fn concurrent_claims_grant_the_key_once(store: StoreUnderTest) {
    let store = Arc::clone(store.store());
    let key = new_key();
    let fp = fingerprint("{\"race\":true}");
    let start = Arc::new(tokio::sync::Barrier::new(1000));
    let claims: Vec<_> = (0..1000)
        .map(|_| {
            let (store, start) = (Arc::clone(&store), Arc::clone(&start));
            tokio::spawn(async move {
                start.wait().await;
                store
                    .claim(claim(&key, &fp, LeaseToken::random()))
                    .await
                    .expect("claim failed")
            })
        })
        .collect();
    let mut granted = 0;
    for claim in claims {
        match claim.await.expect("claim task panicked") {
            ClaimOutcome::Claimed => granted += 1,
            ClaimOutcome::InFlight => {}
            other => panic!("unexpected outcome {other:?}"),
        }
    }
    assert_eq!(granted, 1, "exactly one claim must win");
}

/// Rule 9: a record the store cannot read (a response that does not decode, a record format
/// version this build does not know) is answered [`StoreError::Corrupt`], every time: never a
/// panic, never a guess, and the record is not overwritten. Needs the store's
/// [`corrupt`](StoreUnderTest::corrupt) hook.
pub async fn an_unreadable_record_is_a_store_error(subject: StoreUnderTest) {
    let Some(corrupt) = subject.corrupt.clone() else {
        eprintln!(
            "skipped an_unreadable_record_is_a_store_error: the store under test has no \
             `corrupt` hook (a store that keeps no encoded records needs none)"
        );
        return;
    };
    let store = subject.store();
    let damages = [
        // A header count that, read as a capacity, overflows a HeaderMap.
        Corruption::Response(vec![1, 0, 0, 200, 0xff, 0xff]),
        Corruption::Response(b"not a record".to_vec()),
        Corruption::FormatVersion(99),
    ];
    for damage in damages {
        let (key, fp, token) = (new_key(), fingerprint("{}"), LeaseToken::random());
        claim_ok(&**store, claim(&key, &fp, token)).await;
        store
            .complete(&key, token, &response("{}"), LONG)
            .await
            .unwrap();
        corrupt(key, damage.clone()).await;
        for attempt in ["first", "second"] {
            let answer = store.claim(claim(&key, &fp, LeaseToken::random())).await;
            assert!(
                matches!(answer, Err(StoreError::Corrupt(_))),
                "{damage:?}, {attempt} claim: expected a Corrupt error, got {answer:?}"
            );
        }
    }
}

/// The store of a steps rule, or `None` (the rule says it is skipped) when it keeps none.
fn keeping_steps(subject: &StoreUnderTest, rule: &str) -> Option<Arc<dyn Store>> {
    if subject.store().step_support() == StepSupport::None {
        eprintln!("skipped {rule}: the store keeps no steps (Store::step_support)");
        return None;
    }
    Some(Arc::clone(subject.store()))
}

fn step(name: &str, output: &'static str) -> RecordedStep {
    RecordedStep::new(name, Bytes::from_static(output.as_bytes()))
}

/// Rule 11: steps are appended in order by their holder only; the holder's step sent again
/// changes nothing, a step out of place is refused.
pub async fn steps_are_recorded_in_order(subject: StoreUnderTest) {
    let Some(store) = keeping_steps(&subject, "steps_are_recorded_in_order") else {
        return;
    };
    let (key, fp, token) = (new_key(), fingerprint("{}"), LeaseToken::random());
    claim_ok(&*store, claim(&key, &fp, token)).await;
    let (bank, ledger) = (step("bank", "{\"id\":1}"), step("ledger", "7"));
    store
        .record_step(&key, token, 0, &bank)
        .await
        .expect("the first step");
    store
        .record_step(&key, token, 0, &bank)
        .await
        .expect("the holder's step sent again answers Ok");
    assert_lease_lost(
        store.record_step(&key, token, 2, &ledger).await,
        "a step after a gap",
    );
    assert_lease_lost(
        store
            .record_step(&key, LeaseToken::random(), 1, &ledger)
            .await,
        "a step under a foreign token",
    );
    store
        .record_step(&key, token, 1, &ledger)
        .await
        .expect("the second step");
    assert_lease_lost(
        store.record_step(&new_key(), token, 0, &bank).await,
        "a step of an absent key",
    );
}

/// Rule 12: a suspended operation keeps its steps and is taken over at once by the same
/// request, which resumes it; the old holder is fenced, and another request refused.
pub async fn a_suspended_operation_resumes_with_its_steps(subject: StoreUnderTest) {
    let Some(store) = keeping_steps(&subject, "a_suspended_operation_resumes_with_its_steps")
    else {
        return;
    };
    let (key, fp, old) = (new_key(), fingerprint("{\"n\":1}"), LeaseToken::random());
    claim_ok(&*store, claim(&key, &fp, old)).await;
    let (bank, ledger) = (step("bank", "\"bt_1\""), step("ledger", "7"));
    store.record_step(&key, old, 0, &bank).await.unwrap();
    store.record_step(&key, old, 1, &ledger).await.unwrap();
    assert_lease_lost(
        store.suspend(&key, LeaseToken::random(), None).await,
        "a suspension under a foreign token",
    );
    store
        .suspend(&key, old, None)
        .await
        .expect("the holder suspends");
    assert_eq!(
        claim_ok(
            &*store,
            claim(&key, &fingerprint("{\"n\":2}"), LeaseToken::random())
        )
        .await,
        ClaimOutcome::Mismatch {
            stored_algorithm: Some(fp.algorithm())
        },
        "a suspended operation keeps its fingerprint"
    );
    let new = LeaseToken::random();
    assert_eq!(
        claim_ok(&*store, claim(&key, &fp, new)).await,
        ClaimOutcome::Resumed(Progress {
            steps: vec![bank.clone(), ledger],
            suspensions: 1,
        })
    );
    assert_eq!(
        claim_ok(&*store, claim(&key, &fp, LeaseToken::random())).await,
        ClaimOutcome::InFlight,
        "the resumed operation holds its key"
    );
    assert_lease_lost(
        store.record_step(&key, old, 2, &bank).await,
        "the old holder's step",
    );
    assert_lease_lost(
        store.complete(&key, old, &response("{}"), LONG).await,
        "the old holder's completion",
    );
    // A start mark, the empty output of a step called at most once, is kept as it is.
    let started = RecordedStep::start_mark("mail");
    store
        .record_step(&key, new, 2, &started)
        .await
        .expect("the new holder goes on");
    store.suspend(&key, new, None).await.unwrap();
    match claim_ok(&*store, claim(&key, &fp, LeaseToken::random())).await {
        ClaimOutcome::Resumed(progress) => {
            assert_eq!(progress.steps.len(), 3);
            assert_eq!(progress.steps[2], started, "a start mark reads back as one");
            assert_eq!(progress.suspensions, 2);
        }
        other => panic!("expected the operation resumed again, got {other:?}"),
    }
}

/// Rule 12: an operation with steps whose lease lapsed (its process died) is resumed by the
/// next claim of the same request.
pub async fn a_lapsed_operation_with_steps_resumes(subject: StoreUnderTest) {
    let Some(store) = keeping_steps(&subject, "a_lapsed_operation_with_steps_resumes") else {
        return;
    };
    let (key, fp, old) = (new_key(), fingerprint("{}"), LeaseToken::random());
    let short = Claim {
        lease: SHORT,
        ..claim(&key, &fp, old)
    };
    claim_ok(&*store, short).await;
    let bank = step("bank", "{}");
    store.record_step(&key, old, 0, &bank).await.unwrap();
    assert_eq!(
        claim_ok(&*store, claim(&key, &fp, LeaseToken::random())).await,
        ClaimOutcome::InFlight
    );
    sleep(PAST_SHORT).await;
    assert_eq!(
        claim_ok(&*store, claim(&key, &fp, LeaseToken::random())).await,
        ClaimOutcome::Resumed(Progress {
            steps: vec![bank],
            suspensions: 0,
        })
    );
}

/// Rule 12: resuming does not extend an operation's life: it is forgotten a TTL after its
/// first claim (or a lease after its last takeover, if later), however often it is resumed.
pub async fn a_resumed_operation_keeps_its_expiry(subject: StoreUnderTest) {
    let Some(store) = keeping_steps(&subject, "a_resumed_operation_keeps_its_expiry") else {
        return;
    };
    let (key, fp, first) = (new_key(), fingerprint("{}"), LeaseToken::random());
    let brief = Claim {
        lease: SHORT,
        ttl: SHORT,
        ..claim(&key, &fp, first)
    };
    claim_ok(&*store, brief).await;
    store
        .record_step(&key, first, 0, &step("bank", "{}"))
        .await
        .unwrap();
    store.suspend(&key, first, None).await.unwrap();
    // A takeover that asks for a long TTL and a short lease.
    let second = LeaseToken::random();
    let takeover = Claim {
        lease: SHORT / 3,
        ttl: LONG,
        ..claim(&key, &fp, second)
    };
    assert!(matches!(
        claim_ok(&*store, takeover).await,
        ClaimOutcome::Resumed(_)
    ));
    store.suspend(&key, second, None).await.unwrap();
    sleep(PAST_SHORT).await;
    assert_eq!(
        claim_ok(&*store, claim(&key, &fp, LeaseToken::random())).await,
        ClaimOutcome::Claimed,
        "the operation outlived its first claim's TTL"
    );
}

/// Rules 11 and 12: a completed operation is a replay, steps or not; its holder's step after
/// completion is refused.
pub async fn completion_ends_the_steps(subject: StoreUnderTest) {
    let Some(store) = keeping_steps(&subject, "completion_ends_the_steps") else {
        return;
    };
    let (key, fp, token) = (new_key(), fingerprint("{}"), LeaseToken::random());
    claim_ok(&*store, claim(&key, &fp, token)).await;
    store
        .record_step(&key, token, 0, &step("bank", "{}"))
        .await
        .unwrap();
    store
        .complete(&key, token, &response("{\"done\":1}"), LONG)
        .await
        .unwrap();
    assert_lease_lost(
        store
            .record_step(&key, token, 1, &step("ledger", "1"))
            .await,
        "a step after completion",
    );
    assert_lease_lost(
        store.suspend(&key, token, None).await,
        "a suspension after completion",
    );
    assert_eq!(
        claim_ok(&*store, claim(&key, &fp, LeaseToken::random())).await,
        ClaimOutcome::Completed(response("{\"done\":1}"))
    );
}

/// Rule 13: a durable store keeps a resumable claim's request and answers the operation when
/// it is due (`after` past a lapsed lease, `resume_in` after a suspension), deferring what it
/// answers, and never answers one that is held, completed, or suspended without a time.
pub async fn a_durable_store_answers_the_operations_due(subject: StoreUnderTest) {
    let store = Arc::clone(subject.store());
    if store.step_support() != StepSupport::Durable {
        eprintln!("skipped a_durable_store_answers_the_operations_due: the store is not durable");
        return;
    }
    let request = KeptRequest::new(
        Method::POST,
        "/transfers",
        idem_core::key::IdempotencyKey::new("conformance-due").unwrap(),
        Some(idem_core::scope::Principal::new("alice")),
        HeaderMap::new(),
        Bytes::from_static(b"{\"amount\":1}"),
    );
    let resumable = Resumable {
        request: &request,
        after: SHORT,
    };
    let fp = fingerprint("{}");
    let (lapsing, suspended, silent, done) = (new_key(), new_key(), new_key(), new_key());
    let tokens = [(); 4].map(|()| LeaseToken::random());
    let lease_short = Claim {
        lease: SHORT,
        resumable: Some(resumable),
        ..claim(&lapsing, &fp, tokens[0])
    };
    claim_ok(&*store, lease_short).await;
    for (key, token) in [
        (&suspended, tokens[1]),
        (&silent, tokens[2]),
        (&done, tokens[3]),
    ] {
        let held = Claim {
            resumable: Some(resumable),
            ..claim(key, &fp, token)
        };
        claim_ok(&*store, held).await;
    }
    store
        .suspend(&suspended, tokens[1], Some(Duration::ZERO))
        .await
        .unwrap();
    store.suspend(&silent, tokens[2], None).await.unwrap();
    store
        .complete(&done, tokens[3], &response("{}"), LONG)
        .await
        .unwrap();
    let ours = [lapsing, suspended, silent, done];
    let due_now = |store: Arc<dyn Store>| async move {
        let due = store.due(1000, LONG).await.expect("due failed");
        due.into_iter()
            .filter(|operation| ours.contains(&operation.key))
            .collect::<Vec<_>>()
    };
    let first = due_now(Arc::clone(&store)).await;
    assert_eq!(
        first.len(),
        1,
        "only the suspended operation is due at once: {first:?}"
    );
    assert_eq!(first[0].key, suspended);
    assert_eq!(first[0].suspensions, 1);
    assert_eq!(first[0].request.as_ref().ok(), Some(&request));
    assert!(
        due_now(Arc::clone(&store)).await.is_empty(),
        "an operation answered as due is deferred"
    );
    // The lapsing lease lapses after SHORT, and the operation is due SHORT after that.
    sleep(PAST_SHORT + PAST_SHORT).await;
    let later = due_now(Arc::clone(&store)).await;
    assert_eq!(
        later
            .iter()
            .map(|operation| operation.key)
            .collect::<Vec<_>>(),
        [lapsing],
        "then the operation whose lease lapsed is due"
    );
    assert_eq!(later[0].suspensions, 0);
}
