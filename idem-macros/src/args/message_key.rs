//! The value of `key`: where a message handler's key is (`header("Nats-Msg-Id")`,
//! `json("/order_id")`), or which field of a gRPC method's request message keys a call
//! (`field(request_id)`). Unlike the other values it is a call, not a literal.

use syn::{Expr, Lit, LitStr};

use super::{
    keyword::About,
    syntax::{is_token_byte, literal, unwrap_group},
};

/// Where a message's key is, checked; or, for a gRPC method, a field of its request message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum MessageKey {
    Header(String),
    Json(String),
    Field(syn::Ident),
}

/// `header("<name>")`, `json("<pointer>")` or `field(<name>)`.
pub(super) fn message_key(value: &Expr, about: About) -> syn::Result<MessageKey> {
    let expected = || {
        syn::Error::new_spanned(
            value,
            format!(
                r#"expected `header("<name>")` or `json("<pointer>")` (a message handler), or `field(<name>)` (a gRPC method), for `{}`, as in `{}`"#,
                about.name, about.example
            ),
        )
    };
    let Expr::Call(call) = unwrap_group(value) else {
        return Err(expected());
    };
    let (Expr::Path(function), [argument]) =
        (&*call.func, &call.args.iter().collect::<Vec<_>>()[..])
    else {
        return Err(expected());
    };
    if function.path.is_ident("field") {
        return field(argument);
    }
    let Some(Lit::Str(literal)) = literal(argument) else {
        return Err(expected());
    };
    if function.path.is_ident("header") {
        header(literal)
    } else if function.path.is_ident("json") {
        json(literal)
    } else {
        Err(expected())
    }
}

/// The field named in `field(<name>)`.
fn field(argument: &Expr) -> syn::Result<MessageKey> {
    match unwrap_group(argument) {
        Expr::Path(field) if field.path.get_ident().is_some() => Ok(MessageKey::Field(
            field.path.get_ident().expect("checked").clone(),
        )),
        _ => Err(syn::Error::new_spanned(
            argument,
            "expected the name of a field of the request message, as in `field(request_id)`",
        )),
    }
}

/// The header named in `header("<name>")`: a token, in any case, as brokers write theirs
/// (`Nats-Msg-Id`).
fn header(literal: &LitStr) -> syn::Result<MessageKey> {
    let text = literal.value();
    if text.is_empty() || !text.bytes().all(is_token_byte) {
        return Err(syn::Error::new_spanned(
            literal,
            format!(
                "`{text}` is not a header name; use letters, digits and `-`, as in \
                 `Nats-Msg-Id` or `message-id`"
            ),
        ));
    }
    Ok(MessageKey::Header(text))
}

/// The member named in `json("<pointer>")`: a JSON Pointer, `""` being the whole payload.
fn json(literal: &LitStr) -> syn::Result<MessageKey> {
    let text = literal.value();
    if !(text.is_empty() || text.starts_with('/')) {
        return Err(syn::Error::new_spanned(
            literal,
            format!("`{text}` is not a JSON Pointer; start it with `/`, as in `/{text}`"),
        ));
    }
    Ok(MessageKey::Json(text))
}
