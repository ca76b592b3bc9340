//! The admin API, on when `SHOP_ADMIN_TOKEN` is set: what idem holds for a key, and resetting
//! it. Off, its paths answer 404 like any unknown one.
//!
//! - `GET /admin/idempotency-keys?user=U&method=POST&route=/payments&key=K` answers 200 with
//!   `{"state":"completed","status":201,"storedAt":..,"expiresAt":..,"bytes":..}` or
//!   `{"state":"in_flight","since":..,"leaseExpiresAt":..}` (with `steps`, `suspensions`,
//!   `suspended` and `resumesAt` for an operation of several steps, a transfer), and 404
//!   Problem Details when nothing is held.
//! - `DELETE` with the same query removes it: 204, and the next request with the key runs
//!   again; a request still running under it is fenced (its result is not stored). 404 when
//!   nothing was held.
//!
//! Both need `Authorization: Bearer <SHOP_ADMIN_TOKEN>`: without it, or with another token,
//! 401 Problem Details and nothing else. `user` names the principal of a route scoped per
//! user (every route of the shop's but the bank's webhook, whose records are global: leave it
//! out); `route` is the route template (`/payments/{id}/refunds`, not a path). Times are RFC
//! 3339 in UTC, on the store's clock. An answer never carries the stored body or the client's
//! key.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::{
    Extension, Json, Router,
    extract::{Query, State, rejection::QueryRejection},
    http::{HeaderMap, Method, StatusCode, header},
    response::{IntoResponse, Response},
    routing::get,
};
use idem::{
    Idempotency, IdempotencyKey, Principal, ProblemKind, RecordAddress, Scope,
    store::{Held, StoreError},
};
use serde::{Deserialize, Serialize};

use crate::{
    Shop,
    auth::User,
    problem::{ShopProblem, ShopProblemKind},
};

/// The admin API's token: compared in constant time, and never shown.
#[derive(Clone, PartialEq, Eq)]
pub struct AdminToken(String);

impl AdminToken {
    /// The token, if it is one: at least 16 visible ASCII characters, so that a short
    /// or empty `SHOP_ADMIN_TOKEN` does not open the API to a guess.
    pub fn new(token: &str) -> Option<Self> {
        let token = token.trim();
        let visible = token.bytes().all(|byte| byte.is_ascii_graphic());
        (token.len() >= 16 && visible).then(|| Self(token.to_owned()))
    }

    /// Whether `offered` is the token, in time that does not depend on where they differ.
    fn accepts(&self, offered: &str) -> bool {
        let (ours, theirs) = (self.0.as_bytes(), offered.as_bytes());
        let differs = ours
            .iter()
            .zip(theirs)
            .fold(ours.len() ^ theirs.len(), |acc, (a, b)| {
                acc | usize::from(a ^ b)
            });
        differs == 0
    }
}

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken(***)")
    }
}

/// The admin routes.
pub fn router() -> Router<Shop> {
    Router::new().route("/admin/idempotency-keys", get(look_up).delete(remove))
}

/// The query of both routes. Every member is optional here and checked before the store is
/// asked, so that the answer names the one missing.
#[derive(Debug, Deserialize)]
pub struct KeyQuery {
    user: Option<String>,
    method: Option<String>,
    route: Option<String>,
    key: Option<String>,
}

async fn look_up(
    State(shop): State<Shop>,
    Extension(idem): Extension<Idempotency>,
    headers: HeaderMap,
    query: Result<Query<KeyQuery>, QueryRejection>,
) -> Response {
    let address = match authorize(&shop, &headers).and_then(|()| address(query)) {
        Ok(address) => address,
        Err(refusal) => return refusal.into_response(),
    };
    match idem.look_up(&address).await {
        Ok(Some(held)) => Json(describe(&held)).into_response(),
        Ok(None) => nothing_held(),
        Err(error) => store_failed(&error),
    }
}

async fn remove(
    State(shop): State<Shop>,
    Extension(idem): Extension<Idempotency>,
    headers: HeaderMap,
    query: Result<Query<KeyQuery>, QueryRejection>,
) -> Response {
    let address = match authorize(&shop, &headers).and_then(|()| address(query)) {
        Ok(address) => address,
        Err(refusal) => return refusal.into_response(),
    };
    match idem.remove(&address, "the shop's admin API").await {
        Ok(Some(_)) => StatusCode::NO_CONTENT.into_response(),
        Ok(None) => nothing_held(),
        Err(error) => store_failed(&error),
    }
}

/// Nothing but the token opens the API: 401 otherwise, before the query is read.
fn authorize(shop: &Shop, headers: &HeaderMap) -> Result<(), ShopProblem> {
    let offered = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| {
            let (scheme, token) = value.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        });
    let token = shop.settings().admin_token.as_ref();
    match (token, offered) {
        (Some(token), Some(offered)) if token.accepts(offered) => Ok(()),
        _ => Err(ShopProblem::new(
            ShopProblemKind::AdminUnauthorized,
            "send `Authorization: Bearer <SHOP_ADMIN_TOKEN>`",
        )),
    }
}

/// The record the query names, or 400 naming what is wrong with it.
fn address(query: Result<Query<KeyQuery>, QueryRejection>) -> Result<RecordAddress, ShopProblem> {
    let invalid = |detail: String| ShopProblem::new(ShopProblemKind::InvalidQuery, detail);
    let Query(query) = query.map_err(|error| invalid(error.body_text()))?;
    let required = |value: Option<String>, name: &str, example: &str| {
        value.ok_or_else(|| invalid(format!("`{name}` is required, as in `{name}={example}`")))
    };
    let method = required(query.method, "method", "POST")?;
    let route = required(query.route, "route", "/payments")?;
    let key = required(query.key, "key", "8e03978e-40d5-43e8-bc93-6894a57f9324")?;
    let method = Method::from_bytes(method.as_bytes())
        .map_err(|_| invalid(format!("`{method}` is not an HTTP method")))?;
    let key = IdempotencyKey::new(&key)
        .map_err(|error| invalid(format!("`key` is not an Idempotency-Key: {error}")))?;
    let (scope, principal) = match query.user {
        None => (Scope::Global, None),
        Some(user) => {
            let user = User::new(&user).ok_or_else(|| {
                invalid(
                    "`user` is a user id: 1 to 64 characters of letters, digits, `_` and `-`"
                        .to_owned(),
                )
            })?;
            (Scope::User, Some(Principal::new(user.id())))
        }
    };
    RecordAddress::new(scope, principal, method, route, key)
        .map_err(|error| invalid(error.to_string()))
}

fn nothing_held() -> Response {
    ShopProblem::new(
        ShopProblemKind::KeyNotHeld,
        "nothing is held for this key: the next request with it runs",
    )
    .into_response()
}

/// The store failed: 503, as idem answers a request when its store is down.
fn store_failed(error: &StoreError) -> Response {
    tracing::warn!(%error, "the admin API could not reach the idempotency store");
    let mut response = idem::Problem::new(
        ProblemKind::StoreUnavailable,
        "the idempotency store did not answer; try again",
    )
    .into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, header::HeaderValue::from(1));
    response
}

/// What is held, as the admin API answers it: states, times and sizes, never the body.
pub fn describe(held: &Held) -> Description {
    match held {
        Held::Completed(record) => Description::Completed(Completed {
            state: "completed",
            status: record.status.as_u16(),
            stored_at: record.stored_at.map(rfc3339),
            expires_at: rfc3339(record.expires_at),
            bytes: record.bytes,
        }),
        Held::InFlight(record) => {
            let operation = !record.steps.is_empty() || record.suspensions > 0;
            Description::InFlight(InFlight {
                state: "in_flight",
                since: record.since.map(rfc3339),
                lease_expires_at: rfc3339(record.lease_expires_at),
                steps: operation.then(|| record.steps.clone()),
                suspensions: operation.then_some(record.suspensions),
                suspended: operation.then(|| record.is_suspended()),
                resumes_at: operation.then(|| record.resumes_at.map(rfc3339)),
            })
        }
        _ => Description::Unknown { state: "unknown" },
    }
}

/// The admin API's answer to a look-up, members in the order an operator reads them.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Description {
    /// A completed record.
    Completed(Completed),
    /// A record in flight.
    InFlight(InFlight),
    /// A state this build of the shop does not know.
    Unknown {
        /// `unknown`.
        state: &'static str,
    },
}

/// A completed record.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Completed {
    state: &'static str,
    status: u16,
    stored_at: Option<String>,
    expires_at: String,
    bytes: u64,
}

/// A record in flight; the members after `leaseExpiresAt` only for an operation of several
/// steps.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InFlight {
    state: &'static str,
    since: Option<String>,
    lease_expires_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    steps: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    suspensions: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    suspended: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resumes_at: Option<Option<String>>,
}

/// A time as RFC 3339 in UTC, to the millisecond: `2026-12-03T15:20:01.123Z`.
pub fn rfc3339(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let seconds = since.as_secs();
    let (days, of_day) = (seconds / 86_400, seconds % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60,
        since.subsec_millis()
    )
}

/// The date `days` after 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn times_are_rfc3339_in_utc() {
        let at = |seconds: u64, millis: u64| {
            rfc3339(UNIX_EPOCH + Duration::from_secs(seconds) + Duration::from_millis(millis))
        };
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(at(1_796_157_394, 123), "2026-12-01T20:36:34.123Z");
        assert_eq!(at(4_107_542_399, 999), "2100-02-28T23:59:59.999Z");
    }

    #[test]
    fn the_token_is_long_compared_whole_and_never_shown() {
        assert!(AdminToken::new("short").is_none());
        assert!(AdminToken::new("with a space in it!").is_none());
        let token = AdminToken::new("adm_0123456789abcdef").unwrap();
        assert!(token.accepts("adm_0123456789abcdef"));
        assert!(!token.accepts("adm_0123456789abcdeF"));
        assert!(!token.accepts("adm_0123456789abcde"));
        assert!(!token.accepts("adm_0123456789abcdef0"));
        assert!(!token.accepts(""));
        assert_eq!(format!("{token:?}"), "AdminToken(***)");
    }
}
