//! A handler that runs without a record: the request had no key and its policy lets it run
//! without one, or the store failed and the policy says to run anyway.

use axum::response::Response;

use crate::{
    context::IdempotencyContext,
    flow::{counts_as_result, problems},
    observe::{self, Outcome},
    policy::Policy,
    scope::Route,
};

/// Runs a handler without a record: there is no key, or the store failed and the policy says
/// to run anyway. A transaction the handler opened commits when its response would have been
/// stored, and rolls back otherwise, as on the recorded path.
pub(in crate::flow) async fn without_record<F>(
    policy: &Policy,
    route: &Route,
    context: IdempotencyContext,
    call: impl FnOnce() -> F,
) -> Response
where
    F: Future<Output = Response>,
{
    observe::record(
        Outcome::Unrecorded,
        route.as_str(),
        None,
        &"ran without an idempotency record",
    );
    let response = call().await;
    let Some(transaction) = context.take_transaction().await else {
        return response;
    };
    let idem = context.runtime();
    let ended = if counts_as_result(policy, &response) {
        idem.commit(transaction).await
    } else {
        idem.rollback(transaction).await
    };
    match ended {
        Ok(()) => response,
        Err(error) => {
            observe::record_error(
                Outcome::StoreError,
                route.as_str(),
                None,
                "the transaction of a request without a record could not be ended",
                &error,
            );
            problems::store_unavailable(
                idem,
                policy,
                "the transaction of this request could not be committed",
            )
        }
    }
}
