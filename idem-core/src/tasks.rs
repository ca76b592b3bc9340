//! Tasks the runtime waits for, and the signal that stops them: the two things of
//! `tokio-util` the runtime needs, kept here so that a service that adds idem does not build
//! `tokio-util` and the `futures` macros it brings for them.
//!
//! [`Tasks`] counts running work (spawned tasks, and requests polled inline that hold a
//! [`Running`] token) and lets a shutdown wait until it is closed and empty; [`Stop`] is a
//! flag that work can wait on.

use std::{
    future::Future,
    pin::pin,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
};

use tokio::{runtime::Handle, sync::Notify, task::JoinHandle};

/// Running work, counted; cheap to clone (all clones count the same work).
#[derive(Clone, Debug, Default)]
pub(crate) struct Tasks(Arc<Count>);

#[derive(Debug, Default)]
struct Count {
    running: AtomicUsize,
    closed: AtomicBool,
    /// Woken when the count reaches zero and when the tracker closes.
    changed: Notify,
}

/// One unit of running work: counted from its making to its drop.
#[derive(Debug)]
pub(crate) struct Running(Arc<Count>);

impl Drop for Running {
    fn drop(&mut self) {
        if self.0.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.changed.notify_waiters();
        }
    }
}

impl Tasks {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Counts one more unit of work until the token is dropped.
    pub(crate) fn running(&self) -> Running {
        self.0.running.fetch_add(1, Ordering::AcqRel);
        Running(Arc::clone(&self.0))
    }

    /// Spawns `work` on the current runtime, counted until it ends.
    pub(crate) fn spawn<F>(&self, work: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.spawn_on(work, &Handle::current())
    }

    /// Spawns `work` on `runtime`, counted until it ends.
    pub(crate) fn spawn_on<F>(&self, work: F, runtime: &Handle) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let running = self.running();
        runtime.spawn(async move {
            let output = work.await;
            drop(running);
            output
        })
    }

    /// The work running now.
    pub(crate) fn len(&self) -> usize {
        self.0.running.load(Ordering::Acquire)
    }

    /// Lets [`wait`](Self::wait) return once nothing runs.
    pub(crate) fn close(&self) {
        self.0.closed.store(true, Ordering::Release);
        self.0.changed.notify_waiters();
    }

    /// Undoes [`close`](Self::close): a runtime shared by two servers keeps working after the
    /// first shuts down.
    pub(crate) fn reopen(&self) {
        self.0.closed.store(false, Ordering::Release);
    }

    /// Waits until the tracker is closed and nothing runs.
    pub(crate) async fn wait(&self) {
        loop {
            // Registered before the check, so that a change between the two is not missed.
            let mut changed = pin!(self.0.changed.notified());
            changed.as_mut().enable();
            if self.0.closed.load(Ordering::Acquire) && self.len() == 0 {
                return;
            }
            changed.await;
        }
    }
}

/// A signal to stop, which work waits on; cheap to clone (all clones are one signal).
#[derive(Clone, Debug, Default)]
pub(crate) struct Stop(Arc<StopState>);

#[derive(Debug, Default)]
struct StopState {
    stopped: AtomicBool,
    signalled: Notify,
}

impl Stop {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Signals every waiter, now and later.
    pub(crate) fn stop(&self) {
        self.0.stopped.store(true, Ordering::Release);
        self.0.signalled.notify_waiters();
    }

    pub(crate) fn is_stopped(&self) -> bool {
        self.0.stopped.load(Ordering::Acquire)
    }

    /// Waits for the signal (at once if it was given).
    pub(crate) async fn stopped(&self) {
        loop {
            let mut signalled = pin!(self.0.signalled.notified());
            signalled.as_mut().enable();
            if self.is_stopped() {
                return;
            }
            signalled.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn wait_returns_once_closed_and_every_task_and_token_is_done() {
        let tasks = Tasks::new();
        let inline = tasks.running();
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        tasks.spawn(async move {
            let _ = released.await;
        });
        assert_eq!(tasks.len(), 2);
        tasks.close();
        let waiting = tokio::spawn({
            let tasks = tasks.clone();
            async move { tasks.wait().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "two units still run");
        drop(inline);
        release.send(()).unwrap();
        waiting.await.unwrap();
        assert_eq!(tasks.len(), 0);
    }

    #[tokio::test]
    async fn an_open_tracker_is_not_waited_out_even_when_empty() {
        let tasks = Tasks::new();
        let waited = tokio::time::timeout(Duration::from_millis(20), tasks.wait()).await;
        assert!(waited.is_err(), "wait returned before close");
        tasks.close();
        tasks.wait().await;
        tasks.reopen();
        assert!(
            tokio::time::timeout(Duration::from_millis(20), tasks.wait())
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn a_stop_reaches_those_waiting_and_those_who_come_later() {
        let stop = Stop::new();
        let waiting = tokio::spawn({
            let stop = stop.clone();
            async move { stop.stopped().await }
        });
        tokio::task::yield_now().await;
        assert!(!stop.is_stopped());
        stop.stop();
        waiting.await.unwrap();
        stop.stopped().await;
        assert!(stop.is_stopped());
    }
}
