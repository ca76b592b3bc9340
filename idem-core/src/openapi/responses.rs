//! The answers of an idempotent operation: `Idempotent-Replayed` on the responses a retry may
//! get again, and idem's own Problem Details answers, merged into the ones the operation
//! already documents for the same status.

use std::collections::BTreeMap;

use utoipa::openapi::{
    Content, RefOr, Response, Type,
    header::Header,
    path::Operation,
    schema::{AnyOfBuilder, ObjectBuilder},
};

use super::{
    DocumentError, Endpoint,
    probe::{RuntimeFacts, Sighting},
    problem_schema, words,
};
use crate::{
    policy::{OnConflict, OnStoreError, Policy},
    problem::{PROBLEM_JSON, ProblemKind},
};

/// The header a replayed answer carries.
pub(crate) const REPLAYED_HEADER: &str = "Idempotent-Replayed";

/// One of idem's answers: its status, the kinds it answers with, what it means, and whether
/// it may carry `Retry-After`.
struct Answer {
    status: u16,
    kinds: Vec<ProblemKind>,
    description: String,
    retry_after: bool,
}

/// Adds to `operation` what a route that runs `sighting` answers. `shared` holds the
/// document's shared responses, which a response given by reference is copied from before
/// it is changed (the other operations that share it stay as they are).
pub(crate) fn add(
    operation: &mut Operation,
    sighting: &Sighting,
    facts: &RuntimeFacts,
    shared: &BTreeMap<String, RefOr<Response>>,
    endpoint: &Endpoint,
) -> Result<(), DocumentError> {
    let responses = &mut operation.responses.responses;
    for (status, response) in responses.iter_mut() {
        if is_replayed(status, &sighting.policy) {
            let response = inline(response, shared, endpoint)?;
            add_header(response, REPLAYED_HEADER, replayed_header());
        }
    }
    for answer in answers(&sighting.policy, facts) {
        let schema = problem_schema::for_status(answer.status, &answer.kinds, facts);
        let status = answer.status.to_string();
        let documented = responses.contains_key(&status);
        let response = responses
            .entry(status)
            .or_insert_with(|| RefOr::T(Response::new("")));
        let response = inline(response, shared, endpoint)?;
        response.description = if documented {
            format!(
                "{}\n\nIdempotency: {}",
                response.description, answer.description
            )
        } else {
            answer.description
        };
        merge_problem(response, schema);
        if answer.retry_after {
            add_header(response, "Retry-After", retry_after_header());
        }
    }
    Ok(())
}

/// Whether a response of `status` (`201`, `4XX`, `default`) is stored and replayed: every
/// answer of the handler's but 5xx, which only `store_server_errors` keeps. An informational
/// status is never an answer; `default` may be anything, so it is left as it is.
fn is_replayed(status: &str, policy: &Policy) -> bool {
    match status.as_bytes().first() {
        Some(b'2' | b'3' | b'4') => true,
        Some(b'5') => policy.store_server_errors,
        _ => false,
    }
}

/// The answers idem gives on a route that runs `policy`, status by status.
fn answers(policy: &Policy, facts: &RuntimeFacts) -> Vec<Answer> {
    let answer = |status, kinds: &[ProblemKind], description: String, retry_after| Answer {
        status,
        kinds: kinds.to_vec(),
        description,
        retry_after,
    };
    let mut answers = vec![key_refused(policy)];
    // No `principal-missing`: a service refuses an unauthenticated caller itself, with its
    // own 401, and idem's 500 for a principal the service did not name is the service's bug,
    // as `misconfigured` is, not an answer a client plans for.
    answers.push(answer(
        409,
        &[ProblemKind::RequestInFlight],
        in_flight(policy.on_conflict),
        true,
    ));
    answers.push(answer(
        410,
        &[ProblemKind::ResponseNotReplayable],
        format!(
            "The first request with this key was answered with a body larger than the {} bytes \
             kept for replay, so a retry cannot get it again; the operation is not run again. \
             `originalStatus` is the first answer's status.",
            policy.max_stored_body
        ),
        false,
    ));
    if let Some(limit) = facts.body_limit {
        answers.push(answer(
            413,
            &[ProblemKind::BodyTooLarge],
            format!("The body is larger than the {limit} bytes this operation accepts."),
            false,
        ));
    }
    answers.push(answer(
        422,
        &[ProblemKind::KeyReused],
        "The key was already used for a different request (another body, method or path): \
         use a new key for a new operation."
            .to_owned(),
        false,
    ));
    answers.extend(failures(policy));
    answers
}

/// 409: what a retry meets while the first request runs.
fn in_flight(on_conflict: OnConflict) -> String {
    match on_conflict {
        OnConflict::Reject => "The first request with this key is still running; retry after \
                               `Retry-After` to get its answer."
            .to_owned(),
        OnConflict::Wait(wait) => format!(
            "The first request with this key was still running after this one waited {} for \
             it; retry after `Retry-After` to get its answer.",
            words::duration(wait)
        ),
    }
}

/// 400: what makes a key unusable.
fn key_refused(policy: &Policy) -> Answer {
    let mut kinds = vec![ProblemKind::KeyMalformed, ProblemKind::BodyUnreadable];
    let missing = if policy.required {
        kinds.insert(0, ProblemKind::KeyMissing);
        "missing or "
    } else {
        ""
    };
    Answer {
        status: 400,
        kinds,
        description: format!(
            "The `Idempotency-Key` is {missing}malformed (empty, longer than 255 characters, \
             not visible ASCII, several values, or not in a form this operation accepts), or \
             the body could not be read. Nothing was run or stored."
        ),
        retry_after: false,
    }
}

/// 500 and 503: the operation or the store failed.
fn failures(policy: &Policy) -> [Answer; 2] {
    let store = match policy.on_store_error {
        OnStoreError::Fail => {
            "The idempotency store could not be reached, so the operation was not run; retry \
             with the same key after `Retry-After`."
        }
        OnStoreError::RunWithoutRecord => {
            "The idempotency store failed where the operation could not go on without it (its \
             transaction could not commit), and nothing was stored; retry with the same key \
             after `Retry-After`. When the store cannot be reached before the operation runs, \
             it runs without a record instead."
        }
    };
    [
        Answer {
            status: 500,
            kinds: vec![ProblemKind::HandlerFailed],
            description: "The operation failed unexpectedly. `detail` says whether the key was \
                          released (a retry runs the operation again) or is still held (retry \
                          after `Retry-After`)."
                .to_owned(),
            retry_after: true,
        },
        Answer {
            status: 503,
            kinds: vec![ProblemKind::StoreUnavailable],
            description: store.to_owned(),
            retry_after: true,
        },
    ]
}

/// `response` as an object of the operation's own, copied from the shared responses if it
/// is a reference.
fn inline<'a>(
    response: &'a mut RefOr<Response>,
    shared: &BTreeMap<String, RefOr<Response>>,
    endpoint: &Endpoint,
) -> Result<&'a mut Response, DocumentError> {
    let dangling = |location: &str| DocumentError::DanglingReference {
        endpoint: endpoint.clone(),
        reference: location.to_owned(),
    };
    if let RefOr::Ref(reference) = response {
        let location = &reference.ref_location;
        let copied = location
            .strip_prefix("#/components/responses/")
            .and_then(|name| shared.get(name));
        match copied {
            Some(RefOr::T(copied)) => *response = RefOr::T(copied.clone()),
            _ => return Err(dangling(location)),
        }
    }
    match response {
        RefOr::T(response) => Ok(response),
        RefOr::Ref(reference) => Err(dangling(&reference.ref_location)),
    }
}

/// Makes `response`'s Problem Details content accept idem's answers too: the schema it had
/// or `ours`. Content without a schema accepts anything already.
fn merge_problem(response: &mut Response, ours: RefOr<utoipa::openapi::Schema>) {
    match response.content.get_mut(PROBLEM_JSON) {
        Some(RefOr::T(content)) => {
            if let Some(theirs) = content.schema.take() {
                content.schema = Some(AnyOfBuilder::new().item(theirs).item(ours).into());
            }
        }
        // A shared content object: its schema is the document's to keep.
        Some(RefOr::Ref(_)) => {}
        None => {
            response
                .content
                .insert(PROBLEM_JSON.to_owned(), RefOr::T(Content::new(Some(ours))));
        }
    }
}

/// Adds the header `name` unless the response documents it already (in any case).
fn add_header(response: &mut Response, name: &str, header: Header) {
    let documented = response
        .headers
        .keys()
        .any(|known| known.eq_ignore_ascii_case(name));
    if !documented {
        response.headers.insert(name.to_owned(), RefOr::T(header));
    }
}

fn replayed_header() -> Header {
    let mut header = Header::new(
        ObjectBuilder::new()
            .schema_type(Type::String)
            .enum_values(Some(["true"])),
    );
    header.description = Some(
        "`true` when this is the stored answer to the first request with this \
         `Idempotency-Key`, sent again; absent on the first answer"
            .to_owned(),
    );
    header
}

fn retry_after_header() -> Header {
    let mut header = Header::new(
        ObjectBuilder::new()
            .schema_type(Type::Integer)
            .minimum(Some(1)),
    );
    header.description = Some("Seconds to wait before the retry".to_owned());
    header
}
