use axum::{Router, routing::post};
use idem::idempotent;

#[idempotent(ttl = 24, scope = true)]
async fn handler(body: String) -> String {
    body
}

fn main() {
    let _app: Router = Router::new().route("/", post(handler));
}
