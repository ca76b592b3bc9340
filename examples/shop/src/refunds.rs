//! `POST /payments/{id}/refunds`: gives (part of) a payment back, through the bank.

use axum::{Json, extract::State, http::StatusCode};
use idem::{extract::Tx, idempotent, steps::Steps};
use serde::Deserialize;
use utoipa::ToSchema;

use crate::{
    Shop,
    auth::User,
    json::{ValidJson, Validate},
    ledger::RefundOutcome,
    model::{Refund, new_id, now, rules},
    payments::{PaymentId, payment_not_found},
    problem::{FieldError, ProblemBody, ShopError, ShopProblem, ShopProblemKind},
};

/// The body of `POST /payments/{id}/refunds`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewRefund {
    /// 1 to what is left of the payment, in its currency.
    #[schema(minimum = 1, maximum = 100_000_000, example = 1200)]
    pub amount: i64,
}

impl Validate for NewRefund {
    fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errors = Vec::new();
        rules::amount(&mut errors, "amount", self.amount);
        rules::verdict(errors)
    }
}

/// Refunds (part of) one of the caller's payments.
///
/// The bank takes a moment to confirm a refund. A second request with the same key while
/// the first is running waits for it (up to 5 s) and answers its result, rather than 409: a
/// double click on "refund" gets one refund and one answer. If the bank fails (502), that
/// answer is kept for the key: whether the money moved is unknown until the bank's statement
/// says, so the refund is not tried again blindly. Check the payment's `amountRefunded` and
/// send a new key to try again.
#[utoipa::path(
    post,
    path = "/payments/{id}/refunds",
    tag = "payments",
    params(("id" = String, Path, description = "The payment's id")),
    request_body = NewRefund,
    security(("bearer" = [])),
    responses(
        (status = 201, description = "The refund was made", body = Refund),
        (status = 400, description = "The body is invalid, or the refund is larger than what is left of the payment", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "No `Authorization: Bearer <user-id>`", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "The caller has no payment with this id", body = ProblemBody, content_type = "application/problem+json"),
        (status = 415, description = "The body is not JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 502, description = "The bank did not confirm the refund; this answer is replayed for the key", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is unavailable; nothing ran", body = ProblemBody, content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
    )
)]
// `on_conflict = "wait(5s)"`: a duplicate waits for the first refund's answer instead of a
// 409 it would have to retry. `store_server_errors = true`: the bank's failure is the answer
// for this key, as Stripe replays 5xx: a refund is not re-run on a guess.
#[idempotent(on_conflict = "wait(5s)", store_server_errors = true)]
pub async fn create_refund(
    State(shop): State<Shop>,
    user: User,
    PaymentId(payment_id): PaymentId,
    mut tx: Tx,
    mut steps: Steps,
    ValidJson(new): ValidJson<NewRefund>,
) -> Result<(StatusCode, Json<Refund>), ShopError> {
    let payment = shop
        .ledger()
        .payment(user.id(), &payment_id)
        .await?
        .ok_or_else(|| payment_not_found(&payment_id))?;
    let refundable = payment.amount - payment.amount_refunded;
    if new.amount > refundable {
        return Err(exceeds(new.amount, refundable).into());
    }
    if shop.bank().refund().await.is_err() {
        tracing::warn!(user = user.id(), payment = %payment_id, "the bank did not confirm a refund");
        return Err(ShopProblem::new(
            ShopProblemKind::BankUnavailable,
            "the bank did not confirm the refund; check the payment's amountRefunded before \
             you try again with a new Idempotency-Key",
        )
        .into());
    }
    let refund = Refund {
        id: new_id("re"),
        payment: payment_id.clone(),
        amount: new.amount,
        status: "succeeded".to_owned(),
        created: now(),
    };
    // With its books beside Redis, the refund is a step of the operation: see `ledger`.
    let (outcome, refund) = shop
        .ledger()
        .record_refund(&mut tx, &mut steps, user.id(), refund)
        .await?;
    match outcome {
        RefundOutcome::Refunded(_) => {
            tracing::info!(user = user.id(), payment = %payment_id, refund = %refund.id, "refund made");
            Ok((StatusCode::CREATED, Json(refund)))
        }
        // Another refund of this payment came first (with another key).
        RefundOutcome::Exceeds { refundable } => Err(exceeds(new.amount, refundable).into()),
        RefundOutcome::NotFound => Err(payment_not_found(&payment_id).into()),
    }
}

fn exceeds(amount: i64, refundable: i64) -> ShopProblem {
    ShopProblem::invalid_fields(vec![FieldError::new(
        "amount",
        format!("{amount} is more than the {refundable} left to refund"),
    )])
    .with_kind(ShopProblemKind::RefundExceedsPayment)
}
