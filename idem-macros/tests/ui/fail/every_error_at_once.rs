use axum::{Router, routing::post};
use idem::idempotent;

#[idempotent(tll = "1h", ttl = "1M", ttl = "2h", scope = "users", required = "no")]
async fn handler(body: String) -> String {
    body
}

fn main() {
    let _app: Router = Router::new().route("/", post(handler));
}
