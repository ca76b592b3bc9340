//! Where records and data live, as `IDEM_STORE` says.
//!
//! | `IDEM_STORE` | idempotency records | payments, refunds, transfers |
//! | --- | --- | --- |
//! | unset, empty or `memory` | `MemoryStore`, in this process | in this process's memory |
//! | `redis://...` | `RedisStore`, shared by every shop on that Redis | in this process's memory |
//! | `postgres://...` | `PostgresStore` | PostgreSQL tables, written in the record's transaction |
//!
//! The shop's data follows the store only in PostgreSQL, where the point is that a payment
//! row and its record commit together. With Redis, several shops share their idempotency
//! records (a key sent to two of them runs once) but each keeps its own payments: a real
//! service would keep those in a shared database too.

use std::{fmt, str::FromStr, time::Duration};

use idem_core::{
    Idempotency, MemoryStore, RedisStore,
    store::{PostgresStore, StoreError, postgres::SweeperHandle},
};

use crate::ledger::{Ledger, PostgresLedger};

/// The store `IDEM_STORE` names.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreChoice {
    /// The embedded `MemoryStore`.
    Memory,
    /// A Redis server: `redis://`, `rediss://` (TLS) or `redis+unix://`.
    Redis(String),
    /// A PostgreSQL database: `postgres://` or `postgresql://`.
    Postgres(String),
}

impl FromStr for StoreChoice {
    type Err = BackendError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let value = value.trim();
        if value.is_empty() || value == "memory" {
            return Ok(Self::Memory);
        }
        let scheme = value.split_once("://").map(|(scheme, _)| scheme);
        match scheme {
            Some("redis" | "rediss" | "redis+unix" | "unix") => Ok(Self::Redis(value.to_owned())),
            Some("postgres" | "postgresql") => Ok(Self::Postgres(value.to_owned())),
            _ => Err(BackendError::UnknownStore(redact(value))),
        }
    }
}

impl fmt::Display for StoreChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Memory => f.write_str("memory"),
            Self::Redis(url) | Self::Postgres(url) => f.write_str(&redact(url)),
        }
    }
}

impl fmt::Debug for StoreChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StoreChoice({self})")
    }
}

/// A URL with its password replaced by `***`, for messages.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _password)) => format!("{scheme}://{user}:***@{host}{path}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

/// Why the shop could not open its store.
#[derive(Debug)]
#[non_exhaustive]
pub enum BackendError {
    /// `IDEM_STORE` names no store the shop knows.
    UnknownStore(String),
    /// Redis could not be reached.
    Redis(Box<dyn std::error::Error + Send + Sync>),
    /// The database could not be reached or migrated.
    Postgres(sqlx::Error),
    /// The idempotency table could not be migrated.
    Store(StoreError),
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownStore(value) => write!(
                f,
                "IDEM_STORE={value:?} names no store; use `memory` (the default), \
                 `redis://host:6379` or `postgres://user@host/db`"
            ),
            Self::Redis(error) => write!(f, "Redis: {error}"),
            Self::Postgres(error) => write!(f, "PostgreSQL: {error}"),
            Self::Store(error) => write!(f, "the idempotency store: {error}"),
        }
    }
}

impl std::error::Error for BackendError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::UnknownStore(_) => None,
            Self::Redis(error) => Some(&**error),
            Self::Postgres(error) => Some(error),
            Self::Store(error) => Some(error),
        }
    }
}

/// The idempotency runtime and the ledger of one shop, on one store.
#[derive(Debug)]
pub struct Backend {
    /// The idempotency runtime.
    pub idem: Idempotency,
    /// Where the shop's data lives.
    pub ledger: Ledger,
    /// What keeps the idempotency records, for the start-up message.
    pub records: String,
    sweeper: Option<SweeperHandle>,
}

impl Backend {
    /// Everything in this process's memory: the default, which needs no service.
    pub fn memory() -> Self {
        Self {
            idem: Idempotency::new(MemoryStore::default()),
            ledger: Ledger::memory(),
            records: "MemoryStore (in this process)".to_owned(),
            sweeper: None,
        }
    }

    /// Opens the store `choice` names, creating its tables if needed.
    pub async fn open(choice: &StoreChoice) -> Result<Self, BackendError> {
        match choice {
            StoreChoice::Memory => Ok(Self::memory()),
            StoreChoice::Redis(url) => {
                let store = RedisStore::connect(url.as_str())
                    .await
                    .map_err(|error| BackendError::Redis(error.into()))?;
                let mut backend = Self::redis(store);
                backend.records = format!("RedisStore ({})", redact(url));
                Ok(backend)
            }
            StoreChoice::Postgres(url) => {
                let store = PostgresStore::connect(url)
                    .await
                    .map_err(BackendError::Postgres)?;
                let mut backend = Self::postgres(store).await?;
                backend.records = format!("PostgresStore ({})", redact(url));
                Ok(backend)
            }
        }
    }

    /// Records in Redis, shared with every shop on the same server; the shop's data in this
    /// process's memory.
    pub fn redis(store: RedisStore) -> Self {
        Self {
            idem: Idempotency::new(store),
            ledger: Ledger::memory(),
            records: "RedisStore".to_owned(),
            sweeper: None,
        }
    }

    /// Records in `store`, and the shop's data in the same database: migrates both, and
    /// sweeps expired records every 5 minutes.
    pub async fn postgres(store: PostgresStore) -> Result<Self, BackendError> {
        store.migrate().await.map_err(BackendError::Store)?;
        let ledger = PostgresLedger::migrate(store.pool())
            .await
            .map_err(BackendError::Postgres)?;
        let sweeper = store.spawn_sweeper(Duration::from_secs(300));
        Ok(Self {
            idem: Idempotency::new(store),
            ledger: Ledger::Postgres(ledger),
            records: "PostgresStore".to_owned(),
            sweeper: Some(sweeper),
        })
    }

    /// Stops background work (the sweeper).
    pub async fn close(mut self) {
        if let Some(sweeper) = self.sweeper.take() {
            sweeper.stop().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idem_store_names_a_store() {
        assert_eq!("".parse::<StoreChoice>().unwrap(), StoreChoice::Memory);
        assert_eq!(
            "memory".parse::<StoreChoice>().unwrap(),
            StoreChoice::Memory
        );
        let postgres = "postgres://postgres@127.0.0.1:5432/test";
        assert_eq!(
            postgres.parse::<StoreChoice>().unwrap(),
            StoreChoice::Postgres(postgres.to_owned())
        );
        assert!(matches!(
            "postgresql://db/x".parse::<StoreChoice>(),
            Ok(StoreChoice::Postgres(_))
        ));
        let refused = "mysql://root:hunter2@db/x"
            .parse::<StoreChoice>()
            .unwrap_err();
        assert!(
            refused.to_string().contains("mysql://root:***@db/x"),
            "{refused}"
        );
        assert!(!refused.to_string().contains("hunter2"));
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact("postgres://app:s3cret@db:5432/shop"),
            "postgres://app:***@db:5432/shop"
        );
        assert_eq!(redact("postgres://app@db/shop"), "postgres://app@db/shop");
        assert_eq!(redact("memory"), "memory");
    }
}
