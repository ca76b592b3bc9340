//! Reading a value's tokens, shared by every value parser: its literal, a string, and the
//! bytes a header name is made of.
//!
//! A value reaches the macro wrapped in the invisible groups `macro_rules!` adds when the
//! attribute is written by a declarative macro (`$value:expr`); every reader looks through
//! them, so such an attribute means what it says.

use syn::{Expr, Lit, LitStr};

use super::keyword::About;

/// The literal of a value, looking through invisible groups.
pub(super) fn literal(value: &Expr) -> Option<&Lit> {
    match unwrap_group(value) {
        Expr::Lit(literal) => Some(&literal.lit),
        _ => None,
    }
}

/// A value without its invisible groups.
pub(super) fn unwrap_group(value: &Expr) -> &Expr {
    match value {
        Expr::Group(group) => unwrap_group(&group.expr),
        other => other,
    }
}

/// The string literal of a value, or the error that asks for one, on the value.
pub(super) fn string(value: &Expr, about: About) -> syn::Result<&LitStr> {
    match literal(value) {
        Some(Lit::Str(string)) => Ok(string),
        _ => Err(syn::Error::new_spanned(
            value,
            format!(
                "expected a string for `{}`, as in `{}`",
                about.name, about.example
            ),
        )),
    }
}

/// Whether `byte` may appear in a header name: RFC 9110's `tchar`.
pub(super) fn is_token_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}
