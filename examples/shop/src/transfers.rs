//! `POST /transfers`, `GET /transfers`: money sent to a bank account, which takes the bank a
//! while (`SHOP_TRANSFER_DELAY_MS`, 10 s by default).
//!
//! The shop orders each transfer from the bank over HTTP, under a key derived from its own
//! operation: `shop-transfer`, the user and the user's `Idempotency-Key`
//! ([`bank_key`]). The shop's record of a transfer makes a retry replay the shop's answer; the
//! derived key makes a transfer the shop runs again anyway (its record expired, or was lost
//! with the process) come back from the bank as the same transfer, so the money moves once.

use axum::{
    Json,
    extract::{FromRequestParts, State},
    http::{StatusCode, request::Parts},
};
use idem_core::{IdempotencyKey, KeySyntax, extract::Tx, idempotent, key::DeriveError};
use serde::Deserialize;
use utoipa::ToSchema;

use crate::{
    Shop,
    auth::User,
    bank_service::TransferOrder,
    json::{ValidJson, Validate},
    model::{Transfer, TransferList, new_id, now, rules},
    openapi::IdempotencyKeyHeader,
    problem::{FieldError, ProblemBody, ShopError, ShopProblem, ShopProblemKind},
};

/// The key the shop sends the bank for the transfer that `user` asked for with `key`: the same
/// for every run of that operation, in any shop process.
///
/// ```
/// use idem_core::IdempotencyKey;
///
/// let key = IdempotencyKey::new("8e03978e-40d5-43e8-bc93-6894a57f9324")?;
/// let bank_key = shop::transfers::bank_key("alice", &key)?;
/// assert_eq!(bank_key.as_str(), "shop-transfer:alice:8e03978e-40d5-43e8-bc93-6894a57f9324");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
///
/// Never in practice: the namespace is a valid constant.
pub fn bank_key(user: &str, key: &IdempotencyKey) -> Result<IdempotencyKey, DeriveError> {
    IdempotencyKey::derive("shop-transfer", [user, key.as_str()])
}

/// The `Idempotency-Key` the client sent, as the runtime read it. The runtime refuses a request
/// without a valid key before any extractor runs, so `None` is never seen by the handler of a
/// route that requires one.
#[derive(Debug)]
pub struct ClientKey(pub Option<IdempotencyKey>);

impl<S: Send + Sync> FromRequestParts<S> for ClientKey {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        // Lenient reads every key a strict route accepts too, and the same way.
        Ok(Self(
            IdempotencyKey::from_headers(&parts.headers, KeySyntax::Lenient)
                .ok()
                .flatten(),
        ))
    }
}

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
        (status = 502, description = "The bank did not confirm the transfer; the key is released, and a retry with it asks the bank again under the same bank key, so the money moves at most once", body = ProblemBody, content_type = "application/problem+json"),
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
    ClientKey(key): ClientKey,
    mut tx: Tx,
    ValidJson(new): ValidJson<NewTransfer>,
) -> Result<(StatusCode, Json<Transfer>), ShopError> {
    let bank_key = key
        .as_ref()
        .map(|key| bank_key(user.id(), key))
        .and_then(Result::ok)
        .ok_or_else(|| {
            ShopProblem::new(
                ShopProblemKind::Internal,
                "the transfer has no Idempotency-Key to derive the bank's key from",
            )
        })?;
    let order = TransferOrder {
        amount: new.amount,
        currency: new.currency.clone(),
        to_account: new.to_account.clone(),
    };
    let moved = shop.bank().transfer(&bank_key, &order).await.map_err(|failed| {
        tracing::warn!(user = user.id(), error = %failed.0, "the bank did not confirm a transfer");
        ShopProblem::new(
            ShopProblemKind::BankUnavailable,
            format!(
                "the bank did not confirm the transfer ({}); send it again with the same \
                 Idempotency-Key: the bank moves the money at most once",
                failed.0
            ),
        )
    })?;
    tracing::debug!(user = user.id(), bank_transfer = %moved.id, "the bank confirmed a transfer");
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
