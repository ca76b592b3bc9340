//! The call that builds what the expansion emits, `::idem::__private::<kind>::new(..)`,
//! located on the attribute's arguments. Shared by the handler's expansion (`Idempotent`,
//! `MessageHandler`) and the gRPC method's (`grpc::Method`).

use proc_macro2::{Delimiter, Group, Span, TokenStream};
use quote::{quote, quote_spanned};

use crate::args::Extent;

/// `::idem::__private::#kind::new(#arguments)`, located on the attribute's arguments.
///
/// `Idempotent::new` is a `const fn` that panics when `Policy::validate` refuses the policy,
/// so a policy that breaks one of its rules fails where the constant is compiled, and rustc
/// reports the panic on this call ("evaluation panicked: invalid idempotency policy: ...").
/// A call's span runs from its first token to its closing parenthesis: with the path where
/// the first argument starts and the parentheses where the last one ends, the error
/// underlines the arguments that made the policy. Only the location changes; the names
/// resolve at the call site, as everywhere else in the expansion.
pub(crate) fn call(
    kind: &TokenStream,
    extent: Option<Extent>,
    arguments: TokenStream,
) -> TokenStream {
    let Some(Extent { first, last }) = extent else {
        return quote!(::idem::__private::#kind::new(#arguments));
    };
    let at = |span: Span| Span::call_site().located_at(span);
    let path = quote_spanned!(at(first)=> ::idem::__private::#kind::new);
    let mut parenthesized = Group::new(Delimiter::Parenthesis, arguments);
    parenthesized.set_span(at(last));
    quote!(#path #parenthesized)
}
