//! The idem servers the benchmarks measure, each a router that answers `POST /payments` with
//! the same handler ([`crate::payment`]), or with that handler after two local steps
//! ([`Server::steps_router`]).

use std::{fmt, str::FromStr};

use axum::{
    Extension, Json, Router,
    extract::State,
    http::{header::AUTHORIZATION, request::Parts},
    response::Response,
    routing::post,
};
use idem::{
    Idempotency, IdempotencyLayer, MemoryStore, Policy, Principal, Scope, idempotent,
    steps::{StepError, Steps},
    store::Store,
};

use crate::payment::{self, Ledger, NewPayment};

/// Which way the handler is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Server {
    /// The handler alone, without idempotency.
    Bare,
    /// The handler under [`IdempotencyLayer`].
    Layer,
    /// The handler annotated with `#[idempotent(scope = ...)]`.
    Attribute,
}

impl Server {
    /// Every server, in the order the benchmarks report them.
    pub const ALL: [Server; 3] = [Server::Bare, Server::Layer, Server::Attribute];

    /// The name the command lines use.
    pub fn name(self) -> &'static str {
        match self {
            Server::Bare => "bare",
            Server::Layer => "layer",
            Server::Attribute => "attribute",
        }
    }

    /// The router of this server, its keys scoped as `scoping` says and its records in
    /// `store` (both unused by [`Server::Bare`]): [`Scoping::User`] with
    /// `MemoryStore::default()` is the configuration a service would run, [`Scoping::Global`]
    /// with a [`roomy_store`] the one that leaves the principal and eviction out.
    ///
    /// ```
    /// use idem_bench::server::{Scoping, Server};
    /// use idem::MemoryStore;
    ///
    /// let app: axum::Router = Server::Layer.router(Scoping::User, MemoryStore::default());
    /// # drop(app);
    /// ```
    pub fn router(self, scoping: Scoping, store: impl Store) -> Router {
        let ledger = Ledger::default();
        let idem = || scoping.runtime(store);
        match (self, scoping) {
            (Server::Bare, _) => Router::new()
                .route(payment::PATH, post(payment::create_payment))
                .with_state(ledger),
            (Server::Layer, _) => Router::new()
                .route(payment::PATH, post(payment::create_payment))
                .with_state(ledger)
                .layer(IdempotencyLayer::new(
                    idem(),
                    Policy::new().scope(scoping.scope()),
                )),
            (Server::Attribute, Scoping::User) => Router::new()
                .route(payment::PATH, post(payment_of_user))
                .with_state(ledger)
                .layer(Extension(idem())),
            (Server::Attribute, Scoping::Global) => Router::new()
                .route(payment::PATH, post(global_payment))
                .with_state(ledger)
                .layer(Extension(idem())),
        }
    }
}

impl Server {
    /// The router of this server in the configuration `steps`: keys scoped as in
    /// [`Scoping::Global`], records in `store`, and idem's servers run the handler after two
    /// local steps ([`Steps::local`]) whose work is a constant, so that what the figures add
    /// to the `global` configuration's is the runtime's cost of a step: its lease check, its
    /// record in the store. [`Server::Bare`] cannot run steps (they need a record) and serves
    /// the plain handler, as in every configuration.
    ///
    /// ```
    /// use idem_bench::server::{Server, roomy_store};
    ///
    /// let app: axum::Router = Server::Layer.steps_router(roomy_store());
    /// # drop(app);
    /// ```
    pub fn steps_router(self, store: impl Store) -> Router {
        let ledger = Ledger::default();
        let idem = || Scoping::Global.runtime(store);
        match self {
            Server::Bare => Router::new()
                .route(payment::PATH, post(payment::create_payment))
                .with_state(ledger),
            Server::Layer => Router::new()
                .route(payment::PATH, post(payment_in_steps))
                .with_state(ledger)
                .layer(IdempotencyLayer::new(
                    idem(),
                    Policy::new().scope(Scope::Global),
                )),
            Server::Attribute => Router::new()
                .route(payment::PATH, post(global_payment_in_steps))
                .with_state(ledger)
                .layer(Extension(idem())),
        }
    }
}

/// Whose keys a request's key is among, for the idem servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scoping {
    /// `Scope::User`: the principal is the request's `Authorization` header, read by a
    /// principal resolver (as a service behind bearer tokens would name its caller, and as the
    /// peer's scope closure reads it), with no middleware of its own.
    User,
    /// `Scope::Global`: one key space for every client, no principal to find.
    Global,
}

impl Scoping {
    fn scope(self) -> Scope {
        match self {
            Scoping::User => Scope::User,
            Scoping::Global => Scope::Global,
        }
    }

    fn runtime(self, store: impl Store) -> Idempotency {
        match self {
            Scoping::User => Idempotency::builder(store)
                .principal_resolver(principal_from_authorization)
                .build(),
            Scoping::Global => Idempotency::new(store),
        }
    }
}

/// The caller of a request: its `Authorization` header as it came.
fn principal_from_authorization(_: &Scope, parts: &Parts) -> Option<Principal> {
    let credentials = parts.headers.get(AUTHORIZATION)?.to_str().ok()?;
    Some(Principal::new(credentials))
}

impl FromStr for Scoping {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name {
            "user" => Ok(Scoping::User),
            "global" => Ok(Scoping::Global),
            other => Err(format!(
                "unknown configuration `{other}`; expected `user` or `global`"
            )),
        }
    }
}

/// The same handler as [`payment::create_payment`], annotated, its keys the caller's.
#[idempotent(scope = "user")]
async fn payment_of_user(State(ledger): State<Ledger>, Json(new): Json<NewPayment>) -> Response {
    payment::take_payment(&ledger, new)
}

/// The same handler, annotated, its keys in one space for every caller.
#[idempotent(scope = "global")]
async fn global_payment(State(ledger): State<Ledger>, Json(new): Json<NewPayment>) -> Response {
    payment::take_payment(&ledger, new)
}

/// The two steps of the `steps` configuration, then the handler's own work. Each step's
/// output is a constant: what is measured is the runtime's work around a step.
async fn two_steps_then_payment(
    ledger: &Ledger,
    steps: &mut Steps,
    new: NewPayment,
) -> Result<Response, StepError> {
    let quote: u64 = steps.local("quote", || async { Ok(1) }).await?;
    let fee: u64 = steps.local("fee", || async move { Ok(quote + 1) }).await?;
    std::hint::black_box(fee);
    Ok(payment::take_payment(ledger, new))
}

/// The handler of the `steps` configuration, under the layer.
async fn payment_in_steps(
    State(ledger): State<Ledger>,
    mut steps: Steps,
    Json(new): Json<NewPayment>,
) -> Result<Response, StepError> {
    two_steps_then_payment(&ledger, &mut steps, new).await
}

/// The handler of the `steps` configuration, annotated.
#[idempotent(scope = "global")]
async fn global_payment_in_steps(
    State(ledger): State<Ledger>,
    mut steps: Steps,
    Json(new): Json<NewPayment>,
) -> Result<Response, StepError> {
    two_steps_then_payment(&ledger, &mut steps, new).await
}

impl fmt::Display for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A server name that is none of [`Server::ALL`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownServer(pub String);

impl fmt::Display for UnknownServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown server `{}`; expected one of `bare`, `layer`, `attribute`",
            self.0
        )
    }
}

impl std::error::Error for UnknownServer {}

impl FromStr for Server {
    type Err = UnknownServer;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Server::ALL
            .into_iter()
            .find(|server| server.name() == name)
            .ok_or_else(|| UnknownServer(name.to_owned()))
    }
}

/// A memory store with room for every fresh key of a load run, so that eviction stays out of
/// the measurement of the server's usual state (the instruction-count mode measures a store at
/// its bound separately).
pub fn roomy_store() -> MemoryStore {
    MemoryStore::builder()
        .max_entries(20_000_000)
        .max_bytes(4 << 30)
        .build()
}

/// A memory store bounded at `entries` records: once that many are stored, each new record
/// evicts one. Its byte bound (4 KiB a record) leaves the benchmarks' records, about 1 KiB
/// each, to the entry bound; with the default 64 MiB, a bound above about 60,000 records
/// would never be reached.
pub fn bounded_store(entries: u64) -> MemoryStore {
    MemoryStore::builder()
        .max_entries(entries)
        .max_bytes(entries.saturating_mul(4096))
        .build()
}
