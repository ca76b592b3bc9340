//! `#[idempotent]`: makes one axum handler idempotent under the `Idempotency-Key` header.
//!
//! Use it through the crate `idem`, which re-exports it as `idem::idempotent` (feature
//! `macros`, on by default); its arguments and behaviour are documented on the attribute,
//! [`idempotent`]. The macro only describes the handler's policy; the runtime (`idem-core`,
//! which `idem` re-exports) does the work.

mod args;
mod constructor;
mod duration;
mod errors;
mod expand;
mod grpc;
mod policy;
mod validate;

#[cfg(test)]
mod tests;

use proc_macro::TokenStream;

/// Makes an axum handler idempotent under the `Idempotency-Key` header: the first request with
/// a key runs the handler and its response is stored; a retry with the same key gets that
/// response back, marked `Idempotent-Replayed: true`, without running the handler again.
///
/// ```
/// use axum::{Extension, Json, Router, extract::State, http::StatusCode, routing::post};
/// use idem::{Idempotency, MemoryStore, idempotent};
/// use serde_json::{Value, json};
/// use tower::ServiceExt;
///
/// #[derive(Clone)]
/// struct Db;
///
/// /// Creates a payment. A retry with the same `Idempotency-Key` gets the first response.
/// #[idempotent(ttl = "24h", scope = "global")]
/// async fn create_payment(State(_db): State<Db>, Json(request): Json<Value>)
///     -> (StatusCode, Json<Value>)
/// {
///     (StatusCode::CREATED, Json(json!({ "id": 1, "amount": request["amount"] })))
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let idem = Idempotency::new(MemoryStore::default());
/// let app: Router = Router::new()
///     .route("/payments", post(create_payment))
///     .with_state(Db)
///     // The runtime is found as a request extension.
///     .layer(Extension(idem));
///
/// let request = || {
///     axum::http::Request::post("/payments")
///         .header("content-type", "application/json")
///         .header("idempotency-key", "8e03978e-40d5-43e8-bc93-6894a57f9324")
///         .body(axum::body::Body::from(r#"{"amount": 9800}"#))
///         .unwrap()
/// };
/// let first = app.clone().oneshot(request()).await.unwrap();
/// assert_eq!(first.status(), StatusCode::CREATED);
/// let retry = app.oneshot(request()).await.unwrap();
/// assert_eq!(retry.status(), StatusCode::CREATED);
/// assert_eq!(retry.headers()["idempotent-replayed"], "true");
/// # }
/// ```
///
/// # Arguments
///
/// All are optional, and checked when the handler compiles: a typo or a malformed value is
/// a compile error on that token, and the runtime receives typed values.
///
/// | argument | values | default |
/// | --- | --- | --- |
/// | `ttl` | a duration: how long a completed response is replayed | `"24h"` |
/// | `scope` | `"user"`, `"global"`, `"custom(<name>)"`: whose keys these are | `"user"` |
/// | `required` | `true`: no key is 400; `false`: no key runs without idempotency | `true` |
/// | `lease` | a duration: how long an in-flight request blocks its key without a heartbeat | `"60s"` |
/// | `on_conflict` | `"reject"`: 409 at once; `"wait(<duration>)"`: wait for the first result | `"reject"` |
/// | `store_server_errors` | `false`: a 5xx releases the key; `true`: it is stored and replayed | `false` |
/// | `fingerprint` | `"json"`: canonical JSON (key order ignored), multipart forms by their parts (boundary ignored); `"raw"`: the body bytes | `"json"` |
/// | `fingerprint_omit` | JSON Pointers of members left out of the fingerprint, as `["/clientTimestamp"]`: a retry that differs only there is replayed | `[]` |
/// | `fingerprint_only` | JSON Pointers of the only members fingerprinted, as `["/amount", "/currency"]` (not with `fingerprint_omit`) | `[]` |
/// | `on_store_error` | `"fail"`: 503 when the store is down; `"run"`: run without idempotency | `"fail"` |
/// | `key_syntax` | `"lenient"`: `"abc"` or `abc`; `"strict"`: only the sf-string `"abc"` | `"lenient"` |
/// | `resume_after` | `"off"`, or a duration: the service resumes an operation of several steps that nobody took over within it | `"off"` |
/// | `keep_headers` | request headers kept to run an abandoned operation again, as `["x-source"]`; never credentials | `[]` |
/// | `key` | `header("<name>")` or `json("<pointer>")`: makes a message handler, keyed by that header or JSON member (below); `field(<name>)` on a gRPC method: the request message's field that keys a call without `idempotency-key` metadata | none: an HTTP handler, keyed by `Idempotency-Key` |
///
/// A duration is one or more `<number><unit>` groups with the units `ms`, `s`, `m`, `h` and
/// `d`: `"250ms"`, `"90s"`, `"1h 30m"`, `"7d"`. It must be positive, and `ttl` at least as
/// long as `lease`. A custom scope name is lowercase letters, digits, `_` and `-`, and
/// neither `user` nor `global`. Its principal comes from the runtime's `ResolvePrincipal`.
/// A JSON Pointer of `fingerprint_omit` or `fingerprint_only` starts with `/` and writes `~`
/// as `~0`; none is given twice or inside another, and neither goes with `fingerprint =
/// "raw"` (`idem::fingerprint::members` says what a selection risks).
///
/// These rules are `Policy::validate`'s, which the layer applies too: a handler whose policy
/// breaks one does not compile, and the error (`evaluation panicked: invalid idempotency
/// policy: ...`) underlines the attribute's arguments. A handler in an `impl` block is
/// checked where it is used, when the crate is built; `cargo check` does not evaluate it.
///
/// # Message handlers
///
/// With `key = header("Nats-Msg-Id")` (a header of the message: AMQP `message-id` too) or
/// `key = json("/order_id")` (a member of its JSON payload, by JSON Pointer), the handler is a
/// message handler: a constant of type `idem::message::MessageHandler`, which a
/// `idem::message::Runner` drives over a JetStream consumer or a RabbitMQ queue. Its
/// arguments are axum extractors as above, the payload's last; the same key with another
/// payload is a poison message. Its keys belong to its stream (or queue) and consumer, so
/// `scope` does not apply and is refused; every other argument does.
///
/// ```
/// use axum::{Json, extract::State};
/// use idem::{idempotent, message::{MessageError, MessageKey}};
///
/// #[derive(Clone)]
/// struct Db;
///
/// #[idempotent(key = json("/order_id"), lease = "10s")]
/// async fn on_order_paid(State(_db): State<Db>, Json(event): Json<serde_json::Value>)
///     -> Result<(), MessageError>
/// {
///     if event["amount"].as_i64().is_none() {
///         return Err(MessageError::terminal("an order without an amount"));
///     }
///     Ok(())
/// }
///
/// assert_eq!(on_order_paid.key(), MessageKey::Json("/order_id"));
/// let service = on_order_paid.with_state(Db); // for `Runner::new(idem, service)`
/// # drop(service);
/// ```
///
/// The runner, the brokers and what happens to each message are in `idem::message` and
/// [`[docs/messages.md](https://github.com/idem-rs/idem/blob/main/docs/messages.md)`].
///
/// [`docs/messages.md`]: https://github.com/idem-rs/idem/blob/main/docs/messages.md
///
/// # What a replay checks
///
/// A stored response is answered only to a request that passed every check that guarded the
/// first execution:
///
/// - every extractor that reads only the request's parts (authentication, `Path`, `Query`,
///   headers, `State`) runs before the key is claimed, on every request, replays included;
/// - the body extractor (the last argument) runs before the claim too, on every request, on
///   the body the runtime has already buffered: a custom `FromRequest` that checks a
///   signature over the body is such a **guard**, with no annotation. Its rejection is
///   answered as it is; nothing is claimed or stored;
/// - unless its type implements `idem::PureBody`, as axum's `Json`, `Form`, `RawForm`,
///   `Bytes`, `String` and `Body` do: such an extractor only parses the body, which the
///   fingerprint has already compared, so it runs after the claim and a replay skips it. Its
///   rejection (bad JSON) releases the key: the client can fix the body and retry the same
///   key.
///
/// Checks written inside the handler's body cannot run again, since a replay does not run the
/// handler: put each check that decides who may have the result in an extractor. The module
/// `idem::extract` has a signed webhook as its example.
///
/// # Calling it in a test
///
/// An annotated handler is called as the function it was written as, and returns what the
/// function returns (a `Response` when it returns `impl IntoResponse`, whose type cannot be
/// named):
///
/// ```
/// # use axum::{Json, http::StatusCode};
/// # use idem::idempotent;
/// # #[idempotent(scope = "global")]
/// # async fn create_transfer(Json(transfer): Json<serde_json::Value>) -> (StatusCode, String) {
/// #     (StatusCode::CREATED, transfer.to_string())
/// # }
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let (status, body) = create_transfer(Json(serde_json::json!({ "amount": 5 }))).await;
/// assert_eq!(status, StatusCode::CREATED);
/// # assert_eq!(body, r#"{"amount":5}"#);
/// # }
/// ```
///
/// Such a call runs the function alone, without idempotency: a test of the idempotent
/// behaviour sends requests through a router.
///
/// # What it expands to
///
/// The handler becomes a constant of type
/// `idem::__private::Idempotent<fn(T1, .., Tn) -> HandlerFuture<Output>>`, which
/// implements axum's `Handler`: the route names it as before (`post(create_payment)`), and
/// axum checks the extractors against the router's state where the route is added. The
/// constant dereferences to its `fn` pointer, which is why it can be called. The original
/// function is nested, unchanged, inside the constant:
///
/// ```text
/// #[allow(non_upper_case_globals)]
/// const create_payment: ::idem::__private::Idempotent<
///     fn(State<Db>, Json<Value>) -> ::idem::__private::HandlerFuture<(StatusCode, Json<Value>)>,
/// > = {
///     async fn create_payment(State(_db): State<Db>, Json(request): Json<Value>) -> ... { ... }
///     ::idem::__private::Idempotent::new(
///         ::idem::__private::Policy::new()
///             .ttl(::idem::__private::Duration::from_secs(86400))
///             .scope(::idem::__private::Scope::Global),
///         |__idem_arg0, __idem_arg1| ::idem::__private::boxed(create_payment(__idem_arg0, __idem_arg1)),
///         || ::idem::__private::LastArgument::<Json<Value>>::NEW.runs_on_replay(),
///     )
/// };
/// ```
///
/// The policy names only the arguments given; the defaults are `Policy::new()`'s, and
/// `Idempotent::new` checks it with `Policy::validate` where the constant is compiled. The
/// last line asks whether the last argument's type is a `PureBody`.
///
/// An associated function (in an `impl` block) works too, and a route names it
/// `post(Payments::create)`. One that names `Self` is not nested but kept as a hidden
/// associated function next to the constant, because a nested function cannot see `Self`.
///
/// A handler must be an `async fn` whose argument types can be named: no `self`, no
/// generics, no `impl Trait` arguments, at most 16 arguments (as axum allows).
///
/// # Installing the runtime
///
/// An annotated handler finds the runtime, `idem::Idempotency`, as a request extension:
/// add `.layer(axum::Extension(idem))` to the router, after the routes it covers. Without it
/// the handler answers 500 Problem Details (`misconfigured`) and logs an error.
///
/// # Whose key is it
///
/// With `scope = "user"` (the default), a key belongs to the request's principal, and a
/// request without one is answered 401 Problem Details. By default the principal is the
/// `idem::Principal` request extension, inserted by the application's authentication:
///
/// - a middleware, before the handler runs;
/// - or an extractor among the handler's arguments: the principal is read once every
///   extractor that reads only the request's parts has run, in any position, and before a
///   body extractor (`Json`, `Bytes`, `Form`), which axum requires to come last.
///
/// ```
/// use axum::{extract::FromRequestParts, http::{StatusCode, request::Parts}, Json};
/// use idem::{Principal, idempotent};
///
/// struct User(String);
///
/// impl<S: Send + Sync> FromRequestParts<S> for User {
///     type Rejection = StatusCode;
///
///     async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, StatusCode> {
///         let id = parts.headers.get("x-user").and_then(|v| v.to_str().ok())
///             .ok_or(StatusCode::UNAUTHORIZED)?.to_owned();
///         // Tell idem whose keys this request uses.
///         parts.extensions.insert(Principal::new(id.as_str()));
///         Ok(User(id))
///     }
/// }
///
/// #[idempotent]
/// async fn create_order(user: User, Json(order): Json<serde_json::Value>) -> String {
///     format!("{} ordered {order}", user.0)
/// }
/// # let _: axum::Router = axum::Router::new().route("/orders", axum::routing::post(create_order));
/// ```
///
/// For a custom scope (`"custom(tenant)"`), or to find the user another way, install a
/// `ResolvePrincipal` with `Idempotency::builder(store).principal_resolver(..)`.
/// `scope = "global"` needs no principal: one key space for every caller, for
/// machine-to-machine APIs whose keys are secret or whose results are not.
///
/// # Other attributes
///
/// Doc comments, `#[cfg]`, lint levels (`#[allow]`, `#[expect]`, ...) and `#[deprecated]`
/// go on the constant, which is what the route and the docs see; lint levels reach the
/// nested function from there. Every other attribute (`#[tracing::instrument]`,
/// `#[inline]`, ...) stays on the nested function, and `#[cfg_attr]` is split by the same
/// rule.
///
/// Attribute macros run from the top down. One that must see the handler as a module-level
/// function (`#[utoipa::path]`, which generates an item next to it) goes *above*
/// `#[idempotent]`; one that rewrites the function itself (`#[tracing::instrument]`) goes
/// below, where it applies to the nested function. `#[axum::debug_handler]` works in either
/// place: above, it checks the function as written and calls the constant as a function;
/// below, it checks the nested function (give it `state = ..` when the state is not named by
/// a `State` argument).
///
/// The design, and what each choice costs, is in [`[docs/macro.md](https://github.com/idem-rs/idem/blob/main/docs/macro.md)`].
///
/// [`docs/macro.md`]: https://github.com/idem-rs/idem/blob/main/docs/macro.md
#[proc_macro_attribute]
pub fn idempotent(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::expand(args.into(), item.into()).into()
}
