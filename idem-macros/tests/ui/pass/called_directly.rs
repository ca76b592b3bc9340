//! An annotated handler is called as the function it was, and returns its output: the
//! named type, or a `Response` for `impl IntoResponse`.
use axum::{
    Json, Router,
    extract::State,
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::post,
};
use idem::idempotent;

#[derive(Clone)]
struct Db;

#[idempotent(scope = "global")]
async fn create(State(_db): State<Db>, Json(n): Json<u32>) -> Result<(StatusCode, String), StatusCode> {
    Ok((StatusCode::CREATED, n.to_string()))
}

#[idempotent(scope = "global")]
async fn opaque(Json(n): Json<u32>) -> impl IntoResponse {
    n.to_string()
}

#[idempotent(scope = "global")]
async fn nothing() {}

async fn unit_test() {
    let created: Result<(StatusCode, String), StatusCode> = create(State(Db), Json(1)).await;
    assert_eq!(created, Ok((StatusCode::CREATED, "1".to_owned())));
    let response: Response = opaque(Json(2)).await;
    assert_eq!(response.status(), StatusCode::OK);
    let (): () = nothing().await;
}

fn main() {
    let _app: Router = Router::new()
        .route("/create", post(create))
        .route("/opaque", post(opaque))
        .route("/nothing", post(nothing))
        .with_state(Db);
    let _test = unit_test();
}
