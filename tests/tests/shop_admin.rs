//! The operator's side of the shop over real HTTP, on the memory, Redis and PostgreSQL stores:
//! its admin API (`SHOP_ADMIN_TOKEN`) shows what is held for a key and resets it, a reset key
//! runs again, removing a key in flight fences its payment, the token is needed, and a retry
//! that differs only in `clientTimestamp` is the same payment. The Redis and PostgreSQL
//! variants are skipped, saying so, when `IDEM_TEST_REDIS_URL` or `IDEM_TEST_DATABASE_URL` is
//! unset.

use std::time::{Duration, SystemTime};

use idem::postgres::PostgresStore;
use idem_tests::{
    Answer, eventually, key,
    shop_fixture::{TestShop, payment, settings, user},
};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use shop::{Backend, Settings, admin::AdminToken, admin::rfc3339, backend::StoreChoice};

const TOKEN: &str = "adm_test_0123456789abcdef";

#[derive(Clone, Copy, Debug)]
enum Kind {
    Memory,
    Redis,
    Postgres,
}

/// The shop on `kind`'s store with the admin API on, payments taking `payment_delay`; `None`
/// (saying so) when the store is not configured.
async fn shop(kind: Kind, payment_delay: Duration, test: &str) -> Option<TestShop> {
    let settings = Settings {
        admin_token: AdminToken::new(TOKEN),
        payment_delay,
        ..settings()
    };
    let backend = match kind {
        Kind::Memory => Backend::memory(),
        Kind::Redis => {
            let url = idem_tests::redis_fixture::redis_url()?;
            let store: StoreChoice = url.parse().expect("a redis:// URL");
            Backend::open(&store).await.expect("the test Redis answers")
        }
        Kind::Postgres => {
            let url = idem_tests::postgres_fixture::database_url(test)?;
            let admin = idem_tests::postgres_fixture::admin_pool(&url).await;
            let records = idem_tests::postgres_fixture::fresh_name(&admin, "r").await;
            let store = PostgresStore::builder()
                .table(&records)
                .unwrap()
                .connect(&url)
                .await
                .unwrap();
            Backend::postgres(store).await.unwrap()
        }
    };
    Some(TestShop::on(backend, settings).await)
}

/// An admin request `method` for `user`'s key on `POST /payments`, with `token` (none: no
/// `Authorization`).
async fn admin(
    shop: &TestShop,
    method: Method,
    token: Option<&str>,
    user: &str,
    key: &str,
) -> Answer {
    let query = [
        ("user", user),
        ("method", "POST"),
        ("route", "/payments"),
        ("key", key),
    ];
    let mut request = shop.api.http.request(method, admin_url(shop, &query));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    Answer::of(request).await
}

/// The admin API's URL with `query`, its values percent-encoded.
fn admin_url(shop: &TestShop, query: &[(&str, &str)]) -> reqwest::Url {
    let mut url: reqwest::Url = shop.api.url("/admin/idempotency-keys").parse().unwrap();
    url.query_pairs_mut().extend_pairs(query);
    url
}

async fn look_up(shop: &TestShop, user: &str, key: &str) -> Answer {
    admin(shop, Method::GET, Some(TOKEN), user, key).await
}

/// A completed key says 201 and its expiry, and neither the body nor the key; after DELETE the
/// same request runs again, a second payment not marked replayed.
async fn a_completed_key_is_shown_and_reset(kind: Kind) {
    let test = format!("a_completed_key_is_shown_and_reset ({kind:?})");
    let Some(shop) = self::shop(kind, Duration::ZERO, &test).await else {
        return;
    };
    let (alice, key) = (user(), key());
    let before = SystemTime::now();
    let first = shop.api.pay(&alice, &key, &payment(9800)).await.created();
    let after = SystemTime::now();

    let held = look_up(&shop, &alice, &key).await;
    assert_eq!(held.status, StatusCode::OK, "{held:?}");
    let record = held.json();
    assert_eq!(record["state"], "completed", "{record}");
    assert_eq!(record["status"], 201);
    assert!(record["bytes"].as_u64().unwrap() > 0);
    // RFC 3339 in UTC to the millisecond: such times compare as their text does.
    let stored_at = record["storedAt"].as_str().unwrap();
    let slack = Duration::from_secs(2);
    assert!(
        rfc3339(before - slack).as_str() <= stored_at
            && stored_at <= rfc3339(after + slack).as_str(),
        "{record}"
    );
    let day = Duration::from_secs(24 * 3600);
    let expires_at = record["expiresAt"].as_str().unwrap();
    assert!(
        rfc3339(before + day - slack).as_str() <= expires_at
            && expires_at <= rfc3339(after + day + slack).as_str(),
        "a payment's record lives 24 h: {record}"
    );
    let id = first["id"].as_str().unwrap();
    assert!(
        !String::from_utf8_lossy(&held.body).contains(id)
            && !held.body.windows(key.len()).any(|w| w == key.as_bytes()),
        "neither the stored body nor the key: {held:?}"
    );

    let removed = admin(&shop, Method::DELETE, Some(TOKEN), &alice, &key).await;
    assert_eq!(removed.status, StatusCode::NO_CONTENT, "{removed:?}");
    look_up(&shop, &alice, &key)
        .await
        .problem(StatusCode::NOT_FOUND, "key-not-held");
    let again = shop.api.pay(&alice, &key, &payment(9800)).await;
    assert!(!again.replayed(), "{again:?}");
    let second = again.created();
    assert_ne!(second["id"], first["id"], "the request ran again");
    assert_eq!(shop.api.payments(&alice).await.len(), 2);
}

/// A key in flight shows `in_flight` with its lease; deleting it makes the running payment's
/// completion fenced, never stored: on PostgreSQL its transaction rolls back and its client
/// gets 409; on memory and Redis its client gets the payment. Either way the record stays
/// absent, and the same request runs again.
async fn removing_a_key_in_flight_fences_its_payment(kind: Kind) {
    let test = format!("removing_a_key_in_flight_fences_its_payment ({kind:?})");
    // The card network takes this long: the test removes the key well within it.
    let Some(shop) = self::shop(kind, Duration::from_secs(4), &test).await else {
        return;
    };
    let (alice, key) = (user(), key());
    let first = {
        let (api, alice, key) = (shop.api.clone(), alice.clone(), key.clone());
        tokio::spawn(async move { api.pay(&alice, &key, &payment(9800)).await })
    };
    let mut held = Value::Null;
    let claimed = eventually(Duration::from_secs(10), async || {
        let answer = look_up(&shop, &alice, &key).await;
        held = if answer.status == StatusCode::OK {
            answer.json()
        } else {
            Value::Null
        };
        held["state"] == "in_flight"
    })
    .await;
    assert!(claimed, "the payment's key is in flight: {held}");
    let (since, lease) = (
        held["since"].as_str().unwrap(),
        held["leaseExpiresAt"].as_str().unwrap(),
    );
    assert!(since < lease, "{held}");
    assert!(
        held.get("steps").is_none(),
        "a payment has no steps: {held}"
    );

    let removed = admin(&shop, Method::DELETE, Some(TOKEN), &alice, &key).await;
    assert_eq!(removed.status, StatusCode::NO_CONTENT, "{removed:?}");
    let first = first.await.unwrap();
    match kind {
        Kind::Postgres => {
            first.problem(StatusCode::CONFLICT, "request-in-flight");
        }
        Kind::Memory | Kind::Redis => {
            first.created();
        }
    }
    look_up(&shop, &alice, &key)
        .await
        .problem(StatusCode::NOT_FOUND, "key-not-held");

    let again = shop.api.pay(&alice, &key, &payment(9800)).await;
    assert!(!again.replayed(), "{again:?}");
    again.created();
    let payments = shop.api.payments(&alice).await.len();
    let expected = match kind {
        Kind::Postgres => 1,
        Kind::Memory | Kind::Redis => 2,
    };
    assert_eq!(payments, expected);
}

/// Without the token, or with another one, the admin API answers 401 and shows nothing.
async fn the_admin_api_needs_its_token(kind: Kind) {
    let test = format!("the_admin_api_needs_its_token ({kind:?})");
    let Some(shop) = self::shop(kind, Duration::ZERO, &test).await else {
        return;
    };
    let (alice, key) = (user(), key());
    shop.api.pay(&alice, &key, &payment(9800)).await.created();
    for method in [Method::GET, Method::DELETE] {
        for token in [None, Some("adm_test_0123456789abcdeX"), Some("alice")] {
            let refused = admin(&shop, method.clone(), token, &alice, &key).await;
            let body = refused.problem(StatusCode::UNAUTHORIZED, "admin-unauthorized");
            assert!(body.get("state").is_none(), "{body}");
            assert!(refused.header("www-authenticate").is_some());
        }
    }
    // Nothing was removed.
    let held = look_up(&shop, &alice, &key).await;
    assert_eq!(held.json()["state"], "completed");
}

/// A payment whose retry differs only in `clientTimestamp` is one payment; a change anywhere
/// else is still 422.
async fn a_new_client_timestamp_is_the_same_payment(kind: Kind) {
    let test = format!("a_new_client_timestamp_is_the_same_payment ({kind:?})");
    let Some(shop) = self::shop(kind, Duration::ZERO, &test).await else {
        return;
    };
    let (alice, key) = (user(), key());
    let stamped = |stamp: &str, amount: i64| json!({ "amount": amount, "currency": "JPY", "clientTimestamp": stamp });
    let first = shop
        .api
        .pay(&alice, &key, &stamped("2026-12-01T10:00:00Z", 9800))
        .await;
    first.created();
    for retry in [
        stamped("2026-12-01T10:00:07Z", 9800),
        json!({ "currency": "JPY", "amount": 9800 }),
    ] {
        let replayed = shop.api.pay(&alice, &key, &retry).await;
        assert!(replayed.replayed(), "{replayed:?}");
        assert_eq!(replayed.body, first.body);
    }
    shop.api
        .pay(&alice, &key, &stamped("2026-12-01T10:00:07Z", 9801))
        .await
        .refusal(StatusCode::UNPROCESSABLE_ENTITY, "key-reused");
    assert_eq!(shop.api.payments(&alice).await.len(), 1);
}

/// Writes one test per store for each scenario.
macro_rules! on_every_store {
    ($($scenario:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    super::$scenario(super::Kind::Memory).await
                }
            )*
        }
        mod redis {
            $(
                #[cfg_attr(not(idem_test_redis), ignore = "IDEM_TEST_REDIS_URL is not set")]
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    super::$scenario(super::Kind::Redis).await
                }
            )*
        }
        mod postgres {
            $(
                #[cfg_attr(not(idem_test_postgres), ignore = "IDEM_TEST_DATABASE_URL is not set")]
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    super::$scenario(super::Kind::Postgres).await
                }
            )*
        }
    };
}

on_every_store!(
    a_completed_key_is_shown_and_reset,
    removing_a_key_in_flight_fences_its_payment,
    the_admin_api_needs_its_token,
    a_new_client_timestamp_is_the_same_payment,
);

/// Without `SHOP_ADMIN_TOKEN` the admin API is off: its path is like any unknown one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_its_token_the_admin_api_is_not_there() {
    let shop = TestShop::memory(settings()).await;
    let (alice, key) = (user(), key());
    shop.api.pay(&alice, &key, &payment(9800)).await.created();
    for token in [None, Some(TOKEN)] {
        admin(&shop, Method::GET, token, &alice, &key)
            .await
            .problem(StatusCode::NOT_FOUND, "route-not-found");
    }
}

/// A query that misses a member, or has one that is not one, is 400 naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_query_is_refused_naming_what_is_wrong() {
    let shop = self::shop(Kind::Memory, Duration::ZERO, "a_bad_query")
        .await
        .unwrap();
    for (query, says) in [
        (
            vec![("method", "POST"), ("route", "/payments")],
            "`key` is required",
        ),
        (
            vec![("method", "POST"), ("key", "k")],
            "`route` is required",
        ),
        (
            vec![("method", "POST"), ("route", "payments"), ("key", "k")],
            "not a route template",
        ),
        (
            vec![("method", "P O S T"), ("route", "/payments"), ("key", "k")],
            "not an HTTP method",
        ),
        (
            vec![("method", "POST"), ("route", "/payments"), ("key", "")],
            "not an Idempotency-Key",
        ),
        (
            vec![
                ("user", "al ice"),
                ("method", "POST"),
                ("route", "/payments"),
                ("key", "k"),
            ],
            "user id",
        ),
    ] {
        let url = admin_url(&shop, &query);
        let answer = Answer::of(shop.api.http.get(url).bearer_auth(TOKEN)).await;
        let body = answer.problem(StatusCode::BAD_REQUEST, "invalid-query");
        assert!(
            body["detail"].as_str().unwrap().contains(says),
            "{query:?}: {body}"
        );
    }
}
