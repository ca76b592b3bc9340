//! Doc comments and other attributes: docs, `cfg` and lint levels go on the constant that
//! replaces the handler; the others stay on the function.
#![deny(warnings, missing_docs)]

use axum::{Router, routing::post};
use idem::idempotent;

/// Creates a thing.
///
/// Documented like any public item.
#[idempotent(scope = "global")]
#[inline]
#[allow(clippy::unused_async)]
pub async fn create() -> &'static str {
    "created"
}

/// Never compiled: `cfg` removes the constant and the function inside it.
#[idempotent(scope = "global")]
#[cfg(any())]
pub async fn gone() -> &'static str {
    missing_function()
}

/// Lint levels on the constant reach the function nested in it.
#[idempotent(scope = "global")]
#[expect(unused_variables)]
pub async fn linted() {
    let unused = 1;
}

/// `cfg_attr` is split by the same rule.
#[idempotent(scope = "global")]
#[cfg_attr(all(), doc = "Also documented.", inline)]
pub async fn conditional() {}

fn main() {
    let _app: Router = Router::new()
        .route("/things", post(create))
        .route("/linted", post(linted))
        .route("/conditional", post(conditional));
}
