//! `POST /transfers`, `GET /transfers`: money sent to a bank account, which takes the bank a
//! while (`SHOP_TRANSFER_DELAY_MS`, 10 s by default).
//!
//! A transfer is an operation of two steps (see idem's docs/steps.md): the order at the bank,
//! a foreign step under a key derived from the operation and the step (the same in every run
//! of this operation, in any shop process, so the bank moves the money once), then the ledger
//! row, a local step. Each step's output is recorded with the operation's record as it ends.
//! If the shop dies between the two, or the ledger fails, the next run of the operation (the
//! user's retry, or the shop's own resumption `SHOP_RESUME_AFTER_MS` after it was abandoned)
//! gets the bank's answer from the record without calling the bank, and writes the row: the
//! bank's transfer never goes without its ledger row.

use axum::{Json, extract::State, http::StatusCode};
use idem::{
    idempotent,
    steps::{StepError, Steps},
};
use serde::Deserialize;
use utoipa::ToSchema;

use crate::{
    Shop,
    auth::User,
    bank::TransferFailed,
    bank_service::TransferOrder,
    json::{ValidJson, Validate},
    model::{Transfer, TransferList, new_id, now, rules},
    problem::{FieldError, ProblemBody, ShopError, ShopProblem, ShopProblemKind},
};

/// The body of `POST /transfers`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NewTransfer {
    /// 1 to 100000000, in the currency's minor unit.
    #[schema(minimum = 1, maximum = 100_000_000, example = 50000)]
    pub amount: i64,
    /// ISO 4217 code: 3 capital letters.
    #[schema(pattern = "^[A-Z]{3}$", example = "JPY")]
    pub currency: String,
    /// The receiving account: 7 digits.
    #[schema(pattern = "^[0-9]{7}$", example = "0000000")]
    pub to_account: String,
}

impl Validate for NewTransfer {
    fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errors = Vec::new();
        rules::amount(&mut errors, "amount", self.amount);
        rules::currency(&mut errors, "currency", &self.currency);
        rules::account(&mut errors, "toAccount", &self.to_account);
        rules::verdict(errors)
    }
}

/// Sends money to a bank account.
///
/// The bank takes a while. A client that times out sends the same request with the same
/// key: while the first is still running it gets 409 with `Retry-After`, and once the first
/// has finished it gets its answer. The transfer is made once, and if its client never comes
/// back the shop finishes it itself. It stays `pending` until the bank's webhook settles it.
#[utoipa::path(
    post,
    path = "/transfers",
    tag = "transfers",
    request_body = NewTransfer,
    security(("bearer" = [])),
    responses(
        (status = 201, description = "The bank accepted the transfer", body = Transfer),
        (status = 400, description = "The body is invalid (nothing was stored: fix it and send it again with the same key)", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "No `Authorization: Bearer <user-id>`", body = ProblemBody, content_type = "application/problem+json"),
        (status = 415, description = "The body is not JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 502, description = "`bank-unavailable`: the bank did not confirm the transfer yet; the operation stays open, a retry with the same key resumes it (the shop also does, on its own), and the money moves at most once. `bank-refused`: the bank refused it for good; stored, and replayed to every retry", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is unavailable; retry with the same key", body = ProblemBody, content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
    )
)]
// `lease = "15s"`: if this instance dies mid-transfer, another run may take the operation
// over after 15 s instead of the default 60 s; while the handler runs, the heartbeat renews
// the lease every 5 s, so a 10 s transfer keeps it. `on_conflict = "reject"`: a duplicate is
// told at once (409, `Retry-After`) rather than held for 10 s, which is what the demo shows.
// `resume_after = "5s"`: an operation that stopped part-way and that nobody takes over within
// 5 s of its lease lapsing is finished by the shop itself (SHOP_RESUME_AFTER_MS sets another
// delay for every such route).
#[idempotent(lease = "15s", on_conflict = "reject", resume_after = "5s")]
pub async fn create_transfer(
    State(shop): State<Shop>,
    user: User,
    mut steps: Steps,
    ValidJson(new): ValidJson<NewTransfer>,
) -> Result<(StatusCode, Json<Transfer>), ShopError> {
    let order = TransferOrder {
        amount: new.amount,
        currency: new.currency.clone(),
        to_account: new.to_account.clone(),
    };
    let bank = shop.bank().clone();
    let moved = steps
        .call("bank-order", |key| async move {
            bank.transfer(&key, &order).await.map_err(bank_failed)
        })
        .await?;
    tracing::debug!(user = user.id(), bank_transfer = %moved.id, "the bank confirmed a transfer");
    // SHOP_LEDGER_DELAY_MS: a window between the steps for the fault tests to cut the shop off
    // in (examples/shop/tests/partitions.rs); none by default.
    let pause = shop.settings().ledger_delay;
    if !pause.is_zero() {
        tokio::time::sleep(pause).await;
    }
    let transfer = Transfer {
        id: new_id("tr"),
        amount: new.amount,
        currency: new.currency,
        to_account: new.to_account,
        status: "pending".to_owned(),
        bank_transfer: moved.id,
        created: now(),
    };
    let transfer = shop
        .ledger()
        .record_transfer(&mut steps, user.id(), transfer)
        .await?;
    tracing::info!(user = user.id(), transfer = %transfer.id, "transfer sent");
    Ok((StatusCode::CREATED, Json(transfer)))
}

/// What a failed order at the bank is for the operation: a refusal ends it (502
/// `bank-refused`, stored), anything else leaves it open to resume (502 `bank-unavailable`).
fn bank_failed(failed: TransferFailed) -> StepError {
    match failed {
        TransferFailed::Refused(why) => {
            tracing::info!(error = %why, "the bank refused a transfer");
            StepError::terminal(ShopProblem::new(
                ShopProblemKind::BankRefused,
                format!("the bank refused the transfer: {why}; nothing was moved"),
            ))
        }
        TransferFailed::Unconfirmed(why) => {
            tracing::warn!(error = %why, "the bank did not confirm a transfer");
            StepError::retryable(ShopProblem::new(
                ShopProblemKind::BankUnavailable,
                format!(
                    "the bank did not confirm the transfer ({why}); send it again with the same \
                     Idempotency-Key, or leave it to the shop, which finishes it: the bank \
                     moves the money at most once"
                ),
            ))
        }
    }
}

/// Lists the caller's transfers, oldest first.
#[utoipa::path(
    get,
    path = "/transfers",
    tag = "transfers",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The caller's transfers", body = TransferList),
        (status = 401, description = "No `Authorization: Bearer <user-id>`", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn list_transfers(
    State(shop): State<Shop>,
    user: User,
) -> Result<Json<TransferList>, ShopError> {
    let items = shop.ledger().transfers(user.id()).await?;
    Ok(Json(TransferList { items }))
}
