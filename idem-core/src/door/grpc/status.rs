//! gRPC status codes both ways: the flow's refusals as `tonic::Status` with `google.rpc`
//! details ([`refusal`]), and a handler's code as the HTTP status the flow decides by
//! ([`http_status`], [`is_result`]). [docs/grpc.md](https://github.com/idem-rs/idem/blob/main/docs/grpc.md) has both tables.

use std::{collections::HashMap, time::Duration};

use axum::response::Response;
use http::{StatusCode, header};
use http_body_util::BodyExt;
use idem_protocol::problem::GRPC_ERROR_DOMAIN;
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

use crate::problem::{Problem, ProblemKind};

/// The code of a kind, as tonic names it.
pub(crate) fn code_of(kind: ProblemKind) -> Code {
    Code::from_i32(kind.grpc_code())
}

/// The flow's Problem answer (`kind`) as a gRPC status: the kind's code, its title and
/// detail as the message, an `ErrorInfo` (the kind's reason, and its `type` URI in the
/// metadata), a `RetryInfo` when the answer says when to come back, and a `BadRequest` that
/// names the metadata entry when the key is at fault.
pub(crate) async fn refusal(kind: ProblemKind, answer: Response) -> Status {
    let retry_after = answer
        .headers()
        .get(header::RETRY_AFTER)
        .and_then(|value| value.to_str().ok()?.parse::<u64>().ok())
        .map(Duration::from_secs);
    let body = answer
        .into_body()
        .collect()
        .await
        .map(|body| body.to_bytes())
        .unwrap_or_default();
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let member = |name: &str| json[name].as_str().unwrap_or_default().to_owned();
    let type_uri = Some(member("type"))
        .filter(|uri| !uri.is_empty())
        .unwrap_or_else(|| kind.type_uri());
    let message = format!("{}: {}", kind.title(), member("detail"));
    with_details(kind, message, type_uri, retry_after)
}

/// A Problem made here (not by the flow) as a gRPC status.
pub(crate) fn from_problem(problem: &Problem, retry_after: Option<Duration>) -> Status {
    let kind = problem.kind();
    let message = format!("{}: {}", kind.title(), problem.detail());
    with_details(kind, message, problem.type_uri(), retry_after)
}

fn with_details(
    kind: ProblemKind,
    message: String,
    type_uri: String,
    retry_after: Option<Duration>,
) -> Status {
    let metadata = HashMap::from([("type".to_owned(), type_uri)]);
    let mut details = ErrorDetails::with_error_info(kind.reason(), GRPC_ERROR_DOMAIN, metadata);
    if let Some(after) = retry_after {
        details.set_retry_info(Some(after));
    }
    if matches!(kind, ProblemKind::KeyMissing | ProblemKind::KeyMalformed) {
        details.add_bad_request_violation("idempotency-key", kind.title());
    }
    if kind == ProblemKind::KeyReused {
        details.add_precondition_failure_violation(
            "IDEMPOTENCY_KEY",
            "idempotency-key",
            "the key was first used for another request; use a new key for a new operation",
        );
    }
    Status::with_error_details(code_of(kind), message, details)
}

/// The HTTP status a handler's gRPC code stands for (`google.rpc.Code`'s mapping), by which
/// the flow decides what is stored: a 5xx releases the key unless the policy stores server
/// errors.
pub(crate) fn http_status(code: Code) -> StatusCode {
    let status = match code {
        Code::Ok => 200,
        Code::Cancelled => 499,
        Code::Unknown | Code::Internal | Code::DataLoss => 500,
        Code::InvalidArgument | Code::FailedPrecondition | Code::OutOfRange => 400,
        Code::DeadlineExceeded => 504,
        Code::NotFound => 404,
        Code::AlreadyExists | Code::Aborted => 409,
        Code::PermissionDenied => 403,
        Code::Unauthenticated => 401,
        Code::ResourceExhausted => 429,
        Code::Unimplemented => 501,
        Code::Unavailable => 503,
    };
    StatusCode::from_u16(status).expect("a valid status code")
}

/// Whether a handler's answer with `code` can be the operation's result. `CANCELLED`,
/// `ABORTED` and `RESOURCE_EXHAUSTED` say "not now" rather than "this is the result": each
/// releases the key whatever the policy, so that the retry they invite runs.
pub(crate) fn is_result(code: Code) -> bool {
    !matches!(
        code,
        Code::Cancelled | Code::Aborted | Code::ResourceExhausted
    )
}

#[cfg(test)]
mod tests {
    use axum::response::IntoResponse;

    use super::*;

    #[tokio::test]
    async fn a_refusal_carries_its_code_reason_type_and_retry_info() {
        let answer = Problem::new(ProblemKind::RequestInFlight, "still running")
            .with_retry_after(Duration::from_secs(2))
            .into_response();
        let status = refusal(ProblemKind::RequestInFlight, answer).await;
        assert_eq!(status.code(), Code::Aborted);
        assert!(status.message().ends_with("still running"), "{status:?}");
        let details = status.get_error_details();
        let info = details.error_info().unwrap();
        assert_eq!(info.reason, "REQUEST_IN_FLIGHT");
        assert_eq!(info.domain, GRPC_ERROR_DOMAIN);
        assert_eq!(
            info.metadata["type"],
            ProblemKind::RequestInFlight.type_uri()
        );
        let retry = details.retry_info().unwrap();
        assert_eq!(retry.retry_delay, Some(Duration::from_secs(2)));
    }

    #[test]
    fn every_kind_has_the_code_of_the_table() {
        let table = [
            (ProblemKind::KeyMissing, Code::InvalidArgument),
            (ProblemKind::KeyMalformed, Code::InvalidArgument),
            (ProblemKind::PrincipalMissing, Code::Internal),
            (ProblemKind::RequestInFlight, Code::Aborted),
            (ProblemKind::ResponseNotReplayable, Code::FailedPrecondition),
            (ProblemKind::BodyTooLarge, Code::ResourceExhausted),
            (ProblemKind::BodyUnreadable, Code::Cancelled),
            (ProblemKind::KeyReused, Code::FailedPrecondition),
            (ProblemKind::HandlerFailed, Code::Internal),
            (ProblemKind::Misconfigured, Code::Internal),
            (ProblemKind::StepsChanged, Code::Internal),
            (ProblemKind::StoreUnavailable, Code::Unavailable),
            (ProblemKind::StepOutcomeUnknown, Code::Unknown),
        ];
        assert_eq!(table.len(), ProblemKind::ALL.len());
        for (kind, code) in table {
            assert_eq!(code_of(kind), code, "{kind:?}");
        }
    }

    #[test]
    fn server_errors_release_and_not_now_is_never_stored() {
        assert!(http_status(Code::Internal).is_server_error());
        assert!(http_status(Code::Unavailable).is_server_error());
        assert!(!http_status(Code::NotFound).is_server_error());
        assert!(is_result(Code::InvalidArgument) && is_result(Code::Ok));
        assert!(!is_result(Code::Aborted) && !is_result(Code::ResourceExhausted));
    }
}
