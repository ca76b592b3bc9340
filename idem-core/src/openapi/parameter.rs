//! The `Idempotency-Key` header parameter of an operation: required or not, its schema, and a
//! description that states how long a key is kept and whose it is.

use utoipa::openapi::{
    RefOr, Required,
    path::{Parameter, ParameterBuilder, ParameterIn},
};

use super::{key_schema, probe::Sighting, words};

/// The header's name.
pub(crate) const KEY_HEADER: &str = "Idempotency-Key";

/// The parameter of a route that runs what `sighting` says.
pub(crate) fn key_parameter(sighting: &Sighting) -> Parameter {
    let policy = &sighting.policy;
    let description = [
        words::required(policy.required).to_owned(),
        "It names one operation: send a new unique value (a UUID, say) for each operation, and \
         the same value on every retry of it."
            .to_owned(),
        words::syntax(policy.key_syntax).to_owned(),
        format!(
            "The first request's answer is kept for {} after it completes, and every retry with \
             the same key and body gets it again, marked `Idempotent-Replayed: true`; after that \
             the key is new. The same key with another body is answered 422 (`key-reused`).",
            words::duration(policy.ttl)
        ),
        words::scope(policy.scope),
        words::conflict(policy.on_conflict),
    ]
    .join(" ");
    let required = if policy.required {
        Required::True
    } else {
        Required::False
    };
    ParameterBuilder::new()
        .name(KEY_HEADER)
        .parameter_in(ParameterIn::Header)
        .required(required)
        .description(Some(description))
        .schema(Some(key_schema::for_syntax(policy.key_syntax)))
        .example(Some("\"8e03978e-40d5-43e8-bc93-6894a57f9324\"".into()))
        .build()
}

/// Whether `parameter` is an `Idempotency-Key` header (header names are case-insensitive).
pub(crate) fn is_key_parameter(parameter: &RefOr<Parameter>) -> bool {
    matches!(
        parameter,
        RefOr::T(parameter)
            if parameter.parameter_in == ParameterIn::Header
                && parameter.name.eq_ignore_ascii_case(KEY_HEADER)
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{key::KeySyntax, policy::Policy, scope::Scope};

    fn rendered(policy: Policy) -> serde_json::Value {
        let sighting = Sighting {
            policy,
            runtime: None,
        };
        serde_json::to_value(key_parameter(&sighting)).unwrap()
    }

    #[test]
    fn the_parameter_says_what_the_policy_does() {
        let parameter = rendered(
            Policy::new()
                .ttl(Duration::from_secs(3 * 86_400))
                .scope(Scope::Global)
                .key_syntax(KeySyntax::Strict),
        );
        assert_eq!(parameter["name"], "Idempotency-Key");
        assert_eq!(parameter["in"], "header");
        assert_eq!(parameter["required"], true);
        let description = parameter["description"].as_str().unwrap();
        for words in [
            "Required",
            "kept for 3 days",
            "shared by every caller",
            "Only as an",
        ] {
            assert!(description.contains(words), "{words}: {description}");
        }
        assert!(
            parameter["schema"]["pattern"]
                .as_str()
                .unwrap()
                .starts_with("^\"")
        );
    }

    #[test]
    fn an_optional_key_is_not_required() {
        let parameter = rendered(Policy::new().required(false));
        assert_eq!(parameter["required"], false);
        assert!(parameter["schema"]["oneOf"].is_array());
    }
}
