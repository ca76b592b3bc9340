use axum::{Json, Router, routing::post};
use idem::idempotent;

#[idempotent(fingerprint_only = ["/order", "/order/note"])]
async fn handler(Json(body): Json<serde_json::Value>) -> Json<serde_json::Value> {
    Json(body)
}

fn main() {
    let _app: Router = Router::new().route("/", post(handler));
}
