//! A whole gRPC response as the flow stores it, and back.
//!
//! The flow keeps a response as a status, headers and one body. A gRPC response is a head
//! (its initial metadata), its message frames, and trailers that carry the status
//! (`grpc-status`, `grpc-message`, `grpc-status-details-bin`) and the trailing metadata; an
//! error is often a head alone ("trailers-only"). [`flatten`] stores the frames and then the
//! trailers as gRPC-Web's trailers frame, under the HTTP status the gRPC code stands for, so
//! that the flow's rules (a 5xx releases the key unless the policy stores server errors) read
//! the code. [`Record`] splits a flattened response again, to send it (the layer) or to hand
//! it to a method as its `Result` (the attribute); the head says `idempotent-replayed: true`
//! on a replay, as the flow's replay adds it.

use std::{
    convert::Infallible,
    pin::Pin,
    task::{Context, Poll},
};

use axum::{body::Body, response::Response};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode, header, response::Parts};
use http_body::Frame;
use http_body_util::BodyExt;
use tonic::{Code, Status, metadata::MetadataMap};

use super::{frame, status};
use crate::replay::NoStore;

/// Marks the flattened response of a handler that ran for this call, as opposed to a replay.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FirstRun;

/// A gRPC response as one response the flow can capture, store and replay.
pub(crate) fn flatten(mut head: Parts, data: Bytes, trailers: Option<HeaderMap>) -> Response {
    let code = grpc_code(trailers.as_ref().unwrap_or(&head.headers));
    head.status = status::http_status(code);
    head.extensions.insert(FirstRun);
    if !status::is_result(code) {
        head.extensions.insert(NoStore);
    }
    let body = match &trailers {
        Some(trailers) => frame::with_trailers(&data, trailers),
        None => data,
    };
    Response::from_parts(head, Body::from(body))
}

/// A method's `Result`, as tonic would send it, flattened.
pub(crate) fn of_result<R: prost::Message>(
    result: &Result<tonic::Response<R>, Status>,
) -> Response {
    match result {
        Ok(response) => {
            let mut head = Response::new(()).into_parts().0;
            head.headers = response.metadata().clone().into_headers();
            head.headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/grpc"),
            );
            let mut trailers = HeaderMap::new();
            trailers.insert(Status::GRPC_STATUS, HeaderValue::from(0));
            let data = frame::encode(&response.get_ref().encode_to_vec());
            flatten(head, data, Some(trailers))
        }
        Err(status) => {
            let (head, ()) = status.clone().into_http::<()>().into_parts();
            flatten(head, Bytes::new(), None)
        }
    }
}

/// The code a head or trailers carry; `UNKNOWN` without one, as a client would read it.
fn grpc_code(headers: &HeaderMap) -> Code {
    headers
        .get(Status::GRPC_STATUS)
        .map_or(Code::Unknown, |value| Code::from_bytes(value.as_bytes()))
}

/// A flattened response split again.
#[derive(Debug)]
pub(crate) struct Record {
    head: Parts,
    data: Bytes,
    trailers: Option<HeaderMap>,
}

impl Record {
    /// Reads `answer`, a flattened response (the handler's, or its replay); `None` when it is
    /// not one.
    pub(crate) async fn read(answer: Response) -> Option<Self> {
        let (mut head, body) = answer.into_parts();
        let body = body.collect().await.ok()?.to_bytes();
        let (data, trailers) = frame::split(&body)?;
        head.status = StatusCode::OK;
        head.headers.remove(header::CONTENT_LENGTH);
        Some(Self {
            head,
            data,
            trailers,
        })
    }

    /// The response as gRPC sends it: the head, the message frames, the trailers.
    pub(crate) fn into_http(self) -> Response {
        let body = Whole {
            data: Some(self.data).filter(|data| !data.is_empty()),
            trailers: self.trailers,
        };
        Response::from_parts(self.head, Body::new(body))
    }

    /// The response as a method's `Result`: its message decoded as `R`, or its status.
    pub(crate) fn into_result<R: prost::Message + Default>(
        self,
    ) -> Result<tonic::Response<R>, Status> {
        let Self {
            head,
            data,
            trailers,
        } = self;
        let status_headers = trailers.as_ref().unwrap_or(&head.headers);
        if !decodable_details(status_headers) {
            return Err(undecodable("its status details"));
        }
        let status = Status::from_header_map(status_headers)
            .unwrap_or_else(|| Status::unknown("the stored response has no grpc-status"));
        if status.code() != Code::Ok {
            return Err(status);
        }
        let message = frame::single_message(&data, usize::MAX)
            .ok()
            .and_then(|message| R::decode(message).ok())
            .ok_or_else(|| undecodable("its message"))?;
        Ok(tonic::Response::from_parts(
            MetadataMap::from_headers(head.headers),
            message,
            head.extensions,
        ))
    }
}

/// tonic panics on details that are not base64; a record that does not decode is an error
/// of its request, never a panic.
fn decodable_details(headers: &HeaderMap) -> bool {
    headers
        .get(Status::GRPC_STATUS_DETAILS)
        .is_none_or(|value| {
            value
                .as_bytes()
                .iter()
                .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'+' | b'/' | b'='))
        })
}

fn undecodable(what: &str) -> Status {
    tracing::error!(
        "idempotency: a stored gRPC response does not decode ({what}); was the method's \
         response type changed under its records?"
    );
    Status::internal(format!(
        "the stored response for this idempotency key does not decode ({what})"
    ))
}

/// A body of one data frame, then the trailers.
struct Whole {
    data: Option<Bytes>,
    trailers: Option<HeaderMap>,
}

impl http_body::Body for Whole {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        let frame = match this.data.take() {
            Some(data) => Some(Frame::data(data)),
            None => this.trailers.take().map(Frame::trailers),
        };
        Poll::Ready(frame.map(Ok))
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none() && self.trailers.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, PartialEq, prost::Message)]
    struct Reply {
        #[prost(string, tag = "1")]
        id: String,
    }

    #[tokio::test]
    async fn a_result_survives_the_store_form() {
        let mut response = tonic::Response::new(Reply { id: "p1".into() });
        response
            .metadata_mut()
            .insert("x-note", "kept".parse().unwrap());
        let flat = of_result(&Ok(response));
        assert_eq!(flat.status(), StatusCode::OK);
        let record = Record::read(flat).await.unwrap();
        let again: tonic::Response<Reply> = record.into_result().unwrap();
        assert_eq!(again.get_ref().id, "p1");
        assert_eq!(again.metadata().get("x-note").unwrap(), "kept");
    }

    #[tokio::test]
    async fn an_error_keeps_its_code_and_a_server_error_releases_by_status() {
        let flat = of_result::<Reply>(&Err(Status::not_found("no such payment")));
        assert_eq!(flat.status(), StatusCode::NOT_FOUND);
        assert!(flat.extensions().get::<NoStore>().is_none());
        let error = Record::read(flat)
            .await
            .unwrap()
            .into_result::<Reply>()
            .unwrap_err();
        assert_eq!(error.code(), Code::NotFound);
        assert_eq!(error.message(), "no such payment");
        let internal = of_result::<Reply>(&Err(Status::internal("boom")));
        assert!(internal.status().is_server_error());
        let aborted = of_result::<Reply>(&Err(Status::aborted("retry")));
        assert!(aborted.extensions().get::<NoStore>().is_some());
    }
}
