//! A body extractor of the application's own is a guard with no annotation; one that
//! implements `PureBody` is skipped on a replay. Both need the state, as a real one would.
use axum::{
    Router,
    body::Bytes,
    extract::{FromRequest, Request},
    http::StatusCode,
    routing::post,
};
use idem::{PureBody, idempotent};

#[derive(Clone)]
struct Keys {
    secret: &'static str,
}

struct Signed(Bytes);

impl FromRequest<Keys> for Signed {
    type Rejection = StatusCode;

    async fn from_request(request: Request, keys: &Keys) -> Result<Self, StatusCode> {
        let signed = request.headers().get("signature").is_some_and(|value| value == keys.secret);
        let body = Bytes::from_request(request, keys).await.map_err(|_| StatusCode::BAD_REQUEST)?;
        if signed { Ok(Self(body)) } else { Err(StatusCode::UNAUTHORIZED) }
    }
}

struct Lines(Vec<String>);

impl<S: Send + Sync> FromRequest<S> for Lines {
    type Rejection = StatusCode;

    async fn from_request(request: Request, state: &S) -> Result<Self, StatusCode> {
        let text = String::from_request(request, state).await.map_err(|_| StatusCode::BAD_REQUEST)?;
        Ok(Self(text.lines().map(str::to_owned).collect()))
    }
}

impl PureBody for Lines {}

#[idempotent(scope = "global", fingerprint = "raw")]
async fn webhook(Signed(body): Signed) -> Bytes {
    body
}

#[idempotent(scope = "global")]
async fn import(Lines(lines): Lines) -> String {
    lines.len().to_string()
}

fn main() {
    assert!(webhook.last_runs_on_replay(), "a guard");
    assert!(!import.last_runs_on_replay(), "pure");
    let _app: Router = Router::new()
        .route("/webhook", post(webhook))
        .route("/import", post(import))
        .with_state(Keys { secret: "s" });
}
