//! An annotated handler's [`Door`]: the checks its extractors make, and how
//! the handler is called.

use std::{future::Future, marker::PhantomData};

use axum::{body::Body, extract::Request, response::Response};
use bytes::Bytes;
use http::request::Parts;

use super::{
    arguments::{Arguments, FromRequestArgs},
    handler::HandlerFn,
};
use crate::{context::IdempotencyContext, flow::Door, replay::NoStore};

/// An annotated handler with its state: the [`Door`] of both its doors.
///
/// Every check that guards the handler runs before the claim, so that a replay is answered
/// only to a request that passed them again: the extractors that read only the parts (one of
/// them may be the authentication that names the principal), then a body extractor that is a
/// guard (a signature over the body). Their rejections touch nothing. A pure body extractor
/// runs after the claim, so that a replay does not pay for parsing a body it will not use;
/// its rejection (bad JSON, a failed validation) releases the key, and the client may fix the
/// body and retry the key.
pub(crate) struct AnnotatedDoor<F, S, M> {
    pub(crate) call: F,
    pub(crate) state: S,
    pub(crate) last_runs_on_replay: bool,
    pub(crate) marker: PhantomData<fn() -> M>,
}

impl<F, S, M> Door for AnnotatedDoor<F, S, M>
where
    F: HandlerFn,
    F::Args: FromRequestArgs<S, M>,
    S: Send + Sync + 'static,
    M: 'static,
{
    type Head = <F::Args as FromRequestArgs<S, M>>::Head;
    type Prepared = Arguments<F::Args, S, M>;

    // Any extractor may read the context, `Tx` among them, and parts extractors run before
    // the claim.
    const CHECKS_READ_CONTEXT: bool = true;

    fn attach(_: &mut Self::Prepared, _: IdempotencyContext) {
        // Not called: the context went into the request before its extractors ran.
    }

    fn head(&self, parts: &mut Parts) -> impl Future<Output = Result<Self::Head, Response>> + Send {
        F::Args::head(parts, &self.state)
    }

    fn prepare(
        &self,
        head: Self::Head,
        parts: Parts,
        body: Bytes,
    ) -> impl Future<Output = Result<Self::Prepared, Response>> + Send {
        F::Args::guard(
            head,
            parts,
            Body::from(body),
            &self.state,
            self.last_runs_on_replay,
        )
    }

    async fn call(self, arguments: Self::Prepared) -> Response {
        match arguments.finish(&self.state).await {
            Ok(args) => self.call.call_with(args).await,
            Err(mut rejection) => {
                rejection.extensions_mut().insert(NoStore);
                rejection
            }
        }
    }

    async fn call_without_key(self, request: Request) -> Response {
        let (mut parts, body) = request.into_parts();
        let args = match F::Args::head(&mut parts, &self.state).await {
            Ok(head) => F::Args::tail(head, parts, body, &self.state).await,
            Err(rejection) => Err(rejection),
        };
        match args {
            Ok(args) => self.call.call_with(args).await,
            Err(rejection) => rejection,
        }
    }
}
