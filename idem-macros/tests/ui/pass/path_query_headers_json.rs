use std::collections::HashMap;

use axum::{
    Json, Router,
    extract::{Path, Query},
    http::HeaderMap,
    routing::put,
};
use idem::idempotent;

#[idempotent(scope = "global")]
async fn update(
    Path(id): Path<u64>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    Json(body): Json<serde_json::Value>,
) -> String {
    format!("{id} {} {} {body}", query.len(), headers.len())
}

fn main() {
    let _app: Router = Router::new().route("/items/{id}", put(update));
}
