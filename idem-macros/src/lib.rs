//! The `#[idempotent]` attribute for axum handlers.
//!
//! Use it through `idem-core`, which re-exports it as `idem_core::idempotent`.

mod args;
mod duration;
mod expand;
mod validate;

use proc_macro::TokenStream;

/// Makes an axum handler idempotent.
#[proc_macro_attribute]
pub fn idempotent(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::expand(args.into(), item.into()).into()
}
