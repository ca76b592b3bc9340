//! The OpenAPI document says what idempotency does (feature `openapi`): each idempotent
//! operation of a [utoipa](https://docs.rs/utoipa) document described from the policy its
//! route runs, read from the assembled router itself.
//!
//! ```
//! use axum::{Json, Router, http::StatusCode, routing::post};
//! use idem::{Idempotency, IdempotencyLayer, Policy, Scope, openapi::Documenter};
//! use utoipa::OpenApi;
//!
//! /// Makes a payment.
//! #[utoipa::path(post, path = "/payments", responses((status = 201, description = "Made")))]
//! async fn create_payment(Json(payment): Json<serde_json::Value>) -> (StatusCode, Json<serde_json::Value>) {
//!     (StatusCode::CREATED, Json(payment))
//! }
//!
//! #[derive(OpenApi)]
//! #[openapi(paths(create_payment))]
//! struct ApiDoc;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let policy = Policy::new().scope(Scope::Global);
//! let router: Router = Router::new()
//!     .route("/payments", post(create_payment))
//!     .route_layer(IdempotencyLayer::new(Idempotency::default(), policy));
//!
//! let document = Documenter::new().document(&router, ApiDoc::openapi()).await?;
//! let json: serde_json::Value = serde_json::from_str(&document.to_json()?)?;
//! let create = &json["paths"]["/payments"]["post"];
//! assert_eq!(create["parameters"][0]["name"], "Idempotency-Key");
//! assert_eq!(create["x-idempotency"]["ttl"], 86_400);
//! assert_eq!(create["x-idempotency"]["scope"], "global");
//! assert!(create["responses"]["201"]["headers"]["Idempotent-Replayed"].is_object());
//! assert!(create["responses"]["409"]["headers"]["Retry-After"].is_object());
//!
//! // In a test: the document says what every route runs.
//! Documenter::new().check(&router, &document, []).await?;
//! # Ok(()) }
//! ```
//!
//! # What it adds to an idempotent operation
//!
//! - the `Idempotency-Key` header parameter: required or not as the route is, a schema that
//!   accepts exactly what the key parser accepts under the route's `key_syntax` (both
//!   spellings, or only the sf-string), and a description that states the TTL, the scope and
//!   what a retry in flight meets;
//! - idem's answers as `application/problem+json` (RFC 9457), each with the `type` URIs the
//!   runtime writes (its `problem_type_base` included): 400 (key missing or malformed, body
//!   unreadable), 409 and 503 with `Retry-After`, 410 (a
//!   response too large to keep), 413 (when a body limit applies, with the limit), 422, and
//!   500 (the handler failed). A status the operation documents already keeps its words and
//!   its schema, which the runtime's is added to (`anyOf`);
//! - `Idempotent-Replayed` among the headers of every response a retry may get again (all
//!   but 5xx, and 5xx too with `store_server_errors`);
//! - `x-idempotency`: the policy as data (`ttl`, `scope`, `lease`, `required`,
//!   `storeServerErrors`, `resumeAfter` where set, and more), for a client generator or a
//!   gateway.
//!
//! [docs/openapi.md](https://github.com/idem-rs/idem/blob/main/docs/openapi.md) shows one
//! operation before and after, and what each member says.
//!
//! # How the policy is read
//!
//! [`Documenter`] sends each operation of the document a probe through the router: a request
//! marked with [`Probe`]. The door of idem on the route (the `#[idempotent]` handler or the
//! [`IdempotencyLayer`](crate::IdempotencyLayer)) answers it with the policy it runs, as the
//! runtime applies it (`max_ttl` and `resume_after` of the runtime included), without claiming
//! a key or calling the handler. So the document says what the routes do, whether they are
//! declared with `#[utoipa::path]`, with utoipa-axum's `OpenApiRouter`, or assembled by hand,
//! and a route whose policy changes changes its document. Only methods idem guards are probed
//! (POST, PUT, PATCH, DELETE): the layer never guards a safe method, and a probe of a GET
//! would call its handler.
//!
//! What is in front of idem sees the probe as a request: an authentication layer wants
//! credentials ([`Documenter::header`]), or may let a [`Probe`] through. A probe that is
//! refused (401, 403, 407) is an error, since it says nothing of the route.
//!
//! # What it refuses, and what it cannot see
//!
//! Rather than a document that says something else than the router does, [`DocumentError`]:
//! an operation no route serves, two operations that are one route, an `#[idempotent]`
//! handler without its runtime, an operation that documents `Idempotency-Key` itself (two
//! places to keep in step), a reference the document does not hold. [`Documenter::check`]
//! finds a route that idem guards and the document does not describe, an operation described
//! as idempotent whose route is not, and an `x-idempotency` that is not what the route runs.
//!
//! It cannot see a route that neither the document nor the check's list names (axum does not
//! list a router's routes), a door under another door (the outermost one answers the probe),
//! nor an `#[idempotent]` handler routed under a safe method.

mod ask;
mod check;
mod document;
mod endpoint;
mod error;
mod extension;
mod key_schema;
mod parameter;
pub(crate) mod probe;
mod problem_schema;
mod responses;
mod words;

pub use self::{
    check::{CheckError, Finding},
    document::Documenter,
    endpoint::Endpoint,
    error::DocumentError,
    probe::Probe,
};
