use axum::{Router, routing::post};
use idem::idempotent;

struct Payment;

#[idempotent(scope = "global")]
async fn handler(_payment: Payment) {}

fn main() {
    let _app: Router = Router::new().route("/", post(handler));
}
