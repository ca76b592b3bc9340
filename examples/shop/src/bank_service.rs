//! The bank, as an HTTP service of its own: `POST /transfers` moves money, under
//! `#[idempotent]`, so that the shop can retry a transfer without moving the money twice;
//! `GET /transfers` lists what it moved for the calling account, each with the key it came
//! under.
//!
//! The shop starts one in its own process, on a loopback port, unless `SHOP_BANK_URL` names
//! one elsewhere: a test's, or the `bank` binary (`cargo run -p shop --bin bank -- --addr
//! 127.0.0.1:4000`), which outlives a shop that is killed. Its customers are the shops,
//! authenticated the way the shop authenticates its users (`Authorization: Bearer <account>`,
//! demo grade), and each one's keys are its own. A transfer takes the bank
//! `SHOP_TRANSFER_DELAY_MS`. The account [`CLOSED_ACCOUNT`] is closed: a transfer to it is
//! refused with 422 `account-closed`, and moves nothing.
//!
//! ```no_run
//! # async fn run() -> std::io::Result<()> {
//! use std::time::Duration;
//!
//! let bank = shop::bank_service::BankServer::start(Duration::from_millis(200)).await?;
//! println!("the bank is at {}", bank.url());
//! # Ok(()) }
//! ```

use std::{
    fmt, io,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    Extension, Json, Router,
    extract::{FromRequestParts, State},
    http::{StatusCode, request::Parts},
    routing::post,
};
use idem::{Idempotency, IdempotencyKey, KeySyntax, MemoryStore, idempotent};
use serde::{Deserialize, Serialize};
use tokio::{net::TcpListener, task::JoinHandle};
use utoipa::ToSchema;

use crate::{
    auth::User,
    json::{ValidJson, Validate},
    model::{new_id, now, rules},
    problem::{FieldError, ShopProblem, ShopProblemKind},
};

/// The receiving account the bank refuses transfers to: it is closed.
pub const CLOSED_ACCOUNT: &str = "9999999";

/// The body of the bank's `POST /transfers`. Its schema tells `ValidJson` which members are
/// required.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TransferOrder {
    /// In the currency's minor unit.
    pub amount: i64,
    /// ISO 4217 code.
    pub currency: String,
    /// The receiving account: 7 digits.
    pub to_account: String,
}

impl Validate for TransferOrder {
    fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errors = Vec::new();
        rules::amount(&mut errors, "amount", self.amount);
        rules::currency(&mut errors, "currency", &self.currency);
        rules::account(&mut errors, "toAccount", &self.to_account);
        rules::verdict(errors)
    }
}

/// Money the bank moved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BankTransfer {
    /// `bt_` and 24 letters and digits.
    pub id: String,
    /// Who ordered it: the shop's account at the bank.
    pub account: String,
    /// The `Idempotency-Key` it came under.
    pub key: String,
    /// In the currency's minor unit.
    pub amount: i64,
    /// ISO 4217 code.
    pub currency: String,
    /// The receiving account.
    pub to_account: String,
    /// When the money moved, in seconds since the Unix epoch.
    pub created: i64,
}

/// The bank's books: every transfer it made, in order. Cheap to clone; clones share them.
#[derive(Clone, Default)]
pub struct BankBooks {
    transfers: Arc<Mutex<Vec<BankTransfer>>>,
    delay: Duration,
}

impl BankBooks {
    /// Books of a bank that takes `delay` per transfer.
    pub fn new(delay: Duration) -> Self {
        Self {
            transfers: Arc::default(),
            delay,
        }
    }

    /// Every transfer the bank made, oldest first.
    pub fn transfers(&self) -> Vec<BankTransfer> {
        self.transfers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

impl fmt::Debug for BankBooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BankBooks")
            .field("transfers", &self.transfers().len())
            .field("delay", &self.delay)
            .finish()
    }
}

/// The `Idempotency-Key` a transfer came under, as the runtime reads it. The runtime refuses a
/// request without a valid key before any extractor runs, so the handler always finds one.
#[derive(Debug)]
pub struct OrderKey(pub String);

impl<S: Send + Sync> FromRequestParts<S> for OrderKey {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let key = IdempotencyKey::from_headers(&parts.headers, KeySyntax::Lenient)
            .ok()
            .flatten()
            .map(|key| key.as_str().to_owned());
        Ok(Self(key.unwrap_or_default()))
    }
}

/// Moves money: answers 201 with the transfer, after the bank's delay. A retry with the same
/// key gets the same transfer, replayed, and moves nothing. A transfer to the
/// [`CLOSED_ACCOUNT`] is refused, 422, and that refusal is replayed too.
// `scope = "user"` (the default): a key is the calling shop's own. `on_conflict = "reject"`: a
// retry that comes while the transfer runs is told to come back (409, `Retry-After`), which
// the shop's client does.
#[idempotent(on_conflict = "reject")]
pub async fn create_transfer(
    State(books): State<BankBooks>,
    account: User,
    OrderKey(key): OrderKey,
    ValidJson(order): ValidJson<TransferOrder>,
) -> Result<(StatusCode, Json<BankTransfer>), ShopProblem> {
    tokio::time::sleep(books.delay).await;
    if order.to_account == CLOSED_ACCOUNT {
        return Err(ShopProblem::new(
            ShopProblemKind::AccountClosed,
            format!("the account {CLOSED_ACCOUNT} is closed; nothing was moved"),
        ));
    }
    let transfer = BankTransfer {
        id: new_id("bt"),
        account: account.id().to_owned(),
        key,
        amount: order.amount,
        currency: order.currency,
        to_account: order.to_account,
        created: now(),
    };
    books
        .transfers
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push(transfer.clone());
    tracing::info!(account = account.id(), transfer = %transfer.id, "the bank moved money");
    Ok((StatusCode::CREATED, Json(transfer)))
}

/// What `GET /transfers` answers: the calling account's transfers, oldest first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BankStatement {
    /// The transfers.
    pub items: Vec<BankTransfer>,
}

/// Lists the money the bank moved for the calling account, oldest first.
pub async fn list_transfers(State(books): State<BankBooks>, account: User) -> Json<BankStatement> {
    let items = books
        .transfers()
        .into_iter()
        .filter(|transfer| transfer.account == account.id())
        .collect();
    Json(BankStatement { items })
}

/// The bank's router, keeping its transfers in `books` and its idempotency records in `idem`.
pub fn app(books: BankBooks, idem: Idempotency) -> Router {
    Router::new()
        .route("/transfers", post(create_transfer).get(list_transfers))
        .with_state(books)
        .layer(Extension(idem))
}

/// A bank serving on a loopback port until it is dropped.
#[derive(Debug)]
pub struct BankServer {
    url: String,
    books: BankBooks,
    task: JoinHandle<()>,
}

impl BankServer {
    /// Starts a bank whose transfers take `delay`, on a free loopback port, with its records in
    /// memory.
    ///
    /// # Errors
    ///
    /// When no loopback port can be bound.
    pub async fn start(delay: Duration) -> io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let books = BankBooks::new(delay);
        let router = app(books.clone(), Idempotency::new(MemoryStore::default()));
        let task = tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, router).await {
                tracing::error!(%error, "the bank stopped serving");
            }
        });
        Ok(Self { url, books, task })
    }

    /// Where the bank listens: `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The bank's books.
    pub fn books(&self) -> &BankBooks {
        &self.books
    }
}

impl Drop for BankServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
