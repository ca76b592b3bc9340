use axum::extract::FromRequest;
use idem_core::idempotent;

#[idempotent]
async fn handler(body: impl FromRequest<()> + Send, other: Option<impl Send>) {
    let _ = (body, other);
}

fn main() {}
