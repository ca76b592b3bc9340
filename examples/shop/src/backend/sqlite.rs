//! The shop on SQLite (`IDEM_STORE=sqlite:///path/to/shop.db`): records in `SqliteStore`, the
//! shop's data in the same file, written in each request's transaction.

use std::time::Duration;

use idem::{Idempotency, sqlite::SqliteStore};

use super::{Backend, BackendError};
use crate::ledger::{Ledger, SqliteLedger};

impl Backend {
    /// Records in `store`, and the shop's data in the same file: migrates both, and sweeps
    /// expired records every 5 minutes.
    pub async fn sqlite(store: SqliteStore) -> Result<Self, BackendError> {
        store.migrate().await.map_err(BackendError::Store)?;
        let ledger = SqliteLedger::migrate(store.pool())
            .await
            .map_err(BackendError::Sqlite)?;
        let sweeper = store.spawn_sweeper(Duration::from_secs(300));
        Ok(Self {
            idem: Idempotency::new(store),
            ledger: Ledger::Sqlite(ledger),
            records: "SqliteStore".to_owned(),
            memory_store: None,
            sweeper: Some(sweeper),
            mysql_sweeper: None,
        })
    }

    /// Opens (or creates) the file `url` names and opens the shop on it.
    pub(super) async fn open_sqlite(url: &str) -> Result<Self, BackendError> {
        let store = SqliteStore::connect(url)
            .await
            .map_err(BackendError::Connect)?;
        let mut backend = Self::sqlite(store).await?;
        backend.records = format!("SqliteStore ({url})");
        Ok(backend)
    }
}
