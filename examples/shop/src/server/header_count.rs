//! The shop's limit on header lines, answered as Problem Details.
//!
//! hyper refuses a request head with more header lines than its limit with an empty `431`, before
//! any application code runs. The shop raises hyper's limit well above its own
//! ([`HYPER_MAX_HEADERS`] against [`MAX_HEADERS`]) and refuses the requests between the two
//! here, where the answer can be a Problem Details document like every other error.

use axum::{
    extract::Request,
    middleware::Next,
    response::{IntoResponse, Response},
};

use crate::problem::{ShopProblem, ShopProblemKind};

/// The most header lines a request may carry; more is answered `431` Problem Details.
///
/// As many as hyper allows by default, so raising hyper's own limit refuses nothing that was
/// accepted before.
pub const MAX_HEADERS: usize = 100;

/// The limit hyper enforces itself. A request with more header lines than this is answered by
/// hyper, with an empty `431`.
///
/// hyper reserves room for this many headers for every request head it parses (64 bytes each), so
/// it stays in the thousands rather than unbounded: 1000 costs 64 KB per parse.
pub const HYPER_MAX_HEADERS: usize = 1000;

/// Answers `431` Problem Details to a request with more than [`MAX_HEADERS`] header lines.
pub(super) async fn limit_header_count(request: Request, next: Next) -> Response {
    // `len` counts values, so a name repeated on several lines counts once per line.
    let lines = request.headers().len();
    if lines > MAX_HEADERS {
        return ShopProblem::new(
            ShopProblemKind::TooManyHeaders,
            format!("the request has {lines} header lines; the shop takes at most {MAX_HEADERS}"),
        )
        .into_response();
    }
    next.run(request).await
}
