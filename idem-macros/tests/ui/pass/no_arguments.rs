use axum::{Router, routing::post};
use idem::idempotent;

#[idempotent]
async fn ping() -> &'static str {
    "pong"
}

#[idempotent(scope = "global")]
async fn unit_return() {}

fn main() {
    let _app: Router = Router::new()
        .route("/ping", post(ping))
        .route("/unit", post(unit_return));
}
