//! The shop on MySQL or MariaDB (`IDEM_STORE=mysql://...`): records in `MySqlStore`, the
//! shop's data in the same database, written in each request's transaction.

use std::time::Duration;

use idem::{Idempotency, mysql::MySqlStore};

use super::{Backend, BackendError};
use crate::ledger::{Ledger, MySqlLedger};

impl Backend {
    /// Records in `store`, and the shop's data in the same database: migrates both, and
    /// sweeps expired records every 5 minutes.
    pub async fn mysql(store: MySqlStore) -> Result<Self, BackendError> {
        store.migrate().await.map_err(BackendError::Store)?;
        let ledger = MySqlLedger::migrate(store.pool())
            .await
            .map_err(BackendError::MySql)?;
        let sweeper = store.spawn_sweeper(Duration::from_secs(300));
        Ok(Self {
            idem: Idempotency::new(store),
            ledger: Ledger::MySql(ledger),
            records: "MySqlStore".to_owned(),
            memory_store: None,
            sweeper: None,
            mysql_sweeper: Some(sweeper),
        })
    }

    /// Connects to the database at `url` and opens the shop on it.
    pub(super) async fn open_mysql(url: &str) -> Result<Self, BackendError> {
        let store = MySqlStore::connect(url)
            .await
            .map_err(BackendError::Connect)?;
        let mut backend = Self::mysql(store).await?;
        backend.records = format!("MySqlStore ({})", super::redact(url));
        Ok(backend)
    }
}
