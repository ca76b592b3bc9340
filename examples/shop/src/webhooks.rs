//! `POST /webhooks/bank`: the bank tells the shop that a transfer settled.
//!
//! A machine calls this endpoint, not a user: it authenticates by signing the body
//! (`Bank-Signature: sha256=<hex HMAC-SHA256 of the body>`), and sends each event with an
//! `Idempotency-Key` of its own, the event's id, on every delivery. Banks deliver webhooks
//! at least once, so the same event may arrive twice, days apart.

use axum::{
    Json,
    body::Bytes,
    extract::{FromRequest, Request, State},
};
use idem::{extract::Tx, idempotent};
use serde::Deserialize;
use utoipa::ToSchema;

use crate::{
    Shop,
    bank::SIGNATURE_HEADER,
    json::{BodyRejection, Validate, is_json, parse},
    model::Transfer,
    problem::{FieldError, ProblemBody, ShopError, ShopProblem, ShopProblemKind},
};

/// What happened, as the bank names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, ToSchema)]
pub enum BankEventType {
    /// The transfer reached the receiving account.
    #[serde(rename = "transfer.settled")]
    TransferSettled,
}

/// A bank webhook's body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BankEvent {
    /// What happened.
    #[serde(rename = "type")]
    pub kind: BankEventType,
    /// The transfer it happened to.
    #[schema(example = "tr_1MiN3gLkdIwHu7ixNCZvFdgA")]
    pub transfer: String,
}

impl Validate for BankEvent {
    fn validate(&self) -> Result<(), Vec<FieldError>> {
        Ok(())
    }
}

/// A webhook body whose signature is the bank's: the body extractor of [`bank_webhook`].
///
/// It is what authenticates the bank, so it must run for every delivery, a redelivery of an
/// event already applied included: a replay hands out the transfer, and must not hand it to
/// whoever copied the event's key and body without the secret. It does not implement
/// [`idem::PureBody`], so `#[idempotent]` runs it before the idempotency decision, on
/// the body the runtime has buffered, for the first delivery and every retry alike. A
/// forged, unsigned or broken delivery is refused here with 401 (or 400, 413, 415): the key
/// is not claimed, nothing is stored, and no stored result is replayed to it.
#[derive(Debug)]
pub struct SignedEvent(pub BankEvent);

impl FromRequest<Shop> for SignedEvent {
    type Rejection = BodyRejection;

    async fn from_request(request: Request, shop: &Shop) -> Result<Self, Self::Rejection> {
        if !is_json(request.headers()) {
            return Err(BodyRejection::Invalid(ShopProblem::new(
                ShopProblemKind::UnsupportedMediaType,
                "send the event as JSON, with `Content-Type: application/json`",
            )));
        }
        let signature = request
            .headers()
            .get(SIGNATURE_HEADER)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let body = Bytes::from_request(request, shop)
            .await
            .map_err(|rejection| match rejection.status().as_u16() {
                413 => BodyRejection::TooLarge,
                _ => BodyRejection::Unreadable(rejection.body_text()),
            })?;
        if !shop.bank().verify(&body, &signature) {
            return Err(BodyRejection::Invalid(ShopProblem::new(
                ShopProblemKind::InvalidSignature,
                "the Bank-Signature header is not the bank's signature of this body",
            )));
        }
        parse(&body).map(Self).map_err(BodyRejection::Invalid)
    }
}

/// Receives an event from the bank.
///
/// The key must be an RFC 9651 sf-string (`Idempotency-Key: "evt_..."`), and a redelivery
/// must be the same bytes: the body is compared as it was signed, not as JSON.
#[utoipa::path(
    post,
    path = "/webhooks/bank",
    tag = "webhooks",
    request_body = BankEvent,
    security(("bankSignature" = [])),
    responses(
        (status = 200, description = "The event was applied; the transfer as it is now", body = Transfer),
        (status = 400, description = "The event is invalid", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "The signature is not the bank's", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No transfer with this id", body = ProblemBody, content_type = "application/problem+json"),
        (status = 415, description = "The body is not JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is unavailable; nothing ran", body = ProblemBody, content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
    )
)]
// `scope = "global"`: the caller is the bank, not a user; its event ids are unique across all
// its deliveries. `key_syntax = "strict"`: the bank follows the IETF draft and quotes its
// keys, so a bare key is a client that is not the bank. `fingerprint = "raw"`: the payload is
// signed as bytes, so a redelivery is the same bytes; a re-serialized body is not the event
// that was signed. `ttl = "3d"`: the bank redelivers for up to three days.
//
// Safe to replay: `Tx` reads only the request's parts, and `SignedEvent` is a guard (it is
// not a `PureBody`), so both run before the stored transfer is handed out, and a redelivery
// gets it only with the bank's signature of these very bytes.
#[idempotent(
    scope = "global",
    key_syntax = "strict",
    fingerprint = "raw",
    ttl = "3d"
)]
pub async fn bank_webhook(
    State(shop): State<Shop>,
    mut tx: Tx,
    SignedEvent(event): SignedEvent,
) -> Result<Json<Transfer>, ShopError> {
    let BankEventType::TransferSettled = event.kind;
    match shop
        .ledger()
        .settle_transfer(&mut tx, &event.transfer)
        .await?
    {
        Some(transfer) => {
            tracing::info!(transfer = %transfer.id, "transfer settled");
            Ok(Json(transfer))
        }
        None => Err(ShopProblem::new(
            ShopProblemKind::TransferNotFound,
            format!("there is no transfer {:?}", event.transfer),
        )
        .into()),
    }
}
