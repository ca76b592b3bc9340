//! The policy the expansion passes to `Idempotent::new`: `Policy::new()` and one setter per
//! argument the user gave, so that the defaults live in `Policy::new()` only.
//!
//! ```text
//! ::idem::__private::Policy::new()
//!     .ttl(::idem::__private::Duration::from_secs(86400))
//!     .scope(::idem::__private::Scope::User)
//! ```
//!
//! Each setter is spanned on the value the user wrote.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};

use crate::args::{
    Args, Argument, Choice, Given, HeaderNames, MessageKey, Millis, OnConflict, Pointers, Scope, kw,
};

/// The policy expression: the setters come in the order of the fields of [`Args`], whatever
/// the order the arguments were written in.
pub(crate) fn policy(args: &Args) -> TokenStream {
    let Args {
        ttl,
        scope,
        required,
        lease,
        on_conflict,
        store_server_errors,
        fingerprint,
        fingerprint_omit,
        fingerprint_only,
        on_store_error,
        key_syntax,
        resume_after,
        keep_headers,
        key: _,
        extent: _,
    } = args;
    let setters = [
        setter::<kw::ttl>(ttl),
        setter::<kw::scope>(scope),
        setter::<kw::required>(required),
        setter::<kw::lease>(lease),
        setter::<kw::on_conflict>(on_conflict),
        setter::<kw::store_server_errors>(store_server_errors),
        setter::<kw::fingerprint>(fingerprint),
        pointers_setter::<kw::fingerprint_omit>(fingerprint_omit),
        pointers_setter::<kw::fingerprint_only>(fingerprint_only),
        setter::<kw::on_store_error>(on_store_error),
        setter::<kw::key_syntax>(key_syntax),
        resume_setter(resume_after),
        setter::<kw::keep_headers>(keep_headers),
    ];
    quote!(::idem::__private::Policy::new() #(#setters)*)
}

/// `MessageKey::Header("Nats-Msg-Id")` or `MessageKey::Json("/id")`, spanned on the value.
pub(crate) fn message_key(key: &Given<MessageKey>) -> TokenStream {
    let span = key.span;
    match &key.value {
        MessageKey::Header(name) => {
            quote_spanned!(span=> ::idem::__private::MessageKey::Header(#name))
        }
        MessageKey::Json(pointer) => {
            quote_spanned!(span=> ::idem::__private::MessageKey::Json(#pointer))
        }
        MessageKey::Field(_) => quote_spanned!(span=> ::core::compile_error!(
            "`field(..)` keys a gRPC method of a service's trait impl; a message handler's key is `header(..)` or `json(..)`"
        )),
    }
}

/// `.name(value)`, named after the argument `K` and spanned on its value; nothing for an
/// argument not given.
fn setter<K: Argument>(given: &Option<Given<impl Expression>>) -> TokenStream {
    let Some(Given { value, span }) = given else {
        return TokenStream::new();
    };
    let setter = format_ident!("{}", K::ABOUT.name, span = *span);
    let value = value.expression(*span);
    quote_spanned!(*span=> .#setter(#value))
}

/// `.resume_after(duration)`; nothing for `"off"`, the default, or an argument not given.
fn resume_setter(given: &Option<Given<Option<Millis>>>) -> TokenStream {
    match given {
        Some(Given {
            value: Some(after),
            span,
        }) => setter::<kw::resume_after>(&Some(Given {
            value: *after,
            span: *span,
        })),
        _ => TokenStream::new(),
    }
}

/// `.fingerprint_omit(&[..])` or `.fingerprint_only(&[..])`; nothing for `[]`, the default
/// (no selection), or an argument not given.
fn pointers_setter<K: Argument>(given: &Option<Given<Pointers>>) -> TokenStream {
    match given {
        Some(Given { value, .. }) if value.0.is_empty() => TokenStream::new(),
        _ => setter::<K>(given),
    }
}

/// A checked value as the expression its setter takes.
trait Expression {
    /// The expression, spanned on the value the user wrote.
    fn expression(&self, span: Span) -> TokenStream;
}

impl Expression for bool {
    fn expression(&self, span: Span) -> TokenStream {
        quote_spanned!(span=> #self)
    }
}

impl Expression for Millis {
    /// `Duration::from_secs(n)` for whole seconds, else `Duration::from_millis(n)`.
    fn expression(&self, span: Span) -> TokenStream {
        let Self(millis) = *self;
        let (constructor, amount) = if millis.is_multiple_of(1000) {
            ("from_secs", millis / 1000)
        } else {
            ("from_millis", millis)
        };
        let constructor = format_ident!("{constructor}", span = span);
        let mut amount = proc_macro2::Literal::u64_unsuffixed(amount);
        amount.set_span(span);
        quote_spanned!(span=> ::idem::__private::Duration::#constructor(#amount))
    }
}

impl Expression for Scope {
    fn expression(&self, span: Span) -> TokenStream {
        match self {
            Self::User => quote_spanned!(span=> ::idem::__private::Scope::User),
            Self::Global => quote_spanned!(span=> ::idem::__private::Scope::Global),
            Self::Custom(name) => {
                quote_spanned!(span=> ::idem::__private::Scope::Custom(#name))
            }
        }
    }
}

impl Expression for OnConflict {
    fn expression(&self, span: Span) -> TokenStream {
        match self {
            Self::Reject => quote_spanned!(span=> ::idem::__private::OnConflict::Reject),
            Self::Wait(wait) => {
                let wait = wait.expression(span);
                quote_spanned!(span=> ::idem::__private::OnConflict::Wait(#wait))
            }
        }
    }
}

impl Expression for HeaderNames {
    /// A reference to a `static` array of `HeaderName::from_static("x-a")`: the names are
    /// lowercase tokens, which `from_static` takes, and a `HeaderName` has a destructor, so a
    /// constant can only refer to the array as a static.
    fn expression(&self, span: Span) -> TokenStream {
        let names = self.0.iter();
        let count = proc_macro2::Literal::usize_unsuffixed(self.0.len());
        quote_spanned!(span=> {
            static __IDEM_KEEP_HEADERS: [::idem::__private::HeaderName; #count] =
                [#(::idem::__private::HeaderName::from_static(#names)),*];
            &__IDEM_KEEP_HEADERS
        })
    }
}

impl Expression for Pointers {
    /// `&["/a", "/b"]`: a constant can refer to a slice of string literals.
    fn expression(&self, span: Span) -> TokenStream {
        let pointers = self.0.iter();
        quote_spanned!(span=> &[#(#pointers),*])
    }
}

impl Expression for Choice {
    fn expression(&self, span: Span) -> TokenStream {
        let enum_name = format_ident!("{}", self.enum_name, span = span);
        let variant = format_ident!("{}", self.variant, span = span);
        quote_spanned!(span=> ::idem::__private::#enum_name::#variant)
    }
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::*;
    use crate::args;

    #[test]
    fn no_arguments_is_policy_new() {
        let args = args::parse(quote!()).unwrap();
        assert_eq!(
            policy(&args).to_string(),
            quote!(::idem::__private::Policy::new()).to_string()
        );
    }

    #[test]
    fn setters_come_in_the_order_of_the_fields_whatever_the_written_order() {
        let args = args::parse(quote!(
            key_syntax = "strict",
            on_conflict = "wait(1500ms)",
            ttl = "1h",
            scope = "custom(tenant)"
        ))
        .unwrap();
        let expected = quote! {
            ::idem::__private::Policy::new()
                .ttl(::idem::__private::Duration::from_secs(3600))
                .scope(::idem::__private::Scope::Custom("tenant"))
                .on_conflict(::idem::__private::OnConflict::Wait(
                    ::idem::__private::Duration::from_millis(1500)
                ))
                .key_syntax(::idem::__private::KeySyntax::Strict)
        };
        assert_eq!(policy(&args).to_string(), expected.to_string());
    }
}
