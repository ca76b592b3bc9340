//! The annotated handler's body, called through a `fn` pointer: its boxed future
//! ([`HandlerFuture`]) and the calls by argument tuple ([`HandlerFn`]).

use std::{
    fmt,
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

use axum::response::{IntoResponse, Response};

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

/// A handler's `fn` pointer type: what it takes, and how its output becomes a response.
pub trait HandlerFn: Copy + Send + Sync + 'static {
    /// The tuple of the argument types.
    type Args: Send + 'static;

    /// Calls the handler with its arguments.
    fn call_with(self, args: Self::Args) -> impl Future<Output = Response> + Send + 'static;
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
impl_handler_fn!(T1);
impl_handler_fn!(T1, T2);
impl_handler_fn!(T1, T2, T3);
impl_handler_fn!(T1, T2, T3, T4);
impl_handler_fn!(T1, T2, T3, T4, T5);
impl_handler_fn!(T1, T2, T3, T4, T5, T6);
impl_handler_fn!(T1, T2, T3, T4, T5, T6, T7);
impl_handler_fn!(T1, T2, T3, T4, T5, T6, T7, T8);
impl_handler_fn!(T1, T2, T3, T4, T5, T6, T7, T8, T9);
impl_handler_fn!(T1, T2, T3, T4, T5, T6, T7, T8, T9, T10);
impl_handler_fn!(T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11);
impl_handler_fn!(T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12);
impl_handler_fn!(T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13);
impl_handler_fn!(T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14);
impl_handler_fn!(
    T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15
);
impl_handler_fn!(
    T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15, T16
);
