//! One argument, `name = value`: the one parser of every argument's syntax, and the one check
//! that refuses an argument given twice (axum-macros' `parse_assignment_attribute` and its
//! `Combine` step). An argument's own code is only the parser of its value.

use proc_macro2::{Group, Span, TokenStream};
use quote::{ToTokens, quote};
use syn::{
    Expr, Meta, Token,
    parse::{Parse, ParseStream},
    spanned::Spanned,
    token,
};

use super::keyword::{About, Argument, every_name};
use crate::errors::Errors;

/// A checked value, with the span of the tokens it was written as.
#[derive(Debug)]
pub(crate) struct Given<T> {
    pub(crate) value: T,
    pub(crate) span: Span,
}

/// Reads the arguments one at a time, and collects what is wrong with them.
#[derive(Default)]
pub(super) struct Reader {
    /// The arguments given so far, to refuse one given twice.
    given: Vec<&'static str>,
    /// Errors about which arguments are given: unknown, repeated, without a value, or not
    /// with another.
    names: Errors,
    /// Errors about the values given, reported after those about the names: the user reads
    /// first which arguments are wrong, then what is wrong with the values of the others.
    values: Errors,
}

impl Reader {
    /// Reads `K = value` into `slot`, the value checked by `check`. An argument given twice,
    /// or without a value, is refused on its name; a value `check` refuses leaves `slot`
    /// empty.
    pub(super) fn assign<K: Argument, T>(
        &mut self,
        input: ParseStream<'_>,
        slot: &mut Option<Given<T>>,
        check: impl FnOnce(&Expr, About) -> syn::Result<T>,
    ) -> syn::Result<()> {
        let keyword: K = input.parse()?;
        let assignment: Assignment = input.parse()?;
        if !self.first_time(&keyword, K::ABOUT) {
            return Ok(());
        }
        let value = match assignment {
            Assignment::Value(value) => value,
            Assignment::Missing(list) => {
                self.refuse(missing_value(quote!(#keyword #list), K::ABOUT));
                return Ok(());
            }
        };
        match check(&value, K::ABOUT) {
            Ok(checked) => {
                let span = value.span();
                *slot = Some(Given {
                    value: checked,
                    span,
                });
            }
            Err(error) => self.values.push(error),
        }
        Ok(())
    }

    /// The one check for a repeated argument: whether `keyword` is given for the first time.
    /// A repeat is refused on its name, even if the first had no valid value.
    fn first_time(&mut self, keyword: &impl ToTokens, about: About) -> bool {
        if self.given.contains(&about.name) {
            let message = format!(
                "repeated argument `{}`; give each argument at most once",
                about.name
            );
            self.refuse(syn::Error::new_spanned(keyword, message));
            return false;
        }
        self.given.push(about.name);
        true
    }

    /// Reads an argument whose name is none of the arguments', and refuses it on its name.
    pub(super) fn unknown(&mut self, input: ParseStream<'_>) -> syn::Result<()> {
        let meta: Meta = input.parse()?;
        let path = meta.path().to_token_stream().to_string().replace(' ', "");
        self.refuse(syn::Error::new_spanned(
            meta.path(),
            format!(
                "unknown argument `{path}`; expected one of {}",
                every_name()
            ),
        ));
        Ok(())
    }

    /// Refuses an argument, or two that do not go together, on its name or its value.
    pub(super) fn refuse(&mut self, error: syn::Error) {
        self.names.push(error);
    }

    /// `value`, or every error found, those about the names first.
    pub(super) fn finish<T>(self, value: T) -> syn::Result<T> {
        let mut errors = self.names;
        errors.append(self.values);
        errors.finish(value)
    }
}

/// What follows an argument's name.
enum Assignment {
    /// `= value`.
    Value(Expr),
    /// Nothing, or a list (`ttl("24h")`), kept for the error's span.
    Missing(Option<Group>),
}

impl Parse for Assignment {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            return input.parse().map(Self::Value);
        }
        let list =
            input.peek(token::Paren) || input.peek(token::Bracket) || input.peek(token::Brace);
        Ok(Self::Missing(if list {
            Some(input.parse()?)
        } else {
            None
        }))
    }
}

/// The error for `name` or `name(..)`, on those tokens, where `name = value` was expected.
fn missing_value(written: TokenStream, about: About) -> syn::Error {
    let message = format!("expected `{} = ...`, as in `{}`", about.name, about.example);
    syn::Error::new_spanned(written, message)
}
