//! The `#[idempotent]` HTTP door: an annotated handler ([`Idempotent`]) is an axum
//! `Handler`, so the route names it as before (`post(create_payment)`), and axum checks the
//! extractors against the router's state where the route is added, as it does for a plain
//! handler. Each request goes through the runtime's flow.
//!
//! Nothing here is public API: the expansion names these items through `__private`.

use std::marker::PhantomData;

use axum::{
    extract::Request,
    handler::Handler,
    response::{IntoResponse, Response},
};

use crate::{
    door::annotated::{
        Idempotent, arguments::FromRequestArgs, door::AnnotatedDoor, handler::HandlerFn,
    },
    flow::{self, RequestFuture},
    misconfigured,
    problem::{Problem, ProblemKind},
    runtime::Idempotency,
    scope::Route,
};

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
        // A probe asks for the policy, which it gets without a claim or a call of the handler.
        #[cfg(feature = "openapi")]
        if let Some(answer) = crate::openapi::probe::answer(
            &request,
            request.extensions().get::<Idempotency>(),
            self.policy(),
        ) {
            return RequestFuture::cancellable(std::future::ready(answer));
        }
        let Some(idem) = request.extensions().get::<Idempotency>().cloned() else {
            let refusal = not_installed(&request);
            return RequestFuture::cancellable(async move { refusal });
        };
        let door = AnnotatedDoor {
            call: *self,
            state,
            last_runs_on_replay: self.last_runs_on_replay(),
            marker: PhantomData,
        };
        flow::start(idem, self.policy(), request, door)
    }
}

/// 500: the router does not carry the runtime. Logged the first time each route meets it.
fn not_installed(request: &Request) -> Response {
    let route = Route::of(request.extensions(), request.uri());
    if misconfigured::first_on_route("runtime-missing", route.as_str()) {
        tracing::error!(
            route = route.as_str(),
            "#[idempotent] handler called without the idempotency runtime: add \
             `.layer(axum::Extension(idempotency))` to the router that serves it, where \
             `idempotency` is the service's `idem::Idempotency`; every request of this route is \
             answered 500 until then (logged once per route)"
        );
    }
    Problem::new(
        ProblemKind::Misconfigured,
        "the service is set up wrong (its idempotency runtime is not installed); the request \
         was not run, and the fault is the service's, not the request's",
    )
    .into_response()
}
