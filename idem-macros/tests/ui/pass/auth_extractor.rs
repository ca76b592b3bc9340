use axum::{
    Json, Router,
    extract::FromRequestParts,
    http::{StatusCode, request::Parts},
    routing::post,
};
use idem::{Principal, idempotent};

/// The application's own authentication: it names the principal for idem, which resolves it
/// after every extractor but the body extractor has run.
struct User(String);

impl<S: Send + Sync> FromRequestParts<S> for User {
    type Rejection = StatusCode;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let id = parts
            .headers
            .get("x-user")
            .and_then(|value| value.to_str().ok())
            .ok_or(StatusCode::UNAUTHORIZED)?
            .to_owned();
        parts.extensions.insert(Principal::new(id.as_str()));
        Ok(Self(id))
    }
}

#[idempotent]
async fn create_order(user: User, Json(order): Json<serde_json::Value>) -> (StatusCode, String) {
    (StatusCode::CREATED, format!("{} ordered {order}", user.0))
}

fn main() {
    let _app: Router = Router::new().route("/orders", post(create_order));
}
