//! Not public API: what `#[idempotent]` expands to. It may change in any release.
//!
//! An annotated handler becomes a constant of type [`Idempotent<Args>`], where `Args` is the
//! tuple of the handler's argument types. [`Idempotent`] implements axum's `Handler`, so the
//! route names it as before (`post(create_payment)`), and axum checks the extractors against
//! the router's state where the route is added, as it does for a plain handler.

// A refusal or an extractor's rejection is a `Response`, returned once per request; boxing it
// would cost an allocation on every refused request to save stack space nobody misses.
#![allow(clippy::result_large_err)]

use std::{fmt, future::Future, marker::PhantomData, pin::Pin};

pub use core::time::Duration;

use axum::{
    body::Body,
    extract::{FromRequest, FromRequestParts, Request},
    handler::Handler,
    response::{IntoResponse, Response},
};
use http::request::Parts;

use crate::{
    Idempotency,
    context::IdempotencyContext,
    flow::{self, Admission},
    problem::{Problem, ProblemKind},
    replay::NoStore,
    scope::{self, Route},
};
pub use crate::{
    fingerprint::FingerprintMode,
    key::KeySyntax,
    policy::{OnConflict, OnStoreError, Policy},
    scope::Scope,
};

/// The boxed future of an annotated handler's body.
pub type HandlerFuture = Pin<Box<dyn Future<Output = Response> + Send>>;

/// Boxes the original handler's future and turns its output into a response.
pub fn boxed<F>(future: F) -> HandlerFuture
where
    F: Future + Send + 'static,
    F::Output: IntoResponse,
{
    Box::pin(async move { future.await.into_response() })
}

/// An annotated handler: its policy and its original body, taking its arguments as a tuple.
pub struct Idempotent<Args> {
    policy: Policy,
    call: fn(Args) -> HandlerFuture,
}

impl<Args> Idempotent<Args> {
    /// The handler for `policy`, running `call` once its arguments are extracted.
    pub const fn new(policy: Policy, call: fn(Args) -> HandlerFuture) -> Self {
        Self { policy, call }
    }

    /// The handler's policy, for tests of what the attribute expands to.
    pub const fn policy(&self) -> Policy {
        self.policy
    }
}

impl<Args> Clone for Idempotent<Args> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<Args> Copy for Idempotent<Args> {}

impl<Args> fmt::Debug for Idempotent<Args> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Idempotent")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

/// The marker that keeps [`Idempotent`]'s `Handler` impl apart from axum's own.
#[derive(Debug)]
pub struct Marker<M>(PhantomData<M>);

impl<S, M, Args> Handler<Marker<M>, S> for Idempotent<Args>
where
    S: Clone + Send + Sync + 'static,
    Args: FromRequestArgs<S, M>,
    M: 'static,
{
    type Future = HandlerFuture;

    fn call(self, request: Request, state: S) -> Self::Future {
        Box::pin(self.handle(request, state))
    }
}

impl<Args: Send + 'static> Idempotent<Args> {
    async fn handle<S, M>(self, mut request: Request, state: S) -> Response
    where
        S: Send + Sync + 'static,
        Args: FromRequestArgs<S, M>,
    {
        let Some(idem) = request.extensions().get::<Idempotency>().cloned() else {
            return not_installed(&request);
        };
        let context = IdempotencyContext::new(&idem);
        request.extensions_mut().insert(context.clone());
        let keyed = match flow::admit(&self.policy, request).await {
            Ok(Admission::Keyed(keyed)) => keyed,
            Ok(Admission::Unkeyed(request)) => {
                let route = Route::of(request.extensions(), request.uri());
                let (mut parts, body) = request.into_parts();
                let args = match Args::head(&mut parts, &state).await {
                    Ok(head) => Args::tail(head, parts, body, &state).await,
                    Err(rejection) => Err(rejection),
                };
                let args = match args {
                    Ok(args) => args,
                    Err(rejection) => return rejection,
                };
                let handler = (self.call)(args);
                return flow::run_unrecorded(&self.policy, route.as_str(), context, handler).await;
            }
            Err(refusal) => return refusal,
        };
        let flow::Keyed {
            mut parts,
            body,
            key,
            fingerprint,
        } = keyed;
        let route = Route::of(&parts.extensions, &parts.uri);
        // The extractors that read only the parts run before the claim: one of them may be the
        // authentication that names the principal, and their rejections (401, a bad path)
        // touch nothing. The body extractor runs after the claim, so that a replay does not
        // pay for parsing a body it will not use; its rejection (bad JSON, a failed
        // validation) releases the key, and the client may fix the body and retry the key.
        let head = match Args::head(&mut parts, &state).await {
            Ok(head) => head,
            Err(rejection) => return rejection,
        };
        let store_key = match flow::store_key(&idem, &self.policy, &parts, &key) {
            Ok(store_key) => store_key,
            Err(refusal) => return refusal,
        };
        let call = self.call;
        let handler = move || async move {
            match Args::tail(head, parts, Body::from(body), &state).await {
                Ok(args) => call(args).await,
                Err(mut rejection) => {
                    rejection.extensions_mut().insert(NoStore);
                    rejection
                }
            }
        };
        flow::run(
            &idem,
            &self.policy,
            store_key,
            &fingerprint,
            route,
            context,
            handler,
        )
        .await
    }
}

fn not_installed(request: &Request) -> Response {
    let route = scope::route(request.extensions(), request.uri());
    tracing::error!(
        route,
        "#[idempotent] handler called without the idempotency runtime: add \
         `.layer(axum::Extension(idempotency))` to the router"
    );
    Problem::new(
        ProblemKind::Misconfigured,
        "the idempotency runtime is not installed on this service",
    )
    .into_response()
}

/// A handler's argument tuple, extracted in two steps around the claim of the key: first every
/// argument that reads only the request's parts, then the body extractor, if the last argument
/// is one.
pub trait FromRequestArgs<S, M>: Sized + Send + 'static {
    /// What is extracted before the claim.
    type Head: Send + 'static;

    /// Runs every extractor that reads only the request's parts.
    fn head(
        parts: &mut Parts,
        state: &S,
    ) -> impl Future<Output = Result<Self::Head, Response>> + Send;

    /// Runs the body extractor, if any, and assembles the arguments.
    fn tail(
        head: Self::Head,
        parts: Parts,
        body: Body,
        state: &S,
    ) -> impl Future<Output = Result<Self, Response>> + Send;
}

impl<S: Send + Sync> FromRequestArgs<S, ()> for () {
    type Head = ();

    async fn head(_: &mut Parts, _: &S) -> Result<(), Response> {
        Ok(())
    }

    async fn tail(_: (), _: Parts, _: Body, _: &S) -> Result<(), Response> {
        Ok(())
    }
}

/// Marks a last argument that reads only the request parts.
#[derive(Debug)]
pub enum ViaParts {}

/// Marks a last argument that takes the whole request, body and all.
#[derive(Debug)]
pub enum ViaRequest {}

/// How the last argument is extracted. axum's own marker types are private, so this trait
/// tells the two kinds apart the way axum does: a type is either `FromRequestParts` or
/// `FromRequest` (with a body), and inference picks the one impl that applies. A parts
/// extractor in last place then runs before the claim like the others, so an authentication
/// extractor may come last.
pub trait FromLastArg<S, M>: Sized + Send + 'static {
    /// The argument when it reads only the parts; `()` for a body extractor.
    type Early: Send + 'static;

    /// Extracts a parts extractor; does nothing for a body extractor.
    fn early(
        parts: &mut Parts,
        state: &S,
    ) -> impl Future<Output = Result<Self::Early, Response>> + Send;

    /// The argument: the early one, or the body extractor run on the whole request.
    fn late(
        early: Self::Early,
        parts: Parts,
        body: Body,
        state: &S,
    ) -> impl Future<Output = Result<Self, Response>> + Send;
}

impl<S, E> FromLastArg<S, ViaParts> for E
where
    S: Send + Sync,
    E: FromRequestParts<S> + Send + 'static,
{
    type Early = E;

    async fn early(parts: &mut Parts, state: &S) -> Result<E, Response> {
        E::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)
    }

    async fn late(early: E, _: Parts, _: Body, _: &S) -> Result<E, Response> {
        Ok(early)
    }
}

impl<S, E> FromLastArg<S, ViaRequest> for E
where
    S: Send + Sync,
    E: FromRequest<S> + Send + 'static,
{
    type Early = ();

    async fn early(_: &mut Parts, _: &S) -> Result<(), Response> {
        Ok(())
    }

    async fn late(_: (), parts: Parts, body: Body, state: &S) -> Result<E, Response> {
        let request = Request::from_parts(parts, body);
        E::from_request(request, state)
            .await
            .map_err(IntoResponse::into_response)
    }
}

macro_rules! impl_from_request_args {
    ($($head:ident),* ; $last:ident) => {
        #[allow(non_snake_case)]
        impl<S, M, $($head,)* $last> FromRequestArgs<S, M> for ($($head,)* $last,)
        where
            S: Send + Sync,
            $($head: FromRequestParts<S> + Send + 'static,)*
            $last: FromLastArg<S, M>,
        {
            type Head = ($($head,)* $last::Early,);

            async fn head(parts: &mut Parts, state: &S) -> Result<Self::Head, Response> {
                $(
                    let $head = $head::from_request_parts(parts, state)
                        .await
                        .map_err(IntoResponse::into_response)?;
                )*
                let $last = $last::early(parts, state).await?;
                Ok(($($head,)* $last,))
            }

            async fn tail(head: Self::Head, parts: Parts, body: Body, state: &S) -> Result<Self, Response> {
                let ($($head,)* $last,) = head;
                let $last = $last::late($last, parts, body, state).await?;
                Ok(($($head,)* $last,))
            }
        }
    };
}

impl_from_request_args!(; T1);
impl_from_request_args!(T1; T2);
impl_from_request_args!(T1, T2; T3);
impl_from_request_args!(T1, T2, T3; T4);
impl_from_request_args!(T1, T2, T3, T4; T5);
impl_from_request_args!(T1, T2, T3, T4, T5; T6);
impl_from_request_args!(T1, T2, T3, T4, T5, T6; T7);
impl_from_request_args!(T1, T2, T3, T4, T5, T6, T7; T8);
impl_from_request_args!(T1, T2, T3, T4, T5, T6, T7, T8; T9);
impl_from_request_args!(T1, T2, T3, T4, T5, T6, T7, T8, T9; T10);
impl_from_request_args!(T1, T2, T3, T4, T5, T6, T7, T8, T9, T10; T11);
impl_from_request_args!(T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11; T12);
impl_from_request_args!(T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12; T13);
impl_from_request_args!(T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13; T14);
impl_from_request_args!(T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14; T15);
impl_from_request_args!(T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15; T16);
