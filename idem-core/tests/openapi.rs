//! The OpenAPI document from the policy that runs: what `openapi::Documenter` writes for
//! routes declared with `#[utoipa::path]`, utoipa-axum's router and by hand; that a probe
//! neither runs a handler nor claims a key; that what the document says is what the route
//! answers; and each way it refuses a router it cannot describe.
#![cfg(feature = "openapi")]

use std::{
    sync::atomic::{AtomicUsize, Ordering},
    time::Duration,
};

use axum::{
    Extension, Json, Router,
    body::Body,
    extract::{DefaultBodyLimit, Request},
    http::{HeaderValue, StatusCode, header},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    routing::post,
};
use http::Method;
use idem::{
    Idempotency, IdempotencyLayer, MemoryStore, Policy, Principal, Scope, idempotent,
    openapi::{DocumentError, Documenter, Endpoint, Finding, Probe},
};
use serde_json::{Value, json};
use tower::ServiceExt;
use utoipa::{
    OpenApi,
    openapi::{
        OpenApi as Document, PathItem, PathsBuilder, RefOr, ResponseBuilder,
        path::{HttpMethod, OperationBuilder},
    },
};

/// How many times a handler of these tests ran.
static RUNS: AtomicUsize = AtomicUsize::new(0);

/// Makes a payment.
#[utoipa::path(
    post,
    path = "/payments",
    responses(
        (status = 201, description = "The payment was made"),
        (status = 400, description = "The body is invalid", content_type = "application/problem+json", body = Value),
    )
)]
#[idempotent(ttl = "2h", scope = "user", lease = "10s", fingerprint_omit = ["/clientTimestamp"])]
async fn create_payment(
    Extension(user): Extension<Principal>,
    Json(payment): Json<Value>,
) -> (StatusCode, Json<Value>) {
    RUNS.fetch_add(1, Ordering::SeqCst);
    drop(user);
    (StatusCode::CREATED, Json(payment))
}

/// E-mails a receipt again.
#[utoipa::path(post, path = "/payments/{id}/receipt", responses((status = 202, description = "Sent")))]
#[idempotent(
    required = false,
    scope = "global",
    key_syntax = "strict",
    store_server_errors = true
)]
async fn send_receipt() -> StatusCode {
    StatusCode::ACCEPTED
}

#[derive(OpenApi)]
#[openapi(paths(create_payment, send_receipt))]
struct ApiDoc;

/// Names every caller `alice`: the principal a user-scoped key needs.
async fn alice(mut request: Request, next: Next) -> Response {
    request.extensions_mut().insert(Principal::new("alice"));
    next.run(request).await
}

fn shop(idem: Idempotency) -> Router {
    Router::new()
        .route("/payments", post(create_payment))
        .route("/payments/{id}/receipt", post(send_receipt))
        .layer(DefaultBodyLimit::max(4096))
        .layer(Extension(idem))
        .layer(middleware::from_fn(alice))
}

async fn document(router: &Router, openapi: Document) -> Value {
    let document = Documenter::new().document(router, openapi).await.unwrap();
    serde_json::from_str(&document.to_json().unwrap()).unwrap()
}

fn key_parameter(operation: &Value) -> &Value {
    operation["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|parameter| parameter["name"] == "Idempotency-Key")
        .unwrap()
}

/// The `type` URIs the document allows for `status`.
fn documented_types(operation: &Value, status: &str) -> Vec<Value> {
    let schema = &operation["responses"][status]["content"]["application/problem+json"]["schema"];
    let ours = match schema.get("anyOf") {
        Some(alternatives) => &alternatives[1],
        None => schema,
    };
    ours["allOf"][1]["properties"]["type"]["enum"]
        .as_array()
        .unwrap()
        .clone()
}

#[tokio::test]
async fn an_attribute_route_is_documented_from_its_policy() {
    let document = document(&shop(Idempotency::default()), ApiDoc::openapi()).await;
    let create = &document["paths"]["/payments"]["post"];
    let key = key_parameter(create);
    assert_eq!(key["in"], "header");
    assert_eq!(key["required"], true);
    let description = key["description"].as_str().unwrap();
    assert!(description.contains("kept for 2 hours"), "{description}");
    assert!(description.contains("caller's own"), "{description}");
    assert!(key["schema"]["oneOf"].is_array(), "both spellings");

    let policy = &create["x-idempotency"];
    assert_eq!(policy["ttl"], 7_200);
    assert_eq!(policy["lease"], 10);
    assert_eq!(policy["scope"], "user");
    assert_eq!(policy["required"], true);
    assert_eq!(policy["storeServerErrors"], false);
    assert_eq!(policy["fingerprintOmit"], json!(["/clientTimestamp"]));
    assert_eq!(policy["maxRequestBody"], 4096);
    assert!(policy.get("resumeAfter").is_none());

    let responses = &create["responses"];
    assert!(responses["201"]["headers"]["Idempotent-Replayed"].is_object());
    for (status, slug) in [
        ("409", "request-in-flight"),
        ("410", "response-not-replayable"),
        ("413", "body-too-large"),
        ("422", "key-reused"),
        ("500", "handler-failed"),
        ("503", "store-unavailable"),
    ] {
        let types = documented_types(create, status);
        assert_eq!(types, [format!("/problems/idempotency#{slug}")], "{status}");
    }
    for status in ["409", "503"] {
        assert!(
            responses[status]["headers"]["Retry-After"].is_object(),
            "{status}"
        );
    }
    assert!(responses["422"]["headers"]["Retry-After"].is_null());
    // The operation's own 400 keeps its words and its schema, and accepts idem's too.
    let bad = &responses["400"];
    let description = bad["description"].as_str().unwrap();
    assert!(
        description.starts_with("The body is invalid\n\nIdempotency: "),
        "{description}"
    );
    let types = documented_types(create, "400");
    assert!(types.contains(&json!("/problems/idempotency#key-missing")));
    assert!(
        bad["headers"]["Idempotent-Replayed"].is_object(),
        "a 400 of the handler's is replayed"
    );
    let problem = &document["components"]["schemas"]["IdempotencyProblem"];
    assert_eq!(
        problem["required"],
        json!(["type", "title", "status", "detail"])
    );
}

#[tokio::test]
async fn each_setting_shows_in_its_operation() {
    let document = document(&shop(Idempotency::default()), ApiDoc::openapi()).await;
    let receipt = &document["paths"]["/payments/{id}/receipt"]["post"];
    let key = key_parameter(receipt);
    assert_eq!(key["required"], false);
    assert!(
        key["schema"]["pattern"]
            .as_str()
            .unwrap()
            .starts_with("^\""),
        "strict: quoted only"
    );
    let policy = &receipt["x-idempotency"];
    assert_eq!(policy["keySyntax"], "strict");
    assert_eq!(policy["scope"], "global");
    assert_eq!(policy["storeServerErrors"], true);
    assert!(
        receipt["responses"]["401"].is_null(),
        "a global key needs no principal"
    );
    let types = documented_types(receipt, "400");
    assert!(
        !types.contains(&json!("/problems/idempotency#key-missing")),
        "optional key"
    );
}

#[tokio::test]
async fn a_probe_runs_no_handler_and_claims_no_key() {
    let idem = Idempotency::new(MemoryStore::default());
    let router = shop(idem.clone());
    let before = RUNS.load(Ordering::SeqCst);
    document(&router, ApiDoc::openapi()).await;
    assert_eq!(RUNS.load(Ordering::SeqCst), before);
    assert_eq!(idem.running(), 0);
    // The key of a first request is free: the handler runs.
    let first = payment(&router, "k-1", r#"{"amount":1}"#).await;
    assert_eq!(first.status(), StatusCode::CREATED);
    assert!(!first.headers().contains_key("idempotent-replayed"));
}

async fn payment(router: &Router, key: &str, body: &'static str) -> Response {
    let request = Request::post("/payments")
        .header("idempotency-key", key)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body))
        .unwrap();
    router.clone().oneshot(request).await.unwrap()
}

async fn problem_of(response: Response) -> Value {
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    serde_json::from_slice(&body).unwrap()
}

/// The answers the route gives are the ones its document lists, with the runtime's `type`
/// base.
#[tokio::test]
async fn the_route_answers_as_its_document_says() {
    let idem = Idempotency::builder(MemoryStore::default())
        .problem_type_base("https://api.example.com/problems#")
        .build();
    let router = shop(idem);
    let document = document(&router, ApiDoc::openapi()).await;
    let create = &document["paths"]["/payments"]["post"];

    let missing = Request::post("/payments").body(Body::empty()).unwrap();
    let missing = router.clone().oneshot(missing).await.unwrap();
    assert_eq!(missing.status(), StatusCode::BAD_REQUEST);
    let problem = problem_of(missing).await;
    assert!(
        documented_types(create, "400").contains(&problem["type"]),
        "{problem}"
    );
    assert_eq!(
        problem["type"],
        "https://api.example.com/problems#key-missing"
    );

    assert_eq!(
        payment(&router, "k", r#"{"amount":1}"#).await.status(),
        StatusCode::CREATED
    );
    let reused = payment(&router, "k", r#"{"amount":2}"#).await;
    assert_eq!(reused.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let problem = problem_of(reused).await;
    assert_eq!(documented_types(create, "422"), [problem["type"].clone()]);

    let large = payment(
        &router,
        "k-large",
        Box::leak("x".repeat(5000).into_boxed_str()),
    )
    .await;
    assert_eq!(large.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let problem = problem_of(large).await;
    assert_eq!(documented_types(create, "413"), [problem["type"].clone()]);
}

/// A route whose policy changes changes its document: the layer's policy, and the runtime's
/// cap on TTLs.
#[tokio::test]
async fn a_changed_policy_changes_the_document() {
    let layered = |policy: Policy, idem: Idempotency| {
        Router::new()
            .route("/orders", post(|| async { StatusCode::CREATED }))
            .layer(IdempotencyLayer::new(idem, policy))
    };
    let openapi = || {
        let operation = OperationBuilder::new()
            .response("201", ResponseBuilder::new().description("Ordered"))
            .build();
        Document::builder()
            .paths(PathsBuilder::new().path("/orders", PathItem::new(HttpMethod::Post, operation)))
            .build()
    };
    let policy = Policy::new().scope(Scope::Global);
    let day = document(&layered(policy, Idempotency::default()), openapi()).await;
    let hour = document(
        &layered(
            policy.ttl(Duration::from_secs(3_600)),
            Idempotency::default(),
        ),
        openapi(),
    )
    .await;
    let capped = Idempotency::builder(MemoryStore::default())
        .max_ttl(Duration::from_secs(600))
        .build();
    let capped = document(&layered(policy, capped), openapi()).await;
    let ttl =
        |document: &Value| document["paths"]["/orders"]["post"]["x-idempotency"]["ttl"].clone();
    assert_eq!(ttl(&day), 86_400);
    assert_eq!(ttl(&hour), 3_600);
    assert_eq!(ttl(&capped), 600);
    let description = |document: &Value| {
        key_parameter(&document["paths"]["/orders"]["post"])["description"].clone()
    };
    assert!(
        description(&hour)
            .as_str()
            .unwrap()
            .contains("kept for 1 hour ")
    );
    // No body limit layer: axum's default of 2 MiB.
    assert_eq!(
        day["paths"]["/orders"]["post"]["x-idempotency"]["maxRequestBody"],
        2 * 1024 * 1024
    );
}

mod with_utoipa_axum {
    use utoipa_axum::{router::OpenApiRouter, routes};

    use super::*;

    /// Refunds a payment.
    #[utoipa::path(post, path = "/refunds", responses((status = 201, description = "Refunded")))]
    #[idempotent(scope = "global", on_conflict = "wait(5s)", resume_after = "30s")]
    async fn create_refund() -> StatusCode {
        StatusCode::CREATED
    }

    #[tokio::test]
    async fn an_open_api_router_is_documented() {
        let (router, openapi) = OpenApiRouter::new()
            .routes(routes!(create_refund))
            .split_for_parts();
        let router = router.layer(Extension(Idempotency::default()));
        let document = document(&router, openapi).await;
        let refund = &document["paths"]["/refunds"]["post"];
        assert_eq!(refund["x-idempotency"]["onConflict"], "wait");
        assert_eq!(refund["x-idempotency"]["conflictWait"], 5);
        assert_eq!(refund["x-idempotency"]["resumeAfter"], 30);
        let conflict = refund["responses"]["409"]["description"].as_str().unwrap();
        assert!(conflict.contains("waited 5 seconds"), "{conflict}");
    }
}

/// An operation by hand, with the given responses.
fn by_hand(path: &str, operation: utoipa::openapi::path::Operation) -> Document {
    Document::builder()
        .paths(PathsBuilder::new().path(path, PathItem::new(HttpMethod::Post, operation)))
        .build()
}

fn plain_operation() -> utoipa::openapi::path::Operation {
    OperationBuilder::new()
        .response("201", ResponseBuilder::new().description("Done"))
        .build()
}

fn global_layer(router: Router) -> Router {
    router.layer(IdempotencyLayer::new(
        Idempotency::default(),
        Policy::new().scope(Scope::Global),
    ))
}

async fn refusal(router: &Router, openapi: Document) -> DocumentError {
    match Documenter::new()
        .timeout(Duration::from_millis(200))
        .document(router, openapi)
        .await
    {
        Ok(_) => panic!("a document of a router it cannot describe"),
        Err(error) => error,
    }
}

#[tokio::test]
async fn a_shared_response_is_copied_before_it_changes() {
    let router = global_layer(Router::new().route("/a", post(|| async { StatusCode::CREATED })));
    let operation = OperationBuilder::new()
        .response("201", ResponseBuilder::new().description("Done"))
        .response(
            "503",
            utoipa::openapi::Ref::from_response_name("Unavailable"),
        )
        .build();
    let mut openapi = by_hand("/a", operation);
    let unavailable = ResponseBuilder::new()
        .description("Down for maintenance")
        .build();
    openapi
        .components
        .get_or_insert_with(Default::default)
        .responses
        .insert("Unavailable".to_owned(), RefOr::T(unavailable));
    let document = document(&router, openapi).await;
    let answer = &document["paths"]["/a"]["post"]["responses"]["503"];
    assert!(
        answer["description"]
            .as_str()
            .unwrap()
            .starts_with("Down for maintenance\n\n")
    );
    assert_eq!(
        document["components"]["responses"]["Unavailable"]["description"],
        "Down for maintenance"
    );

    let dangling = OperationBuilder::new()
        .response("409", utoipa::openapi::Ref::from_response_name("Nowhere"))
        .build();
    let error = refusal(&router, by_hand("/a", dangling)).await;
    assert!(
        matches!(error, DocumentError::DanglingReference { .. }),
        "{error}"
    );
}

#[tokio::test]
async fn what_the_document_cannot_say_is_an_error() {
    let router = global_layer(
        Router::new()
            .route("/a", post(|| async { StatusCode::CREATED }))
            .route("/items/{id}", post(|| async { StatusCode::CREATED })),
    );
    let error = refusal(&router, by_hand("/nowhere", plain_operation())).await;
    assert_eq!(
        error.to_string(),
        "POST /nowhere is in the document, but no route of the router serves it (its probe \
         reached the router's fallback): route it, or take it out of the document"
    );
    let mut twice = by_hand("/items/{id}", plain_operation());
    twice.paths.paths.insert(
        "/items/{item}".to_owned(),
        PathItem::new(HttpMethod::Post, plain_operation()),
    );
    let error = refusal(&router, twice).await;
    assert!(matches!(error, DocumentError::SameRoute { .. }), "{error}");

    let keyed = OperationBuilder::new()
        .parameter(
            utoipa::openapi::path::ParameterBuilder::new()
                .name("idempotency-key")
                .parameter_in(utoipa::openapi::path::ParameterIn::Header),
        )
        .response("201", ResponseBuilder::new().description("Done"))
        .build();
    let error = refusal(&router, by_hand("/a", keyed)).await;
    assert!(
        matches!(error, DocumentError::KeyDocumented { .. }),
        "{error}"
    );

    let mut taken = by_hand("/a", plain_operation());
    taken
        .components
        .get_or_insert_with(Default::default)
        .schemas
        .insert(
            "IdempotencyProblem".to_owned(),
            RefOr::T(utoipa::openapi::ObjectBuilder::new().into()),
        );
    let error = refusal(&router, taken).await;
    assert!(
        matches!(error, DocumentError::SchemaTaken { .. }),
        "{error}"
    );
}

#[tokio::test]
async fn a_probe_that_reaches_another_route_is_an_error() {
    // `/items/{id}` is documented; its probe's `idem-probe` is a route of its own.
    let router = Router::new()
        .route("/items/{id}", post(|| async { StatusCode::CREATED }))
        .route("/items/idem-probe", post(|| async { StatusCode::CREATED }));
    let error = refusal(&router, by_hand("/items/{id}", plain_operation())).await;
    assert!(
        matches!(error, DocumentError::OtherRoute { ref route, .. } if route == "/items/idem-probe"),
        "{error}"
    );
}

#[tokio::test]
async fn an_attribute_without_its_runtime_is_an_error() {
    let router = Router::new()
        .route("/payments", post(create_payment))
        .route("/payments/{id}/receipt", post(send_receipt));
    let error = refusal(&router, ApiDoc::openapi()).await;
    assert!(
        matches!(error, DocumentError::RuntimeMissing { .. }),
        "{error}"
    );
}

#[tokio::test]
async fn a_route_without_idem_that_waits_times_out() {
    let router = Router::new().route("/slow", post(std::future::pending::<StatusCode>));
    let error = refusal(&router, by_hand("/slow", plain_operation())).await;
    assert!(matches!(error, DocumentError::TimedOut { .. }), "{error}");
}

/// Authentication in front of idem: a probe without credentials says nothing and is an error;
/// with the header, or let through as a `Probe`, it gets to idem.
#[tokio::test]
async fn authentication_in_front_wants_credentials_or_lets_probes_through() {
    async fn strict(request: Request, next: Next) -> Response {
        if request.headers().get(header::AUTHORIZATION).is_none() {
            return StatusCode::UNAUTHORIZED.into_response();
        }
        next.run(request).await
    }
    async fn probes_pass(request: Request, next: Next) -> Response {
        let probe = request.extensions().get::<Probe>().is_some();
        if !probe && request.headers().get(header::AUTHORIZATION).is_none() {
            return StatusCode::UNAUTHORIZED.into_response();
        }
        next.run(request).await
    }
    let routes = || global_layer(Router::new().route("/a", post(|| async { StatusCode::CREATED })));
    let strict = routes().layer(middleware::from_fn(strict));
    let error = refusal(&strict, by_hand("/a", plain_operation())).await;
    assert!(
        matches!(error, DocumentError::ProbeRefused { status, .. } if status == 401),
        "{error}"
    );
    let with_credentials = Documenter::new()
        .header(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer probe"),
        )
        .document(&strict, by_hand("/a", plain_operation()))
        .await
        .unwrap();
    assert!(
        with_credentials.paths.paths["/a"]
            .post
            .as_ref()
            .unwrap()
            .extensions
            .is_some()
    );
    let lenient = routes().layer(middleware::from_fn(probes_pass));
    document(&lenient, by_hand("/a", plain_operation())).await;
}

/// A route without idem keeps its operation as it was; its handler's body extractor refused
/// the probe's body.
#[tokio::test]
async fn a_route_without_idem_is_left_as_it_is() {
    let router = Router::new().route(
        "/echo",
        post(|Json(body): Json<Value>| async move { Json(body) }),
    );
    let openapi = by_hand("/echo", plain_operation());
    let document = Documenter::new()
        .document(&router, openapi.clone())
        .await
        .unwrap();
    assert!(document == openapi);
}

/// `/a` under a layer, `/b` under another whose TTL is `ttl`, and `/plain` without idem.
fn checked_router(ttl: Duration) -> Router {
    global_layer(Router::new().route("/a", post(|| async { StatusCode::CREATED })))
        .merge(
            Router::new()
                .route("/b", post(|| async { StatusCode::CREATED }))
                .layer(IdempotencyLayer::new(
                    Idempotency::default(),
                    Policy::new().scope(Scope::Global).ttl(ttl),
                )),
        )
        .route("/plain", post(|| async { StatusCode::OK }))
}

async fn documented_a(router: &Router) -> Document {
    Documenter::new()
        .document(router, by_hand("/a", plain_operation()))
        .await
        .unwrap()
}

#[tokio::test]
async fn the_check_finds_routes_the_document_misdescribes() {
    let router = checked_router(Duration::from_secs(86_400));
    let documented = documented_a(&router).await;
    let documenter = Documenter::new();
    let b = Endpoint::new(Method::POST, "/b");
    let plain = Endpoint::new(Method::POST, "/plain");
    let a = Endpoint::new(Method::POST, "/a");
    documenter
        .check(&router, &documented, [a, plain.clone()])
        .await
        .unwrap();

    let error = documenter
        .check(&router, &documented, [b.clone(), plain.clone()])
        .await
        .unwrap_err();
    assert_eq!(error.findings, [Finding::Undocumented { endpoint: b }]);
    assert!(
        error
            .to_string()
            .contains("idem guards POST /b, and the document does not say so")
    );

    // The document of `/a` as if it were `/plain`'s, which no idem guards.
    let mut moved = documented.clone();
    let operation = moved.paths.paths.remove("/a").unwrap();
    moved.paths.paths.insert("/plain".to_owned(), operation);
    let error = documenter.check(&router, &moved, []).await.unwrap_err();
    assert_eq!(
        error.findings,
        [Finding::NotGuarded {
            endpoint: plain,
            status: StatusCode::OK
        }]
    );
}

#[tokio::test]
async fn the_check_finds_a_policy_that_changed_since_the_document() {
    let documented = documented_a(&checked_router(Duration::from_secs(86_400))).await;
    let shorter = Router::new()
        .route("/a", post(|| async { StatusCode::CREATED }))
        .layer(IdempotencyLayer::new(
            Idempotency::default(),
            Policy::new()
                .scope(Scope::Global)
                .ttl(Duration::from_secs(60)),
        ));
    let error = Documenter::new()
        .check(&shorter, &documented, [])
        .await
        .unwrap_err();
    let [
        Finding::Stale {
            endpoint,
            documented,
            running,
        },
    ] = &error.findings[..]
    else {
        panic!("{error}");
    };
    assert_eq!(endpoint, &Endpoint::new(Method::POST, "/a"));
    assert_eq!(
        (documented["ttl"].clone(), running["ttl"].clone()),
        (json!(86_400), json!(60))
    );
}
