//! A handler in an `impl` block is an associated constant, which rustc evaluates where it is
//! used, when the crate is built: there its invalid policy (a TTL shorter than the default
//! lease) is an error on the attribute's arguments, as a free handler's is.
use axum::{Json, Router, extract::State, routing::post};
use idem::idempotent;

#[derive(Clone)]
struct Shop;

impl Shop {
    #[idempotent(scope = "global", ttl = "10s")]
    async fn create(State(_shop): State<Self>, Json(body): Json<String>) -> String {
        body
    }
}

fn main() {
    let _app: Router = Router::new()
        .route("/", post(Shop::create))
        .with_state(Shop);
}
