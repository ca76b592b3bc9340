//! `POST /payments`, `GET /payments`, `GET /payments/{id}`.
//!
//! Creating a payment is the operation idempotency keys exist for: a client that timed out
//! cannot know whether it was charged, and must be able to send the request again.

use axum::{
    Json,
    extract::{FromRequestParts, Path, State},
    http::{StatusCode, header, request::Parts},
};
use idem::{extract::Tx, idempotent, steps::Steps};
use serde::Deserialize;
use utoipa::ToSchema;

use crate::{
    Shop,
    auth::User,
    json::{ValidJson, Validate},
    model::{Payment, PaymentList, new_id, now, rules},
    problem::{FieldError, ProblemBody, ShopError, ShopProblem, ShopProblemKind},
};

/// The body of `POST /payments`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewPayment {
    /// 1 to 100000000, in the currency's minor unit.
    #[schema(minimum = 1, maximum = 100_000_000, example = 9800)]
    pub amount: i64,
    /// ISO 4217 code: 3 capital letters.
    #[schema(pattern = "^[A-Z]{3}$", example = "JPY")]
    pub currency: String,
    /// When the client made the request, in its own words (at most 64 characters). Not part
    /// of the payment, and not of the request either: a retry with another timestamp is the
    /// same payment (the route leaves `/clientTimestamp` out of its idempotency fingerprint).
    #[serde(rename = "clientTimestamp", default)]
    #[schema(max_length = 64, example = "2026-12-01T10:00:00Z")]
    pub client_timestamp: Option<String>,
}

impl Validate for NewPayment {
    fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errors = Vec::new();
        rules::amount(&mut errors, "amount", self.amount);
        rules::currency(&mut errors, "currency", &self.currency);
        if self
            .client_timestamp
            .as_ref()
            .is_some_and(|stamp| stamp.chars().count() > 64)
        {
            errors.push(FieldError::new(
                "clientTimestamp",
                "must be at most 64 characters",
            ));
        }
        rules::verdict(errors)
    }
}

/// A `201 Created` answer with the new payment and its `Location`.
pub type Created<T> = (StatusCode, [(header::HeaderName, String); 1], Json<T>);

/// Makes a payment.
///
/// Send a new `Idempotency-Key` for each payment and the same key when you retry it: the
/// retry gets the first answer (with `Idempotent-Replayed: true`) and you are charged once.
/// Keys are the caller's own, and are remembered for 24 hours. `clientTimestamp` is not
/// compared: a retry that sends another one gets the first answer.
#[utoipa::path(
    post,
    path = "/payments",
    tag = "payments",
    request_body = NewPayment,
    security(("bearer" = [])),
    responses(
        (status = 201, description = "The payment was made", body = Payment,
            headers(("Location" = String, description = "The payment's URL: `/payments/{id}`"))),
        (status = 400, description = "The body is invalid (nothing was stored: fix it and send it again with the same key)", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "No `Authorization: Bearer <user-id>`", body = ProblemBody, content_type = "application/problem+json"),
        (status = 415, description = "The body is not JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is unavailable; nothing ran, retry with the same key after `Retry-After`", body = ProblemBody, content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
    )
)]
// `scope = "user"`: Alice's key never finds Bob's payment. `ttl = "24h"`: a retry that comes
// later than a day is a new payment, as at Stripe; both are also the defaults, written out
// because a payment is where a reader looks for them. `lease = "10s"`: a shop that dies
// mid-payment blocks its key for 10 seconds rather than a minute; a payment that takes longer
// keeps its key, since the runtime renews the lease while the handler runs.
// `fingerprint_omit`: a client that stamps each attempt with its clock sends a retry whose
// body differs only there; it is the same payment, replayed, where a change of the amount or
// the currency is still 422.
#[idempotent(
    ttl = "24h",
    scope = "user",
    lease = "10s",
    fingerprint_omit = ["/clientTimestamp"]
)]
pub async fn create_payment(
    State(shop): State<Shop>,
    user: User,
    mut tx: Tx,
    mut steps: Steps,
    ValidJson(new): ValidJson<NewPayment>,
) -> Result<Created<Payment>, ShopError> {
    // The card network's approval: none by default; `SHOP_PAYMENT_DELAY_MS` makes it long
    // enough for a client to time out and retry.
    tokio::time::sleep(shop.settings().payment_delay).await;
    let payment = Payment {
        id: new_id("pay"),
        amount: new.amount,
        currency: new.currency,
        status: "succeeded".to_owned(),
        amount_refunded: 0,
        created: now(),
    };
    // With its books beside Redis, the row is a step of the operation: see `ledger`.
    let payment = shop
        .ledger()
        .record_payment(&mut tx, &mut steps, user.id(), payment)
        .await?;
    tracing::info!(user = user.id(), payment = %payment.id, amount = payment.amount, "payment made");
    crate::metrics::payment_created();
    let location = format!("/payments/{}", payment.id);
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(payment),
    ))
}

/// Lists the caller's payments, oldest first.
#[utoipa::path(
    get,
    path = "/payments",
    tag = "payments",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The caller's payments", body = PaymentList),
        (status = 401, description = "No `Authorization: Bearer <user-id>`", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn list_payments(
    State(shop): State<Shop>,
    user: User,
) -> Result<Json<PaymentList>, ShopError> {
    let items = shop.ledger().payments(user.id()).await?;
    Ok(Json(PaymentList { items }))
}

/// Shows one of the caller's payments.
#[utoipa::path(
    get,
    path = "/payments/{id}",
    tag = "payments",
    params(("id" = String, Path, description = "The payment's id", example = "pay_4eC39HqLyjWDarjtT1zdp7dc")),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The payment", body = Payment),
        (status = 401, description = "No `Authorization: Bearer <user-id>`", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "The caller has no payment with this id (another user's is not shown either)", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn get_payment(
    State(shop): State<Shop>,
    user: User,
    PaymentId(id): PaymentId,
) -> Result<Json<Payment>, ShopError> {
    shop.ledger()
        .payment(user.id(), &id)
        .await?
        .map(Json)
        .ok_or_else(|| payment_not_found(&id).into())
}

/// The `{id}` of a payment's path. A path whose id is not even UTF-8 names no payment: it is
/// answered 404 Problem Details, like any other unknown id, rather than axum's plain-text 400.
#[derive(Debug)]
pub struct PaymentId(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PaymentId {
    type Rejection = ShopProblem;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match Path::<String>::from_request_parts(parts, state).await {
            Ok(Path(id)) => Ok(Self(id)),
            Err(rejection) => Err(ShopProblem::new(
                ShopProblemKind::PaymentNotFound,
                format!(
                    "there is no payment at {}: {}",
                    parts.uri.path(),
                    rejection.body_text()
                ),
            )),
        }
    }
}

/// The 404 for a payment the caller does not have.
pub fn payment_not_found(id: &str) -> ShopProblem {
    ShopProblem::new(
        ShopProblemKind::PaymentNotFound,
        format!("you have no payment {id:?}"),
    )
}
