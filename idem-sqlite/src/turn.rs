//! [`WriteTurns`]: this process's writes to the file, one at a time, in the order they ask.
//!
//! SQLite lets one connection write at a time, and a connection that finds the lock taken
//! waits in SQLite's busy handler, which sleeps and tries again at growing intervals (up to
//! 100 ms): whoever tries at the right moment wins, not whoever waited longest. Under load
//! from one process, with every pooled connection polling so, a write could wait a second
//! behind later ones, and fail at the busy timeout while the lock was busy only a millisecond
//! at a time. So the store's connections take turns first, in a fair queue of this process,
//! and only the one whose turn it is meets the busy handler, against other processes' writers
//! alone. A turn waits no longer than the busy timeout, as the lock itself would.

use std::{sync::Arc, time::Duration};

use tokio::sync::{Mutex, OwnedMutexGuard};

use idem_core::store::StoreError;

/// The queue of this process's writers to one file (shared by a store's clones).
#[derive(Debug)]
pub(crate) struct WriteTurns {
    turn: Arc<Mutex<()>>,
    patience: Duration,
}

/// A writer's turn: the file's write lock is this process's to take until it is dropped.
pub(crate) type Turn = OwnedMutexGuard<()>;

impl WriteTurns {
    /// Turns that wait at most `patience` (the busy timeout).
    pub(crate) fn new(patience: Duration) -> Self {
        Self {
            turn: Arc::default(),
            patience,
        }
    }

    /// Waits for this writer's turn.
    ///
    /// # Errors
    ///
    /// [`StoreError::Timeout`] when the writers before it held the turn longer than the busy
    /// timeout: nothing was written.
    pub(crate) async fn take(&self) -> Result<Turn, StoreError> {
        tokio::time::timeout(self.patience, Arc::clone(&self.turn).lock_owned())
            .await
            .map_err(|_| StoreError::Timeout(self.patience))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn turns_are_taken_one_at_a_time_and_a_long_wait_gives_up() {
        let turns = WriteTurns::new(Duration::from_millis(50));
        let first = turns.take().await.unwrap();
        assert!(matches!(turns.take().await, Err(StoreError::Timeout(_))));
        drop(first);
        assert!(turns.take().await.is_ok());
    }
}
