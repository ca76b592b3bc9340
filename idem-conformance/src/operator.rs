//! The rules of the operator's side, 14 (look-up) and 15 (removal), as conformance tests.
//!
//! Times are compared with the store's own clock (the `at` of each answer), never with the
//! test's: a shared store keeps time on its server.

use std::{sync::Arc, time::Duration};

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use tokio::time::sleep;

use crate::{
    Corruption, LONG, PAST_SHORT, SHORT, StoreUnderTest, assert_lease_lost, claim, claim_ok,
    fingerprint, keeping_steps, new_key, response, step,
};
use idem_core::store::{
    Claim, ClaimOutcome, LeaseToken, StepSupport, Store,
    held::{Held, InFlightRecord, RecordState},
    operation::{KeptRequest, Resumable},
};

/// How far a duration a store reports may be from the one it was given: stores keep whole
/// milliseconds or microseconds, and a call takes a moment.
const SLACK: Duration = Duration::from_secs(5);

/// A store's clock may tick between two times of one write (a row's `expires_at` and its
/// `updated_at`): a report may exceed what it was given by this much.
const TICK: Duration = Duration::from_millis(50);

#[track_caller]
fn assert_about(actual: Duration, expected: Duration, what: &str) {
    assert!(
        actual <= expected + TICK && actual + SLACK >= expected,
        "{what}: {actual:?}, expected about {expected:?}"
    );
}

async fn in_flight(store: &dyn Store, key: &idem_core::scope::StoreKey) -> InFlightRecord {
    match store.look_up(key).await.expect("look-up failed") {
        Some(Held::InFlight(record)) => record,
        other => panic!("expected a record in flight, got {other:?}"),
    }
}

/// Rule 14: an absent key, and one whose record expired, look up as nothing.
pub async fn an_absent_or_expired_key_looks_up_as_nothing(subject: StoreUnderTest) {
    let store = Arc::clone(subject.store());
    assert_eq!(store.look_up(&new_key()).await.unwrap(), None);
    let (key, fp, token) = (new_key(), fingerprint("{}"), LeaseToken::random());
    let brief = Claim {
        lease: SHORT,
        ttl: SHORT,
        ..claim(&key, &fp, token)
    };
    claim_ok(&*store, brief).await;
    store
        .complete(&key, token, &response("{}"), SHORT)
        .await
        .unwrap();
    assert!(store.look_up(&key).await.unwrap().is_some());
    sleep(PAST_SHORT).await;
    assert_eq!(
        store.look_up(&key).await.unwrap(),
        None,
        "an expired record"
    );
}

/// Rule 14: a key in flight looks up with its lease and its lifetime; the look-up changes
/// nothing, and a lapsed lease looks up as lapsed.
pub async fn a_claimed_key_looks_up_in_flight(subject: StoreUnderTest) {
    let store = Arc::clone(subject.store());
    let (key, fp, holder) = (new_key(), fingerprint("{}"), LeaseToken::random());
    let short = Claim {
        lease: SHORT,
        ..claim(&key, &fp, holder)
    };
    claim_ok(&*store, short).await;
    let record = in_flight(&*store, &key).await;
    assert!(record.is_held() && !record.is_suspended(), "{record:?}");
    assert_about(record.lease_left(), SHORT, "the lease left");
    assert_about(
        record.expires_at.duration_since(record.at).unwrap(),
        LONG,
        "the in-flight record's lifetime",
    );
    if let Some(since) = record.since {
        assert!(
            since <= record.at,
            "claimed {since:?}, looked up at {:?}",
            record.at
        );
    }
    assert!(record.steps.is_empty() && record.suspensions == 0);
    // A look-up renews nothing: the lease lapses on time, and the same request takes over.
    sleep(PAST_SHORT).await;
    let lapsed = in_flight(&*store, &key).await;
    assert!(!lapsed.is_held(), "{lapsed:?}");
    assert_eq!(lapsed.lease_left(), Duration::ZERO);
    assert_eq!(
        claim_ok(&*store, claim(&key, &fp, LeaseToken::random())).await,
        ClaimOutcome::Claimed
    );
    let taken_over = in_flight(&*store, &key).await;
    assert!(taken_over.is_held());
    assert_eq!(
        taken_over.since, record.since,
        "a takeover keeps when the key was first claimed"
    );
}

/// Rule 14: a completed key looks up with its status, its expiry and its size, and a
/// response too large to keep says so.
pub async fn a_completed_key_looks_up_with_its_status_and_expiry(subject: StoreUnderTest) {
    let store = Arc::clone(subject.store());
    for stored in [
        response("{\"id\":\"pay_1\"}"),
        idem_core::replay::StoredResponse::omitted(StatusCode::OK),
    ] {
        let (key, fp, token) = (new_key(), fingerprint("{}"), LeaseToken::random());
        claim_ok(&*store, claim(&key, &fp, token)).await;
        store.complete(&key, token, &stored, LONG).await.unwrap();
        let record = match store.look_up(&key).await.unwrap() {
            Some(Held::Completed(record)) => record,
            other => panic!("expected a completed record, got {other:?}"),
        };
        assert_eq!(record.status, stored.status());
        assert_eq!(record.body_kept, stored.body().is_some());
        assert_eq!(record.bytes, stored.as_bytes().len() as u64);
        assert_about(record.expires_in(), LONG, "the completed record's TTL");
        if let Some(stored_at) = record.stored_at {
            assert!(stored_at <= record.at);
            assert_about(
                record.expires_at.duration_since(stored_at).unwrap(),
                LONG,
                "from completion to expiry",
            );
        }
        // Looked up, still the same record to a claim.
        assert_eq!(
            claim_ok(&*store, claim(&key, &fp, LeaseToken::random())).await,
            ClaimOutcome::Completed(stored)
        );
    }
}

/// Rule 14: an operation of several steps looks up with the names of its steps and its
/// suspensions; suspended, nobody holds it.
pub async fn an_operation_looks_up_with_its_steps(subject: StoreUnderTest) {
    let Some(store) = keeping_steps(&subject, "an_operation_looks_up_with_its_steps") else {
        return;
    };
    let (key, fp, token) = (new_key(), fingerprint("{}"), LeaseToken::random());
    claim_ok(&*store, claim(&key, &fp, token)).await;
    store
        .record_step(&key, token, 0, &step("bank-order", "{\"id\":\"bt_1\"}"))
        .await
        .unwrap();
    let running = in_flight(&*store, &key).await;
    assert_eq!(running.steps, ["bank-order"]);
    assert!(running.is_held() && !running.is_suspended());
    store.suspend(&key, token, None).await.unwrap();
    let suspended = in_flight(&*store, &key).await;
    assert_eq!(suspended.steps, ["bank-order"]);
    assert_eq!(suspended.suspensions, 1);
    assert!(suspended.is_suspended(), "{suspended:?}");
    assert!(matches!(
        claim_ok(&*store, claim(&key, &fp, LeaseToken::random())).await,
        ClaimOutcome::Resumed(_)
    ));
}

/// Rule 15: removing a completed key makes the next request with it run; its holder's
/// repeated completion is refused, and a second removal finds nothing.
pub async fn removing_a_completed_key_runs_the_next_request(subject: StoreUnderTest) {
    let store = Arc::clone(subject.store());
    assert_eq!(
        store.remove(&new_key()).await.unwrap(),
        None,
        "an absent key"
    );
    let (key, fp, token) = (new_key(), fingerprint("{}"), LeaseToken::random());
    claim_ok(&*store, claim(&key, &fp, token)).await;
    store
        .complete(&key, token, &response("{\"n\":1}"), LONG)
        .await
        .unwrap();
    assert_eq!(
        store.remove(&key).await.unwrap(),
        Some(RecordState::Completed)
    );
    assert_eq!(store.look_up(&key).await.unwrap(), None);
    assert_lease_lost(
        store
            .complete(&key, token, &response("{\"n\":1}"), LONG)
            .await,
        "the removed record's holder, completing again",
    );
    assert_eq!(store.remove(&key).await.unwrap(), None, "removed twice");
    // Another body, too: the key is as if never used.
    let other = fingerprint("{\"n\":2}");
    assert_eq!(
        claim_ok(&*store, claim(&key, &other, LeaseToken::random())).await,
        ClaimOutcome::Claimed
    );
}

/// Rule 15: removing a key in flight fences its holder: its completion, renewal and release
/// are refused, before and after the next claim, and the next claim's holder completes.
pub async fn removing_a_key_in_flight_fences_its_holder(subject: StoreUnderTest) {
    let store = Arc::clone(subject.store());
    let (key, fp, old) = (new_key(), fingerprint("{}"), LeaseToken::random());
    claim_ok(&*store, claim(&key, &fp, old)).await;
    assert_eq!(
        store.remove(&key).await.unwrap(),
        Some(RecordState::InFlight)
    );
    assert_lease_lost(
        store.renew(&key, old, LONG).await,
        "the old holder's renewal",
    );
    assert_lease_lost(
        store.complete(&key, old, &response("{}"), LONG).await,
        "the old holder's completion",
    );
    let new = LeaseToken::random();
    assert_eq!(
        claim_ok(&*store, claim(&key, &fp, new)).await,
        ClaimOutcome::Claimed
    );
    assert_lease_lost(
        store
            .complete(&key, old, &response("{\"old\":1}"), LONG)
            .await,
        "the old holder's completion after the next claim",
    );
    assert_lease_lost(store.release(&key, old).await, "the old holder's release");
    store
        .complete(&key, new, &response("{\"new\":1}"), LONG)
        .await
        .expect("the new holder completes");
    assert_eq!(
        claim_ok(&*store, claim(&key, &fp, LeaseToken::random())).await,
        ClaimOutcome::Completed(response("{\"new\":1}"))
    );
}

/// Rule 15: removing an operation of several steps removes the whole operation: the next
/// claim runs it from the start, its old holder's steps are refused, and a durable store
/// never answers it as due.
pub async fn removing_an_operation_forgets_its_steps(subject: StoreUnderTest) {
    let Some(store) = keeping_steps(&subject, "removing_an_operation_forgets_its_steps") else {
        return;
    };
    let request = KeptRequest::new(
        Method::POST,
        "/transfers",
        idem_core::key::IdempotencyKey::new("conformance-removed").unwrap(),
        None,
        HeaderMap::new(),
        Bytes::from_static(b"{}"),
    );
    let (key, fp, old) = (new_key(), fingerprint("{}"), LeaseToken::random());
    let resumable = Claim {
        resumable: Some(Resumable {
            request: &request,
            after: Duration::ZERO,
        }),
        ..claim(&key, &fp, old)
    };
    claim_ok(&*store, resumable).await;
    store
        .record_step(&key, old, 0, &step("bank-order", "1"))
        .await
        .unwrap();
    store
        .suspend(&key, old, Some(Duration::ZERO))
        .await
        .unwrap();
    assert_eq!(
        store.remove(&key).await.unwrap(),
        Some(RecordState::InFlight)
    );
    if store.step_support() == StepSupport::Durable {
        let due = store.due(1000, LONG).await.expect("due failed");
        assert!(
            due.iter().all(|operation| operation.key != key),
            "a removed operation is never due"
        );
    }
    let new = LeaseToken::random();
    assert_eq!(
        claim_ok(&*store, claim(&key, &fp, new)).await,
        ClaimOutcome::Claimed,
        "the operation runs from its start"
    );
    assert_lease_lost(
        store.record_step(&key, old, 1, &step("ledger", "2")).await,
        "the old holder's step",
    );
    assert!(in_flight(&*store, &key).await.steps.is_empty());
}

/// Rules 9 and 15: a record the store cannot read is removed like any other, and its key is
/// free again. Needs the store's [`corrupt`](StoreUnderTest::corrupt) hook.
pub async fn an_unreadable_record_can_be_removed(subject: StoreUnderTest) {
    let Some(corrupt) = subject.corrupt.clone() else {
        eprintln!(
            "skipped an_unreadable_record_can_be_removed: the store under test has no \
             `corrupt` hook (a store that keeps no encoded records needs none)"
        );
        return;
    };
    let store = subject.store();
    for damage in [
        Corruption::Response(b"not a record".to_vec()),
        Corruption::FormatVersion(99),
    ] {
        let (key, fp, token) = (new_key(), fingerprint("{}"), LeaseToken::random());
        claim_ok(&**store, claim(&key, &fp, token)).await;
        store
            .complete(&key, token, &response("{}"), LONG)
            .await
            .unwrap();
        corrupt(key, damage.clone()).await;
        assert!(
            matches!(
                store.look_up(&key).await,
                Err(idem_core::store::StoreError::Corrupt(_))
            ),
            "{damage:?}: a look-up of an unreadable record is Corrupt"
        );
        let removed = store.remove(&key).await.expect("the removal");
        assert!(
            matches!(
                removed,
                Some(RecordState::Unreadable | RecordState::Completed)
            ),
            "{damage:?}: removed {removed:?}"
        );
        assert_eq!(
            claim_ok(&**store, claim(&key, &fp, LeaseToken::random())).await,
            ClaimOutcome::Claimed,
            "{damage:?}: the key is free again"
        );
    }
}
