use axum::{Router, routing::post};
use idem::idempotent;

#[idempotent]
async fn handler(body: String, _: ...) -> String {
    body
}

fn main() {
    let _app: Router = Router::new().route("/", post(handler));
}
