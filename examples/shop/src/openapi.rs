//! `GET /openapi.json`: the OpenAPI 3.1 document of the shop, generated from the handlers'
//! `#[utoipa::path]` attributes.
//!
//! Every idempotent operation lists the `Idempotency-Key` header (required or not, strict or
//! lenient, as its `#[idempotent]` says), whose schema admits exactly the values the service
//! accepts (`key_schema`, tested against the key parser), and, added here in one place, the answers the idempotency runtime
//! gives on every such route: `Idempotent-Replayed` on a replayed success, and the Problem
//! Details of a malformed key (400), a request in flight (409), a body over the limit (413),
//! a reused key (422) and a failed handler (500).

mod key_schema;

use std::sync::LazyLock;

use axum::{
    http::{HeaderValue, header},
    response::{IntoResponse, Response},
};
use utoipa::{
    IntoParams, Modify, OpenApi,
    openapi::{
        self, Content, Ref, RefOr, Required, ResponseBuilder, Schema,
        header::Header,
        path::{Operation, Parameter, ParameterBuilder, ParameterIn},
        schema::{ObjectBuilder, Type},
        security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme},
    },
};

use crate::{
    health, payments,
    problem::{PROBLEM_JSON, ProblemBody},
    receipts, refunds, transfers, webhooks,
};

/// The `Idempotency-Key` header of an operation that requires a key, for `params(...)`.
#[derive(Debug)]
pub struct IdempotencyKeyHeader;

impl IntoParams for IdempotencyKeyHeader {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        vec![key_header(
            Required::True,
            "A new unique value for each operation (a UUID, say), and the same value on every \
             retry of it. 1 to 255 visible ASCII characters, sent as an RFC 9651 sf-string \
             (`\"8e03978e-40d5-43e8-bc93-6894a57f9324\"`, the IETF draft) or bare \
             (`8e03978e-40d5-43e8-bc93-6894a57f9324`, as Stripe sends it): both name the same \
             key. A bare key cannot contain a comma; a quoted one can. Required: a request \
             without one is answered 400.",
            "\"8e03978e-40d5-43e8-bc93-6894a57f9324\"",
            key_schema::lenient(),
        )]
    }
}

/// The `Idempotency-Key` header of an operation where a key is optional, for `params(...)`.
#[derive(Debug)]
pub struct OptionalIdempotencyKeyHeader;

impl IntoParams for OptionalIdempotencyKeyHeader {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        vec![key_header(
            Required::False,
            "Optional: without one the request simply runs; with one, a retry gets the first \
             answer. 1 to 255 visible ASCII characters, as an RFC 9651 sf-string (`\"abc\"`) or \
             bare (`abc`): both name the same key.",
            "8e03978e-40d5-43e8-bc93-6894a57f9324",
            key_schema::lenient(),
        )]
    }
}

/// The `Idempotency-Key` header of an operation that takes only the IETF draft's spelling, for
/// `params(...)`.
#[derive(Debug)]
pub struct StrictIdempotencyKeyHeader;

impl IntoParams for StrictIdempotencyKeyHeader {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        vec![key_header(
            Required::True,
            "Required, and only as an RFC 9651 sf-string: a double-quoted string of 1 to 255 \
             visible ASCII characters (`\"evt_1NG8Du2eZvKYlo2C\"`). A bare key is answered 400.",
            "\"evt_1NG8Du2eZvKYlo2C\"",
            key_schema::strict(),
        )]
    }
}

/// The `Idempotency-Key` header with its schema, which [`key_schema`] keeps exact.
fn key_header(
    required: Required,
    description: &str,
    example: &str,
    schema: impl Into<RefOr<Schema>>,
) -> Parameter {
    ParameterBuilder::new()
        .name("Idempotency-Key")
        .parameter_in(ParameterIn::Header)
        .required(required)
        .description(Some(description))
        .schema(Some(schema))
        .example(Some(example.into()))
        .build()
}

/// The OpenAPI document.
#[derive(Debug, OpenApi)]
#[openapi(
    info(
        title = "shop",
        description = "A small shop (payments, refunds, transfers) whose POST operations take an \
            `Idempotency-Key`: a retry with the same key gets the first answer, and the operation \
            runs once. Errors are RFC 9457 Problem Details (`application/problem+json`).",
    ),
    paths(
        payments::create_payment,
        payments::list_payments,
        payments::get_payment,
        refunds::create_refund,
        receipts::send_receipt,
        receipts::list_receipts,
        transfers::create_transfer,
        transfers::list_transfers,
        webhooks::bank_webhook,
        health::healthz,
        openapi_json,
    ),
    components(schemas(ProblemBody)),
    modifiers(&SecuritySchemes, &IdempotencyAnswers),
    tags(
        (name = "payments", description = "Payments, their refunds and receipts"),
        (name = "transfers", description = "Money sent to bank accounts"),
        (name = "webhooks", description = "Events the bank sends"),
        (name = "service", description = "The service itself"),
    )
)]
pub struct ApiDoc;

/// The document, rendered once.
static DOCUMENT: LazyLock<String> = LazyLock::new(|| {
    ApiDoc::openapi()
        .to_pretty_json()
        .expect("the document serializes")
});

/// Serves this document.
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "service",
    responses((status = 200, description = "The OpenAPI 3.1 document of this service", content_type = "application/json"))
)]
pub async fn openapi_json() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        DOCUMENT.as_str(),
    )
        .into_response()
}

struct SecuritySchemes;

impl Modify for SecuritySchemes {
    fn modify(&self, openapi: &mut openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "Demo grade: the token is the user id itself (1 to 64 of \
                         `[A-Za-z0-9_-]`), unchecked. `Authorization: Bearer alice`.",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "bankSignature",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "Bank-Signature",
                "`sha256=` and the hex HMAC-SHA256 of the body, keyed with the webhook secret",
            ))),
        );
    }
}

/// Adds what the idempotency runtime answers to every operation with an `Idempotency-Key`.
struct IdempotencyAnswers;

impl Modify for IdempotencyAnswers {
    fn modify(&self, openapi: &mut openapi::OpenApi) {
        for item in openapi.paths.paths.values_mut() {
            let operations = [
                &mut item.post,
                &mut item.put,
                &mut item.patch,
                &mut item.delete,
            ];
            for operation in operations.into_iter().flatten() {
                if has_key_header(operation) {
                    add_idempotency_answers(operation);
                }
            }
        }
    }
}

fn has_key_header(operation: &Operation) -> bool {
    operation.parameters.iter().flatten().any(
        |parameter| matches!(parameter, RefOr::T(parameter) if parameter.name == "Idempotency-Key"),
    )
}

fn add_idempotency_answers(operation: &mut Operation) {
    let responses = &mut operation.responses.responses;
    for (status, response) in responses.iter_mut() {
        if let (true, RefOr::T(response)) = (status.starts_with('2'), response) {
            response.headers.insert(
                "Idempotent-Replayed".to_owned(),
                RefOr::T(header(
                    "`true` when this is the stored answer of the first request with this key, \
                     sent again; absent on the first answer",
                )),
            );
        }
    }
    let problems = [
        (
            "400",
            "The Idempotency-Key is missing or malformed (empty, longer than 255 characters, not visible ASCII, several values)",
        ),
        (
            "409",
            "The first request with this key is still running; retry after `Retry-After` to get its answer",
        ),
        ("413", "The body is larger than the shop accepts (16 KiB)"),
        (
            "422",
            "The key was already used for a different request (another body, or another payment); use a new key",
        ),
        (
            "500",
            "The operation failed unexpectedly; `detail` says whether the key was released (a retry runs it again) or is still held (retry after `Retry-After`)",
        ),
    ];
    for (status, description) in problems {
        responses.entry(status.to_owned()).or_insert_with(|| {
            let mut response = ResponseBuilder::new()
                .description(description)
                .content(
                    PROBLEM_JSON,
                    Content::new(Some(Ref::from_schema_name("Problem"))),
                )
                .build();
            if status == "409" {
                response.headers.insert(
                    "Retry-After".to_owned(),
                    RefOr::T(header("Seconds to wait before the retry")),
                );
            }
            RefOr::T(response)
        });
    }
}

fn header(description: &str) -> Header {
    let mut header = Header::new(ObjectBuilder::new().schema_type(Type::String));
    header.description = Some(description.to_owned());
    header
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_is_openapi_3_1_with_problem_answers() {
        let document: serde_json::Value = serde_json::from_str(&DOCUMENT).unwrap();
        assert_eq!(document["openapi"], "3.1.0");
        let create = &document["paths"]["/payments"]["post"];
        let key = create["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|parameter| parameter["name"] == "Idempotency-Key")
            .unwrap();
        assert_eq!(key["in"], "header");
        assert_eq!(key["required"], true);
        for status in ["400", "401", "409", "413", "415", "422", "500", "503"] {
            let problem = &create["responses"][status]["content"][PROBLEM_JSON]["schema"]["$ref"];
            assert_eq!(problem, "#/components/schemas/Problem", "{status}");
        }
        assert!(
            create["responses"]["201"]["headers"]["Idempotent-Replayed"].is_object(),
            "{create}"
        );
        let receipt_key = &document["paths"]["/payments/{id}/receipt"]["post"]["parameters"][1];
        assert_eq!(receipt_key["name"], "Idempotency-Key");
        assert_eq!(receipt_key["required"], false);
        assert!(document["paths"]["/payments"]["get"]["parameters"].is_null());
    }
}
