use axum::{Router, body::Bytes, routing::post};
use idem::idempotent;

#[idempotent(scope = "global", fingerprint = "raw")]
async fn upload(body: Bytes) -> String {
    body.len().to_string()
}

fn main() {
    let _app: Router = Router::new().route("/upload", post(upload));
}
