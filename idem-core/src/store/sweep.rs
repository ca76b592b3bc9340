//! A paced sweeper, for a store that deletes its expired records in batches (the PostgreSQL,
//! MySQL and SQLite stores run one; a store of your own can too).
//!
//! An expired record already behaves as absent (a claim replaces it, rule 6), so sweeping is
//! only about space. A batch is the store's: one short statement or transaction that deletes
//! at most so many expired records without making a request wait ([`SweepBatches`]). It still
//! competes with requests for the database's CPU and disk, so the background sweeper rests
//! after each batch in proportion to the time the batch took ([`SweepPace`]): a backlog is
//! worked off at a bounded share of one connection's time instead of as fast as the database
//! allows.
//!
//! ```
//! use std::time::Duration;
//! use idem::store::{StoreError, sweep::{SweepBatches, SweepPace, spawn_sweeper}};
//!
//! /// A store's handle that deletes expired records (here: pretends to).
//! #[derive(Clone)]
//! struct Records;
//!
//! impl SweepBatches for Records {
//!     async fn sweep_batch(&self, batch_size: u32) -> Result<u64, StoreError> {
//!         // DELETE ... LIMIT batch_size, and how many rows it deleted.
//!         Ok(0)
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let sweeper = spawn_sweeper(Records, Duration::from_secs(300), SweepPace::default());
//! sweeper.stop().await;
//! # }
//! ```

use std::{fmt, future::Future, time::Duration};

use tokio::{
    sync::oneshot,
    task::JoinHandle,
    time::{Instant, MissedTickBehavior},
};

use super::StoreError;

/// What a sweeper asks of a store: one batch of deletions.
pub trait SweepBatches: Clone + Send + Sync + 'static {
    /// Deletes at most `batch_size` expired records (at least one), without waiting on a row a
    /// request holds, and answers how many it deleted.
    fn sweep_batch(&self, batch_size: u32) -> impl Future<Output = Result<u64, StoreError>> + Send;
}

/// Deletes every expired record of `store`, `batch_size` per batch, and answers how many: for
/// a schedule of the service's own. Records that expire while it runs may be left for the next
/// sweep.
pub async fn sweep_all(store: &impl SweepBatches, batch_size: u32) -> Result<u64, StoreError> {
    let batch_size = batch_size.max(1);
    let mut total = 0;
    loop {
        let deleted = store.sweep_batch(batch_size).await?;
        total += deleted;
        if deleted < u64::from(batch_size) {
            return Ok(total);
        }
    }
}

/// Sweeps `store` every `every` (first at once) in a background task, at `pace`, until the
/// handle is stopped or dropped: each batch deletes up to [`SweepPace::batch`] records, and is
/// followed by a rest of [`SweepPace::rest_after`] the time it took, until a batch finds fewer
/// records than it may delete. A failed sweep is logged and tried again at the next tick. A
/// stop request ends the sweep between batches or during a rest.
///
/// # Panics
///
/// Outside a tokio runtime.
pub fn spawn_sweeper(store: impl SweepBatches, every: Duration, pace: SweepPace) -> SweeperHandle {
    let (stop, mut stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let mut ticks = tokio::time::interval(every.max(Duration::from_millis(1)));
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = &mut stopped => return,
                _ = ticks.tick() => {}
            }
            match sweep_paced(&store, pace, &mut stopped).await {
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

/// One sweep of the background sweeper: batches at `pace` until one finds fewer records than
/// it may delete, or fails. Answers how many it deleted, or `None` when `stopped` fired (or
/// its sender was dropped) before the sweep ended.
async fn sweep_paced(
    store: &impl SweepBatches,
    pace: SweepPace,
    stopped: &mut oneshot::Receiver<()>,
) -> Option<u64> {
    let mut total = 0;
    loop {
        let started = Instant::now();
        match store.sweep_batch(pace.batch).await {
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

/// How a background sweeper ([`spawn_sweeper`]) paces itself: how many
/// records a batch deletes, and what fraction of the time it may spend deleting.
///
/// After each batch that found a full batch of expired records, the sweeper rests for the time
/// the batch took times `(1 - busy) / busy`: at the default `busy` of 1/10, a batch that took
/// 20 ms is followed by 180 ms of rest. So a sweep keeps one connection busy at most that
/// fraction of the time, however large the backlog, and a slower database (a busy one, whose
/// batches take longer) gets longer rests. [`rest_after`](Self::rest_after) is that rule.
///
/// The default keeps up with far more than a steady churn produces: a batch of 1,000 took
/// about 44 ms on a loaded shop (1 million rows in 44 s), so at a tenth of the time the
/// sweeper deletes about 2,300 records a second, where a 30-day window at 100 keyed requests
/// a second expires about 100 a second.
///
/// ```
/// use std::time::Duration;
/// use idem::store::sweep::SweepPace;
///
/// let pace = SweepPace::default();
/// assert_eq!(pace.batch_size(), 1000);
/// assert_eq!(pace.rest_after(Duration::from_millis(20)), Duration::from_millis(180));
///
/// // As fast as the database allows: no rest at all.
/// let flat_out = SweepPace::default().busy(1.0)?;
/// assert_eq!(flat_out.rest_after(Duration::from_millis(20)), Duration::ZERO);
/// # Ok::<(), idem::store::sweep::SweepPaceError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[must_use]
pub struct SweepPace {
    batch: u32,
    busy: f64,
}

impl SweepPace {
    /// The default batch: a thousand records.
    pub const DEFAULT_BATCH: u32 = 1000;

    /// The default busy fraction: a tenth of the time.
    pub const DEFAULT_BUSY: f64 = 0.1;

    /// The records one batch deletes at most (one statement, one commit); zero counts as one.
    /// Smaller batches hold their row locks and their share of WAL for less time each;
    /// larger ones pay less per record for the statement. The default is
    /// [`DEFAULT_BATCH`](Self::DEFAULT_BATCH).
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
    /// use idem::store::sweep::SweepPace;
    ///
    /// let quarter = SweepPace::default().busy(0.25)?;
    /// assert_eq!(quarter.rest_after(Duration::from_millis(10)), Duration::from_millis(30));
    /// # Ok::<(), idem::store::sweep::SweepPaceError>(())
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
            batch: Self::DEFAULT_BATCH,
            busy: Self::DEFAULT_BUSY,
        }
    }
}

/// A [`SweepPace`] setting out of range.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum SweepPaceError {
    /// The busy fraction is not in `(0, 1]`.
    Busy(f64),
}

impl fmt::Display for SweepPaceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Busy(fraction) => {
                write!(
                    f,
                    "the sweeper's busy fraction must be in (0, 1], not {fraction}"
                )
            }
        }
    }
}

impl std::error::Error for SweepPaceError {}

/// A background sweeper ([`spawn_sweeper`]). Dropping it stops the sweeper (after the batch
/// it is running, or at once when it rests).
///
/// ```no_run
/// # async fn run(store: idem::postgres::PostgresStore) {
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
        assert_eq!(pace.batch_size(), SweepPace::DEFAULT_BATCH);
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
