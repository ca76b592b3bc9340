//! The one sequence every request goes through, for `IdempotencyLayer`
//! and `#[idempotent]` alike: [`handle`].
//!
//! 1. **Admit** ([`admit`]): parse the key, buffer the body (bounded), fingerprint it. Nothing
//!    here needs the store; a refusal is 400 or 413.
//! 2. **Parts checks** ([`Door::head`]): what guards the handler and reads only the
//!    request's parts; for `#[idempotent]`, its parts extractors, one of which may be the
//!    authentication that names the principal.
//! 3. **Scope** ([`admit::store_key`]): the principal (500 without one: the service named none) and the store key.
//! 4. **Body checks** ([`Door::prepare`]): what guards the handler and reads the body;
//!    for `#[idempotent]`, a body extractor that is not a pure parser (a signed webhook's).
//!    Steps 2 and 4 run before the claim, so a replay is answered only to a request that
//!    passed them again.
//! 5. **Decide** ([`decide`]): one atomic claim of the store answers claimed, completed (a
//!    replay), in flight (409, or wait) or mismatch (422).
//! 6. **Execute** ([`execute`]): a claimed request's handler runs to the end; its response
//!    is stored (or the key released), then answered.
//!
//! The whole sequence runs to its end even if the client leaves ([`RequestFuture`]): a claim
//! on its way to the store lands and is followed through, and a handler that has started
//! stores its result for the retry.
//!
//! What differs between the doors (the layer, the attribute, the message and gRPC doors) is
//! the [`Door`] each supplies: which checks run in steps 2 and 4, and how the handler is
//! called. The answers the flow gives instead of
//! the handler's are worded in [`problems`]; the store is reached through the runtime.

// A refusal is a `Response`, returned once per request; see `__private`.
#![allow(clippy::result_large_err)]

mod admit;
pub(crate) mod body_limit;
mod decide;
mod detach;
mod execute;
mod problems;

use std::future::Future;

use axum::{extract::Request, response::Response};
use bytes::Bytes;
use http::{Extensions, request::Parts};

pub use self::detach::RequestFuture;
use self::{
    admit::{Admission, Keyed},
    decide::Decision,
    execute::Execution,
};
use crate::{
    context::IdempotencyContext, observe, policy::Policy, replay::NoStore, runtime::Idempotency,
    scope::Route,
};

/// A door: what each way in (the layer, the attribute, a message, a gRPC call) supplies to
/// [`handle`]: the checks that guard the handler, and how it is called.
pub(crate) trait Door: Send + Sized + 'static {
    /// What the parts checks produce: the parts extractors' values, for an annotated handler.
    type Head: Send + 'static;
    /// What the handler is called with once its key is claimed.
    type Prepared: Send + 'static;

    /// Whether the checks before the claim (steps 2 and 4) may read the request's
    /// [`IdempotencyContext`]: an annotated handler's extractors may (`Tx` is one), so its
    /// request gets the context first. The layer has no checks of its own: its request gets
    /// the context only when the handler is about to run ([`Door::attach`]), and a replay
    /// does not pay for one.
    const CHECKS_READ_CONTEXT: bool;

    /// Gives a claimed request its context, for a door whose checks do not read it.
    /// Not called when [`Door::CHECKS_READ_CONTEXT`] is set: the context is in the
    /// request's extensions already.
    fn attach(prepared: &mut Self::Prepared, context: IdempotencyContext);

    /// Step 2: the checks that read only the request's parts. A rejection is answered as it
    /// is; nothing was claimed.
    fn head(&self, parts: &mut Parts) -> impl Future<Output = Result<Self::Head, Response>> + Send;

    /// Step 4: the checks that read the body, and whatever the handler needs of the request.
    fn prepare(
        &self,
        head: Self::Head,
        parts: Parts,
        body: Bytes,
    ) -> impl Future<Output = Result<Self::Prepared, Response>> + Send;

    /// The handler, for a claimed key. A response marked [`NoStore`] releases the key.
    fn call(self, prepared: Self::Prepared) -> impl Future<Output = Response> + Send + 'static;

    /// The handler, for a request without a key that the policy lets run without one.
    fn call_without_key(self, request: Request) -> impl Future<Output = Response> + Send + 'static;
}

/// The future of a request taken through the whole sequence: it runs to its end even if its
/// caller stops waiting (see [`RequestFuture`]).
pub(crate) fn start(
    idem: Idempotency,
    policy: Policy,
    request: Request,
    door: impl Door,
) -> RequestFuture {
    let tasks = idem.tasks().clone();
    let policy = idem.applied(policy);
    let route = Route::of(request.extensions(), request.uri());
    let span = observe::request_span(route.as_str());
    let flow = async move { handle(&idem, &policy, request, route, door).await };
    RequestFuture::detachable(observe::in_span(span, flow), &tasks)
}

/// Takes a request through the whole sequence (see the [module docs](self)) and answers it.
async fn handle<E: Door>(
    idem: &Idempotency,
    policy: &Policy,
    mut request: Request,
    route: Route,
    door: E,
) -> Response {
    let early_context =
        E::CHECKS_READ_CONTEXT.then(|| context_in(request.extensions_mut(), idem, policy));
    let Keyed {
        mut parts,
        body,
        key,
        fingerprint,
    } = match admit::admit(idem, policy, request, &route).await {
        Ok(Admission::Keyed(keyed)) => keyed,
        Ok(Admission::WithoutKey(mut request)) => {
            let context =
                early_context.unwrap_or_else(|| context_in(request.extensions_mut(), idem, policy));
            let handler = move || door.call_without_key(request);
            return execute::without_record(policy, &route, context, handler).await;
        }
        Err(refusal) => return refusal,
    };
    let head = match door.head(&mut parts).await {
        Ok(head) => head,
        Err(rejection) => return rejection,
    };
    let (store_key, principal) = match admit::store_key(idem, policy, &parts, &key, &route) {
        Ok(scoped) => (scoped.key, scoped.principal),
        Err(refusal) => return refusal,
    };
    // Boxed, and only on a route that resumes: the request's future holds it.
    let kept = policy.resume_after.map(|_| {
        Box::new(admit::kept_request(
            policy,
            &parts,
            &body,
            &key,
            principal.as_ref(),
        ))
    });
    drop(principal);
    observe::span_key(&store_key);
    let mut prepared = match door.prepare(head, parts, body).await {
        Ok(prepared) => prepared,
        Err(rejection) => return rejection,
    };
    let claimed = decide::decide(
        idem,
        policy,
        &store_key,
        &fingerprint,
        &route,
        kept.as_deref(),
    );
    let lease = match claimed.await {
        Decision::Respond(response) => return response,
        Decision::Run(lease) => Some(lease),
        Decision::RunWithoutRecord => None,
    };
    // The handler runs from here on.
    let context = early_context.unwrap_or_else(|| {
        let context = IdempotencyContext::new(idem, policy.retry_after);
        E::attach(&mut prepared, context.clone());
        context
    });
    let handler = move || door.call(prepared);
    let Some(lease) = lease else {
        return execute::without_record(policy, &route, context, handler).await;
    };
    let execution = Execution {
        idem: idem.clone(),
        policy: *policy,
        key: store_key,
        fingerprint,
        lease,
        route,
        context,
        kept,
    };
    execution.execute(handler).await
}

/// A new context for one request, put into its extensions for the handler to find.
fn context_in(
    extensions: &mut Extensions,
    idem: &Idempotency,
    policy: &Policy,
) -> IdempotencyContext {
    let context = IdempotencyContext::new(idem, policy.retry_after);
    extensions.insert(context.clone());
    context
}

/// Whether a response is the operation's result, to be stored (and its transaction
/// committed), or a failure after which the key is released.
pub(crate) fn counts_as_result(policy: &Policy, response: &Response) -> bool {
    response.extensions().get::<NoStore>().is_none()
        && (policy.store_server_errors || !response.status().is_server_error())
}
