//! The attribute's arguments: `#[idempotent(ttl = "24h", scope = "user", ...)]`.
//!
//! The macro checks what only it can see: the syntax of each value (a duration literal with
//! the units `ms`, `s`, `m`, `h` and `d`, a scope, one of a few words, a bool). The runtime
//! receives typed values (`Duration`, `Scope`, ...), never strings. Whether the values make a
//! policy that can work (positive durations, a TTL no shorter than the lease, a custom scope
//! name) is for `Policy::validate` alone to say: the expansion runs it where the constant is
//! compiled, and its error is reported on the arguments ([`Extent`]). Every error of the
//! syntax is reported at once.
//!
//! [`Args`] is a field per argument, filled by the one parser of `name = value`
//! (`assignment`, which also refuses a repeat) with the parser of the argument's value
//! (`value`, `list`, `message_key`). A new argument is a line of `keyword`'s table, a field
//! of [`Args`] and a line of [`Args::argument`], and its setter in `policy`.

mod assignment;
mod keyword;
mod list;
mod message_key;
mod syntax;
#[cfg(test)]
mod tests;
mod value;

use proc_macro2::{Span, TokenStream};
use syn::{
    Token,
    parse::{Parse, ParseStream},
};

#[cfg(test)]
pub(crate) use self::keyword::ARGUMENTS;
pub(crate) use self::{
    assignment::Given,
    keyword::{Argument, kw},
    list::{HeaderNames, Pointers},
    message_key::MessageKey,
    value::{Choice, Millis, OnConflict, Scope},
};
use self::{
    assignment::Reader,
    keyword::message_kw,
    list::{header_names, pointers},
    message_key::message_key,
    value::{
        FINGERPRINT, KEY_SYNTAX, ON_STORE_ERROR, boolean, choice, duration, on_conflict,
        resume_after, scope,
    },
};

/// The attribute's arguments, each checked; `None` where the user gave none, so that the
/// policy keeps `Policy::new()`'s default.
#[derive(Debug, Default)]
pub(crate) struct Args {
    pub(crate) ttl: Option<Given<Millis>>,
    pub(crate) scope: Option<Given<Scope>>,
    pub(crate) required: Option<Given<bool>>,
    pub(crate) lease: Option<Given<Millis>>,
    pub(crate) on_conflict: Option<Given<OnConflict>>,
    pub(crate) store_server_errors: Option<Given<bool>>,
    pub(crate) fingerprint: Option<Given<Choice>>,
    pub(crate) fingerprint_omit: Option<Given<Pointers>>,
    pub(crate) fingerprint_only: Option<Given<Pointers>>,
    pub(crate) on_store_error: Option<Given<Choice>>,
    pub(crate) key_syntax: Option<Given<Choice>>,
    /// `None` inside: `"off"`, written out.
    pub(crate) resume_after: Option<Given<Option<Millis>>>,
    pub(crate) keep_headers: Option<Given<HeaderNames>>,
    /// Where a message handler's key is; `None` for an HTTP handler, whose key is the
    /// `Idempotency-Key` header.
    pub(crate) key: Option<Given<MessageKey>>,
    /// Where the arguments are written; `None` without arguments.
    pub(crate) extent: Option<Extent>,
}

/// Where the arguments are written: the first token of the first one and the last token of
/// the last one. A policy that `Policy::validate` refuses is made by the arguments together,
/// and its error is reported from the one to the other (`constructor::call`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Extent {
    pub(crate) first: Span,
    pub(crate) last: Span,
}

/// Parses and checks the attribute's arguments.
pub(crate) fn parse(tokens: TokenStream) -> syn::Result<Args> {
    syn::parse2(tokens)
}

impl Parse for Args {
    /// The arguments, separated by commas. A token that fits no argument's syntax stops the
    /// parse, as in any attribute; every other error is collected.
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut args = Self::default();
        let mut reader = Reader::default();
        let first = input.span();
        while !input.is_empty() {
            args.argument(&mut reader, input)?;
            let last = input.cursor().prev_span();
            args.extent = Some(Extent { first, last });
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        args.check_combinations(&mut reader);
        reader.finish(args)
    }
}

impl Args {
    /// Reads one argument into its field, with the parser of its value.
    fn argument(&mut self, reader: &mut Reader, input: ParseStream<'_>) -> syn::Result<()> {
        if input.peek2(Token![::]) {
            // `ttl::x` is a path, no argument's name.
            reader.unknown(input)
        } else if input.peek(kw::ttl) {
            reader.assign::<kw::ttl, _>(input, &mut self.ttl, duration)
        } else if input.peek(kw::scope) {
            reader.assign::<kw::scope, _>(input, &mut self.scope, scope)
        } else if input.peek(kw::required) {
            reader.assign::<kw::required, _>(input, &mut self.required, boolean)
        } else if input.peek(kw::lease) {
            reader.assign::<kw::lease, _>(input, &mut self.lease, duration)
        } else if input.peek(kw::on_conflict) {
            reader.assign::<kw::on_conflict, _>(input, &mut self.on_conflict, on_conflict)
        } else if input.peek(kw::store_server_errors) {
            reader.assign::<kw::store_server_errors, _>(
                input,
                &mut self.store_server_errors,
                boolean,
            )
        } else if input.peek(kw::fingerprint) {
            reader.assign::<kw::fingerprint, _>(input, &mut self.fingerprint, choice(&FINGERPRINT))
        } else if input.peek(kw::fingerprint_omit) {
            reader.assign::<kw::fingerprint_omit, _>(input, &mut self.fingerprint_omit, pointers)
        } else if input.peek(kw::fingerprint_only) {
            reader.assign::<kw::fingerprint_only, _>(input, &mut self.fingerprint_only, pointers)
        } else if input.peek(kw::on_store_error) {
            reader.assign::<kw::on_store_error, _>(
                input,
                &mut self.on_store_error,
                choice(&ON_STORE_ERROR),
            )
        } else if input.peek(kw::key_syntax) {
            reader.assign::<kw::key_syntax, _>(input, &mut self.key_syntax, choice(&KEY_SYNTAX))
        } else if input.peek(kw::resume_after) {
            reader.assign::<kw::resume_after, _>(input, &mut self.resume_after, resume_after)
        } else if input.peek(kw::keep_headers) {
            reader.assign::<kw::keep_headers, _>(input, &mut self.keep_headers, header_names)
        } else if input.peek(message_kw::key) {
            reader.assign::<message_kw::key, _>(input, &mut self.key, message_key)
        } else {
            reader.unknown(input)
        }
    }

    /// Refuses the arguments that do not go together, on the one that should go.
    fn check_combinations(&self, reader: &mut Reader) {
        let message_handler = self
            .key
            .as_ref()
            .is_some_and(|key| !matches!(key.value, MessageKey::Field(_)));
        if let (true, Some(scope)) = (message_handler, &self.scope) {
            reader.refuse(syn::Error::new(
                scope.span,
                "`scope` does not apply to a message handler: its keys belong to its stream (or \
                 queue) and consumer; remove `scope`",
            ));
        }
        if let (Some(key), Some(resume_after)) = (&self.key, &self.resume_after) {
            let why = match key.value {
                MessageKey::Field(_) => {
                    "`resume_after` does not apply to a gRPC method: a client's retry with the \
                     same key resumes an interrupted call; remove `resume_after`"
                }
                _ => {
                    "`resume_after` does not apply to a message handler: the broker's \
                     redelivery resumes an interrupted message; remove `resume_after`"
                }
            };
            reader.refuse(syn::Error::new(resume_after.span, why));
        }
        // `[]` is the default, no selection: it goes with the other.
        if let (Some(omit), Some(only)) = (&self.fingerprint_omit, &self.fingerprint_only)
            && !omit.value.0.is_empty()
            && !only.value.0.is_empty()
        {
            reader.refuse(syn::Error::new(
                only.span,
                "give `fingerprint_omit` or `fingerprint_only`, not both: one leaves the members \
                 it names out of the fingerprint, the other keeps only those",
            ));
        }
    }
}
