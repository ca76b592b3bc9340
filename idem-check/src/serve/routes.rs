//! The endpoints of `serve`: a payment-like operation under idem, its listing, the count of
//! runs per key, and who the caller is.

use std::sync::LazyLock;

use axum::{
    Extension, Json,
    extract::{Query, Request, State},
    http::{HeaderMap, StatusCode, Uri},
    middleware::Next,
    response::{Html, IntoResponse, Response},
};
use idem::{Principal, problem::catalogue_page};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::serve::{ServeState, faults::key_of};

/// The principal of a request without `Authorization`.
pub(crate) const ANONYMOUS: &str = "anonymous";

/// Who the caller is: the token of `Authorization: Bearer <token>` (any other `Authorization`
/// value whole), or `anonymous`. Unchecked, as in the shop: it is there to scope keys.
pub(crate) async fn authenticate(mut request: Request, next: Next) -> Response {
    let principal = request
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .map(|value| {
            value
                .strip_prefix("Bearer ")
                .unwrap_or(value)
                .trim()
                .to_owned()
        })
        .filter(|principal| !principal.is_empty())
        .unwrap_or_else(|| ANONYMOUS.to_owned());
    request.extensions_mut().insert(Principal::new(principal));
    next.run(request).await
}

/// `POST /payments`: runs the operation once per key (idem sees to that), with the faults the
/// server and the query ask for, and answers 201 with the body's members and a new `id`.
pub(crate) async fn create(
    State(state): State<ServeState>,
    Extension(principal): Extension<Principal>,
    headers: HeaderMap,
    uri: Uri,
    Json(body): Json<Map<String, Value>>,
) -> Response {
    let key = key_of(&headers).unwrap_or_default();
    let principal = principal.as_str();
    let faults = state.faults.for_request(&uri);
    let run = state.runs.run(principal, &key);
    tokio::time::sleep(faults.delay).await;
    if run <= faults.fail_first {
        tracing::info!(principal, key, run, "run fails on purpose (fail_first)");
        return fault(run, faults.fail_first);
    }
    let mut payment = Map::new();
    payment.insert("id".to_owned(), Value::String(new_id()));
    payment.extend(body);
    let payment = Value::Object(payment);
    state.runs.created(principal, payment.clone());
    tracing::info!(principal, key, run, "ran");
    (StatusCode::CREATED, Json(payment)).into_response()
}

/// Where the server serves [`catalogue`], the page its own `type` URIs lead to.
pub(crate) const CATALOGUE_PATH: &str = "/problems/check";

/// The server's own problem types, in the Markdown [`catalogue_page`] renders (and
/// [docs/check.md](https://github.com/idem-rs/idem/blob/main/docs/check.md) repeats).
const PROBLEM_TYPES: &str = "### fault-injected
**500.** A fault `idem-check serve` injected on purpose (`--fail-first`, `?fail_first=`):
nothing was created. The key is released for a new run, or, with `--on-5xx stored`, this
answer is stored and replayed to every retry.
";

/// `GET /problems/check`: the page of the server's own problem types. Those of idem's
/// runtime (a missing key, a conflict) lead to `/problems/idempotency`, served beside it.
pub(crate) async fn catalogue() -> Html<&'static str> {
    static PAGE: LazyLock<String> = LazyLock::new(|| {
        catalogue_page(
            "idem-check serve problem types",
            "The faults `idem-check serve` injects on purpose answer RFC 9457 Problem Details \
             whose `type` ends with `#` and one of the names below.",
            PROBLEM_TYPES,
        )
    });
    Html(PAGE.as_str())
}

/// A 500 Problem Details answer for run `run` of `fail_first`.
fn fault(run: u32, fail_first: u32) -> Response {
    let body = json!({
        "type": format!("{CATALOGUE_PATH}#fault-injected"),
        "title": "A fault injected by idem-check serve",
        "status": 500,
        "detail": format!("run {run} of this key fails on purpose (fail_first = {fail_first}); nothing was created"),
    });
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        [(http::header::CONTENT_TYPE, "application/problem+json")],
        body.to_string(),
    )
        .into_response()
}

/// `GET /payments`: what the caller's runs created, oldest first.
pub(crate) async fn list(
    State(state): State<ServeState>,
    Extension(principal): Extension<Principal>,
) -> Json<Value> {
    Json(json!({ "items": state.runs.items(principal.as_str()) }))
}

#[derive(Debug, Deserialize)]
pub(crate) struct RunsQuery {
    key: Option<String>,
}

/// `GET /runs[?key=K]`: per key and principal, the attempts and the runs.
pub(crate) async fn runs(
    State(state): State<ServeState>,
    Query(query): Query<RunsQuery>,
) -> Json<Value> {
    Json(json!({ "keys": state.runs.lines(query.key.as_deref()) }))
}

/// `GET /healthz`.
pub(crate) async fn healthz() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

fn new_id() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let suffix: String = (0..16)
        .map(|_| char::from(ALPHABET[rand::random_range(0..ALPHABET.len())]))
        .collect();
    format!("pay_{suffix}")
}
