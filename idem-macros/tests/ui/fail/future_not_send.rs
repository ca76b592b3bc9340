use std::rc::Rc;

use axum::{Router, routing::post};
use idem::idempotent;

async fn yield_now() {}

#[idempotent(scope = "global")]
async fn handler(body: String) -> String {
    let shared = Rc::new(body);
    yield_now().await;
    shared.to_string()
}

fn main() {
    let _app: Router = Router::new().route("/", post(handler));
}
