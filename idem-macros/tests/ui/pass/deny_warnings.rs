//! The expansion is lint-clean: no unused, dead-code or naming warnings.
#![deny(warnings, unused, dead_code, nonstandard_style, rust_2018_idioms, unreachable_pub)]
#![forbid(unsafe_code)]

use axum::{Extension, Json, Router, extract::State, http::StatusCode, routing::post};
use idem::{Idempotency, MemoryStore, idempotent};

#[derive(Clone)]
struct AppState {
    prefix: &'static str,
}

#[idempotent(ttl = "1h", lease = "30s", on_conflict = "wait(5s)")]
async fn create(
    State(state): State<AppState>,
    Json(name): Json<String>,
) -> Result<(StatusCode, String), StatusCode> {
    if name.is_empty() {
        return Err(StatusCode::UNPROCESSABLE_ENTITY);
    }
    Ok((StatusCode::CREATED, format!("{}{name}", state.prefix)))
}

#[idempotent(scope = "global")]
async fn unused_arguments(_state: State<AppState>, _body: String) {}

impl AppState {
    /// An associated handler that names `Self`: its hidden function raises no lint either.
    #[idempotent(scope = "global")]
    async fn prefixed(State(state): State<Self>, Json(name): Json<String>) -> String {
        format!("{}{name}", state.prefix)
    }
}

fn main() {
    let idem = Idempotency::new(MemoryStore::default());
    let _app: Router = Router::new()
        .route("/things", post(create))
        .route("/nothing", post(unused_arguments))
        .route("/prefixed", post(AppState::prefixed))
        .with_state(AppState { prefix: "thing-" })
        .layer(Extension(idem));
    let _called = create(State(AppState { prefix: "" }), Json(String::new()));
}
