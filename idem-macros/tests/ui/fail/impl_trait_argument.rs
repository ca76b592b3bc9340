use axum::extract::FromRequest;
use idem::idempotent;

#[idempotent]
async fn handler(body: impl FromRequest<()> + Send, other: Option<impl Send>) {
    let _ = (body, other);
}

fn main() {}
