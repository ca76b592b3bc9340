//! Not public API: what `#[idempotent]` expands to. It may change in any release.
//!
//! An annotated handler becomes a constant of type [`Idempotent<F>`], where `F` is a `fn`
//! pointer type: the handler's argument types and its output, boxed
//! (`fn(State<Db>, Json<New>) -> HandlerFuture<Payment>`). [`Idempotent`] implements axum's
//! `Handler`, so the route names it as before (`post(create_payment)`), and axum checks the
//! extractors against the router's state where the route is added, as it does for a plain
//! handler. It also dereferences to `F`, so a test calls it as it would call the function:
//! `create_payment(State(db), Json(new)).await`.

// A refusal or an extractor's rejection is a `Response`, returned once per request; boxing it
// would cost an allocation on every refused request to save stack space nobody misses.
#![allow(clippy::result_large_err)]

use std::{
    fmt,
    future::Future,
    marker::PhantomData,
    ops::Deref,
    pin::Pin,
    task::{Context, Poll},
};

pub use core::time::Duration;

use axum::{
    body::Body,
    extract::{FromRequest, FromRequestParts, Request},
    handler::Handler,
    response::{IntoResponse, Response},
};
use bytes::Bytes;
use http::request::Parts;

use crate::{
    Idempotency,
    extract::PureBody,
    flow::{self, Endpoint},
    problem::{Problem, ProblemKind},
    replay::NoStore,
    scope::Route,
};
pub use crate::{
    fingerprint::FingerprintMode,
    flow::RequestFuture,
    key::KeySyntax,
    policy::{OnConflict, OnStoreError, Policy},
    scope::Scope,
};

/// The boxed future of an annotated handler's body, whose output is `O`, and how `O` becomes
/// a response. The way to a response travels with the future, so that `Idempotent`'s
/// `Handler` impl needs no bound on `O`: a handler whose output is not a response is one
/// error, on its return type (in [`boxed`]), not a second one on the route.
pub struct HandlerFuture<O = Response> {
    future: Pin<Box<dyn Future<Output = O> + Send>>,
    respond: fn(O) -> Response,
}

impl<O> Future for HandlerFuture<O> {
    type Output = O;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<O> {
        self.future.as_mut().poll(cx)
    }
}

impl<O> fmt::Debug for HandlerFuture<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HandlerFuture")
    }
}

impl<O> HandlerFuture<O> {
    /// Runs the handler to its response.
    async fn respond(self) -> Response {
        let respond = self.respond;
        respond(self.await)
    }
}

/// Boxes the original handler's future. (Its output must be a response: the bound puts a
/// mistake on the handler's return type rather than on the route.)
pub fn boxed<F>(future: F) -> HandlerFuture<F::Output>
where
    F: Future + Send + 'static,
    F::Output: IntoResponse,
{
    HandlerFuture {
        future: Box::pin(future),
        respond: IntoResponse::into_response,
    }
}

/// Boxes the future of a handler whose output type cannot be named (`-> impl IntoResponse`),
/// turning its output into a response.
pub fn boxed_response<F>(future: F) -> HandlerFuture
where
    F: Future + Send + 'static,
    F::Output: IntoResponse,
{
    HandlerFuture {
        future: Box::pin(async move { future.await.into_response() }),
        respond: core::convert::identity,
    }
}

/// An annotated handler: its policy and its original body, called through the `fn` pointer
/// `F`.
pub struct Idempotent<F> {
    policy: Policy,
    call: F,
    last_runs_on_replay: fn() -> bool,
}

impl<F> Idempotent<F> {
    /// The handler for `policy`, running `call` once its arguments are extracted.
    /// `last_runs_on_replay` says whether the last argument is extracted before the claim,
    /// on every request (see [`LastArgument::runs_on_replay`]).
    ///
    /// An invalid policy is a compile error where the constant is defined: this is where
    /// `#[idempotent]` and [`Policy::validate`] share their rules.
    pub const fn new(policy: Policy, call: F, last_runs_on_replay: fn() -> bool) -> Self {
        if let Err(error) = policy.validate() {
            panic!("{}", error.summary());
        }
        Self {
            policy,
            call,
            last_runs_on_replay,
        }
    }

    /// The handler's policy, for tests of what the attribute expands to.
    pub const fn policy(&self) -> Policy {
        self.policy
    }

    /// Whether the last argument runs before every replay (a guard or a parts extractor)
    /// rather than only before the handler (a [`PureBody`]).
    pub fn last_runs_on_replay(&self) -> bool {
        (self.last_runs_on_replay)()
    }
}

/// A test calls the handler as the function it was written as.
impl<F> Deref for Idempotent<F> {
    type Target = F;

    fn deref(&self) -> &F {
        &self.call
    }
}

impl<F: Copy> Clone for Idempotent<F> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<F: Copy> Copy for Idempotent<F> {}

impl<F> fmt::Debug for Idempotent<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Idempotent")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

/// Answers whether a handler's last argument, of type `T`, runs before every replay. The
/// expansion asks `LastArgument::<T>::NEW.runs_on_replay()` where it names `T`: a `T` that
/// implements [`PureBody`] finds the method of this type and answers `false`; any other `T`
/// finds the method of [`Guard`] through `Deref` and answers `true`. So a body extractor is
/// a guard unless it opts out, and no annotation is needed for the safe choice.
pub struct LastArgument<T>(PhantomData<fn() -> T>);

impl<T> LastArgument<T> {
    /// The probe for `T`.
    pub const NEW: Self = Self(PhantomData);
}

impl<T: PureBody> LastArgument<T> {
    /// A pure body extractor is skipped on a replay.
    pub fn runs_on_replay(&self) -> bool {
        false
    }
}

impl<T> fmt::Debug for LastArgument<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LastArgument")
    }
}

/// What [`LastArgument`] of a type that is not a [`PureBody`] dereferences to.
#[derive(Debug)]
pub struct Guard;

impl Guard {
    /// A guard (or a parts extractor) runs before every replay.
    pub fn runs_on_replay(&self) -> bool {
        true
    }
}

impl<T> Deref for LastArgument<T> {
    type Target = Guard;

    fn deref(&self) -> &Guard {
        &Guard
    }
}

/// A handler's `fn` pointer type: what it takes, and how its output becomes a response.
pub trait HandlerFn: Copy + Send + Sync + 'static {
    /// The tuple of the argument types.
    type Args: Send + 'static;

    /// Calls the handler with its arguments.
    fn call_with(self, args: Self::Args) -> impl Future<Output = Response> + Send + 'static;
}

/// The marker that keeps [`Idempotent`]'s `Handler` impl apart from axum's own.
#[derive(Debug)]
pub struct Marker<M>(PhantomData<M>);

impl<S, M, F> Handler<Marker<M>, S> for Idempotent<F>
where
    S: Clone + Send + Sync + 'static,
    F: HandlerFn,
    F::Args: FromRequestArgs<S, M>,
    M: 'static,
{
    type Future = RequestFuture;

    fn call(self, request: Request, state: S) -> Self::Future {
        let Some(idem) = request.extensions().get::<Idempotency>().cloned() else {
            let refusal = not_installed(&request);
            return RequestFuture::cancellable(async move { refusal });
        };
        let endpoint = Annotated {
            call: self.call,
            state,
            last_runs_on_replay: self.last_runs_on_replay(),
            marker: PhantomData,
        };
        flow::start(idem, self.policy, request, endpoint)
    }
}

/// An annotated handler with its state: the attribute's [`Endpoint`].
///
/// Every check that guards the handler runs before the claim, so that a replay is answered
/// only to a request that passed them again: the extractors that read only the parts (one of
/// them may be the authentication that names the principal), then a body extractor that is a
/// guard (a signature over the body). Their rejections touch nothing. A pure body extractor
/// runs after the claim, so that a replay does not pay for parsing a body it will not use;
/// its rejection (bad JSON, a failed validation) releases the key, and the client may fix the
/// body and retry the key.
struct Annotated<F, S, M> {
    call: F,
    state: S,
    last_runs_on_replay: bool,
    marker: PhantomData<fn() -> M>,
}

impl<F, S, M> Endpoint for Annotated<F, S, M>
where
    F: HandlerFn,
    F::Args: FromRequestArgs<S, M>,
    S: Send + Sync + 'static,
    M: 'static,
{
    type Head = <F::Args as FromRequestArgs<S, M>>::Head;
    type Prepared = Arguments<F::Args, S, M>;

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

fn not_installed(request: &Request) -> Response {
    let route = Route::of(request.extensions(), request.uri());
    tracing::error!(
        route = route.as_str(),
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
/// is one; a body extractor that is a guard runs before the claim ([`FromRequestArgs::guard`]),
/// a pure one after it.
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

    /// Before the claim: runs the last argument now if it `runs_on_replay` (a guard), or
    /// keeps it for [`Arguments::finish`], after the claim (a pure body extractor).
    fn guard(
        head: Self::Head,
        parts: Parts,
        body: Body,
        state: &S,
        runs_on_replay: bool,
    ) -> impl Future<Output = Result<Arguments<Self, S, M>, Response>> + Send
    where
        S: Sync,
    {
        async move {
            if runs_on_replay {
                Self::tail(head, parts, body, state)
                    .await
                    .map(Arguments::Extracted)
            } else {
                Ok(Arguments::Body { head, parts, body })
            }
        }
    }
}

/// The arguments of a claimed request: extracted, or waiting for their pure body extractor.
// One per request, moved once into the handler's future: boxing the parts would cost an
// allocation on every request to save stack space in a future that holds them anyway.
#[allow(clippy::large_enum_variant)]
pub enum Arguments<Args: FromRequestArgs<S, M>, S, M> {
    /// Every argument, guards included, was extracted before the claim.
    Extracted(Args),
    /// The body extractor is pure and runs only if the handler does.
    Body {
        /// The arguments extracted before the claim.
        head: Args::Head,
        /// The request's parts, for the body extractor.
        parts: Parts,
        /// The buffered body.
        body: Body,
    },
}

impl<Args: FromRequestArgs<S, M>, S, M> Arguments<Args, S, M> {
    /// The arguments, once the pure body extractor, if any, has run.
    pub async fn finish(self, state: &S) -> Result<Args, Response> {
        match self {
            Self::Extracted(args) => Ok(args),
            Self::Body { head, parts, body } => Args::tail(head, parts, body, state).await,
        }
    }
}

impl<Args: FromRequestArgs<S, M>, S, M> fmt::Debug for Arguments<Args, S, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Extracted(_) => f.write_str("Extracted"),
            Self::Body { .. } => f.write_str("Body"),
        }
    }
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

        impl_handler_fn!($($head,)* $last);
    };
}

macro_rules! impl_handler_fn {
    ($($arg:ident),*) => {
        #[allow(non_snake_case)]
        impl<$($arg,)* O> HandlerFn for fn($($arg),*) -> HandlerFuture<O>
        where
            $($arg: Send + 'static,)*
            O: 'static,
        {
            type Args = ($($arg,)*);

            fn call_with(self, ($($arg,)*): Self::Args) -> impl Future<Output = Response> + Send + 'static {
                self($($arg),*).respond()
            }
        }
    };
}

impl_handler_fn!();

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

#[cfg(test)]
mod tests {
    use axum::{
        Form, Json,
        body::{Body, Bytes},
        extract::{RawForm, Request, rejection::JsonRejection},
        http::HeaderMap,
    };
    use bytes::BytesMut;
    use serde_json::Value;

    use super::LastArgument;

    /// A body extractor of the application's own, that has not said it is pure.
    struct Signed;

    #[test]
    fn axums_body_extractors_are_pure_and_every_other_type_is_a_guard() {
        let pure = [
            LastArgument::<Json<Value>>::NEW.runs_on_replay(),
            LastArgument::<Form<Vec<(String, String)>>>::NEW.runs_on_replay(),
            LastArgument::<RawForm>::NEW.runs_on_replay(),
            LastArgument::<Bytes>::NEW.runs_on_replay(),
            LastArgument::<BytesMut>::NEW.runs_on_replay(),
            LastArgument::<String>::NEW.runs_on_replay(),
            LastArgument::<Body>::NEW.runs_on_replay(),
            LastArgument::<Option<Json<Value>>>::NEW.runs_on_replay(),
            LastArgument::<Result<Json<Value>, JsonRejection>>::NEW.runs_on_replay(),
        ];
        assert_eq!(pure, [false; 9]);
        let guards = [
            LastArgument::<Signed>::NEW.runs_on_replay(),
            LastArgument::<Option<Signed>>::NEW.runs_on_replay(),
            LastArgument::<Request>::NEW.runs_on_replay(),
            LastArgument::<HeaderMap>::NEW.runs_on_replay(),
            LastArgument::<()>::NEW.runs_on_replay(),
        ];
        assert_eq!(guards, [true; 5]);
    }
}
