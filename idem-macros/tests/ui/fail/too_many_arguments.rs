use axum::http::HeaderMap;
use idem::idempotent;

#[idempotent]
#[allow(clippy::too_many_arguments)]
async fn handler(
    h1: HeaderMap, h2: HeaderMap, h3: HeaderMap, h4: HeaderMap, h5: HeaderMap, h6: HeaderMap,
    h7: HeaderMap, h8: HeaderMap, h9: HeaderMap, h10: HeaderMap, h11: HeaderMap, h12: HeaderMap,
    h13: HeaderMap, h14: HeaderMap, h15: HeaderMap, h16: HeaderMap, h17: HeaderMap,
) {
    let _ = (h1, h2, h3, h4, h5, h6, h7, h8, h9, h10, h11, h12, h13, h14, h15, h16, h17);
}

fn main() {}
