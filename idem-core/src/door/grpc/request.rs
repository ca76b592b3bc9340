//! A unary call before the flow: its body read whole (bounded), checked to be the one
//! uncompressed message a unary method takes, its key found (the `idempotency-key`
//! metadata, or a field of the message), and presented to the flow as a request.
//!
//! Every refusal here comes before the claim: nothing is claimed, nothing stored, and the
//! handler does not run.

use std::{convert::Infallible, sync::Arc};

use axum::{body::Body, extract::DefaultBodyLimit, extract::Request};
use bytes::{Bytes, BytesMut};
use http::{HeaderMap, HeaderValue, header};
use http_body_util::BodyExt;
use tonic::{Code, Status};
use tower_layer::Layer;
use tower_service::Service;

use super::{frame, status};
use crate::{
    door::presented::{self, IDEMPOTENCY_KEY},
    problem::{Problem, ProblemKind},
    runtime::Idempotency,
};

/// Reads a message's key (AIP-155's `request_id`) from its encoded bytes: `None` when the
/// message has none (an empty string, proto3's default).
pub(crate) type ReadKey =
    Arc<dyn Fn(&[u8]) -> Result<Option<String>, prost::DecodeError> + Send + Sync>;

/// A refusal before the flow, as the status the client gets.
pub(crate) fn refused(idem: &Idempotency, kind: ProblemKind, detail: String) -> Status {
    status::from_problem(&idem.problem(kind, detail), None)
}

/// Refuses a compressed request message: the door must see the message as its client
/// encoded it, to read its key and fingerprint it. gRPC's answer to an encoding the server
/// does not take is `UNIMPLEMENTED` with the encodings it does.
pub(crate) fn compression(headers: &HeaderMap) -> Result<(), Status> {
    match headers.get("grpc-encoding") {
        None => Ok(()),
        Some(encoding) if encoding == "identity" => Ok(()),
        Some(encoding) => {
            let mut status = Status::unimplemented(format!(
                "this method is idempotent, and takes its request message uncompressed; \
                 the message was sent with grpc-encoding {encoding:?}"
            ));
            status
                .metadata_mut()
                .insert("grpc-accept-encoding", "identity".parse().expect("ASCII"));
            Err(status)
        }
    }
}

/// The whole body of a unary call, reading no further than a message of `limit` bytes
/// needs: a message declared longer is refused as soon as its prefix is read.
pub(crate) async fn whole_body(
    idem: &Idempotency,
    body: Body,
    limit: usize,
) -> Result<Bytes, Status> {
    let mut body = body;
    let mut read = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|error| {
            refused(
                idem,
                ProblemKind::BodyUnreadable,
                format!("the request message could not be read to its end: {error}"),
            )
        })?;
        if let Ok(data) = frame.into_data() {
            read.extend_from_slice(&data);
        }
        if let Some(length) = frame::declared_length(&read) {
            if length > limit {
                return Err(too_large(idem, length, limit));
            }
            // One byte past the message is enough to know that a second one follows.
            if read.len() > frame::PREFIX + length {
                break;
            }
        }
    }
    Ok(read.freeze())
}

fn too_large(idem: &Idempotency, length: usize, limit: usize) -> Status {
    refused(
        idem,
        ProblemKind::BodyTooLarge,
        format!("the request message is {length} bytes, over this method's limit of {limit}"),
    )
}

/// The one message of `body`, or the status gRPC gives a body that is not one.
pub(crate) fn message<'a>(
    idem: &Idempotency,
    body: &'a [u8],
    limit: usize,
) -> Result<&'a [u8], Status> {
    frame::single_message(body, limit).map_err(|error| match error {
        frame::FrameError::TooLarge(length) => too_large(idem, length, limit),
        // gRPC: a unary method takes exactly one message ("request cardinality violation").
        frame::FrameError::Empty => Status::unimplemented("a unary call needs one request message; it had none"),
        frame::FrameError::Several => Status::unimplemented("a unary call takes one request message; it had several"),
        frame::FrameError::Truncated => Status::internal("the request message ends before its declared length"),
        frame::FrameError::Compressed => Status::internal(
            "protocol error: the request message is compressed (or flagged as it) without a grpc-encoding",
        ),
    })
}

/// The status gRPC servers answer a message that does not decode with.
pub(crate) fn undecodable() -> Status {
    Status::new(Code::Internal, "failed to decode the request message")
}

/// Whether `message` is a well-formed protobuf encoding: its fields' tags, lengths and
/// groups hold together. What a door that does not know the message's type can check before
/// the claim; the type's own decoder checks the rest after it.
pub(crate) fn well_formed(mut message: &[u8]) -> bool {
    let mut groups = Vec::new();
    while !message.is_empty() {
        let Some(tag) = varint(&mut message) else {
            return false;
        };
        let (number, wire_type) = (tag >> 3, tag & 7);
        if number == 0 {
            return false;
        }
        let skip = match wire_type {
            0 => varint(&mut message).map(|_| 0),
            1 => Some(8),
            2 => varint(&mut message).and_then(|length| usize::try_from(length).ok()),
            3 => {
                groups.push(number);
                Some(0)
            }
            4 if groups.pop() == Some(number) => Some(0),
            5 => Some(4),
            _ => None,
        };
        match skip {
            Some(skip) if skip <= message.len() => message = &message[skip..],
            _ => return false,
        }
    }
    groups.is_empty()
}

fn varint(bytes: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for (index, byte) in bytes.iter().enumerate().take(10) {
        value |= u64::from(byte & 0x7f) << (7 * index);
        if byte & 0x80 == 0 {
            *bytes = &bytes[index + 1..];
            return Some(value);
        }
    }
    None
}

/// The key the flow reads: the `idempotency-key` metadata when the call has it, else the
/// message's own (`read`), as an sf-string. A key from the message that no header can carry
/// is refused as malformed.
pub(crate) fn key(
    idem: &Idempotency,
    headers: &HeaderMap,
    from_message: Option<String>,
) -> Result<Option<HeaderValue>, Status> {
    if let Some(value) = headers.get(IDEMPOTENCY_KEY) {
        return Ok(Some(value.clone()));
    }
    let Some(key) = from_message.filter(|key| !key.is_empty()) else {
        return Ok(None);
    };
    presented::key_header(&key).map(Some).ok_or_else(|| {
        refused(
            idem,
            ProblemKind::KeyMalformed,
            "the request's id has characters a key cannot have: keys are 1 to 255 characters \
             of visible ASCII"
                .to_owned(),
        )
    })
}

/// The presented request as the flow takes it: its route is the method's path, not the
/// pattern a router matched on its way in (tonic's `Routes` match a whole service as
/// `/<service>/{*rest}`, which would give every method of it one route), and axum's body limit
/// is lifted, since the door has bounded the body by the method's message limit already.
pub(crate) fn for_the_flow(mut request: Request) -> Request {
    request
        .extensions_mut()
        .remove::<axum::extract::MatchedPath>();
    without_body_limit(request)
}

fn without_body_limit(request: Request) -> Request {
    let mut service = DefaultBodyLimit::disable().layer(Echo);
    service
        .call(request)
        .into_inner()
        .unwrap_or_else(|never| match never {})
}

/// A service that answers its request, to pass one through a layer.
struct Echo;

impl Service<Request> for Echo {
    type Response = Request;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Request, Infallible>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        std::future::ready(Ok(request))
    }
}

/// Whether a request is a gRPC call (and so not a health check or a browser's request that
/// happens to share the path).
pub(crate) fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/grpc"))
}

/// A misconfiguration answered in gRPC's terms.
pub(crate) fn misconfigured(detail: &str) -> Status {
    tracing::error!(
        fix = detail,
        "idempotency: an #[idempotent] gRPC method is misconfigured"
    );
    status::from_problem(
        &Problem::new(ProblemKind::Misconfigured, detail.to_owned()),
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_formed_protobuf_is_told_from_garbage() {
        // field 1 varint 150; field 2 "hi"; field 3 fixed32; group 4 with a varint inside.
        let good = [
            0x08, 0x96, 0x01, 0x12, 0x02, b'h', b'i', 0x1d, 1, 2, 3, 4, 0x23, 0x08, 1, 0x24,
        ];
        assert!(well_formed(&good));
        assert!(well_formed(&[]));
        for bad in [
            &[0xff, 0xff, 0xff][..],
            &[0x12, 0x05, b'h'],
            &[0x00, 0x01],
            &[0x23, 0x08, 1],
            &[0x0f],
        ] {
            assert!(!well_formed(bad), "{bad:?}");
        }
    }
}
