use axum::{
    Router,
    http::StatusCode,
    response::{IntoResponse, Redirect},
    routing::post,
};
use idem::idempotent;

#[idempotent(scope = "global")]
async fn either(body: String) -> impl IntoResponse {
    if body.is_empty() {
        StatusCode::NO_CONTENT.into_response()
    } else {
        Redirect::to("/elsewhere").into_response()
    }
}

fn main() {
    let _app: Router = Router::new().route("/either", post(either));
}
