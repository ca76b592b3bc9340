//! [`Detachable`]: a future that keeps running when its caller stops waiting for it.
//!
//! hyper drops a request's future when its client disconnects. A claimed request's handler
//! must not stop with it: half an operation and no stored result would leave the client's
//! retry with nothing to find. Spawning every handler into a task of its own would protect it,
//! at the price of a task and a cross-thread wake-up on every request. Instead the handler is
//! polled inline, in the request's own task, and moved into a spawned task only when the
//! request is dropped before it finished: the common case pays for nothing but a box.

use std::{
    fmt,
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

use tokio_util::task::{TaskTracker, task_tracker::TaskTrackerToken};

/// Polls `F` inline; on drop before completion, spawns the rest of it on the tracker.
pub(crate) struct Detachable<F: Future + Send + 'static> {
    future: Option<Pin<Box<F>>>,
    /// Counts the run as running on the tracker, inline and then in its task, so that
    /// shutdown waits for it and [`TaskTracker::len`] counts it once throughout.
    running: Option<TaskTrackerToken>,
}

impl<F: Future + Send + 'static> Detachable<F> {
    pub(crate) fn new(future: F, tasks: &TaskTracker) -> Self {
        Self {
            future: Some(Box::pin(future)),
            running: Some(tasks.token()),
        }
    }
}

impl<F: Future + Send + 'static> Future for Detachable<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let future = self.future.as_mut().expect("polled after completion");
        let output = std::task::ready!(future.as_mut().poll(cx));
        self.future = None;
        Poll::Ready(output)
    }
}

impl<F: Future + Send + 'static> Drop for Detachable<F> {
    fn drop(&mut self) {
        let (Some(future), running) = (self.future.take(), self.running.take()) else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                // The task takes the inline run's token over rather than counting itself
                // anew, so the count never reads two for one run.
                runtime.spawn(async move {
                    let _running = running;
                    drop(future.await);
                });
            }
            // Dropped outside a runtime: the runtime itself is gone, and the work with it.
            Err(_) => tracing::error!(
                "idempotency: a running handler was dropped outside a tokio runtime"
            ),
        }
    }
}

impl<F: Future + Send + 'static> fmt::Debug for Detachable<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Detachable")
            .field("finished", &self.future.is_none())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::{
        sync::{
            Arc,
            atomic::{AtomicBool, Ordering},
        },
        time::Duration,
    };

    use super::*;

    #[tokio::test]
    async fn runs_inline_to_completion() {
        let tasks = TaskTracker::new();
        assert_eq!(Detachable::new(async { 7 }, &tasks).await, 7);
        assert!(tasks.is_empty());
    }

    #[tokio::test]
    async fn finishes_in_a_task_of_its_own_when_dropped_midway() {
        let tasks = TaskTracker::new();
        let finished = Arc::new(AtomicBool::new(false));
        let work = {
            let finished = Arc::clone(&finished);
            async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                finished.store(true, Ordering::SeqCst);
            }
        };
        let inline = Detachable::new(work, &tasks);
        assert_eq!(tasks.len(), 1, "counted while inline");
        let _ = tokio::time::timeout(Duration::from_millis(5), inline).await;
        assert_eq!(tasks.len(), 1, "counted once detached, never twice");
        tasks.close();
        tasks.wait().await;
        assert!(finished.load(Ordering::SeqCst));
    }
}
