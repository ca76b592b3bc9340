//! A small shop service that shows idempotency keys at work: payments, refunds, receipts,
//! transfers and a bank webhook, each an axum handler under `#[idempotent]`, and with
//! `SHOP_NATS_URL` a receipts consumer, a message handler under `#[idempotent(key = ...)]`.
//!
//! The binary (`cargo run -p shop`) reads its [`Config`] from the environment and the command
//! line, opens the store named by `IDEM_STORE` ([`Backend`]), and serves [`app`] with
//! [`serve`], within [`ConnectionLimits`]. The tests in `tests/` build the same router and serve it on a loopback port.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use shop::{Backend, Settings, Shop};
//!
//! let backend = Backend::memory();
//! let shop = Shop::new(backend.ledger.clone(), Settings::default());
//! let router = shop::app(shop, backend.idem.clone());
//! let listener = shop::server::bind("127.0.0.1:3000".parse()?, "--addr HOST:PORT")?;
//! let limits = shop::ConnectionLimits::default();
//! shop::serve(listener, router, backend.idem.clone(), limits, shop::shutdown_signal()).await?;
//! # Ok(()) }
//! ```

pub mod admin;
pub mod auth;
pub mod backend;
pub mod bank;
pub mod bank_cli;
pub mod bank_service;
pub mod checkout;
pub mod config;
pub mod events;
pub mod grpc;
pub mod health;
pub mod json;
pub mod ledger;
pub mod metrics;
pub mod model;
pub mod openapi;
pub mod payments;
pub mod problem;
pub mod receipts;
pub mod refunds;
pub mod server;
pub mod transfers;
pub mod webhooks;

use std::{fmt, sync::Arc, time::Duration};

use axum::{
    Extension, Router,
    extract::{DefaultBodyLimit, Request},
    middleware,
    routing::{get, post},
};
use idem::{Idempotency, MemoryStore};

use crate::{
    auth::User,
    bank::Bank,
    events::Events,
    ledger::Ledger,
    problem::{ShopProblem, ShopProblemKind},
    receipts::Mailer,
};
pub use crate::{
    backend::Backend,
    config::Config,
    server::{ConnectionLimits, serve},
};

/// How the shop behaves, apart from where it keeps its data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// How long the bank takes to accept a transfer.
    pub transfer_delay: Duration,
    /// How long the card network takes to approve a payment.
    pub payment_delay: Duration,
    /// How long a transfer waits between the bank's answer and its ledger row: none by
    /// default; the fault tests set one to cut the shop off between the two steps.
    pub ledger_delay: Duration,
    /// Where the bank's service is; `None`: the shop starts one in its own process.
    pub bank_url: Option<String>,
    /// How long the shop's client retries one call to the bank before it gives up.
    pub bank_deadline: Duration,
    /// How long the bank takes to confirm a refund.
    pub refund_delay: Duration,
    /// The key the bank signs its webhooks with.
    pub webhook_secret: String,
    /// The largest request body accepted, in bytes.
    pub body_limit: usize,
    /// The token of the admin API (`SHOP_ADMIN_TOKEN`); `None`: no admin API (404).
    pub admin_token: Option<admin::AdminToken>,
}

impl Settings {
    /// The default transfer delay: 10 seconds, as in the seed article's demo.
    pub const DEFAULT_TRANSFER_DELAY: Duration = Duration::from_secs(10);
    /// The default payment delay: none.
    pub const DEFAULT_PAYMENT_DELAY: Duration = Duration::ZERO;
    /// The default refund delay: 1 second.
    pub const DEFAULT_REFUND_DELAY: Duration = Duration::from_secs(1);
    /// The default webhook secret. A demo value: a real one is a secret.
    pub const DEFAULT_WEBHOOK_SECRET: &str = "whsec_demo";
    /// The default body limit: 16 KiB, plenty for these bodies and small enough to show 413.
    pub const DEFAULT_BODY_LIMIT: usize = 16 * 1024;
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            transfer_delay: Self::DEFAULT_TRANSFER_DELAY,
            payment_delay: Self::DEFAULT_PAYMENT_DELAY,
            ledger_delay: Duration::ZERO,
            bank_url: None,
            bank_deadline: idem_client::RetryPolicy::DEFAULT_DEADLINE,
            refund_delay: Self::DEFAULT_REFUND_DELAY,
            webhook_secret: Self::DEFAULT_WEBHOOK_SECRET.to_owned(),
            body_limit: Self::DEFAULT_BODY_LIMIT,
            admin_token: None,
        }
    }
}

/// The shop: its data, its bank and its mailer. The state of every handler. Cheap to clone;
/// clones share everything.
#[derive(Clone)]
pub struct Shop {
    inner: Arc<Inner>,
}

struct Inner {
    ledger: Ledger,
    bank: Bank,
    mailer: Mailer,
    settings: Settings,
    events: Option<Events>,
    /// The idempotency records' store, when they are in this process's memory: `GET /metrics`
    /// asks it how full it is.
    memory_store: Option<MemoryStore>,
}

impl Shop {
    /// A shop keeping its data in `ledger`. Its bank is the one at `settings.bank_url`, or
    /// one it starts on a loopback port at its first transfer.
    pub fn new(ledger: Ledger, settings: Settings) -> Self {
        Self::with_events(ledger, settings, None)
    }

    /// The shop on `backend`: its data in the backend's ledger, and, when its records are in
    /// memory, the memory store watched by `GET /metrics`. It publishes its payments on
    /// `events`, if any.
    pub fn on(backend: &Backend, settings: Settings, events: Option<Events>) -> Self {
        let memory_store = backend.memory_store.clone();
        Self::build(backend.ledger.clone(), settings, events, memory_store)
    }

    /// A shop that publishes its payments as events on `events` (see [`events`]).
    pub fn with_events(ledger: Ledger, settings: Settings, events: Option<Events>) -> Self {
        Self::build(ledger, settings, events, None)
    }

    fn build(
        ledger: Ledger,
        settings: Settings,
        events: Option<Events>,
        memory_store: Option<MemoryStore>,
    ) -> Self {
        let bank = Bank::new(
            settings.transfer_delay,
            settings.refund_delay,
            &settings.webhook_secret,
        )
        .retrying_for(settings.bank_deadline);
        let bank = match &settings.bank_url {
            Some(url) => bank.at(url),
            None => bank,
        };
        Self {
            inner: Arc::new(Inner {
                ledger,
                bank,
                mailer: Mailer::default(),
                settings,
                events,
                memory_store,
            }),
        }
    }

    /// Where the payments, refunds and transfers are.
    pub fn ledger(&self) -> &Ledger {
        &self.inner.ledger
    }

    /// The bank.
    pub fn bank(&self) -> &Bank {
        &self.inner.bank
    }

    /// The outgoing mail.
    pub fn mailer(&self) -> &Mailer {
        &self.inner.mailer
    }

    /// The settings.
    pub fn settings(&self) -> &Settings {
        &self.inner.settings
    }

    /// Where payments are published, with `SHOP_NATS_URL`.
    pub fn events(&self) -> Option<&Events> {
        self.inner.events.as_ref()
    }

    /// The memory store of the idempotency records, when they are in this process.
    pub fn memory_store(&self) -> Option<&MemoryStore> {
        self.inner.memory_store.as_ref()
    }
}

impl fmt::Debug for Shop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shop")
            .field("ledger", &self.inner.ledger)
            .field("settings", &self.inner.settings)
            .finish_non_exhaustive()
    }
}

/// The shop's router, with `idem` as its idempotency runtime.
///
/// Routes that act for a user sit behind an authentication layer, so that a request without
/// credentials is answered 401 before anything else (before a missing key's 400, say). The
/// webhook authenticates by its signature instead, the admin API (with `SHOP_ADMIN_TOKEN`) by
/// its token; `/healthz`, `/metrics`, `/openapi.json` (see [`openapi`]) and the problem catalogues
/// (`/problems/idempotency`, `/problems/shop`) are open.
pub fn app(shop: Shop, idem: Idempotency) -> Router {
    let body_limit = shop.settings().body_limit;
    let users = Router::new()
        .route(
            "/payments",
            post(payments::create_payment)
                .layer(middleware::from_fn_with_state(
                    shop.clone(),
                    events::publish_payment,
                ))
                .get(payments::list_payments),
        )
        .route("/receipts", get(receipts::list_receipts))
        .route("/payments/{id}", get(payments::get_payment))
        .route("/payments/{id}/refunds", post(refunds::create_refund))
        .route("/payments/{id}/receipt", post(receipts::send_receipt))
        .route(
            "/transfers",
            post(transfers::create_transfer).get(transfers::list_transfers),
        )
        .route_layer(middleware::from_extractor::<User>());
    let machines = Router::new()
        .route("/webhooks/bank", post(webhooks::bank_webhook))
        .route("/healthz", get(health::healthz))
        .route("/metrics", get(metrics::metrics))
        // Where the `type` of idem's Problem Details leads: what each refusal means.
        .route(idem::problem::CATALOGUE_PATH, get(idem::problem::catalogue))
        // Where the `type` of the shop's own Problem Details leads.
        .route(problem::CATALOGUE_PATH, get(problem::catalogue));
    // The recorder is the process's, installed before any request can count.
    metrics::handle();
    // Off unless `SHOP_ADMIN_TOKEN` is set: then its paths are like any unknown one, 404.
    let admin = match shop.settings().admin_token {
        Some(_) => admin::router(),
        None => Router::new(),
    };
    let served = users
        .merge(machines)
        .merge(admin)
        .fallback(route_not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(shop)
        .layer(DefaultBodyLimit::max(body_limit))
        // `#[idempotent]` handlers find the runtime as a request extension.
        .layer(Extension(idem));
    // The document of the routes above, as they run.
    openapi::with_document(served)
}

async fn route_not_found(request: Request) -> ShopProblem {
    ShopProblem::new(
        ShopProblemKind::RouteNotFound,
        format!(
            "there is nothing at {}; see /openapi.json",
            request.uri().path()
        ),
    )
}

pub(crate) async fn method_not_allowed(request: Request) -> ShopProblem {
    // axum adds the `Allow` header to this answer.
    ShopProblem::new(
        ShopProblemKind::MethodNotAllowed,
        format!(
            "{} does not take {}",
            request.uri().path(),
            request.method()
        ),
    )
}

/// Completes on SIGINT (Ctrl-C) or SIGTERM.
///
/// The handlers are installed when this is called, not when the future is first polled: a
/// signal that comes in between is then noticed rather than ending the process at once,
/// without its graceful shutdown. Call it within a Tokio runtime.
#[cfg(unix)]
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{SignalKind, signal};
    let interrupt = signal(SignalKind::interrupt());
    let terminate = signal(SignalKind::terminate());
    async move {
        match (interrupt, terminate) {
            (Ok(mut interrupt), Ok(mut terminate)) => {
                tokio::select! {
                    _ = interrupt.recv() => {}
                    _ = terminate.recv() => {}
                }
            }
            (Err(error), _) | (_, Err(error)) => {
                tracing::error!(%error, "cannot listen for SIGINT and SIGTERM");
                std::future::pending::<()>().await;
            }
        }
        tracing::info!("shutting down: no new connections; finishing the requests in progress");
    }
}

/// Completes on Ctrl-C.
#[cfg(not(unix))]
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::error!(%error, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
        tracing::info!("shutting down: no new connections; finishing the requests in progress");
    }
}
