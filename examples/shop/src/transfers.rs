//! `POST /transfers`, `GET /transfers`: money sent to a bank account, which takes the bank a
//! while (`SHOP_TRANSFER_DELAY_MS`, 10 s by default).

use axum::{Json, extract::State, http::StatusCode};
use idem_core::{idempotent, store::postgres::Tx};
use serde::Deserialize;
use utoipa::ToSchema;

use crate::{
    Shop,
    auth::User,
    json::{ValidJson, Validate},
    model::{Transfer, TransferList, new_id, now, rules},
    openapi::IdempotencyKeyHeader,
    problem::{FieldError, ProblemBody, ShopError},
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
/// has finished it gets its answer. The transfer is made once. It stays `pending` until the
/// bank's webhook settles it.
#[utoipa::path(
    post,
    path = "/transfers",
    tag = "transfers",
    params(IdempotencyKeyHeader),
    request_body = NewTransfer,
    security(("bearer" = [])),
    responses(
        (status = 201, description = "The bank accepted the transfer", body = Transfer),
        (status = 400, description = "The key is missing or malformed, or the body is invalid (nothing was stored: fix it and send it again with the same key)", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "No `Authorization: Bearer <user-id>`", body = ProblemBody, content_type = "application/problem+json"),
        (status = 415, description = "The body is not JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The idempotency store or the database is unavailable; nothing ran", body = ProblemBody, content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
    )
)]
// `lease = "15s"`: if this instance dies mid-transfer, a retry may take the key over after
// 15 s instead of the default 60 s; while the handler runs, the heartbeat renews the lease
// every 5 s, so a 10 s transfer keeps it. `on_conflict = "reject"`: a duplicate is told at
// once (409, `Retry-After`) rather than held for 10 s, which is what the demo shows.
#[idempotent(lease = "15s", on_conflict = "reject")]
pub async fn create_transfer(
    State(shop): State<Shop>,
    user: User,
    mut tx: Tx,
    ValidJson(new): ValidJson<NewTransfer>,
) -> Result<(StatusCode, Json<Transfer>), ShopError> {
    shop.bank().transfer().await;
    let transfer = Transfer {
        id: new_id("tr"),
        amount: new.amount,
        currency: new.currency,
        to_account: new.to_account,
        status: "pending".to_owned(),
        created: now(),
    };
    // In PostgreSQL mode the transaction begins here, after the bank answered: it is not
    // held open for the bank's 10 seconds.
    shop.ledger()
        .insert_transfer(&mut tx, user.id(), &transfer)
        .await?;
    tracing::info!(user = user.id(), transfer = %transfer.id, "transfer sent");
    Ok((StatusCode::CREATED, Json(transfer)))
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
