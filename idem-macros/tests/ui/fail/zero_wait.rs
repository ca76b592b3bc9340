use axum::{Router, routing::post};
use idem::idempotent;

#[idempotent(on_conflict = "wait(0ms)")]
async fn handler(body: String) -> String {
    body
}

fn main() {
    let _app: Router = Router::new().route("/", post(handler));
}
