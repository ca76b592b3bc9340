use axum::{Json, Router, routing::post};
use idem::idempotent;

#[idempotent(
    ttl = "1h 30m",
    scope = "custom(tenant)",
    required = false,
    lease = "1500ms",
    on_conflict = "wait(2s)",
    store_server_errors = true,
    fingerprint = "raw",
    on_store_error = "run",
    key_syntax = "strict"
)]
async fn everything(Json(body): Json<serde_json::Value>) -> Json<serde_json::Value> {
    Json(body)
}

fn main() {
    let _app: Router = Router::new().route("/everything", post(everything));
}
