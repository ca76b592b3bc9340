//! Extracting an annotated handler's arguments in two steps around the claim of its key:
//! every parts extractor before it, and the body extractor before or after it, as
//! [`last_argument`](super::last_argument) decides.

use std::{fmt, future::Future};

use axum::{
    body::Body,
    extract::{FromRequest, FromRequestParts, Request},
    response::{IntoResponse, Response},
};
use http::request::Parts;

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
