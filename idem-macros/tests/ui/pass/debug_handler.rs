//! `#[axum::debug_handler]` above `#[idempotent]` (it checks the function as written and
//! calls the constant) and below it (it checks the nested function).
use axum::{Json, Router, extract::State, routing::post};
use idem::idempotent;

#[derive(Clone)]
struct Db;

#[axum::debug_handler]
#[idempotent(scope = "global")]
async fn above(State(_db): State<Db>, Json(body): Json<String>) -> String {
    body
}

#[idempotent(scope = "global")]
#[axum::debug_handler(state = Db)]
async fn below(State(_db): State<Db>, Json(body): Json<String>) -> String {
    body
}

fn main() {
    assert!(!above.last_runs_on_replay() && !below.last_runs_on_replay());
    let _app: Router = Router::new()
        .route("/above", post(above))
        .route("/below", post(below))
        .with_state(Db);
}
