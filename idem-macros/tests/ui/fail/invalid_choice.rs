use axum::{Router, routing::post};
use idem::idempotent;

#[idempotent(fingerprint = "sha256", on_store_error = "ignore", key_syntax = "loose")]
async fn handler(body: String) -> String {
    body
}

fn main() {
    let _app: Router = Router::new().route("/", post(handler));
}
