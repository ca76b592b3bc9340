use axum::{Router, routing::post};
use idem::idempotent;

#[idempotent]
const fn handler() -> &'static str {
    "constant"
}

fn main() {
    let _app: Router = Router::new().route("/", post(handler));
}
