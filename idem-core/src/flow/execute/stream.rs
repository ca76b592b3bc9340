//! Streaming a response to its first caller while capturing it.
//!
//! A handler whose body is not all there when it returns (a stream, server-sent events) must
//! not make its caller wait for the end: the head and the frames read so far go out at once,
//! and a task of the runtime's (tracked like a detached handler) reads the rest, hands each
//! frame on, and captures it. When the body ends, the task stores the record before it ends
//! the caller's body, so the last byte still arrives after the record is stored. A body that
//! grows past `max_stored_body` completes the key without it at that moment (a retry is
//! answered 410, the operation never runs again), and the rest only streams.
//!
//! If the caller disconnects, the task keeps reading while it still captures, so that the
//! result is stored for the retry; once it no longer captures it stops.
//!
//! A handler that has begun a transaction is never streamed: its response waits for the
//! commit, so that no caller sees a result that then rolls back.

use std::{
    collections::VecDeque,
    pin::Pin,
    task::{Context, Poll},
};

use axum::{body::Body, response::Response};
use bytes::Bytes;
use http_body::Frame;
use http_body_util::BodyExt;
use tokio::sync::mpsc;

use super::Execution;
use crate::{
    observe::Outcome,
    replay::{
        StoredResponse,
        capture::{BodyBuffer, Unfinished, storable_headers},
    },
};

/// How many frames may wait for a slow caller before the task waits too.
const IN_TRANSIT: usize = 16;

impl Execution {
    /// Answers with the head of `unfinished` at once; a task streams and captures the rest.
    pub(super) fn stream(self, unfinished: Unfinished) -> Response {
        let Unfinished { parts, read, rest } = unfinished;
        let (sender, receiver) = mpsc::channel(IN_TRANSIT);
        let sent: VecDeque<Bytes> = read.into_frames().collect();
        let mut captured = BodyBuffer::default();
        sent.iter().for_each(|data| captured.push(data.clone()));
        let headers = storable_headers(&parts.headers, &self.policy)
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        let status = parts.status;
        let tasks = self.idem.tasks().clone();
        tasks.spawn(async move {
            self.pump(rest, Some((captured, headers)), status, sender)
                .await;
        });
        Response::from_parts(parts, Body::new(Streamed { sent, receiver }))
    }

    /// Reads the handler's body to its end, hands each frame to the caller, and completes
    /// (or releases) the key.
    async fn pump(
        self,
        mut rest: Body,
        mut capture: Option<(BodyBuffer, http::HeaderMap)>,
        status: http::StatusCode,
        sender: mpsc::Sender<Result<Frame<Bytes>, axum::Error>>,
    ) {
        let heartbeat = self.heartbeat();
        tokio::pin!(heartbeat);
        let mut caller = Some(sender);
        loop {
            let frame = tokio::select! {
                biased;
                frame = rest.frame() => frame,
                never = &mut heartbeat, if capture.is_some() => match never {},
            };
            match frame {
                None => {
                    if let Some((body, headers)) = capture.take() {
                        let body = body.into_bytes();
                        let record = StoredResponse::encode(status, || headers.iter(), Some(&body));
                        if let Some(record) = self.storable(record).await {
                            self.complete_on_its_own(record).await;
                        }
                    }
                    // Dropping the sender ends the caller's body, after the record.
                    return;
                }
                Some(Err(error)) => {
                    if capture.take().is_some() {
                        self.record(
                            Outcome::Released,
                            &"the handler failed: its response body failed mid-stream",
                        );
                        self.release("released after its streamed body failed")
                            .await;
                    }
                    if let Some(caller) = caller.take() {
                        let _ = caller.send(Err(error)).await;
                    }
                    return;
                }
                Some(Ok(frame)) => {
                    if let (Some((body, _)), Some(data)) = (capture.as_mut(), frame.data_ref()) {
                        body.push(data.clone());
                        if body.len() > self.policy.max_stored_body {
                            capture = None;
                            self.complete_on_its_own(StoredResponse::omitted(status))
                                .await;
                        }
                    }
                    let gone = match &caller {
                        Some(sender) => sender.send(Ok(frame)).await.is_err(),
                        None => true,
                    };
                    if gone {
                        caller = None;
                        if capture.is_none() {
                            // Nobody to send it to, nothing to store.
                            return;
                        }
                    }
                }
            }
        }
    }
}

/// The caller's body: the frames read before the response was answered, then what the task
/// hands on.
struct Streamed {
    sent: VecDeque<Bytes>,
    receiver: mpsc::Receiver<Result<Frame<Bytes>, axum::Error>>,
}

impl http_body::Body for Streamed {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        if let Some(data) = self.sent.pop_front() {
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        self.receiver.poll_recv(cx)
    }
}
