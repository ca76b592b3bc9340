use axum::{
    Json, Router,
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::post,
};
use idem::idempotent;

enum ApiError {
    Invalid(String),
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        match self {
            Self::Invalid(why) => (StatusCode::UNPROCESSABLE_ENTITY, why).into_response(),
        }
    }
}

impl From<std::num::ParseIntError> for ApiError {
    fn from(error: std::num::ParseIntError) -> Self {
        Self::Invalid(error.to_string())
    }
}

#[idempotent(scope = "global")]
async fn parse(body: String) -> Result<(StatusCode, Json<u64>), ApiError> {
    let number: u64 = body.trim().parse()?;
    Ok((StatusCode::CREATED, Json(number)))
}

fn main() {
    let _app: Router = Router::new().route("/parse", post(parse));
}
