//! The sweeper: deletes expired records in small batches, at a pace.
//!
//! An expired record already behaves as absent (a claim replaces it), so sweeping is only
//! about space. Each batch is one short transaction at READ COMMITTED that chooses the oldest
//! expired rows with `FOR UPDATE SKIP LOCKED` (skipping rows a claim has locked, and taking no
//! gap locks that would hold up a claim's insert) and deletes them, so the sweeper never
//! makes a request wait for a row. It still competes with requests for the
//! database's CPU, WAL and disk, so the background sweeper rests after each batch in
//! proportion to the time the batch took ([`SweepPace`]): a backlog is worked off at a bounded
//! share of one connection's time instead of as fast as the database allows.

use std::{fmt, time::Duration};

use tokio::{
    sync::oneshot,
    task::JoinHandle,
    time::{Instant, MissedTickBehavior},
};

use sqlx::Row;

use super::{MySqlStore, read_committed};
use idem_core::store::StoreError;

impl MySqlStore {
    /// The batch size [`spawn_sweeper`](Self::spawn_sweeper) uses.
    pub const DEFAULT_SWEEP_BATCH: u32 = 1000;

    /// Deletes every expired record, `batch_size` records per batch, and answers how many
    /// it deleted. Call it on a schedule of your own, or let
    /// [`spawn_sweeper`](Self::spawn_sweeper) do so.
    ///
    /// Each batch deletes the oldest expired records and commits on its own, so no lock is
    /// held longer than one batch takes; rows a claim holds are left for the next sweep. Records that expire while it runs may be left for
    /// the next sweep.
    ///
    /// ```no_run
    /// # async fn run(store: idem::mysql::MySqlStore) -> Result<(), idem::store::StoreError> {
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

    /// Deletes at most `batch_size` expired records, in one short transaction, and answers how
    /// many.
    ///
    /// ```no_run
    /// # async fn run(store: idem::mysql::MySqlStore) -> Result<(), idem::store::StoreError> {
    /// // A little at a time, from a job scheduler of your own.
    /// let deleted = store.sweep_batch(100).await?;
    /// # drop(deleted); Ok(()) }
    /// ```
    pub async fn sweep_batch(&self, batch_size: u32) -> Result<u64, StoreError> {
        let deleted = self
            .sweep_once(batch_size.max(1))
            .await
            .map_err(|e| self.error(e))?;
        #[cfg(feature = "metrics")]
        metrics::counter!("idem_mysql_swept_records_total").increment(deleted);
        Ok(deleted)
    }

    /// One batch: chooses, then deletes, in one transaction at READ COMMITTED.
    async fn sweep_once(&self, batch: u32) -> Result<u64, sqlx::Error> {
        let statements = &self.shared.statements;
        let mut conn = self.shared.pool.acquire().await?;
        let mut transaction = read_committed(&mut conn).await?;
        let keys: Vec<Vec<u8>> = statements
            .expired(batch)
            .fetch_all(&mut *transaction)
            .await?
            .iter()
            .map(|row| row.try_get("store_key"))
            .collect::<Result<_, _>>()?;
        if keys.is_empty() {
            transaction.rollback().await?;
            return Ok(0);
        }
        statements.sweep(&keys).execute(&mut *transaction).await?;
        transaction.commit().await?;
        // The rows were locked by this transaction: every one of them was deleted.
        Ok(keys.len() as u64)
    }

    /// Sweeps every `every` (first at once) in a background task, at the default
    /// [`SweepPace`] (batches of [`DEFAULT_SWEEP_BATCH`](Self::DEFAULT_SWEEP_BATCH), busy a
    /// tenth of the time), until the handle is stopped or dropped. A failed sweep is logged
    /// and tried again at the next tick.
    ///
    /// One sweeper per database is enough; several (one per instance) are harmless, as
    /// batches skip the rows another sweeper holds.
    ///
    /// ```no_run
    /// # async fn run(store: idem::mysql::MySqlStore) {
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
    /// is stopped or dropped: each batch deletes up to [`SweepPace::batch`] records, and is
    /// followed by a rest of [`SweepPace::rest_after`] the time it took, until a batch finds
    /// fewer records than it may delete. A failed sweep is logged and tried again at the next
    /// tick. A stop request ends the sweep between batches or during a rest.
    ///
    /// ```no_run
    /// # async fn run(store: idem::mysql::MySqlStore) -> Result<(), idem::mysql::SweepPaceError> {
    /// use std::time::Duration;
    /// use idem::mysql::SweepPace;
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
        let store = self.clone();
        let (stop, mut stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every.max(Duration::from_millis(1)));
            ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = &mut stopped => return,
                    _ = ticks.tick() => {}
                }
                match store.sweep_paced(pace, &mut stopped).await {
                    Some(deleted) => {
                        tracing::debug!(deleted, "swept expired idempotency records");
                    }
                    None => return,
                }
            }
        });
        SweeperHandle {
            stop: Some(stop),
            task,
        }
    }

    /// One sweep of the background sweeper: batches at `pace` until one finds fewer records
    /// than it may delete, or fails. Answers how many it deleted, or `None` when `stopped`
    /// fired (or its sender was dropped) before the sweep ended.
    async fn sweep_paced(
        &self,
        pace: SweepPace,
        stopped: &mut oneshot::Receiver<()>,
    ) -> Option<u64> {
        let mut total = 0;
        loop {
            let started = Instant::now();
            match self.sweep_batch(pace.batch).await {
                Ok(deleted) => {
                    total += deleted;
                    if deleted < u64::from(pace.batch) {
                        return Some(total);
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "sweeping expired idempotency records failed");
                    return Some(total);
                }
            }
            let rest = pace.rest_after(started.elapsed());
            tokio::select! {
                // A stop request first, also when the rest is zero.
                biased;
                _ = &mut *stopped => return None,
                () = tokio::time::sleep(rest) => {}
            }
        }
    }
}

/// How the background sweeper ([`MySqlStore::spawn_sweeper_with`]) paces itself: how many
/// records a batch deletes, and what fraction of the time it may spend deleting.
///
/// After each batch that found a full batch of expired records, the sweeper rests for the time
/// the batch took times `(1 - busy) / busy`: at the default `busy` of 1/10, a batch that took
/// 20 ms is followed by 180 ms of rest. So a sweep keeps one connection busy at most that
/// fraction of the time, however large the backlog, and a slower database (a busy one, whose
/// batches take longer) gets longer rests. [`rest_after`](Self::rest_after) is that rule.
///
/// The default keeps up with far more than a steady churn produces: see docs/mysql.md for
/// what a batch took, against the churn of a 30-day window at 100 keyed requests a second
/// (about 100 records expire each second).
///
/// ```
/// use std::time::Duration;
/// use idem::mysql::SweepPace;
///
/// let pace = SweepPace::default();
/// assert_eq!(pace.batch_size(), 1000);
/// assert_eq!(pace.rest_after(Duration::from_millis(20)), Duration::from_millis(180));
///
/// // As fast as the database allows: no rest at all.
/// let flat_out = SweepPace::default().busy(1.0)?;
/// assert_eq!(flat_out.rest_after(Duration::from_millis(20)), Duration::ZERO);
/// # Ok::<(), idem::mysql::SweepPaceError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[must_use]
pub struct SweepPace {
    batch: u32,
    busy: f64,
}

impl SweepPace {
    /// The default busy fraction: a tenth of the time.
    pub const DEFAULT_BUSY: f64 = 0.1;

    /// The records one batch deletes at most (one transaction); zero counts as one.
    /// Smaller batches hold their row locks and their share of WAL for less time each;
    /// larger ones pay less per record for the statement. The default is
    /// [`MySqlStore::DEFAULT_SWEEP_BATCH`].
    pub fn batch(mut self, records: u32) -> Self {
        self.batch = records.max(1);
        self
    }

    /// The fraction of the time the sweeper may spend in batches, in `(0, 1]`; `1` sweeps
    /// without resting. The default is [`DEFAULT_BUSY`](Self::DEFAULT_BUSY).
    ///
    /// # Errors
    ///
    /// [`SweepPaceError::Busy`] for a fraction outside `(0, 1]` (or not a number).
    pub fn busy(mut self, fraction: f64) -> Result<Self, SweepPaceError> {
        if !(fraction > 0.0 && fraction <= 1.0) {
            return Err(SweepPaceError::Busy(fraction));
        }
        self.busy = fraction;
        Ok(self)
    }

    /// The records one batch deletes at most.
    pub fn batch_size(&self) -> u32 {
        self.batch
    }

    /// The fraction of the time the sweeper may spend in batches.
    pub fn busy_fraction(&self) -> f64 {
        self.busy
    }

    /// The rest after a batch that took `batch_took`: `batch_took × (1 - busy) / busy`, so
    /// that the batch and its rest together are busy `busy` of the time. A rest too long to
    /// represent is [`Duration::MAX`]; the sweeper still ends it when stopped.
    ///
    /// ```
    /// use std::time::Duration;
    /// use idem::mysql::SweepPace;
    ///
    /// let quarter = SweepPace::default().busy(0.25)?;
    /// assert_eq!(quarter.rest_after(Duration::from_millis(10)), Duration::from_millis(30));
    /// # Ok::<(), idem::mysql::SweepPaceError>(())
    /// ```
    #[must_use]
    pub fn rest_after(&self, batch_took: Duration) -> Duration {
        let idle_per_busy = (1.0 - self.busy) / self.busy;
        // Whole nanoseconds, so that exact inputs give exact rests (20 ms at 1/10: 180 ms).
        let nanos = (batch_took.as_nanos() as f64 * idle_per_busy).round();
        if nanos < u64::MAX as f64 {
            Duration::from_nanos(nanos as u64)
        } else {
            Duration::MAX
        }
    }
}

impl Default for SweepPace {
    fn default() -> Self {
        Self {
            batch: MySqlStore::DEFAULT_SWEEP_BATCH,
            busy: Self::DEFAULT_BUSY,
        }
    }
}

/// A [`SweepPace`] setting out of range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SweepPaceError {
    /// The busy fraction is not in `(0, 1]`.
    #[error("the sweeper's busy fraction must be in (0, 1], not {0}")]
    Busy(f64),
}

/// The background sweeper of [`MySqlStore::spawn_sweeper`] and
/// [`spawn_sweeper_with`](MySqlStore::spawn_sweeper_with). Dropping it stops the sweeper
/// (after the batch it is running, or at once when it rests).
///
/// ```no_run
/// # async fn run(store: idem::mysql::MySqlStore) {
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
    /// Stops the sweeper and waits for the batch it is running to finish; a rest between
    /// batches ends at once.
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

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_default_pace_rests_nine_times_the_batch() {
        let pace = SweepPace::default();
        assert_eq!(pace.batch_size(), MySqlStore::DEFAULT_SWEEP_BATCH);
        assert_eq!(pace.busy_fraction(), 0.1);
        assert_eq!(pace.rest_after(20 * MS), 180 * MS);
        assert_eq!(pace.rest_after(44 * MS), 396 * MS);
        assert_eq!(pace.rest_after(Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn the_rest_keeps_the_busy_fraction() {
        for busy in [0.01, 0.05, 0.25, 0.5, 0.75] {
            let pace = SweepPace::default().busy(busy).unwrap();
            for took in [MS, 20 * MS, 3 * Duration::from_secs(1)] {
                let rest = pace.rest_after(took);
                let share = took.as_secs_f64() / (took + rest).as_secs_f64();
                assert!((share - busy).abs() < 1e-6, "{busy} {took:?}: {share}");
            }
        }
    }

    #[test]
    fn busy_all_the_time_never_rests() {
        let pace = SweepPace::default().busy(1.0).unwrap();
        assert_eq!(pace.rest_after(20 * MS), Duration::ZERO);
        assert_eq!(pace.rest_after(Duration::from_secs(60)), Duration::ZERO);
    }

    #[test]
    fn a_rest_too_long_to_represent_is_the_longest_duration() {
        let pace = SweepPace::default().busy(f64::MIN_POSITIVE).unwrap();
        assert_eq!(pace.rest_after(MS), Duration::MAX);
        assert_eq!(pace.rest_after(Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn a_busy_fraction_outside_zero_to_one_is_refused() {
        for busy in [0.0, -0.1, 1.01, f64::NAN, f64::INFINITY] {
            let refused = SweepPace::default().busy(busy);
            assert!(
                matches!(refused, Err(SweepPaceError::Busy(_))),
                "{busy}: {refused:?}"
            );
        }
        assert_eq!(
            SweepPaceError::Busy(2.0).to_string(),
            "the sweeper's busy fraction must be in (0, 1], not 2"
        );
    }

    #[test]
    fn a_batch_of_zero_is_a_batch_of_one() {
        assert_eq!(SweepPace::default().batch(0).batch_size(), 1);
        assert_eq!(SweepPace::default().batch(250).batch_size(), 250);
    }
}
