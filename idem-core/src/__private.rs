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
    scope::{self, route_of},
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
                let route = scope::route(request.extensions(), request.uri()).to_owned();
                let (parts, body) = request.into_parts();
                let args = match Args::extract(parts, body, &state, |_| Ok(())).await {
                    Ok((args, ())) => args,
                    Err(rejection) => return rejection,
                };
                return flow::run_unrecorded(&self.policy, &route, context, (self.call)(args))
                    .await;
            }
            Err(refusal) => return refusal,
        };
        let flow::Keyed {
            parts,
            body,
            key,
            fingerprint,
        } = keyed;
        let route = route_of(&parts).to_owned();
        // Extractors run before the key is claimed: a rejection (bad JSON, failed
        // validation) stores nothing, and the client may fix the body and retry the key.
        // The principal is resolved once every parts extractor has run, before the body
        // extractor: an authentication extractor in any position may set it.
        let resolve = |parts: &Parts| flow::store_key(&idem, &self.policy, parts, &key);
        let (args, store_key) = match Args::extract(parts, Body::from(body), &state, resolve).await
        {
            Ok(extracted) => extracted,
            Err(rejection) => return rejection,
        };
        let call = self.call;
        flow::run(
            &idem,
            &self.policy,
            store_key,
            &fingerprint,
            &route,
            context,
            move || call(args),
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

/// A handler's argument tuple, extracted the way axum extracts a handler's arguments: every
/// argument but the last from the request parts, the last from the parts or, if it takes the
/// body, from the whole request.
pub trait FromRequestArgs<S, M>: Sized + Send + 'static {
    /// Extracts the arguments, calling `between` on the parts once every extractor that reads
    /// only the parts has run (so one of them may have set the principal), and before an
    /// extractor that takes the body. A rejection or an error of `between` is the response.
    fn extract<T: Send>(
        parts: Parts,
        body: Body,
        state: &S,
        between: impl FnOnce(&Parts) -> Result<T, Response> + Send,
    ) -> impl Future<Output = Result<(Self, T), Response>> + Send;
}

impl<S: Send + Sync> FromRequestArgs<S, ()> for () {
    async fn extract<T: Send>(
        parts: Parts,
        _body: Body,
        _state: &S,
        between: impl FnOnce(&Parts) -> Result<T, Response> + Send,
    ) -> Result<(Self, T), Response> {
        Ok(((), between(&parts)?))
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
/// extractor in last place then runs before `between`, like the others, so an
/// authentication extractor may come last.
pub trait FromLastArg<S, M>: Sized + Send + 'static {
    /// Extracts the argument, calling `between` on the parts before it takes the body.
    fn extract_last<T: Send>(
        parts: Parts,
        body: Body,
        state: &S,
        between: impl FnOnce(&Parts) -> Result<T, Response> + Send,
    ) -> impl Future<Output = Result<(Self, T), Response>> + Send;
}

impl<S, E> FromLastArg<S, ViaParts> for E
where
    S: Send + Sync,
    E: FromRequestParts<S> + Send + 'static,
{
    async fn extract_last<T: Send>(
        mut parts: Parts,
        _body: Body,
        state: &S,
        between: impl FnOnce(&Parts) -> Result<T, Response> + Send,
    ) -> Result<(Self, T), Response> {
        let last = E::from_request_parts(&mut parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        Ok((last, between(&parts)?))
    }
}

impl<S, E> FromLastArg<S, ViaRequest> for E
where
    S: Send + Sync,
    E: FromRequest<S> + Send + 'static,
{
    async fn extract_last<T: Send>(
        parts: Parts,
        body: Body,
        state: &S,
        between: impl FnOnce(&Parts) -> Result<T, Response> + Send,
    ) -> Result<(Self, T), Response> {
        let between = between(&parts)?;
        let request = Request::from_parts(parts, body);
        let last = E::from_request(request, state)
            .await
            .map_err(IntoResponse::into_response)?;
        Ok((last, between))
    }
}

macro_rules! impl_from_request_args {
    ($($head:ident),* ; $last:ident) => {
        #[allow(non_snake_case, unused_mut)]
        impl<S, M, $($head,)* $last> FromRequestArgs<S, M> for ($($head,)* $last,)
        where
            S: Send + Sync,
            $($head: FromRequestParts<S> + Send + 'static,)*
            $last: FromLastArg<S, M>,
        {
            async fn extract<T: Send>(
                mut parts: Parts,
                body: Body,
                state: &S,
                between: impl FnOnce(&Parts) -> Result<T, Response> + Send,
            ) -> Result<(Self, T), Response> {
                $(
                    let $head = $head::from_request_parts(&mut parts, state)
                        .await
                        .map_err(IntoResponse::into_response)?;
                )*
                let ($last, between) = $last::extract_last(parts, body, state, between).await?;
                Ok((($($head,)* $last,), between))
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
