//! [`RequestFuture`]: the future of a request the runtime takes through its flow, which keeps
//! running when its caller stops waiting for it.
//!
//! hyper drops a request's future when its client disconnects. A request whose key the
//! runtime claimed must not stop with it: half an operation and no stored result would leave
//! the client's retry with nothing to find, and a claim on its way to the store would leave its
//! key blocked. Spawning every request into a task of its own would protect it, at the price of
//! a task and a cross-thread wake-up on every request. Instead the whole flow is polled inline,
//! in the request's own task, and moved into a spawned task only when the request is dropped
//! before it finished: the common case pays for nothing but the one box the future is in, which
//! a tower service or an axum handler needs anyway.

use std::{
    fmt,
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

use crate::tasks::{Running, Tasks};
use axum::response::Response;

type BoxedFlow = Pin<Box<dyn Future<Output = Response> + Send>>;

/// The future of a request that an idempotent handler or `IdempotencyLayer` answers. It polls
/// the request's flow inline; dropped before it finished, it spawns the rest of the flow on
/// the runtime, which [`Idempotency::shutdown`](crate::runtime::Idempotency::shutdown) waits for (a
/// safe method that the layer lets through is cancelled with its caller instead).
#[must_use = "futures do nothing unless polled"]
pub struct RequestFuture {
    future: Option<BoxedFlow>,
    /// Counts the request as running on the tracker, inline and then in its task, so that
    /// shutdown waits for it and [`Tasks::len`] counts it once throughout. `None` for a
    /// request that is cancelled with its caller.
    running: Option<Running>,
}

impl RequestFuture {
    /// A flow that finishes even if its caller goes away.
    pub(crate) fn detachable(
        future: impl Future<Output = Response> + Send + 'static,
        tasks: &Tasks,
    ) -> Self {
        Self {
            future: Some(Box::pin(future)),
            running: Some(tasks.running()),
        }
    }

    /// A future that is cancelled with its caller, as a plain handler's is (a safe method
    /// that the layer lets through).
    pub(crate) fn cancellable(future: impl Future<Output = Response> + Send + 'static) -> Self {
        Self {
            future: Some(Box::pin(future)),
            running: None,
        }
    }
}

impl Future for RequestFuture {
    type Output = Response;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Response> {
        let future = self.future.as_mut().expect("polled after completion");
        let output = std::task::ready!(future.as_mut().poll(cx));
        self.future = None;
        self.running = None;
        Poll::Ready(output)
    }
}

impl Drop for RequestFuture {
    fn drop(&mut self) {
        let (Some(future), Some(running)) = (self.future.take(), self.running.take()) else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                // The task takes the inline run's token over rather than counting itself
                // anew, so the count never reads two for one request.
                runtime.spawn(async move {
                    let _running = running;
                    drop(future.await);
                });
            }
            // Dropped outside a runtime: the runtime itself is gone, and the work with it.
            Err(_) => tracing::error!(
                "idempotency: a request in progress was dropped outside a tokio runtime"
            ),
        }
    }
}

impl fmt::Debug for RequestFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestFuture")
            .field("finished", &self.future.is_none())
            .field("detachable", &self.running.is_some())
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

    use axum::response::IntoResponse;

    use super::*;

    #[tokio::test]
    async fn runs_inline_to_completion() {
        let tasks = Tasks::new();
        let response = RequestFuture::detachable(async { "done".into_response() }, &tasks).await;
        assert_eq!(response.status(), 200);
        assert_eq!(tasks.len(), 0);
    }

    fn slow(finished: &Arc<AtomicBool>) -> impl Future<Output = Response> + Send + 'static {
        let finished = Arc::clone(finished);
        async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            finished.store(true, Ordering::SeqCst);
            ().into_response()
        }
    }

    #[tokio::test]
    async fn finishes_in_a_task_of_its_own_when_dropped_midway() {
        let tasks = Tasks::new();
        let finished = Arc::new(AtomicBool::new(false));
        let inline = RequestFuture::detachable(slow(&finished), &tasks);
        assert_eq!(tasks.len(), 1, "counted while inline");
        let _ = tokio::time::timeout(Duration::from_millis(5), inline).await;
        assert_eq!(tasks.len(), 1, "counted once detached, never twice");
        tasks.close();
        tasks.wait().await;
        assert!(finished.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn a_cancellable_one_stops_with_its_caller() {
        let finished = Arc::new(AtomicBool::new(false));
        let cancellable = RequestFuture::cancellable(slow(&finished));
        let _ = tokio::time::timeout(Duration::from_millis(5), cancellable).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!finished.load(Ordering::SeqCst));
    }
}
