//! The sweeper: deletes expired records in small batches.
//!
//! An expired record already behaves as absent (a claim replaces it), so sweeping is only
//! about space. Each batch is one short statement that skips rows a claim has locked, so the
//! sweeper never makes a request wait.

use std::{fmt, time::Duration};

use tokio::{sync::oneshot, task::JoinHandle};

use super::PostgresStore;
use crate::store::StoreError;

impl PostgresStore {
    /// The batch size [`spawn_sweeper`](Self::spawn_sweeper) uses.
    pub const DEFAULT_SWEEP_BATCH: u32 = 1000;

    /// Deletes every expired record, `batch_size` rows per statement, and answers how many
    /// it deleted. Call it on a schedule of your own, or let
    /// [`spawn_sweeper`](Self::spawn_sweeper) do so.
    ///
    /// Each batch deletes the oldest expired records and commits on its own, so no lock is
    /// held longer than one batch takes. Records that expire while it runs may be left for
    /// the next sweep.
    ///
    /// ```no_run
    /// # async fn run(store: idem_core::store::PostgresStore) -> Result<(), idem_core::store::StoreError> {
    /// let deleted = store.sweep(500).await?;
    /// println!("deleted {deleted} expired idempotency records");
    /// # Ok(()) }
    /// ```
    pub async fn sweep(&self, batch_size: u32) -> Result<u64, StoreError> {
        let mut total = 0;
        loop {
            let deleted = self.sweep_batch(batch_size).await?;
            total += deleted;
            if deleted < u64::from(batch_size.max(1)) {
                return Ok(total);
            }
        }
    }

    /// Deletes at most `batch_size` expired records, in one statement, and answers how many.
    ///
    /// ```no_run
    /// # async fn run(store: idem_core::store::PostgresStore) -> Result<(), idem_core::store::StoreError> {
    /// // A little at a time, from a job scheduler of your own.
    /// let deleted = store.sweep_batch(100).await?;
    /// # drop(deleted); Ok(()) }
    /// ```
    pub async fn sweep_batch(&self, batch_size: u32) -> Result<u64, StoreError> {
        let deleted = self
            .shared
            .statements
            .sweep(i64::from(batch_size.max(1)))
            .execute(&self.shared.pool)
            .await
            .map_err(|e| self.error(e))?
            .rows_affected();
        #[cfg(feature = "metrics")]
        metrics::counter!("idem_postgres_swept_records_total").increment(deleted);
        Ok(deleted)
    }

    /// Sweeps every `every` (first at once) in a background task, in batches of
    /// [`DEFAULT_SWEEP_BATCH`](Self::DEFAULT_SWEEP_BATCH), until the handle is stopped or
    /// dropped. A failed sweep is logged and tried again at the next tick.
    ///
    /// One sweeper per database is enough; several (one per instance) are harmless, as
    /// batches skip the rows another sweeper holds.
    ///
    /// ```no_run
    /// # async fn run(store: idem_core::store::PostgresStore) {
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
        let store = self.clone();
        let (stop, mut stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every.max(Duration::from_millis(1)));
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = &mut stopped => return,
                    _ = ticks.tick() => {}
                }
                let mut total = 0;
                loop {
                    match store.sweep_batch(Self::DEFAULT_SWEEP_BATCH).await {
                        Ok(deleted) => {
                            total += deleted;
                            if deleted < u64::from(Self::DEFAULT_SWEEP_BATCH) {
                                break;
                            }
                        }
                        Err(error) => {
                            tracing::warn!(%error, "sweeping expired idempotency records failed");
                            break;
                        }
                    }
                    // Between batches, a stop request ends the sweep.
                    if !matches!(stopped.try_recv(), Err(oneshot::error::TryRecvError::Empty)) {
                        return;
                    }
                }
                tracing::debug!(deleted = total, "swept expired idempotency records");
            }
        });
        SweeperHandle {
            stop: Some(stop),
            task,
        }
    }
}

/// The background sweeper of [`PostgresStore::spawn_sweeper`]. Dropping it stops the sweeper
/// (after the batch it is running).
///
/// ```no_run
/// # async fn run(store: idem_core::store::PostgresStore) {
/// let sweeper = store.spawn_sweeper(std::time::Duration::from_secs(60));
/// assert!(!sweeper.is_finished());
/// sweeper.stop().await;
/// # }
/// ```
#[must_use = "dropping the handle stops the sweeper"]
pub struct SweeperHandle {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl SweeperHandle {
    /// Stops the sweeper and waits for the batch it is running to finish.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
    }

    /// Whether the sweeper's task has ended.
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}

impl fmt::Debug for SweeperHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SweeperHandle")
            .field("finished", &self.task.is_finished())
            .finish()
    }
}
