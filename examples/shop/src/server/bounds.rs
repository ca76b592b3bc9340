//! Which connections the shop serves, which wait for a slot, and which it refuses.
//!
//! Three bounds, three semaphores:
//!
//! - a *slot* is a connection being served: at most [`ConnectionLimits::max_connections`];
//! - a *turn in the queue* is a connection waiting for a slot, for at most
//!   [`ConnectionLimits::queue_timeout`]: at most [`ConnectionLimits::max_queued`];
//! - a *place* is any connection the process holds, served, waiting or being refused: at most
//!   [`ConnectionLimits::max_open`], as many as the slots and the turns, and as many again as
//!   the turns, so that refusals have room of their own.
//!
//! The accept loop takes a place before it accepts, so the process never holds more sockets
//! than that. An accepted connection is served at once if a slot is free; otherwise it waits in
//! the queue if there is room, first come first served; otherwise, or if no slot frees in time,
//! or if the shop starts shutting down meanwhile, it is refused. A refusal takes milliseconds for
//! a client that reads its answer and closes, and at most
//! [`REFUSAL_TIME`](super::refusal::REFUSAL_TIME) for any other, so places come free even in a
//! flood, and connections past them wait in the kernel's accept queue for seconds at most.

use std::{sync::Arc, time::Duration};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};

use super::{ConnectionLimits, refusal::Refusal};

/// The bounds of the shop's connections.
#[derive(Clone, Debug)]
pub(super) struct ConnectionBounds {
    places: Arc<Semaphore>,
    slots: Arc<Semaphore>,
    queue: Arc<Semaphore>,
    queue_timeout: Duration,
}

/// A connection's claim on the process's sockets, from its accept to its close.
pub(super) type Place = OwnedSemaphorePermit;

/// A connection admitted to be served: its place and its slot, both freed when it is dropped.
#[derive(Debug)]
pub(super) struct Serving {
    _place: Place,
    _slot: OwnedSemaphorePermit,
}

/// What becomes of a connection that has just been accepted.
#[derive(Debug)]
pub(super) enum Arrival {
    /// A slot was free: serve it.
    Served(Serving),
    /// Every slot is taken, and the connection has a turn in the queue: [`ConnectionBounds::wait`].
    Queued(Place, OwnedSemaphorePermit),
    /// Every slot is taken and the queue is full.
    Refused(Place, Refusal),
}

impl ConnectionBounds {
    /// The bounds of `limits`.
    pub(super) fn new(limits: &ConnectionLimits) -> Self {
        Self {
            places: Arc::new(Semaphore::new(limits.max_open())),
            slots: Arc::new(Semaphore::new(limits.max_connections)),
            queue: Arc::new(Semaphore::new(limits.max_queued())),
            queue_timeout: limits.queue_timeout,
        }
    }

    /// Waits until the process may hold one more connection.
    pub(super) async fn place(&self) -> Place {
        Arc::clone(&self.places)
            .acquire_owned()
            .await
            .expect("the semaphore is never closed")
    }

    /// What becomes of the connection that holds `place`, as things stand. A slot that comes
    /// free goes to the connections already queued before this call can see it.
    pub(super) fn arrive(&self, place: Place) -> Arrival {
        if let Ok(slot) = Arc::clone(&self.slots).try_acquire_owned() {
            return Arrival::Served(Serving {
                _place: place,
                _slot: slot,
            });
        }
        match Arc::clone(&self.queue).try_acquire_owned() {
            Ok(turn) => Arrival::Queued(place, turn),
            Err(_) => Arrival::Refused(place, Refusal::QueueFull),
        }
    }

    /// Waits for a slot for the queued connection that holds `place` and `turn`, for at most
    /// the queue timeout, and only while `stopping` says the shop is not shutting down.
    pub(super) async fn wait(
        &self,
        place: Place,
        turn: OwnedSemaphorePermit,
        mut stopping: watch::Receiver<bool>,
    ) -> Result<Serving, (Place, Refusal)> {
        let _turn = turn;
        tokio::select! {
            // A shutdown that has begun wins over a slot that came free at the same time.
            biased;
            _ = stopping.wait_for(|&stopping| stopping) => Err((place, Refusal::ShuttingDown)),
            slot = Arc::clone(&self.slots).acquire_owned() => Ok(Serving {
                _place: place,
                _slot: slot.expect("the semaphore is never closed"),
            }),
            () = tokio::time::sleep(self.queue_timeout) => Err((
                place,
                Refusal::QueueTimedOut { waited: self.queue_timeout },
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const QUEUE: Duration = Duration::from_secs(1);
    const LONG: Duration = Duration::from_secs(60);

    fn admission(max_connections: usize) -> ConnectionBounds {
        ConnectionBounds::new(&ConnectionLimits {
            max_connections,
            queue_timeout: QUEUE,
            ..ConnectionLimits::default()
        })
    }

    fn running() -> (watch::Sender<bool>, watch::Receiver<bool>) {
        watch::channel(false)
    }

    #[tokio::test(start_paused = true)]
    async fn the_bound_is_served_then_a_quarter_queues_and_the_rest_is_refused() {
        let admission = admission(8);
        let mut arrivals = Vec::new();
        for _ in 0..12 {
            arrivals.push(admission.arrive(admission.place().await));
        }
        let count = |kind: fn(&Arrival) -> bool| arrivals.iter().filter(|a| kind(a)).count();
        assert_eq!(count(|a| matches!(a, Arrival::Served(_))), 8);
        assert_eq!(count(|a| matches!(a, Arrival::Queued(..))), 2);
        assert_eq!(
            count(|a| matches!(a, Arrival::Refused(_, Refusal::QueueFull))),
            2
        );
        // Every place is taken: the next connection is not accepted until one frees.
        assert!(tokio::time::timeout(LONG, admission.place()).await.is_err());
        drop(arrivals.pop());
        let _place = tokio::time::timeout(LONG, admission.place())
            .await
            .expect("a place once a refused connection is closed");
    }

    #[tokio::test(start_paused = true)]
    async fn a_queued_connection_gets_the_first_slot_that_frees_within_the_queue_timeout() {
        let admission = admission(1);
        let (_stop, stopping) = running();
        let first = admission.arrive(admission.place().await);
        let Arrival::Queued(place, turn) = admission.arrive(admission.place().await) else {
            panic!("queued");
        };
        let waiter = tokio::spawn({
            let admission = admission.clone();
            async move { admission.wait(place, turn, stopping).await.is_ok() }
        });
        tokio::time::sleep(QUEUE - Duration::from_millis(1)).await;
        // A newcomer does not take the slot the queued connection waits for.
        drop(first);
        let newcomer = admission.arrive(admission.place().await);
        assert!(!matches!(newcomer, Arrival::Served(_)), "{newcomer:?}");
        assert!(waiter.await.unwrap(), "served");
    }

    #[tokio::test(start_paused = true)]
    async fn a_queued_connection_is_refused_after_the_queue_timeout() {
        let admission = admission(1);
        let (_stop, stopping) = running();
        let _first = admission.arrive(admission.place().await);
        let Arrival::Queued(place, turn) = admission.arrive(admission.place().await) else {
            panic!("queued");
        };
        let started = tokio::time::Instant::now();
        let refused = admission.wait(place, turn, stopping).await;
        assert!(matches!(
            refused,
            Err((_, Refusal::QueueTimedOut { waited: QUEUE }))
        ));
        assert_eq!(started.elapsed(), QUEUE);
        // Its turn is free again.
        let next = admission.arrive(admission.place().await);
        assert!(matches!(next, Arrival::Queued(..)), "{next:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_queued_connection_is_refused_when_the_shop_shuts_down() {
        let admission = admission(1);
        let (stop, stopping) = running();
        let first = admission.arrive(admission.place().await);
        let Arrival::Queued(place, turn) = admission.arrive(admission.place().await) else {
            panic!("queued");
        };
        let waiter = tokio::spawn({
            let admission = admission.clone();
            async move {
                let refused = admission.wait(place, turn, stopping).await;
                refused.err().map(|(_, why)| why)
            }
        });
        tokio::time::sleep(QUEUE / 2).await;
        stop.send_replace(true);
        // The slot that frees as the shop closes its connections is not given out any more.
        drop(first);
        assert_eq!(waiter.await.unwrap(), Some(Refusal::ShuttingDown));
    }
}
