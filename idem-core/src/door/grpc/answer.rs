//! The flow's answer to a gRPC call, in gRPC: a refusal becomes a status with its details; the
//! handler's flattened response (or its replay) is split into message, metadata and status
//! again. What the flow answered without going near the handler passes as it is.

use axum::response::Response;
use tonic::Status;

use super::{
    record::{FirstRun, Record},
    status,
};
use crate::{door::presented, replay::IDEMPOTENT_REPLAYED};

/// What the answer is.
pub(crate) enum Answer {
    /// The flow refused the call (in flight, another request under the key, the store down).
    Refused(Status),
    /// The handler's response, or its replay.
    Record(Record),
    /// Something else: the handler's answer to a call without a key, which the flow does not
    /// record.
    Other(Response),
}

impl Answer {
    /// Reads the flow's `answer`.
    pub(crate) async fn of(answer: Response) -> Self {
        if let Some(kind) = presented::problem_kind(&answer) {
            return Self::Refused(status::refusal(kind, answer).await);
        }
        let flattened = answer.extensions().get::<FirstRun>().is_some()
            || answer.headers().contains_key(IDEMPOTENT_REPLAYED);
        if !flattened {
            return Self::Other(answer);
        }
        match Record::read(answer).await {
            Some(record) => Self::Record(record),
            None => Self::Refused(Status::internal(
                "the stored response for this idempotency key is not a gRPC response",
            )),
        }
    }
}

/// The answer as the layer sends it.
pub(crate) async fn layer(answer: Response) -> Response {
    match Answer::of(answer).await {
        Answer::Refused(status) => status.into_http(),
        Answer::Record(record) => record.into_http(),
        Answer::Other(response) => response,
    }
}
