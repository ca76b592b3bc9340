use axum::{Router, routing::post};
use idem::idempotent;

#[idempotent(ttl = "0s")]
async fn handler(body: String) -> String {
    body
}

fn main() {
    let _app: Router = Router::new().route("/", post(handler));
}
