//! The body limit a request was held to, so that a 413 can tell the client what it is.
//!
//! The limit is axum's `DefaultBodyLimit`: 2 MiB, unless a layer sets another or none. axum
//! keeps it in a request extension of a private type, which it applies
//! (`RequestExt::with_limited_body`) but lets nobody read. So, on the 413 path only, [`of`]
//! asks axum the one question it answers: does a body of this size pass? A binary search over
//! sizes finds the largest that does. The bodies are zeros sent as one static block as often
//! as needed, so a question costs no allocation, and a 2 MiB limit is found in about 20
//! questions of at most 32 frames each.

use std::{
    pin::Pin,
    task::{Context, Poll, Waker},
};

use axum::{RequestExt, body::Body, extract::Request};
use bytes::Bytes;
use http::Extensions;
use http_body::{Body as _, Frame};

/// One block of zeros, the frame the questions are made of.
static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];

/// Past this a limit is not worth stating (it would take long to find, and no body that
/// large was buffered anyway).
const LARGEST_STATED: usize = 1 << 30;

/// The largest body that the request with `extensions` may send, if it is at most 1 GiB.
pub(crate) fn of(extensions: &Extensions) -> Option<usize> {
    if passes(extensions, LARGEST_STATED + 1) {
        return None;
    }
    // `small` passes, `large` does not.
    let (mut small, mut large) = (0, LARGEST_STATED + 1);
    while large - small > 1 {
        let middle = small + (large - small) / 2;
        if passes(extensions, middle) {
            small = middle;
        } else {
            large = middle;
        }
    }
    Some(small)
}

/// Whether axum lets a body of `size` bytes through for a request with `extensions`.
fn passes(extensions: &Extensions, size: usize) -> bool {
    let mut request = Request::new(Body::new(Zeros { left: size }));
    *request.extensions_mut() = extensions.clone();
    let mut body = request.with_limited_body().into_body();
    let mut context = Context::from_waker(Waker::noop());
    loop {
        // `Zeros` is always ready, and so is the limit around it.
        match Pin::new(&mut body).poll_frame(&mut context) {
            Poll::Ready(None) => return true,
            Poll::Ready(Some(Ok(_))) => {}
            Poll::Ready(Some(Err(_))) | Poll::Pending => return false,
        }
    }
}

/// A body of `left` zero bytes, in frames of at most one block.
struct Zeros {
    left: usize,
}

impl http_body::Body for Zeros {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        let size = self.left.min(ZEROS.len());
        self.left -= size;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(&ZEROS[..size])))))
    }
}

#[cfg(test)]
mod tests {
    use axum::extract::DefaultBodyLimit;
    use tower::{Layer, Service, ServiceExt};

    use super::*;

    /// The extensions a request gets under `layer`.
    async fn extensions_under(layer: DefaultBodyLimit) -> Extensions {
        let capture = tower::service_fn(|request: Request| async move {
            Ok::<_, std::convert::Infallible>(request.extensions().clone())
        });
        let mut service = layer.layer(capture);
        let service = service.ready().await.unwrap();
        service.call(Request::new(Body::empty())).await.unwrap()
    }

    #[tokio::test]
    async fn finds_the_limit_a_layer_sets_and_axums_default() {
        for limit in [0, 1, 16 * 1024, 64 * 1024, 64 * 1024 + 1, 3_000_000] {
            let extensions = extensions_under(DefaultBodyLimit::max(limit)).await;
            assert_eq!(of(&extensions), Some(limit));
        }
        assert_eq!(
            of(&Extensions::new()),
            Some(2 * 1024 * 1024),
            "axum's default"
        );
    }

    #[tokio::test]
    async fn a_disabled_limit_is_none() {
        let extensions = extensions_under(DefaultBodyLimit::disable()).await;
        assert_eq!(of(&extensions), None);
    }
}
