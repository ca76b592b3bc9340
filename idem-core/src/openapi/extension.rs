//! `x-idempotency`: the policy of an operation as data, for a client generator or a gateway.
//!
//! Durations are in seconds (a JSON number, with a fraction when the setting has one), sizes in
//! bytes. Members that a setting leaves out have no member: `conflictWait` only when a retry
//! waits, `resumeAfter` only when the service finishes abandoned operations,
//! `fingerprintOmit` and `fingerprintOnly` only when the route names members,
//! `maxRequestBody` only when a body limit applies.

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::probe::Sighting;
use crate::{
    fingerprint::{FingerprintMode, Members},
    key::KeySyntax,
    policy::{OnConflict, OnStoreError},
};

/// The name of the extension on an operation.
pub(crate) const NAME: &str = "x-idempotency";

/// The extension's value for a route that runs what `sighting` says.
pub(crate) fn value(sighting: &Sighting) -> Value {
    let policy = &sighting.policy;
    let mut value = json!({
        "header": "Idempotency-Key",
        "required": policy.required,
        "keySyntax": match policy.key_syntax {
            KeySyntax::Lenient => "lenient",
            KeySyntax::Strict => "strict",
        },
        "scope": policy.scope.name(),
        "ttl": seconds(policy.ttl),
        "lease": seconds(policy.lease),
        "onConflict": match policy.on_conflict {
            OnConflict::Reject => "reject",
            OnConflict::Wait(_) => "wait",
        },
        "onStoreError": match policy.on_store_error {
            OnStoreError::Fail => "fail",
            OnStoreError::RunWithoutRecord => "run",
        },
        "storeServerErrors": policy.store_server_errors,
        "retryAfter": seconds(policy.retry_after),
        "fingerprint": match policy.fingerprint {
            FingerprintMode::Json => "json",
            FingerprintMode::Raw => "raw",
        },
        "maxStoredBody": policy.max_stored_body,
    });
    let members = value.as_object_mut().expect("an object");
    add_optional(members, sighting);
    value
}

/// The members that only some policies have.
fn add_optional(members: &mut Map<String, Value>, sighting: &Sighting) {
    let policy = &sighting.policy;
    if let OnConflict::Wait(wait) = policy.on_conflict {
        members.insert("conflictWait".to_owned(), seconds(wait));
    }
    if let Some(after) = policy.resume_after {
        members.insert("resumeAfter".to_owned(), seconds(after));
    }
    match policy.fingerprint_members {
        Members::All => {}
        Members::Omit(pointers) => {
            members.insert("fingerprintOmit".to_owned(), json!(pointers));
        }
        Members::Only(pointers) => {
            members.insert("fingerprintOnly".to_owned(), json!(pointers));
        }
    }
    let limit = sighting.runtime.as_ref().and_then(|facts| facts.body_limit);
    if let Some(limit) = limit {
        members.insert("maxRequestBody".to_owned(), json!(limit));
    }
}

/// A duration in seconds: a whole number when it is one.
fn seconds(duration: Duration) -> Value {
    if duration.subsec_nanos() == 0 {
        json!(duration.as_secs())
    } else {
        json!(duration.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{policy::Policy, scope::Scope};

    fn sighting(policy: Policy) -> Sighting {
        Sighting {
            policy,
            runtime: None,
        }
    }

    #[test]
    fn the_default_policy_as_data() {
        assert_eq!(
            value(&sighting(Policy::new())),
            json!({
                "header": "Idempotency-Key",
                "required": true,
                "keySyntax": "lenient",
                "scope": "user",
                "ttl": 86_400,
                "lease": 60,
                "onConflict": "reject",
                "onStoreError": "fail",
                "storeServerErrors": false,
                "retryAfter": 1,
                "fingerprint": "json",
                "maxStoredBody": 1_048_576,
            })
        );
    }

    #[test]
    fn settings_that_only_some_policies_have() {
        let policy = Policy::new()
            .scope(Scope::Custom("tenant"))
            .on_conflict(OnConflict::Wait(Duration::from_millis(2_500)))
            .resume_after(Duration::from_secs(5))
            .fingerprint_omit(&["/clientTimestamp"]);
        let value = value(&sighting(policy));
        assert_eq!(value["scope"], "tenant");
        assert_eq!(value["onConflict"], "wait");
        assert_eq!(value["conflictWait"], 2.5);
        assert_eq!(value["resumeAfter"], 5);
        assert_eq!(value["fingerprintOmit"], json!(["/clientTimestamp"]));
        assert!(value.get("fingerprintOnly").is_none());
        assert!(value.get("maxRequestBody").is_none());
    }
}
