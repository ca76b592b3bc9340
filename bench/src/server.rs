//! The idem servers the benchmarks measure, each a router that answers `POST /payments` with
//! the same handler ([`crate::payment`]).

use std::{fmt, str::FromStr};

use axum::{Extension, Json, Router, extract::State, response::Response, routing::post};
use idem_core::{
    Idempotency, IdempotencyLayer, MemoryStore, Policy, Scope, idempotent, store::Store,
};

use crate::payment::{self, Ledger, NewPayment};

/// Which way the handler is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Server {
    /// The handler alone, without idempotency.
    Bare,
    /// The handler under [`IdempotencyLayer`], with a global scope.
    Layer,
    /// The handler annotated with `#[idempotent(scope = "global")]`.
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

    /// The router of this server, its records in `store` (unused by [`Server::Bare`]): a
    /// [`roomy_store`] or [`bounded_store`], or a `RedisStore` (see `idem-bench`).
    ///
    /// ```
    /// use idem_bench::server::{Server, roomy_store};
    ///
    /// let app: axum::Router = Server::Layer.router(roomy_store());
    /// # drop(app);
    /// ```
    pub fn router(self, store: impl Store) -> Router {
        let ledger = Ledger::default();
        match self {
            Server::Bare => Router::new()
                .route(payment::PATH, post(payment::create_payment))
                .with_state(ledger),
            Server::Layer => Router::new()
                .route(payment::PATH, post(payment::create_payment))
                .with_state(ledger)
                .layer(IdempotencyLayer::new(
                    Idempotency::new(store),
                    Policy::new().scope(Scope::Global),
                )),
            Server::Attribute => Router::new()
                .route(payment::PATH, post(annotated_payment))
                .with_state(ledger)
                .layer(Extension(Idempotency::new(store))),
        }
    }
}

/// The same handler as [`payment::create_payment`], annotated.
#[idempotent(scope = "global")]
async fn annotated_payment(State(ledger): State<Ledger>, Json(new): Json<NewPayment>) -> Response {
    payment::take_payment(&ledger, new)
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
/// evicts one.
pub fn bounded_store(entries: u64) -> MemoryStore {
    MemoryStore::builder().max_entries(entries).build()
}
