//! `GET /healthz`: whether the shop is up, for load balancers and the tests.

use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

/// The answer of `GET /healthz`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// Always `ok`: the process answers.
    #[schema(example = "ok")]
    pub status: &'static str,
}

/// Answers 200 while the shop is serving.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "service",
    responses((status = 200, description = "The shop is up", body = Health))
)]
pub async fn healthz() -> Json<Health> {
    Json(Health { status: "ok" })
}
