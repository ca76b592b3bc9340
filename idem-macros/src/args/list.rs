//! The list arguments, `["a", "b"]`, on one parser: `fingerprint_omit` and
//! `fingerprint_only` hold JSON Pointers, `keep_headers` header names. Each element is refused
//! on its own literal, and every refused element is reported at once.

use syn::{Expr, Lit, LitStr};

use super::{
    keyword::About,
    syntax::{is_token_byte, literal, unwrap_group},
};
use crate::errors::Errors;

/// JSON Pointers to members of a body, each checked to be one: `/`, then tokens in which `~`
/// is `~0` or `~1`. Which lists can work (no pointer twice, none inside another) is
/// `Policy::validate`'s to say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Pointers(pub(crate) Vec<String>);

/// Request header names, checked: lowercase, and none that carries credentials.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HeaderNames(pub(crate) Vec<String>);

/// What a list holds, as its messages name it.
struct Elements {
    /// The elements, for the message about a value that is no list.
    many: &'static str,
    /// One element, for the message about one that is no string.
    one: &'static str,
}

/// `["/a", "/b/0"]`.
pub(super) fn pointers(value: &Expr, about: About) -> syn::Result<Pointers> {
    let elements = Elements {
        many: "JSON Pointers",
        one: "a JSON Pointer",
    };
    strings(value, about, elements, pointer).map(Pointers)
}

/// `["x-a", "x-b"]`.
pub(super) fn header_names(value: &Expr, about: About) -> syn::Result<HeaderNames> {
    let elements = Elements {
        many: "header names",
        one: "a header name",
    };
    strings(value, about, elements, header_name).map(HeaderNames)
}

/// A list of strings, each checked by `check` on its literal.
fn strings(
    value: &Expr,
    about: About,
    elements: Elements,
    check: fn(&LitStr) -> syn::Result<String>,
) -> syn::Result<Vec<String>> {
    let Expr::Array(array) = unwrap_group(value) else {
        return Err(syn::Error::new_spanned(
            value,
            format!(
                "expected a list of {} for `{}`, as in `{}`",
                elements.many, about.name, about.example
            ),
        ));
    };
    let mut strings = Vec::new();
    let mut errors = Errors::default();
    for element in &array.elems {
        let checked = match literal(element) {
            Some(Lit::Str(literal)) => check(literal),
            _ => Err(syn::Error::new_spanned(
                element,
                format!(
                    "expected {} in quotes, as in `{}`",
                    elements.one, about.example
                ),
            )),
        };
        match checked {
            Ok(string) => strings.push(string),
            Err(error) => errors.push(error),
        }
    }
    errors.finish(strings)
}

/// A JSON Pointer to a member: `/`, then tokens in which `~` is `~0` or `~1`.
fn pointer(literal: &LitStr) -> syn::Result<String> {
    let pointer = literal.value();
    let escapes_valid = pointer
        .split('~')
        .skip(1)
        .all(|after| after.starts_with('0') || after.starts_with('1'));
    let problem = if !pointer.starts_with('/') {
        format!(
            "`{pointer}` is not a JSON Pointer to a member; start it with `/`, as in `/{pointer}`"
        )
    } else if !escapes_valid {
        format!(
            "`{pointer}` is not a JSON Pointer: write `~` as `~0`, and `/` within a member's \
             name as `~1`"
        )
    } else {
        return Ok(pointer);
    };
    Err(syn::Error::new_spanned(literal, problem))
}

/// A header name in lowercase, and none that carries credentials: a resumed run is
/// authorized as its recorded principal, never by a kept credential.
fn header_name(literal: &LitStr) -> syn::Result<String> {
    let name = literal.value();
    let lowercase = |byte: u8| is_token_byte(byte) && !byte.is_ascii_uppercase();
    let problem = if name.is_empty() || !name.bytes().all(lowercase) {
        format!(
            "`{name}` is not a header name in lowercase; write it as `{}`",
            name.to_ascii_lowercase()
        )
    } else if ["authorization", "proxy-authorization", "cookie"].contains(&name.as_str()) {
        format!(
            "`{name}` carries credentials, which are never kept: a resumed run is authorized as \
             its recorded principal (see `idem::steps::Resumption`)"
        )
    } else {
        return Ok(name);
    };
    Err(syn::Error::new_spanned(literal, problem))
}
