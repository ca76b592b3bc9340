//! `#[idempotent]` on a method of a tonic service's trait impl.
//!
//! tonic's generated traits are `#[async_trait]`, which rewrites every method of the impl
//! before this attribute sees it: `async fn m(&self, request: Request<M>) -> R { body }`
//! arrives as `fn m<'life0, 'async_trait>(&'life0 self, request: Request<M>) -> Pin<Box<dyn
//! Future<Output = R> + Send + 'async_trait>>` whose body is `Box::pin(async move { let __self
//! = self; let request = request; ... })`, with every `self` of the body renamed `__self`
//! (tracing's `#[instrument]` meets the same shape). The expansion keeps the signature and
//! hands the inner block to the runtime as the method's body, owned:
//!
//! ```text
//! fn create_payment<'life0, 'async_trait>(&'life0 self, request: Request<M>) -> Pin<Box<..>> .. {
//!     const __IDEM_METHOD: ::idem::__private::grpc::Method =
//!         ::idem::__private::grpc::Method::new(::idem::__private::Policy::new()..);
//!     let __idem_service = ::core::clone::Clone::clone(self);
//!     ::std::boxed::Box::pin(::idem::__private::grpc::unary(
//!         &__IDEM_METHOD,
//!         ::core::option::Option::Some::<fn(&M) -> &str>(|__idem_message| &__idem_message.request_id),
//!         request,
//!         move |request| async move { let __self = &__idem_service; let request = request; .. },
//!     ))
//! }
//! ```
//!
//! A `&self` method needs `Self: Clone` (a service is usually a handle on shared state); a
//! `self: Arc<Self>` method (tonic-build's `use_arc_self`) moves its `Arc`.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::{
    Expr, FnArg, GenericArgument, ItemFn, Local, Pat, PathArguments, ReturnType, Stmt, Type,
    spanned::Spanned,
};

use crate::{
    args::{self, Args, MessageKey},
    constructor,
    errors::Errors,
    policy,
};

/// Whether `function` is a gRPC method: it takes `self` and one `Request<_>`.
pub(crate) fn is_method(function: &ItemFn) -> bool {
    let inputs = &function.sig.inputs;
    let receiver = inputs.first().is_some_and(|first| match first {
        FnArg::Receiver(_) => true,
        FnArg::Typed(typed) => matches!(&*typed.pat, Pat::Ident(ident) if ident.ident == "self"),
    });
    receiver && inputs.len() == 2 && inputs.last().and_then(request_message).is_some()
}

/// `M` of an argument typed `Request<M>` (any path ending in `Request`).
fn request_message(argument: &FnArg) -> Option<&Type> {
    let FnArg::Typed(typed) = argument else {
        return None;
    };
    let Type::Path(path) = &*typed.ty else {
        return None;
    };
    let last = path.path.segments.last()?;
    let PathArguments::AngleBracketed(generics) = &last.arguments else {
        return None;
    };
    match (last.ident == "Request", generics.args.first()) {
        (true, Some(GenericArgument::Type(message))) if generics.args.len() == 1 => Some(message),
        _ => None,
    }
}

/// The method, made idempotent; or the errors next to it as written.
pub(crate) fn expand(args: TokenStream, function: ItemFn) -> TokenStream {
    let mut errors = Errors::default();
    let args = args::parse(args).map_err(|error| errors.push(error)).ok();
    if let Some(args) = &args {
        arguments(args, &mut errors);
    }
    let parts = Parts::of(&function)
        .map_err(|error| errors.push(error))
        .ok();
    match (args, parts, errors.finish(())) {
        (Some(args), Some(parts), Ok(())) => generate(&args, parts, function),
        (_, _, result) => {
            let error = result.err().map(syn::Error::into_compile_error);
            quote!(#error #function)
        }
    }
}

/// The arguments that mean nothing on a gRPC method.
fn arguments(args: &Args, errors: &mut Errors) {
    if let Some(fingerprint) = &args.fingerprint {
        errors.push(syn::Error::new(
            fingerprint.span,
            "`fingerprint` does not apply to a gRPC method: its fingerprint is over the encoded \
             request message; remove it",
        ));
    }
    if let Some(key) = &args.key
        && !matches!(key.value, MessageKey::Field(_))
    {
        errors.push(syn::Error::new(
            key.span,
            "a gRPC method is keyed by its `idempotency-key` metadata, and by a field of its \
             request message with `key = field(<name>)`; `header(..)` and `json(..)` key \
             message handlers",
        ));
    }
}

/// What the expansion takes from the method `#[async_trait]` wrote.
struct Parts {
    /// The request message's type.
    message: Type,
    /// The request argument's name.
    request: syn::Ident,
    /// Whether the receiver is `self: Arc<Self>` rather than `&self`.
    arc_receiver: bool,
    /// The statements of `Box::pin(async move { .. })`.
    statements: Vec<Stmt>,
}

impl Parts {
    fn of(function: &ItemFn) -> syn::Result<Self> {
        let not_rewritten = || {
            syn::Error::new_spanned(
                &function.sig,
                "an `#[idempotent]` gRPC method belongs in the `#[tonic::async_trait]` impl of \
                 the service's trait, written as an `async fn`, as tonic's generated traits ask",
            )
        };
        if function.sig.asyncness.is_some() || matches!(function.sig.output, ReturnType::Default) {
            return Err(not_rewritten());
        }
        let arguments = &function.sig.inputs;
        let message = arguments.last().and_then(request_message).cloned();
        let request = match arguments.last() {
            Some(FnArg::Typed(typed)) => match &*typed.pat {
                Pat::Ident(ident) => Some(ident.ident.clone()),
                _ => None,
            },
            _ => None,
        };
        let arc_receiver = match arguments.first() {
            Some(FnArg::Receiver(receiver)) => {
                !matches!(receiver.kind, syn::ReceiverKind::Reference(..))
            }
            _ => true,
        };
        let statements = boxed_block(function).ok_or_else(not_rewritten)?;
        match (message, request) {
            (Some(message), Some(request)) => Ok(Self {
                message,
                request,
                arc_receiver,
                statements,
            }),
            _ => Err(not_rewritten()),
        }
    }
}

/// The statements of the body `Box::pin(async move { .. })`.
fn boxed_block(function: &ItemFn) -> Option<Vec<Stmt>> {
    let [Stmt::Expr(Expr::Call(call), None)] = &function.block.stmts[..] else {
        return None;
    };
    let Expr::Path(callee) = &*call.func else {
        return None;
    };
    let is_pin = callee
        .path
        .segments
        .last()
        .is_some_and(|last| last.ident == "pin");
    match (is_pin, call.args.first()) {
        (true, Some(Expr::Async(block))) if call.args.len() == 1 => Some(block.block.stmts.clone()),
        _ => None,
    }
}

/// The method with its body handed to `grpc::unary`.
fn generate(args: &Args, parts: Parts, mut function: ItemFn) -> TokenStream {
    let Parts {
        message,
        request,
        arc_receiver,
        mut statements,
    } = parts;
    let owned = if arc_receiver {
        quote!(__idem_service)
    } else {
        quote!(&__idem_service)
    };
    let Some(receiver) = statements.iter_mut().find_map(rebinds_self) else {
        let error = syn::Error::new_spanned(
            &function.block,
            "this method's body is not the one `#[async_trait]` writes (`let __self = self;` is \
             missing): put `#[idempotent]` on the `async fn` of an `#[async_trait]` impl",
        );
        let error = error.into_compile_error();
        return quote!(#error #function);
    };
    *receiver = syn::parse2(owned).expect("an expression");
    let own = if arc_receiver {
        quote!(let __idem_service = self;)
    } else {
        quote_spanned!(function.sig.inputs.span()=> let __idem_service = ::core::clone::Clone::clone(self);)
    };
    let key = match args.key.as_ref().map(|key| &key.value) {
        Some(MessageKey::Field(field)) => quote_spanned!(field.span()=>
            ::core::option::Option::Some::<fn(&#message) -> &str>(
                |__idem_message| &__idem_message.#field
            )
        ),
        _ => quote!(::core::option::Option::None),
    };
    let policy = policy::policy(args);
    let method = constructor::call(&quote!(grpc::Method), args.extent, policy);
    let body = quote! {
        {
            const __IDEM_METHOD: ::idem::__private::grpc::Method = #method;
            #own
            ::std::boxed::Box::pin(::idem::__private::grpc::unary(
                &__IDEM_METHOD,
                #key,
                #request,
                move |#request| async move { #(#statements)* },
            ))
        }
    };
    *function.block = syn::parse2(body).expect("a block");
    quote!(#function)
}

/// The initializer of `let __self = self;`, the one use of `self` `#[async_trait]` leaves.
fn rebinds_self(statement: &mut Stmt) -> Option<&mut Expr> {
    let Stmt::Local(Local {
        pat: Pat::Ident(binding),
        init: Some(init),
        ..
    }) = statement
    else {
        return None;
    };
    let is_self = matches!(&*init.expr, Expr::Path(path) if path.path.is_ident("self"));
    (binding.ident == "__self" && is_self).then_some(&mut *init.expr)
}
