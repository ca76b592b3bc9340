//! [`Gate`]: holds the handlers of a test at one point until the test lifts it, and tells the
//! test when one has got there, so that what happens while a request is in flight is set up
//! by the test's own steps rather than by sleeping.

use std::{sync::Arc, time::Duration};

use tokio::sync::Semaphore;

/// A gate handlers pass through; cloning it shares it.
///
/// ```
/// use std::time::Duration;
///
/// use idem_tests::gate::Gate;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let gate = Gate::closed();
/// let handler = tokio::spawn({
///     let gate = gate.clone();
///     async move { gate.pass().await }
/// });
/// gate.arrival(Duration::from_secs(10)).await; // the handler waits at the gate
/// gate.lift();
/// handler.await.unwrap();
/// # });
/// ```
#[derive(Clone, Debug)]
pub struct Gate {
    passage: Arc<Semaphore>,
    arrivals: Arc<Semaphore>,
}

impl Gate {
    /// A gate that holds every handler until [`lift`](Self::lift).
    pub fn closed() -> Self {
        Self::with_passage(0)
    }

    /// A gate that lets every handler through (and still counts arrivals).
    pub fn open() -> Self {
        Self::with_passage(Semaphore::MAX_PERMITS)
    }

    fn with_passage(permits: usize) -> Self {
        Self {
            passage: Arc::new(Semaphore::new(permits)),
            arrivals: Arc::new(Semaphore::new(0)),
        }
    }

    /// Lets every handler through, those waiting and those to come.
    pub fn lift(&self) {
        // Half the maximum: a gate made open may be lifted without overflowing.
        self.passage.add_permits(Semaphore::MAX_PERMITS / 2);
    }

    /// Called by a handler: says it arrived, and waits until the gate lets it through.
    pub async fn pass(&self) {
        self.arrivals.add_permits(1);
        let _passage = self
            .passage
            .acquire()
            .await
            .expect("the gate is never closed for good");
    }

    /// Waits until one more handler has arrived, for at most `within`; fails the test
    /// rather than hang it.
    pub async fn arrival(&self, within: Duration) {
        tokio::time::timeout(within, self.arrivals.acquire())
            .await
            .expect("a handler arrives at the gate")
            .expect("the gate is never closed for good")
            .forget();
    }
}
