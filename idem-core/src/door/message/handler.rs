//! [`MessageHandler`]: what `#[idempotent(key = ...)]` makes of a handler; and
//! [`MessageService`]: a handler with its state, which a [`Runner`](super::Runner) drives.

use std::{
    fmt,
    marker::PhantomData,
    ops::Deref,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use axum::{body::Body, extract::Request, response::Response};
use bytes::Bytes;
use http::request::Parts;

use super::key::MessageKey;
use crate::{
    context::IdempotencyContext,
    door::annotated::{
        Idempotent, arguments::FromRequestArgs, door::AnnotatedDoor, handler::HandlerFn,
    },
    flow::{self, Door, RequestFuture},
    policy::Policy,
    runtime::Idempotency,
    scope::Scope,
};

/// A message handler: its key source, its policy and its original body, called through the
/// `fn` pointer `F`. `#[idempotent(key = header("Nats-Msg-Id"))]` makes one; give it its
/// state with [`with_state`](Self::with_state) (or [`stateless`](Self::stateless)) and hand
/// the result to a [`Runner`](super::Runner).
///
/// A message's key belongs to its stream (or queue) and consumer: the policy's scope is
/// always [`Scope::Global`] within that route, whatever it said.
pub struct MessageHandler<F> {
    key: MessageKey,
    handler: Idempotent<F>,
}

impl<F> MessageHandler<F> {
    /// The handler for messages keyed by `key` under `policy`. An invalid policy is a compile
    /// error where the constant is defined, as for an HTTP handler.
    pub const fn new(
        key: MessageKey,
        policy: Policy,
        call: F,
        last_runs_on_replay: fn() -> bool,
    ) -> Self {
        Self {
            key,
            handler: Idempotent::new(policy.scope(Scope::Global), call, last_runs_on_replay),
        }
    }

    /// Where the key of a message is.
    pub const fn key(&self) -> MessageKey {
        self.key
    }

    /// The handler's policy.
    pub const fn policy(&self) -> Policy {
        self.handler.policy()
    }
}

impl<F: HandlerFn> MessageHandler<F> {
    /// The handler with the state its `State` extractors read.
    pub fn with_state<S, M>(self, state: S) -> MessageService
    where
        F::Args: FromRequestArgs<S, M>,
        S: Clone + Send + Sync + 'static,
        M: 'static,
    {
        let Self { key, handler } = self;
        let policy = handler.policy();
        let last_runs_on_replay = handler.last_runs_on_replay();
        let call = *handler;
        let start = move |idem: Idempotency, request: Request, ran: Arc<AtomicBool>| {
            let annotated = AnnotatedDoor {
                call,
                state: state.clone(),
                last_runs_on_replay,
                marker: PhantomData,
            };
            flow::start(
                idem,
                policy,
                request,
                Observed {
                    inner: annotated,
                    ran,
                },
            )
        };
        MessageService {
            key,
            policy,
            start: Arc::new(start),
        }
    }

    /// The handler of a handler that reads no state.
    pub fn stateless<M>(self) -> MessageService
    where
        F::Args: FromRequestArgs<(), M>,
        M: 'static,
    {
        self.with_state(())
    }
}

/// A test calls the handler as the function it was written as.
impl<F> Deref for MessageHandler<F> {
    type Target = F;

    fn deref(&self) -> &F {
        &self.handler
    }
}

impl<F: Copy> Clone for MessageHandler<F> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<F: Copy> Copy for MessageHandler<F> {}

impl<F> fmt::Debug for MessageHandler<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MessageHandler")
            .field("key", &self.key)
            .field("policy", &self.policy())
            .finish_non_exhaustive()
    }
}

type Start = dyn Fn(Idempotency, Request, Arc<AtomicBool>) -> RequestFuture + Send + Sync;

/// A message handler with its state: what a [`Runner`](super::Runner) calls for each
/// message. Cheap to clone.
#[derive(Clone)]
pub struct MessageService {
    key: MessageKey,
    policy: Policy,
    start: Arc<Start>,
}

impl MessageService {
    /// Where the key of a message is.
    pub fn key(&self) -> MessageKey {
        self.key
    }

    /// The policy the handler's keys are kept under.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Takes one message, presented as `request`, through the flow. `ran` is set once the
    /// handler is called.
    pub(crate) fn start(
        &self,
        idem: Idempotency,
        request: Request,
        ran: Arc<AtomicBool>,
    ) -> RequestFuture {
        (self.start)(idem, request, ran)
    }
}

impl fmt::Debug for MessageService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MessageService")
            .field("key", &self.key)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

/// The message door's [`Door`]: an annotated handler's, which also notes whether the handler
/// was called, so that the runner can tell a refusal from a result.
struct Observed<E> {
    inner: E,
    ran: Arc<AtomicBool>,
}

impl<E: Door> Door for Observed<E> {
    type Head = E::Head;
    type Prepared = E::Prepared;

    const CHECKS_READ_CONTEXT: bool = E::CHECKS_READ_CONTEXT;

    fn attach(prepared: &mut Self::Prepared, context: IdempotencyContext) {
        E::attach(prepared, context);
    }

    fn head(&self, parts: &mut Parts) -> impl Future<Output = Result<Self::Head, Response>> + Send {
        self.inner.head(parts)
    }

    fn prepare(
        &self,
        head: Self::Head,
        parts: Parts,
        body: Bytes,
    ) -> impl Future<Output = Result<Self::Prepared, Response>> + Send {
        self.inner.prepare(head, parts, body)
    }

    fn call(self, prepared: Self::Prepared) -> impl Future<Output = Response> + Send + 'static {
        self.ran.store(true, Ordering::SeqCst);
        self.inner.call(prepared)
    }

    fn call_without_key(
        self,
        request: Request<Body>,
    ) -> impl Future<Output = Response> + Send + 'static {
        self.ran.store(true, Ordering::SeqCst);
        self.inner.call_without_key(request)
    }
}
