//! `GET /openapi.json`: the OpenAPI 3.1 document of the shop, from the handlers'
//! `#[utoipa::path]` attributes and, for every idempotent operation, from the policy its
//! route runs.
//!
//! The shop writes what is its own: its operations, their bodies, its Problem Details and the
//! security schemes. idem's [`Documenter`] adds what the idempotency runtime does on each route
//! that it guards (the `Idempotency-Key` header and its schema, the Problem Details idem
//! answers with, `Idempotent-Replayed` and `x-idempotency`), asked of the router that serves
//! the requests, so that the document changes when a route's `#[idempotent(...)]` does. The
//! document is made once, at start-up ([`prepare`]); a route that it cannot describe stops the
//! shop there.

use std::sync::Arc;

use axum::{
    Router,
    extract::{Request, State},
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
    routing::get,
};
use idem::openapi::{DocumentError, Documenter};
use tokio::sync::OnceCell;
use tower::ServiceExt;
use utoipa::{
    Modify, OpenApi,
    openapi::{
        self,
        security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme},
    },
};

use crate::{
    health, payments,
    problem::{ProblemBody, ShopProblem, ShopProblemKind},
    receipts, refunds, transfers, webhooks,
};

/// What the shop writes of its API; [`document`] adds idempotency to it.
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
    modifiers(&SecuritySchemes),
    tags(
        (name = "payments", description = "Payments, their refunds and receipts"),
        (name = "transfers", description = "Money sent to bank accounts"),
        (name = "webhooks", description = "Events the bank sends"),
        (name = "service", description = "The service itself"),
    )
)]
pub struct ApiDoc;

/// The token the probes of the document carry: the routes that act for a user want one, and
/// this demo takes any user id.
const PROBE_TOKEN: &str = "Bearer openapi-probe";

/// The shop's document, with what `router` (the shop without `GET /openapi.json`) does on each
/// idempotent route.
///
/// # Errors
///
/// When the document cannot say what a route does ([`DocumentError`]).
pub async fn document(router: &Router) -> Result<openapi::OpenApi, DocumentError> {
    Documenter::new()
        .header(header::AUTHORIZATION, HeaderValue::from_static(PROBE_TOKEN))
        .document(router, ApiDoc::openapi())
        .await
}

/// The router of the shop that serves its document: what [`document`] asks, and the document
/// once it is made.
#[derive(Clone)]
struct Served {
    router: Router,
    rendered: Arc<OnceCell<Result<String, String>>>,
}

/// `router` with `GET /openapi.json`, the document of `router` itself.
pub fn with_document(router: Router) -> Router {
    let served = Served {
        router: router.clone(),
        rendered: Arc::default(),
    };
    router.route(
        "/openapi.json",
        get(openapi_json)
            // Other methods on this path are answered as on the shop's other paths.
            .fallback(crate::method_not_allowed)
            .with_state(served),
    )
}

/// Makes the document of the shop served by `router` ([`with_document`]), so that a route it
/// cannot describe stops the shop at start-up rather than at the first `GET /openapi.json`.
///
/// # Errors
///
/// What the document says is wrong, as `GET /openapi.json` would answer it.
pub async fn prepare(router: &Router) -> Result<(), String> {
    let request = Request::get("/openapi.json")
        .body(axum::body::Body::empty())
        .map_err(|error| error.to_string())?;
    let answer = router
        .clone()
        .oneshot(request)
        .await
        .unwrap_or_else(|never| match never {});
    if answer.status() == StatusCode::OK {
        return Ok(());
    }
    let body = axum::body::to_bytes(answer.into_body(), 64 * 1024)
        .await
        .map_err(|error| error.to_string())?;
    Err(format!(
        "the OpenAPI document: {}",
        String::from_utf8_lossy(&body)
    ))
}

/// Serves this document.
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "service",
    responses((status = 200, description = "The OpenAPI 3.1 document of this service", content_type = "application/json"))
)]
async fn openapi_json(State(served): State<Served>) -> Response {
    let rendered = served
        .rendered
        .get_or_init(|| async {
            let document = document(&served.router)
                .await
                .map_err(|error| error.to_string())?;
            document.to_pretty_json().map_err(|error| error.to_string())
        })
        .await;
    match rendered {
        Ok(json) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            json.clone(),
        )
            .into_response(),
        Err(error) => ShopProblem::new(ShopProblemKind::Internal, error.clone()).into_response(),
    }
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
