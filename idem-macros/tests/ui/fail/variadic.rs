use axum::{Router, routing::post};
use idem_core::idempotent;

#[idempotent]
async fn handler(body: String, _: ...) -> String {
    body
}

fn main() {
    let _app: Router = Router::new().route("/", post(handler));
}
