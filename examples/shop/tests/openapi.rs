//! The shop's OpenAPI document says what each idempotent route runs: the key, the answers and
//! `x-idempotency` of `POST /payments`, `/transfers` and `/payments/{id}/refunds` are their
//! attributes' (as the runtime applies them), and change when the policy does.

use std::time::Duration;

use axum::{
    Router,
    body::Body,
    http::{HeaderValue, Method, Request, StatusCode, header},
};
use idem::openapi::{Documenter, Endpoint};
use serde_json::{Value, json};
use shop::{Backend, Settings, Shop};
use tower::ServiceExt;

fn router(backend: &Backend) -> Router {
    let shop = Shop::new(backend.ledger.clone(), Settings::default());
    shop::app(shop, backend.idem.clone())
}

async fn document(router: &Router) -> Value {
    let document = shop::openapi::document(router).await.unwrap();
    serde_json::from_str(&document.to_json().unwrap()).unwrap()
}

fn operation<'a>(document: &'a Value, path: &str) -> &'a Value {
    &document["paths"][path]["post"]
}

fn key(operation: &Value) -> &Value {
    operation["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|parameter| parameter["name"] == "Idempotency-Key")
        .unwrap()
}

#[tokio::test]
async fn each_idempotent_operation_says_what_its_route_runs() {
    let document = document(&router(&Backend::memory())).await;
    let payments = operation(&document, "/payments");
    assert_eq!(key(payments)["required"], true);
    let policy = &payments["x-idempotency"];
    assert_eq!(
        (&policy["ttl"], &policy["lease"], &policy["scope"]),
        (&json!(86_400), &json!(10), &json!("user"))
    );
    assert_eq!(policy["fingerprintOmit"], json!(["/clientTimestamp"]));
    assert_eq!(policy["maxRequestBody"], Settings::DEFAULT_BODY_LIMIT);

    let refunds = operation(&document, "/payments/{id}/refunds");
    let policy = &refunds["x-idempotency"];
    assert_eq!(
        (&policy["onConflict"], &policy["conflictWait"]),
        (&json!("wait"), &json!(5))
    );
    assert_eq!(policy["storeServerErrors"], true);
    // The bank's 502 is stored for the key: a retry may get it again.
    assert!(refunds["responses"]["502"]["headers"]["Idempotent-Replayed"].is_object());

    let transfers = operation(&document, "/transfers");
    let policy = &transfers["x-idempotency"];
    assert_eq!(
        (&policy["lease"], &policy["resumeAfter"]),
        (&json!(15), &json!(5))
    );
    assert_eq!(policy["storeServerErrors"], false);
    assert!(transfers["responses"]["502"]["headers"]["Idempotent-Replayed"].is_null());

    for path in ["/payments", "/transfers", "/payments/{id}/refunds"] {
        let responses = &operation(&document, path)["responses"];
        assert!(
            responses["201"]["headers"]["Idempotent-Replayed"].is_object(),
            "{path}"
        );
        for status in ["400", "401", "409", "413", "422", "503"] {
            let content = &responses[status]["content"]["application/problem+json"];
            assert!(content["schema"].is_object(), "{path} {status}");
        }
        for status in ["409", "503"] {
            assert!(
                responses[status]["headers"]["Retry-After"].is_object(),
                "{path} {status}"
            );
        }
    }
    let receipt = operation(&document, "/payments/{id}/receipt");
    assert_eq!(key(receipt)["required"], false);
    assert_eq!(receipt["x-idempotency"]["onStoreError"], "run");
    let webhook = operation(&document, "/webhooks/bank");
    assert_eq!(webhook["x-idempotency"]["keySyntax"], "strict");
    assert!(
        webhook["responses"]["401"]["content"]["application/problem+json"]["schema"]["anyOf"]
            .is_null(),
        "a global key has no principal to miss: the 401 is the shop's own"
    );
}

/// The runtime caps every TTL at an hour and resumes abandoned transfers after 2 s: the
/// document says so.
#[tokio::test]
async fn a_changed_policy_changes_the_document() {
    let backend = Backend::memory().with_runtime(
        Some(Duration::from_secs(3_600)),
        Some(Duration::from_secs(2)),
    );
    let document = document(&router(&backend)).await;
    let payments = operation(&document, "/payments");
    assert_eq!(payments["x-idempotency"]["ttl"], 3_600);
    let description = key(payments)["description"].as_str().unwrap();
    assert!(description.contains("kept for 1 hour "), "{description}");
    assert_eq!(
        operation(&document, "/webhooks/bank")["x-idempotency"]["ttl"],
        3_600
    );
    assert_eq!(
        operation(&document, "/transfers")["x-idempotency"]["resumeAfter"],
        2
    );
}

/// The document the shop serves is the one its router describes, and a check of it against
/// the router, with every route that takes a POST, finds nothing.
#[tokio::test]
async fn the_served_document_agrees_with_the_router() {
    let router = router(&Backend::memory());
    let request = Request::get("/openapi.json").body(Body::empty()).unwrap();
    let answer = router.clone().oneshot(request).await.unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    let body = axum::body::to_bytes(answer.into_body(), usize::MAX)
        .await
        .unwrap();
    let served: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(served, document(&router).await);
    shop::openapi::prepare(&router).await.unwrap();

    let served = shop::openapi::document(&router).await.unwrap();
    let routes = [
        "/payments",
        "/payments/{id}/refunds",
        "/payments/{id}/receipt",
        "/transfers",
        "/webhooks/bank",
    ]
    .map(|path| Endpoint::new(Method::POST, path));
    Documenter::new()
        .header(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer openapi-check"),
        )
        .check(&router, &served, routes)
        .await
        .unwrap();
}

/// docs/openapi.md shows parts of this document, each in a JSON block after a
/// `<!-- document: POINTER -->` marker: each is the document's, member for member.
#[tokio::test]
async fn the_page_shows_the_document_as_it_is() {
    let page = include_str!("../../../docs/openapi.md");
    let document = document(&router(&Backend::memory())).await;
    let mut shown = 0;
    let mut lines = page.lines();
    while let Some(line) = lines.next() {
        let Some(pointer) = line
            .strip_prefix("<!-- document: ")
            .and_then(|rest| rest.strip_suffix(" -->"))
        else {
            continue;
        };
        assert_eq!(
            lines.next(),
            Some("```json"),
            "{pointer}: no JSON block after it"
        );
        let block: String = lines
            .by_ref()
            .take_while(|line| *line != "```")
            .map(|line| format!("{line}\n"))
            .collect();
        let block: Value = serde_json::from_str(&block).unwrap();
        assert_eq!(document.pointer(pointer), Some(&block), "{pointer}");
        shown += 1;
    }
    assert_eq!(shown, 3);
}
