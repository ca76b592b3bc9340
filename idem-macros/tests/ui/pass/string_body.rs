use axum::{Router, routing::post};
use idem::idempotent;

#[idempotent(scope = "global")]
async fn echo(body: String) -> String {
    body
}

fn main() {
    let _app: Router = Router::new().route("/echo", post(echo));
}
