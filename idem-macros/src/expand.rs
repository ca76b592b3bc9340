//! Code generation: the handler becomes a constant of type
//! `Idempotent<fn(T1, .., Tn) -> HandlerFuture<Output>>`.
//!
//! ```text
//! #[allow(non_upper_case_globals)]
//! pub const create_payment: ::idem::__private::Idempotent<
//!     fn(State<Db>, Json<New>) -> ::idem::__private::HandlerFuture<Payment>,
//! > = {
//!     async fn create_payment(State(db): State<Db>, Json(new): Json<New>) -> Payment { .. }
//!     ::idem::__private::Idempotent::new(
//!         ::idem::__private::Policy::new().ttl(..),
//!         |__idem_arg0, __idem_arg1| ::idem::__private::boxed(create_payment(__idem_arg0, __idem_arg1)),
//!         || ::idem::__private::LastArgument::<Json<New>>::NEW.runs_on_replay(),
//!     )
//! };
//! ```
//!
//! The original function is nested unchanged in the constant's initializer, so its body,
//! spans and error messages are the user's own; one that names `Self` is emitted next to the
//! constant instead, as a hidden associated function. The constant is what the router names,
//! and it dereferences to the `fn` pointer, so it is called like the function.

use proc_macro2::{Ident, Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::{
    AttrStyle, Attribute, ItemFn, Meta, ReturnType, Safety, Token, Type, Visibility,
    punctuated::Punctuated, spanned::Spanned,
};

use crate::{
    args::{self, Args},
    constructor,
    errors::Errors,
    grpc, policy, validate,
};

/// Expands `#[idempotent(args)] item`. On an error, the function is emitted next to the
/// errors, so that the route naming it raises no further errors.
pub(crate) fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    let function = match syn::parse2::<ItemFn>(item.clone()) {
        Ok(function) => function,
        Err(_) => {
            let error = syn::Error::new_spanned(
                &item,
                "`#[idempotent]` applies to an `async fn` axum handler",
            );
            let error = error.into_compile_error();
            return quote!(#error #item);
        }
    };
    if grpc::is_method(&function) {
        return grpc::expand(args, function);
    }
    let mut errors = Errors::default();
    let args = args::parse(args).map_err(|error| errors.push(error)).ok();
    let types = validate::handler(&function)
        .map_err(|error| errors.push(error))
        .ok();
    let (Some(args), Some(types)) = (args, types) else {
        let error = errors.finish(()).err().map(syn::Error::into_compile_error);
        return fallback(error, function);
    };
    let types = types.into_iter().cloned().collect::<Vec<_>>();
    generate(&args, &types, function)
}

/// The function next to the errors, so that the route naming it raises no second error.
///
/// The function is as written, with the qualifiers the errors ask to change already changed
/// (`async` added; `const`, `unsafe`, `extern` and `...` removed): a router cannot take a
/// plain `fn` as a handler, and would otherwise report the same mistake again. The body is
/// untouched.
fn fallback(error: Option<TokenStream>, mut function: ItemFn) -> TokenStream {
    let sig = &mut function.sig;
    sig.constness = None;
    if sig.asyncness.is_none() {
        sig.asyncness = Some(Token![async](sig.fn_token.span()));
    }
    sig.safety = Safety::Default;
    sig.abi = None;
    if sig.variadic.take().is_some() {
        // The comma before `...` is the last punctuation of the arguments.
        let arguments = std::mem::take(&mut sig.inputs);
        sig.inputs = arguments.into_iter().collect();
    }
    quote!(#error #function)
}

/// The constant that replaces the handler: its type, and `Idempotent::new` with the policy,
/// the call of the original function and the question about its last argument. A message
/// handler (`key = ...`) is a `MessageHandler`, whose `new` takes the key source first.
fn generate(args: &Args, types: &[Type], function: ItemFn) -> TokenStream {
    let handler = Handler::new(function);
    let output = Output::of(&handler.original.sig.output);
    let future = output.future();
    let kind = match args.key {
        Some(_) => format_ident!("MessageHandler"),
        None => format_ident!("Idempotent"),
    };
    let handler_type = quote!(::idem::__private::#kind<fn(#(#types),*) -> #future>);
    let arguments = (0..types.len())
        .map(|index| format_ident!("__idem_arg{index}"))
        .collect::<Vec<_>>();
    let call = handler.call(&arguments, &output);
    let last = match types.last() {
        Some(last) => quote!(#last),
        None => quote!(()),
    };
    let key = args.key.as_ref().map(|key| {
        let key = policy::message_key(key);
        quote!(#key,)
    });
    let policy = policy::policy(args);
    let constructor = constructor::call(
        &quote!(#kind),
        args.extent,
        quote! {
            #key
            #policy,
            |#(#arguments),*| #call,
            || ::idem::__private::LastArgument::<#last>::NEW.runs_on_replay(),
        },
    );
    handler.into_constant(handler_type, constructor)
}

/// The annotated function, taken apart: what goes on the constant, and the original function
/// that goes inside it (or next to it).
struct Handler {
    /// The attributes that belong on the constant (see [`split_attributes`]).
    constant_attrs: Vec<Attribute>,
    vis: Visibility,
    /// The handler's name, which the constant takes.
    ident: Ident,
    /// The function as written, with its other attributes and no visibility; renamed
    /// `__idem_<name>` when it is `associated`.
    original: ItemFn,
    /// Whether the function names `Self`. Such an associated function cannot be nested in
    /// the constant (rustc's E0401): it becomes a hidden associated function next to it,
    /// called as `Self::__idem_<name>`.
    associated: bool,
}

impl Handler {
    fn new(function: ItemFn) -> Self {
        let ItemFn {
            attrs,
            vis,
            sig,
            block,
            ..
        } = function;
        let Split { constant, function } = split_attributes(attrs);
        let ident = sig.ident.clone();
        let associated = mentions_self(&sig, &block);
        let name = if associated {
            format_ident!("__idem_{}", ident, span = ident.span())
        } else {
            ident.clone()
        };
        let original = ItemFn {
            attrs: function,
            vis: Visibility::Inherited,
            modifiers: Default::default(),
            sig: syn::Signature { ident: name, ..sig },
            block,
        };
        Self {
            constant_attrs: constant,
            vis,
            ident,
            original,
            associated,
        }
    }

    /// The original function called with `arguments`, its future boxed. It is spanned on
    /// the return type (or the name), where a future that is not `Send`, or an output that
    /// is not a response, is reported rather than on generated code.
    fn call(&self, arguments: &[Ident], output: &Output) -> TokenStream {
        let name = &self.original.sig.ident;
        let path = if self.associated {
            quote!(Self::#name)
        } else {
            quote!(#name)
        };
        let span = match &self.original.sig.output {
            ReturnType::Type(_, output) => output.span(),
            ReturnType::Default => self.ident.span(),
        };
        let boxed = output.boxing(span);
        quote_spanned! {span=>
            ::idem::__private::#boxed(#path(#(#arguments),*))
        }
    }

    /// The constant, of type `handler_type`, initialized by `constructor`.
    fn into_constant(self, handler_type: TokenStream, constructor: TokenStream) -> TokenStream {
        let Self {
            constant_attrs,
            vis,
            ident,
            original,
            associated,
        } = self;
        if associated {
            quote! {
                #[doc(hidden)]
                #original
                #(#constant_attrs)*
                #[allow(non_upper_case_globals)]
                #vis const #ident: #handler_type = #constructor;
            }
        } else {
            quote! {
                #(#constant_attrs)*
                #[allow(non_upper_case_globals)]
                #vis const #ident: #handler_type = {
                    #original
                    #constructor
                };
            }
        }
    }
}

/// The output of the original function, as the `fn` pointer of the constant returns it.
enum Output {
    /// A type that can be named: the direct call returns it.
    Named(TokenStream),
    /// `impl IntoResponse`, or a type with an `impl Trait` inside: it cannot be named, so the
    /// direct call returns the `Response` it turns into.
    Opaque,
}

impl Output {
    fn of(output: &ReturnType) -> Self {
        match output {
            ReturnType::Default => Self::Named(quote!(())),
            ReturnType::Type(_, output) => {
                let mut impl_traits = validate::ImplTraits::default();
                syn::visit::Visit::visit_type(&mut impl_traits, output);
                if impl_traits.0.is_empty() {
                    Self::Named(quote!(#output))
                } else {
                    Self::Opaque
                }
            }
        }
    }

    /// `HandlerFuture<O>`, the boxed future of the original function.
    fn future(&self) -> TokenStream {
        match self {
            Self::Named(output) => quote!(::idem::__private::HandlerFuture<#output>),
            Self::Opaque => quote!(::idem::__private::HandlerFuture),
        }
    }

    /// The `__private` function that boxes the original's future into [`Self::future`],
    /// spanned where a bound it puts on the output should be reported.
    fn boxing(&self, span: Span) -> proc_macro2::Ident {
        match self {
            Self::Named(_) => format_ident!("boxed", span = span),
            Self::Opaque => format_ident!("boxed_response", span = span),
        }
    }
}

/// Whether the function names `Self` anywhere, macro arguments included: then it is an
/// associated function.
fn mentions_self(sig: &syn::Signature, block: &syn::Block) -> bool {
    fn search(tokens: TokenStream) -> bool {
        tokens.into_iter().any(|token| match token {
            proc_macro2::TokenTree::Ident(ident) => ident == "Self",
            proc_macro2::TokenTree::Group(group) => search(group.stream()),
            _ => false,
        })
    }
    search(quote!(#sig)) || search(quote!(#block))
}

/// The attributes of the constant and those of the nested function.
#[derive(Default)]
struct Split {
    constant: Vec<Attribute>,
    function: Vec<Attribute>,
}

/// Sends each attribute where it means something:
///
/// - to the constant: documentation (the constant is what the docs show), `cfg` (so the
///   whole handler, nested function included, is compiled or not), lint levels (they also
///   reach the nested function, which is inside the constant) and `deprecated` (a route
///   names the constant);
/// - to the nested function: everything else (`#[tracing::instrument]`, `#[inline]`, ...);
/// - `cfg_attr(predicate, a, b)`: split, each attribute by the same rule, under the same
///   predicate.
fn split_attributes(attributes: Vec<Attribute>) -> Split {
    let mut split = Split::default();
    for attribute in attributes {
        if let AttrStyle::Inner(_) = attribute.style {
            // `#![...]` inside the body: it stays there.
            split.function.push(attribute);
        } else if let Some(cfg_attr) = split_cfg_attr(&attribute) {
            split.constant.extend(cfg_attr.constant);
            split.function.extend(cfg_attr.function);
        } else if belongs_to_constant(&attribute.meta) {
            split.constant.push(attribute);
        } else {
            split.function.push(attribute);
        }
    }
    split
}

fn belongs_to_constant(meta: &Meta) -> bool {
    const CONSTANT: [&str; 8] = [
        "doc",
        "cfg",
        "allow",
        "warn",
        "deny",
        "forbid",
        "expect",
        "deprecated",
    ];
    CONSTANT.iter().any(|name| meta.path().is_ident(name))
}

/// `#[cfg_attr(p, a, b)]` split into a `#[cfg_attr(p, ..)]` for the constant and one for the
/// function; `None` if the attribute is not a `cfg_attr` that parses.
fn split_cfg_attr(attribute: &Attribute) -> Option<Split> {
    if !attribute.path().is_ident("cfg_attr") {
        return None;
    }
    let (predicate, metas) = attribute
        .parse_args_with(|input: syn::parse::ParseStream<'_>| {
            let predicate: Meta = input.parse()?;
            input.parse::<Token![,]>()?;
            let metas = Punctuated::<Meta, Token![,]>::parse_terminated(input)?;
            Ok((predicate, metas))
        })
        .ok()?;
    let (constant, function): (Vec<_>, Vec<_>) = metas.into_iter().partition(belongs_to_constant);
    let wrap = |metas: Vec<Meta>| {
        if metas.is_empty() {
            return Vec::new();
        }
        let pound = attribute.pound_token;
        let tokens = quote!(#pound [cfg_attr(#predicate, #(#metas),*)]);
        syn::parse::Parser::parse2(Attribute::parse_outer, tokens).unwrap_or_default()
    };
    Some(Split {
        constant: wrap(constant),
        function: wrap(function),
    })
}
