use axum::{Router, routing::post};
use idem::idempotent;

#[idempotent(required = "false", store_server_errors = 1)]
async fn handler(body: String) -> String {
    body
}

fn main() {
    let _app: Router = Router::new().route("/", post(handler));
}
