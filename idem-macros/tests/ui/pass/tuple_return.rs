use axum::{
    Router,
    http::{HeaderMap, StatusCode, header},
    routing::post,
};
use idem::idempotent;

#[idempotent(scope = "global")]
async fn create(body: String) -> (StatusCode, [(header::HeaderName, String); 1], String) {
    let location = format!("/things/{}", body.len());
    (StatusCode::CREATED, [(header::LOCATION, location)], body)
}

#[idempotent(scope = "global")]
async fn with_headers() -> (StatusCode, HeaderMap, &'static str) {
    (StatusCode::ACCEPTED, HeaderMap::new(), "queued")
}

fn main() {
    let _app: Router = Router::new()
        .route("/things", post(create))
        .route("/jobs", post(with_headers));
}
