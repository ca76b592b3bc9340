//! Refusing a connection the shop will not serve, so that the client reads why.
//!
//! A refused connection gets one answer: `503` Problem Details ([`unavailable`]) with
//! `Retry-After: 1` and `Connection: close`. hyper reads the request head and writes the answer
//! (the service never looks at the request); the shop then closes the connection in two stages,
//! as RFC 9112 §9.6 asks: it ends its own side, and reads and discards what the client still
//! sends (the body of a POST, say) until the client closes. Closing at once, with bytes of the
//! request unread, makes the kernel answer with a reset, which a client can see instead of the
//! answer: one still writing its body gets a broken pipe, and one reading may lose what it has
//! not read yet.
//!
//! All of it, from the refusal to the close, takes at most [`REFUSAL_TIME`]: a client that
//! sends no request head within it is closed without an answer, and one that keeps sending is
//! closed then.
//!
//! [`unavailable`]: crate::problem::ShopProblemKind::Unavailable

use std::{convert::Infallible, future::ready, io, time::Duration};

use axum::{
    http::{HeaderValue, header},
    response::{IntoResponse, Response},
};
use hyper::{body::Incoming, server::conn::http1, service::service_fn};
use hyper_util::rt::TokioIo;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

use crate::problem::{ShopProblem, ShopProblemKind};

/// How long a refused connection may stay open: to read its request head, answer it, and wait
/// for the client to close.
pub const REFUSAL_TIME: Duration = Duration::from_secs(2);

/// Why a connection is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Refusal {
    /// Every slot stayed taken while the connection waited this long in the queue.
    QueueTimedOut { waited: Duration },
    /// Every slot was taken, and the queue full.
    QueueFull,
    /// The shop is shutting down.
    ShuttingDown,
}

impl Refusal {
    /// The answer a refused request gets.
    fn answer(self) -> Response {
        let detail = match self {
            Self::QueueTimedOut { waited } => format!(
                "the shop is serving as many connections as it takes, and none came free \
                 within {} ms; nothing was run: retry after the time in Retry-After",
                waited.as_millis()
            ),
            Self::QueueFull => "the shop is serving as many connections as it takes, and as \
                                many more are waiting; nothing was run: retry after the time \
                                in Retry-After"
                .to_owned(),
            Self::ShuttingDown => "the shop is shutting down; nothing was run: retry after the \
                                   time in Retry-After, on this shop once it is back or on another"
                .to_owned(),
        };
        let mut answer = ShopProblem::new(ShopProblemKind::Unavailable, detail).into_response();
        answer
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        answer
    }
}

/// Answers every request on `socket` with `refusal`'s `503`, then closes it without a reset,
/// all within [`REFUSAL_TIME`].
pub(super) async fn refuse(socket: TcpStream, refusal: Refusal) {
    match tokio::time::timeout(REFUSAL_TIME, answer_then_close(socket, refusal)).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => tracing::debug!(%error, "a refused connection ended with an error"),
        Err(_) => tracing::debug!("closing a refused connection that took too long"),
    }
}

async fn answer_then_close(socket: TcpStream, refusal: Refusal) -> io::Result<()> {
    let service = service_fn(move |_request: hyper::Request<Incoming>| {
        ready(Ok::<_, Infallible>(refusal.answer()))
    });
    let mut http = http1::Builder::new();
    // One answer, then the end; the whole exchange is bounded by `REFUSAL_TIME` instead of
    // hyper's header-read timer.
    http.keep_alive(false).header_read_timeout(None);
    let parts = http
        .serve_connection(TokioIo::new(socket), service)
        .without_shutdown()
        .await
        .map_err(io::Error::other)?;
    close_after_reading(parts.io.into_inner()).await
}

/// Ends the shop's side of `socket`, then reads and discards until the client closes its own,
/// so that nothing is left unread when the socket closes.
async fn close_after_reading(mut socket: TcpStream) -> io::Result<()> {
    socket.shutdown().await?;
    let mut discarded = [0; 8192];
    while socket.read(&mut discarded).await? > 0 {}
    Ok(())
}

#[cfg(test)]
mod tests {
    use axum::body::to_bytes;
    use serde_json::Value;

    use super::*;

    async fn body(answer: Response) -> Value {
        serde_json::from_slice(&to_bytes(answer.into_body(), 4096).await.unwrap()).unwrap()
    }

    #[tokio::test]
    async fn a_refusal_is_503_problem_details_that_says_when_to_come_back() {
        for (refusal, says) in [
            (
                Refusal::QueueTimedOut {
                    waited: Duration::from_secs(1),
                },
                "none came free within 1000 ms",
            ),
            (Refusal::QueueFull, "as many more are waiting"),
            (Refusal::ShuttingDown, "shutting down"),
        ] {
            let answer = refusal.answer();
            assert_eq!(answer.status(), 503);
            let headers = answer.headers();
            assert_eq!(headers[header::CONTENT_TYPE], "application/problem+json");
            assert_eq!(headers[header::RETRY_AFTER], "1");
            assert_eq!(headers[header::CONNECTION], "close");
            let problem = body(answer).await;
            assert!(
                problem["type"].as_str().unwrap().ends_with("#unavailable"),
                "{problem}"
            );
            assert!(
                problem["detail"].as_str().unwrap().contains(says),
                "{problem}"
            );
        }
    }
}
