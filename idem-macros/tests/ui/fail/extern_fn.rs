use axum::{Router, routing::post};
use idem::idempotent;

#[idempotent]
async extern "C" fn handler() {}

fn main() {
    let _app: Router = Router::new().route("/", post(handler));
}
