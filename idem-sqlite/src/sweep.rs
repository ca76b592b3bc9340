//! The sweeper: deletes expired records in small batches, at a pace.
//!
//! An expired record already behaves as absent (a claim replaces it), so sweeping is only
//! about space. Each batch is one `DELETE` of the oldest expired rows, which holds the file's
//! write lock for as long as it runs: small batches keep the claims and completions that wait
//! behind it short, and the background sweeper rests after each batch in proportion to the
//! time the batch took ([`SweepPace`]), so a backlog is worked off at a bounded share of the
//! writer's time. The freed pages are reused by later records; the file does not shrink
//! (`VACUUM` does that, offline).

use std::time::Duration;

use super::SqliteStore;
use idem_core::store::{
    StoreError,
    sweep::{SweepBatches, SweepPace, SweeperHandle, spawn_sweeper, sweep_all},
};

impl SqliteStore {
    /// The batch size [`spawn_sweeper`](Self::spawn_sweeper) uses.
    pub const DEFAULT_SWEEP_BATCH: u32 = SweepPace::DEFAULT_BATCH;

    /// Deletes every expired record, `batch_size` records per batch, and answers how many
    /// it deleted. Call it on a schedule of your own, or let
    /// [`spawn_sweeper`](Self::spawn_sweeper) do so.
    ///
    /// Each batch deletes the oldest expired records and commits on its own, so the write
    /// lock is never held longer than one batch takes. Records that expire while it runs may
    /// be left for the next sweep.
    ///
    /// ```no_run
    /// # async fn run(store: idem::sqlite::SqliteStore) -> Result<(), idem::store::StoreError> {
    /// let deleted = store.sweep(500).await?;
    /// println!("deleted {deleted} expired idempotency records");
    /// # Ok(()) }
    /// ```
    pub async fn sweep(&self, batch_size: u32) -> Result<u64, StoreError> {
        sweep_all(self, batch_size).await
    }

    /// Deletes at most `batch_size` expired records, in one statement, and answers how many.
    ///
    /// ```no_run
    /// # async fn run(store: idem::sqlite::SqliteStore) -> Result<(), idem::store::StoreError> {
    /// // A little at a time, from a job scheduler of your own.
    /// let deleted = store.sweep_batch(100).await?;
    /// # drop(deleted); Ok(()) }
    /// ```
    pub async fn sweep_batch(&self, batch_size: u32) -> Result<u64, StoreError> {
        let deleted = self
            .shared
            .statements
            .sweep(batch_size.max(1))
            .execute(&self.shared.pool)
            .await
            .map_err(|e| self.error(e))?
            .rows_affected();
        #[cfg(feature = "metrics")]
        metrics::counter!("idem_sqlite_swept_records_total").increment(deleted);
        Ok(deleted)
    }

    /// Sweeps every `every` (first at once) in a background task, at the default
    /// [`SweepPace`] (batches of [`DEFAULT_SWEEP_BATCH`](Self::DEFAULT_SWEEP_BATCH), busy a
    /// tenth of the time), until the handle is stopped or dropped. A failed sweep is logged
    /// and tried again at the next tick.
    ///
    /// One sweeper per file is enough; several (one per process) are harmless, as each
    /// batch deletes only what is expired when it runs.
    ///
    /// ```no_run
    /// # async fn run(store: idem::sqlite::SqliteStore) {
    /// use std::time::Duration;
    ///
    /// let sweeper = store.spawn_sweeper(Duration::from_secs(300));
    /// // ... serve requests ...
    /// sweeper.stop().await;
    /// # }
    /// ```
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn spawn_sweeper(&self, every: Duration) -> SweeperHandle {
        self.spawn_sweeper_with(every, SweepPace::default())
    }

    /// Sweeps every `every` (first at once) in a background task, at `pace`, until the handle
    /// is stopped or dropped ([`idem_core::store::sweep::spawn_sweeper`] has the rules).
    ///
    /// ```no_run
    /// # async fn run(store: idem::sqlite::SqliteStore) -> Result<(), idem::sqlite::SweepPaceError> {
    /// use std::time::Duration;
    /// use idem::sqlite::SweepPace;
    ///
    /// // Smaller batches, busy a twentieth of the time.
    /// let pace = SweepPace::default().batch(500).busy(0.05)?;
    /// let sweeper = store.spawn_sweeper_with(Duration::from_secs(60), pace);
    /// # drop(sweeper); Ok(()) }
    /// ```
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn spawn_sweeper_with(&self, every: Duration, pace: SweepPace) -> SweeperHandle {
        spawn_sweeper(self.clone(), every, pace)
    }
}

impl SweepBatches for SqliteStore {
    async fn sweep_batch(&self, batch_size: u32) -> Result<u64, StoreError> {
        SqliteStore::sweep_batch(self, batch_size).await
    }
}
