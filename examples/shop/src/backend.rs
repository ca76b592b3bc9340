//! Where records and data live, as `IDEM_STORE` says.
//!
//! | `IDEM_STORE` | idempotency records | payments, refunds, transfers |
//! | --- | --- | --- |
//! | unset, empty or `memory` | `MemoryStore`, in this process | in this process's memory |
//! | `redis://...` | `RedisStore`, shared by every shop on that Redis | PostgreSQL tables in `SHOP_DATABASE_URL`, shared by every shop; without it, in this process's memory |
//! | `redis+cluster://HOST:PORT[,HOST:PORT...]` | `RedisStore` on the Redis Cluster those seed nodes belong to | as with `redis://` |
//! | `redis+sentinel://HOST:PORT[,HOST:PORT...]/NAME` | `RedisStore` on the primary the sentinels name `NAME`, followed through failovers | as with `redis://` |
//! | `postgres://...` | `PostgresStore` | PostgreSQL tables, written in the record's transaction |
//! | `mysql://...` or `mariadb://...` | `MySqlStore` | MySQL or MariaDB tables, written in the record's transaction |
//! | `sqlite:///path/to/shop.db` (the file created when missing) | `SqliteStore` | tables in the same file, written in the record's transaction |
//!
//! In PostgreSQL, MySQL and SQLite, a payment row and its record commit together. With Redis, several
//! shops share their idempotency records (a key sent to two of them runs once) and, with
//! `SHOP_DATABASE_URL`, their books: a row and its record are then two writes in two
//! systems, and each write is a step of its operation, keyed by it
//! ([`DatabaseLedger`]). Without it, each shop keeps its own
//! books in its memory, which a restart forgets.
//!
//! With Redis, `SHOP_REDIS_WAIT_REPLICAS` and `SHOP_REDIS_WAIT_TIMEOUT_MS` (read by
//! [`Config`](crate::Config)) set the [`Durability`] of claims.

use std::{fmt, str::FromStr, sync::Arc, time::Duration};

use idem::{
    Idempotency, IdempotencyBuilder, MemoryStore,
    postgres::{PostgresStore, SweeperHandle},
    redis::{Durability, RedisStore},
    store::{ConnectError, Store, StoreError},
};

use crate::ledger::{DatabaseLedger, Ledger, PostgresLedger};

mod mysql;
mod sqlite;

/// The store `IDEM_STORE` names.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreChoice {
    /// The embedded `MemoryStore`.
    Memory,
    /// A Redis deployment, and the durability its claims wait for.
    Redis(RedisChoice),
    /// A PostgreSQL database: `postgres://` or `postgresql://`.
    Postgres(String),
    /// A MySQL or MariaDB database: `mysql://` or `mariadb://` (which sqlx reads as
    /// `mysql://`).
    MySql(String),
    /// A SQLite file: `sqlite:///absolute/path.db` or `sqlite://relative/path.db`.
    Sqlite(String),
}

/// A Redis deployment, and how far each claim must travel before the handler runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisChoice {
    /// Where Redis is.
    pub deployment: RedisDeployment,
    /// What the store waits for after each claim (asynchronous unless
    /// `SHOP_REDIS_WAIT_REPLICAS` says otherwise).
    pub durability: Durability,
    /// The PostgreSQL database of the shop's payments, refunds and transfers
    /// (`SHOP_DATABASE_URL`); `None`: this process's memory.
    pub books: Option<String>,
}

/// The kinds of Redis deployment `IDEM_STORE` names.
#[derive(Clone, PartialEq, Eq)]
pub enum RedisDeployment {
    /// One server: `redis://`, `rediss://` (TLS) or `redis+unix://`.
    Server(String),
    /// A Redis Cluster, by its seed nodes (`redis://HOST:PORT` each), from
    /// `redis+cluster://HOST:PORT[,HOST:PORT...]`.
    Cluster(Vec<String>),
    /// A primary with replicas watched by Sentinel, from
    /// `redis+sentinel://HOST:PORT[,HOST:PORT...]/NAME`.
    Sentinel {
        /// The sentinels, `redis://HOST:PORT` each.
        sentinels: Vec<String>,
        /// The name the sentinels know the primary by.
        primary: String,
    },
}

impl fmt::Debug for RedisDeployment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Server(url) => write!(f, "Server({})", redact(url)),
            Self::Cluster(nodes) => write!(f, "Cluster({})", redacted_list(nodes)),
            Self::Sentinel { sentinels, primary } => {
                write!(f, "Sentinel({} / {primary})", redacted_list(sentinels))
            }
        }
    }
}

impl FromStr for StoreChoice {
    type Err = BackendError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let value = value.trim();
        if value.is_empty() || value == "memory" {
            return Ok(Self::Memory);
        }
        let redis = |deployment| {
            Ok(Self::Redis(RedisChoice {
                deployment,
                durability: Durability::Async,
                books: None,
            }))
        };
        let scheme = value.split_once("://").map(|(scheme, _)| scheme);
        match scheme {
            Some("redis" | "rediss" | "redis+unix" | "unix") => {
                redis(RedisDeployment::Server(value.to_owned()))
            }
            Some("redis+cluster") => redis(RedisDeployment::Cluster(node_list(value, value)?)),
            Some("redis+sentinel") => {
                let (list, primary) = value
                    .rsplit_once('/')
                    .filter(|(list, primary)| list.ends_with(|c| c != '/') && !primary.is_empty())
                    .ok_or_else(|| BackendError::UnknownStore(redact(value)))?;
                redis(RedisDeployment::Sentinel {
                    sentinels: node_list(list, value)?,
                    primary: primary.to_owned(),
                })
            }
            Some("postgres" | "postgresql") => Ok(Self::Postgres(value.to_owned())),
            Some("mysql") => Ok(Self::MySql(value.to_owned())),
            Some("mariadb") => Ok(Self::MySql(value.replacen("mariadb", "mysql", 1))),
            Some("sqlite") => Ok(Self::Sqlite(value.to_owned())),
            _ => Err(BackendError::UnknownStore(redact(value))),
        }
    }
}

/// `SCHEME://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...]` as one `redis://` URL per node, each
/// with the credentials. `whole` is the variable's value, for the error.
fn node_list(value: &str, whole: &str) -> Result<Vec<String>, BackendError> {
    let refused = || BackendError::UnknownStore(redact(whole));
    let (_, rest) = value.split_once("://").ok_or_else(refused)?;
    let (credentials, hosts) = match rest.rsplit_once('@') {
        Some((credentials, hosts)) => (format!("{credentials}@"), hosts),
        None => (String::new(), rest),
    };
    hosts
        .split(',')
        .map(|node| {
            let (host, port) = node.trim().rsplit_once(':').ok_or_else(refused)?;
            if host.is_empty() || port.parse::<u16>().is_err() {
                return Err(refused());
            }
            Ok(format!("redis://{credentials}{host}:{port}"))
        })
        .collect()
}

impl fmt::Display for StoreChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Memory => f.write_str("memory"),
            Self::Redis(redis) => write!(f, "{}", redis.deployment_url()),
            Self::Postgres(url) | Self::MySql(url) | Self::Sqlite(url) => f.write_str(&redact(url)),
        }
    }
}

impl fmt::Debug for StoreChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StoreChoice({self})")
    }
}

impl RedisChoice {
    /// The deployment as `IDEM_STORE` writes it, its passwords redacted.
    pub fn deployment_url(&self) -> String {
        let hosts = |urls: &[String]| {
            urls.iter()
                .map(|url| redact(url).trim_start_matches("redis://").to_owned())
                .collect::<Vec<_>>()
                .join(",")
        };
        match &self.deployment {
            RedisDeployment::Server(url) => redact(url),
            RedisDeployment::Cluster(nodes) => format!("redis+cluster://{}", hosts(nodes)),
            RedisDeployment::Sentinel { sentinels, primary } => {
                format!("redis+sentinel://{}/{primary}", hosts(sentinels))
            }
        }
    }
}

fn redacted_list(urls: &[String]) -> String {
    urls.iter()
        .map(|url| redact(url))
        .collect::<Vec<_>>()
        .join(",")
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
    /// The store could not be reached: which, where, and what to check.
    Connect(ConnectError),
    /// The database could not be reached or migrated.
    Postgres(sqlx::Error),
    /// The MySQL or MariaDB database could not be reached or migrated.
    MySql(sqlx::Error),
    /// The shop's tables could not be created in the SQLite file.
    Sqlite(sqlx::Error),
    /// The idempotency table could not be migrated.
    Store(StoreError),
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownStore(value) => write!(
                f,
                "IDEM_STORE={value:?} names no store; use `memory` (the default), \
                 `redis://host:6379`, `redis+cluster://host:port,host:port`, \
                 `redis+sentinel://host:port,host:port/name`, `postgres://user@host/db`, \
                 `mysql://user@host/db` or `sqlite:///path/to/shop.db`"
            ),
            // The store's error says it all in its `Debug`, its own cause included.
            Self::Connect(error) => write!(f, "{error:?}"),
            Self::Postgres(error) => write!(f, "PostgreSQL: {error}"),
            Self::MySql(error) => write!(f, "MySQL: {error}"),
            Self::Sqlite(error) => write!(f, "SQLite: {error}"),
            Self::Store(error) => write!(f, "the idempotency store: {error}"),
        }
    }
}

impl std::error::Error for BackendError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::UnknownStore(_) => None,
            Self::Connect(error) => Some(error),
            Self::Postgres(error) | Self::MySql(error) | Self::Sqlite(error) => Some(error),
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
    /// The idempotency records' store when they are in this process's memory, for
    /// `GET /metrics` to ask how full it is.
    pub memory_store: Option<MemoryStore>,
    sweeper: Option<SweeperHandle>,
    mysql_sweeper: Option<idem::mysql::SweeperHandle>,
}

impl Backend {
    /// Everything in this process's memory: the default, which needs no service.
    pub fn memory() -> Self {
        Self::in_memory(MemoryStore::default())
    }

    /// Everything in this process's memory, the idempotency records in `store`.
    pub fn in_memory(store: MemoryStore) -> Self {
        let bound = store.fill().max_entries;
        Self {
            idem: Idempotency::new(store.clone()),
            ledger: Ledger::memory(),
            records: format!(
                "MemoryStore (in this process, at most {bound} records: SHOP_MEMORY_MAX_ENTRIES)"
            ),
            memory_store: Some(store),
            sweeper: None,
            mysql_sweeper: None,
        }
    }

    /// Opens the store `choice` names, creating its tables if needed.
    pub async fn open(choice: &StoreChoice) -> Result<Self, BackendError> {
        Self::open_with(choice, None).await
    }

    /// Opens the store `choice` names, a memory store bounded at `memory_max_entries` records
    /// (its default, 100,000, with `None`).
    pub async fn open_with(
        choice: &StoreChoice,
        memory_max_entries: Option<u64>,
    ) -> Result<Self, BackendError> {
        match choice {
            StoreChoice::Memory => Ok(match memory_max_entries {
                None => Self::memory(),
                Some(bound) => Self::in_memory(MemoryStore::builder().max_entries(bound).build()),
            }),
            StoreChoice::Redis(redis) => {
                let mut backend = Self::open_redis(redis)
                    .await
                    .map_err(BackendError::Connect)?;
                if let Some(url) = &redis.books {
                    backend.ledger = Self::books(url).await?;
                }
                backend.records = match redis.durability {
                    Durability::Async => format!("RedisStore ({})", redis.deployment_url()),
                    durability => format!(
                        "RedisStore ({}; claims wait for {durability})",
                        redis.deployment_url()
                    ),
                };
                Ok(backend)
            }
            StoreChoice::Postgres(url) => {
                let store = PostgresStore::connect(url)
                    .await
                    .map_err(BackendError::Connect)?;
                let mut backend = Self::postgres(store).await?;
                backend.records = format!("PostgresStore ({})", redact(url));
                Ok(backend)
            }
            StoreChoice::MySql(url) => Self::open_mysql(url).await,
            StoreChoice::Sqlite(url) => Self::open_sqlite(url).await,
        }
    }

    async fn open_redis(redis: &RedisChoice) -> Result<Self, ConnectError> {
        let builder = RedisStore::builder().durability(redis.durability);
        Ok(match &redis.deployment {
            RedisDeployment::Server(url) => Self::redis(builder.connect(url.as_str()).await?),
            RedisDeployment::Cluster(nodes) => Self::redis(
                builder
                    .connect_cluster(nodes.iter().map(String::as_str))
                    .await?,
            ),
            RedisDeployment::Sentinel { sentinels, primary } => {
                let sentinels = sentinels.iter().map(String::as_str);
                Self::redis(builder.connect_sentinel(sentinels, primary).await?)
            }
        })
    }

    /// The same backend, its runtime keeping records for at most `max_ttl` whatever a route's
    /// TTL says ([`IdempotencyBuilder::max_ttl`]), and resuming abandoned operations after
    /// `resume_after` whatever a resumable route's delay says
    /// ([`IdempotencyBuilder::resume_after`]). Called before the shop serves, so no request has
    /// met the runtime it replaces.
    #[must_use]
    pub fn with_runtime(
        mut self,
        max_ttl: Option<Duration>,
        resume_after: Option<Duration>,
    ) -> Self {
        if max_ttl.is_none() && resume_after.is_none() {
            return self;
        }
        let mut builder = IdempotencyBuilder::from_arc(Arc::clone(self.idem.store()));
        if let Some(max_ttl) = max_ttl {
            builder = builder.max_ttl(max_ttl);
        }
        if let Some(after) = resume_after {
            builder = builder.resume_after(after);
        }
        self.idem = builder.build();
        self
    }

    /// Records in Redis, shared with every shop on the same deployment; the shop's data in
    /// this process's memory.
    pub fn redis<C>(store: RedisStore<C>) -> Self
    where
        RedisStore<C>: Store,
    {
        Self {
            idem: Idempotency::new(store),
            ledger: Ledger::memory(),
            records: "RedisStore".to_owned(),
            memory_store: None,
            sweeper: None,
            mysql_sweeper: None,
        }
    }

    /// The shop's tables in the PostgreSQL database at `url`, beside a store of their own.
    async fn books(url: &str) -> Result<Ledger, BackendError> {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .acquire_timeout(Duration::from_secs(2))
            .connect(url)
            .await
            .map_err(BackendError::Postgres)?;
        let ledger = DatabaseLedger::migrate(&pool)
            .await
            .map_err(BackendError::Postgres)?;
        Ok(Ledger::Database(ledger))
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
            memory_store: None,
            sweeper: Some(sweeper),
            mysql_sweeper: None,
        })
    }

    /// Stops background work (the sweeper).
    pub async fn close(mut self) {
        if let Some(sweeper) = self.sweeper.take() {
            sweeper.stop().await;
        }
        if let Some(sweeper) = self.mysql_sweeper.take() {
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
        let mysql = "mysql://root@127.0.0.1:3306/test";
        assert_eq!(
            mysql.parse::<StoreChoice>().unwrap(),
            StoreChoice::MySql(mysql.to_owned())
        );
        assert_eq!(
            "mariadb://db/x".parse::<StoreChoice>().unwrap(),
            StoreChoice::MySql("mysql://db/x".to_owned())
        );
        assert_eq!(
            "sqlite:///var/lib/shop/shop.db"
                .parse::<StoreChoice>()
                .unwrap(),
            StoreChoice::Sqlite("sqlite:///var/lib/shop/shop.db".to_owned())
        );
        let refused = "mongodb://root:hunter2@db/x"
            .parse::<StoreChoice>()
            .unwrap_err();
        assert!(
            refused.to_string().contains("mongodb://root:***@db/x"),
            "{refused}"
        );
        assert!(!refused.to_string().contains("hunter2"));
    }

    #[test]
    fn idem_store_names_a_redis_deployment() {
        let redis = |value: &str| match value.parse::<StoreChoice>().unwrap() {
            StoreChoice::Redis(redis) => {
                assert_eq!(redis.durability, Durability::Async);
                redis.deployment
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(
            redis("redis://127.0.0.1:6379"),
            RedisDeployment::Server("redis://127.0.0.1:6379".into())
        );
        assert_eq!(
            redis("redis+cluster://10.0.0.1:7000, 10.0.0.2:7001"),
            RedisDeployment::Cluster(vec![
                "redis://10.0.0.1:7000".into(),
                "redis://10.0.0.2:7001".into()
            ])
        );
        assert_eq!(
            redis("redis+cluster://:s3cret@10.0.0.1:7000,10.0.0.2:7001"),
            RedisDeployment::Cluster(vec![
                "redis://:s3cret@10.0.0.1:7000".into(),
                "redis://:s3cret@10.0.0.2:7001".into()
            ])
        );
        assert_eq!(
            redis("redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/shop"),
            RedisDeployment::Sentinel {
                sentinels: vec![
                    "redis://10.0.0.1:26379".into(),
                    "redis://10.0.0.2:26379".into()
                ],
                primary: "shop".into()
            }
        );
        for refused in [
            "redis+cluster://",
            "redis+cluster://10.0.0.1",
            "redis+cluster://10.0.0.1:port",
            "redis+cluster://10.0.0.1:7000,",
            "redis+sentinel://10.0.0.1:26379",
            "redis+sentinel://10.0.0.1:26379/",
        ] {
            let error = refused.parse::<StoreChoice>().unwrap_err();
            assert!(
                error.to_string().contains("redis+cluster://"),
                "{refused}: {error}"
            );
        }
        let shown = "redis+cluster://:s3cret@10.0.0.1:7000"
            .parse::<StoreChoice>()
            .unwrap();
        assert_eq!(shown.to_string(), "redis+cluster://:***@10.0.0.1:7000");
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
