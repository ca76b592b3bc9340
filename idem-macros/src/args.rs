//! The attribute's arguments: `#[idempotent(ttl = "24h", scope = "user", ...)]`.
//!
//! The macro checks what only it can see: the syntax of each value (a duration literal with
//! the units `ms`, `s`, `m`, `h` and `d`, a scope, one of a few words, a bool). The runtime
//! receives typed values (`Duration`, `Scope`, ...), never strings. Whether the values make a
//! policy that can work (positive durations, a TTL no shorter than the lease, a custom scope
//! name) is for `Policy::validate` alone to say: the expansion runs it where the constant is
//! compiled, and its error is reported on the arguments ([`Extent`]). Every error of the
//! syntax is reported at once.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote};
use syn::{
    Expr, Lit, LitStr, Meta, Token,
    parse::{Parse, ParseStream},
    spanned::Spanned,
    token,
};

use crate::{duration, errors::Errors};

/// Declares the arguments, in the order of the documentation and of the generated policy:
/// each one's keyword, its default as written in the attribute, and an example of it for
/// messages (a value other than the default: `required = false`).
macro_rules! arguments {
    ($($name:ident: default $default:literal, example $example:literal;)*) => {
        /// The arguments' names.
        pub(crate) mod kw {
            $(syn::custom_keyword!($name);)*
        }

        $(
            impl Argument for kw::$name {
                const ABOUT: About = About { name: stringify!($name), example: $example };
            }
        )*

        /// Every argument's name and default, in order.
        pub(crate) const ARGUMENTS: &[(&str, &str)] = &[$((stringify!($name), $default)),*];
    };
}

arguments! {
    ttl: default r#""24h""#, example r#"ttl = "24h""#;
    scope: default r#""user""#, example r#"scope = "global""#;
    required: default "true", example "required = false";
    lease: default r#""60s""#, example r#"lease = "60s""#;
    on_conflict: default r#""reject""#, example r#"on_conflict = "wait(5s)""#;
    store_server_errors: default "false", example "store_server_errors = true";
    fingerprint: default r#""json""#, example r#"fingerprint = "raw""#;
    fingerprint_omit: default "[]", example r#"fingerprint_omit = ["/clientTimestamp"]"#;
    fingerprint_only: default "[]", example r#"fingerprint_only = ["/amount", "/currency"]"#;
    on_store_error: default r#""fail""#, example r#"on_store_error = "run""#;
    key_syntax: default r#""lenient""#, example r#"key_syntax = "strict""#;
    resume_after: default r#""off""#, example r#"resume_after = "30s""#;
    keep_headers: default "[]", example r#"keep_headers = ["x-request-source"]"#;
}

/// The argument that makes a handler a message handler, apart from the policy's: it has no
/// default, and no `Policy` setter.
pub(crate) mod message_kw {
    syn::custom_keyword!(key);
}

impl Argument for message_kw::key {
    const ABOUT: About = About {
        name: "key",
        example: r#"key = header("Nats-Msg-Id")"#,
    };
}

/// An argument's keyword.
pub(crate) trait Argument: Parse + ToTokens {
    /// What messages say about the argument.
    const ABOUT: About;
}

/// What messages say about an argument: its name (also the name of the `Policy` setter it
/// calls), and an example of it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct About {
    pub(crate) name: &'static str,
    example: &'static str,
}

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

/// A checked value, with the span of the tokens it was written as.
#[derive(Debug)]
pub(crate) struct Given<T> {
    pub(crate) value: T,
    pub(crate) span: Span,
}

/// A duration, in milliseconds. Zero is a valid literal: that a duration must be positive is
/// a rule of the policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Millis(pub(crate) u64);

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    User,
    Global,
    /// The name as written; `Policy::validate` holds the rules of a custom scope name.
    Custom(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OnConflict {
    Reject,
    Wait(Millis),
}

/// JSON Pointers to members of a body, each checked to be one: `/`, then tokens in which `~`
/// is `~0` or `~1`. Which lists can work (no pointer twice, none inside another) is
/// `Policy::validate`'s to say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Pointers(pub(crate) Vec<String>);

/// Request header names, checked: lowercase, and none that carries credentials.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HeaderNames(pub(crate) Vec<String>);

/// Where a message's key is: `header("Nats-Msg-Id")` or `json("/order_id")`, checked; or,
/// for a gRPC method, a field of its request message, `field(request_id)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum MessageKey {
    Header(String),
    Json(String),
    Field(syn::Ident),
}

/// A variant of one of `__private`'s enums, named by a word: `fingerprint = "raw"` is
/// `FingerprintMode::Raw`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Choice {
    pub(crate) enum_name: &'static str,
    pub(crate) variant: &'static str,
}

/// The words of an argument that names a variant of one of `__private`'s enums.
struct Words {
    enum_name: &'static str,
    /// Each word, with the variant it names.
    words: &'static [(&'static str, &'static str)],
}

static FINGERPRINT: Words = Words {
    enum_name: "FingerprintMode",
    words: &[("json", "Json"), ("raw", "Raw")],
};

static ON_STORE_ERROR: Words = Words {
    enum_name: "OnStoreError",
    words: &[("fail", "Fail"), ("run", "RunWithoutRecord")],
};

static KEY_SYNTAX: Words = Words {
    enum_name: "KeySyntax",
    words: &[("lenient", "Lenient"), ("strict", "Strict")],
};

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
            reader.argument(input, &mut args)?;
            let last = input.cursor().prev_span();
            args.extent = Some(Extent { first, last });
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        reader.finish(args)
    }
}

/// Reads the arguments one by one into their fields, and collects what is wrong with them.
#[derive(Default)]
struct Reader {
    /// The arguments given so far, to refuse one given twice.
    seen: Vec<&'static str>,
    /// Errors about which arguments are given: unknown, repeated, without a value.
    names: Errors,
    /// Errors about the values given, reported after those about the names: the user reads
    /// first which arguments are wrong, then what is wrong with the values of the others.
    values: Errors,
}

impl Reader {
    /// Reads one argument into its field of `args`.
    fn argument(&mut self, input: ParseStream<'_>, args: &mut Args) -> syn::Result<()> {
        if input.peek2(Token![::]) {
            // `ttl::x` is a path, no argument's name.
            self.unknown(input)
        } else if input.peek(kw::ttl) {
            self.read::<kw::ttl, _>(input, &mut args.ttl, duration)
        } else if input.peek(kw::scope) {
            self.read::<kw::scope, _>(input, &mut args.scope, scope)
        } else if input.peek(kw::required) {
            self.read::<kw::required, _>(input, &mut args.required, boolean)
        } else if input.peek(kw::lease) {
            self.read::<kw::lease, _>(input, &mut args.lease, duration)
        } else if input.peek(kw::on_conflict) {
            self.read::<kw::on_conflict, _>(input, &mut args.on_conflict, on_conflict)
        } else if input.peek(kw::store_server_errors) {
            self.read::<kw::store_server_errors, _>(input, &mut args.store_server_errors, boolean)
        } else if input.peek(kw::fingerprint_omit) {
            self.read::<kw::fingerprint_omit, _>(input, &mut args.fingerprint_omit, pointers)
        } else if input.peek(kw::fingerprint_only) {
            self.read::<kw::fingerprint_only, _>(input, &mut args.fingerprint_only, pointers)
        } else if input.peek(kw::fingerprint) {
            self.read::<kw::fingerprint, _>(input, &mut args.fingerprint, choice(&FINGERPRINT))
        } else if input.peek(kw::on_store_error) {
            self.read::<kw::on_store_error, _>(
                input,
                &mut args.on_store_error,
                choice(&ON_STORE_ERROR),
            )
        } else if input.peek(kw::key_syntax) {
            self.read::<kw::key_syntax, _>(input, &mut args.key_syntax, choice(&KEY_SYNTAX))
        } else if input.peek(kw::resume_after) {
            self.read::<kw::resume_after, _>(input, &mut args.resume_after, resume_after)
        } else if input.peek(kw::keep_headers) {
            self.read::<kw::keep_headers, _>(input, &mut args.keep_headers, header_names)
        } else if input.peek(message_kw::key) {
            self.read::<message_kw::key, _>(input, &mut args.key, message_key)
        } else {
            self.unknown(input)
        }
    }

    /// Reads `K = value` into `slot`, the value checked by `check`. An argument given twice,
    /// or without a value, is refused on its name.
    fn read<K: Argument, T>(
        &mut self,
        input: ParseStream<'_>,
        slot: &mut Option<Given<T>>,
        check: impl FnOnce(&Expr, About) -> syn::Result<T>,
    ) -> syn::Result<()> {
        let keyword: K = input.parse()?;
        let assignment = Assignment::parse(input)?;
        if !self.first_time(&keyword, K::ABOUT) {
            return Ok(());
        }
        let value = match assignment {
            Assignment::Value(value) => value,
            Assignment::Missing(list) => {
                self.names.push(missing_value(&keyword, list, K::ABOUT));
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
    /// A repeat is refused on its name.
    fn first_time(&mut self, keyword: &impl ToTokens, about: About) -> bool {
        if self.seen.contains(&about.name) {
            let message = format!(
                "repeated argument `{}`; give each argument at most once",
                about.name
            );
            self.names.push(syn::Error::new_spanned(keyword, message));
            return false;
        }
        self.seen.push(about.name);
        true
    }

    /// Reads an argument whose name is none of the arguments', and refuses it on its name.
    fn unknown(&mut self, input: ParseStream<'_>) -> syn::Result<()> {
        let meta: Meta = input.parse()?;
        let path = meta.path().to_token_stream().to_string().replace(' ', "");
        let names = ARGUMENTS
            .iter()
            .map(|(name, _)| *name)
            .chain([message_kw::key::ABOUT.name])
            .map(|name| format!("`{name}`"))
            .collect::<Vec<_>>()
            .join(", ");
        self.names.push(syn::Error::new_spanned(
            meta.path(),
            format!("unknown argument `{path}`; expected one of {names}"),
        ));
        Ok(())
    }

    fn finish(mut self, args: Args) -> syn::Result<Args> {
        let message_handler = args
            .key
            .as_ref()
            .is_some_and(|key| !matches!(key.value, MessageKey::Field(_)));
        if let (true, Some(scope)) = (message_handler, &args.scope) {
            self.names.push(syn::Error::new(
                scope.span,
                "`scope` does not apply to a message handler: its keys belong to its stream (or \
                 queue) and consumer; remove `scope`",
            ));
        }
        if let (Some(_), Some(resume_after)) = (&args.key, &args.resume_after) {
            self.names.push(syn::Error::new(
                resume_after.span,
                "`resume_after` does not apply to a message handler: the broker's redelivery \
                 resumes an interrupted message; remove `resume_after`",
            ));
        }
        // `[]` is the default, no selection: it goes with the other.
        if let (Some(omit), Some(only)) = (&args.fingerprint_omit, &args.fingerprint_only)
            && !omit.value.0.is_empty()
            && !only.value.0.is_empty()
        {
            self.names.push(syn::Error::new(
                only.span,
                "give `fingerprint_omit` or `fingerprint_only`, not both: one leaves the members \
                 it names out of the fingerprint, the other keeps only those",
            ));
        }
        let mut errors = self.names;
        errors.append(self.values);
        errors.finish(args)
    }
}

/// What follows an argument's name.
enum Assignment {
    /// `= value`.
    Value(Expr),
    /// Nothing, or a list (`ttl("24h")`), kept for the error's span.
    Missing(Option<proc_macro2::Group>),
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

/// The error for `name` or `name(..)`, where `name = value` was expected.
fn missing_value(
    keyword: &impl ToTokens,
    list: Option<proc_macro2::Group>,
    about: About,
) -> syn::Error {
    let message = format!("expected `{} = ...`, as in `{}`", about.name, about.example);
    syn::Error::new_spanned(quote!(#keyword #list), message)
}

fn boolean(value: &Expr, about: About) -> syn::Result<bool> {
    match literal(value) {
        Some(Lit::Bool(boolean)) => Ok(boolean.value),
        _ => Err(syn::Error::new_spanned(
            value,
            format!(
                "expected `true` or `false` for `{}`, as in `{}`",
                about.name, about.example
            ),
        )),
    }
}

fn string(value: &Expr, about: About) -> syn::Result<&LitStr> {
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

/// The literal of a value, looking through the invisible groups `macro_rules!` adds.
fn literal(value: &Expr) -> Option<&Lit> {
    match value {
        Expr::Lit(literal) => Some(&literal.lit),
        Expr::Group(group) => literal(&group.expr),
        _ => None,
    }
}

fn duration(value: &Expr, about: About) -> syn::Result<Millis> {
    let literal = string(value, about)?;
    millis(literal, &literal.value())
}

/// The duration `text`, written in `literal`, where an error is reported.
fn millis(literal: &LitStr, text: &str) -> syn::Result<Millis> {
    duration::parse_millis(text)
        .map(Millis)
        .map_err(|error| syn::Error::new_spanned(literal, error.message(text)))
}

/// `"off"`, or a duration.
fn resume_after(value: &Expr, about: About) -> syn::Result<Option<Millis>> {
    let literal = string(value, about)?;
    match literal.value().as_str() {
        "off" => Ok(None),
        text => duration::parse_millis(text)
            .map(|millis| Some(Millis(millis)))
            .map_err(|_| {
                invalid_value(
                    about,
                    literal,
                    r#"`"off"` or a duration, as in `"30s"` or `"5m"`"#,
                )
            }),
    }
}

/// `["x-a", "x-b"]`: lowercase header names, none that carries credentials.
fn header_names(value: &Expr, about: About) -> syn::Result<HeaderNames> {
    let Expr::Array(array) = unwrap_group(value) else {
        return Err(syn::Error::new_spanned(
            value,
            format!(
                "expected a list of header names for `{}`, as in `{}`",
                about.name, about.example
            ),
        ));
    };
    let mut names = Vec::new();
    let mut errors = Errors::default();
    for element in &array.elems {
        let Some(Lit::Str(literal)) = literal(element) else {
            errors.push(syn::Error::new_spanned(
                element,
                format!(
                    "expected a header name in quotes, as in `{}`",
                    about.example
                ),
            ));
            continue;
        };
        let name = literal.value();
        let token = |byte: u8| {
            byte.is_ascii_lowercase() || byte.is_ascii_digit() || b"!#$%&'*+-.^_`|~".contains(&byte)
        };
        if name.is_empty() || !name.bytes().all(token) {
            errors.push(syn::Error::new_spanned(
                literal,
                format!(
                    "`{name}` is not a header name in lowercase; write it as `{}`",
                    name.to_ascii_lowercase()
                ),
            ));
        } else if ["authorization", "proxy-authorization", "cookie"].contains(&name.as_str()) {
            errors.push(syn::Error::new_spanned(
                literal,
                format!(
                    "`{name}` carries credentials, which are never kept: a resumed run is \
                     authorized as its recorded principal (see `idem::steps::Resumption`)"
                ),
            ));
        } else {
            names.push(name);
        }
    }
    errors.finish(HeaderNames(names))
}

/// `["/a", "/b/0"]`: JSON Pointers to members, each refused on its literal when it cannot be
/// one.
fn pointers(value: &Expr, about: About) -> syn::Result<Pointers> {
    let Expr::Array(array) = unwrap_group(value) else {
        return Err(syn::Error::new_spanned(
            value,
            format!(
                "expected a list of JSON Pointers for `{}`, as in `{}`",
                about.name, about.example
            ),
        ));
    };
    let mut pointers = Vec::new();
    let mut errors = Errors::default();
    for element in &array.elems {
        let Some(Lit::Str(literal)) = literal(element) else {
            errors.push(syn::Error::new_spanned(
                element,
                format!(
                    "expected a JSON Pointer in quotes, as in `{}`",
                    about.example
                ),
            ));
            continue;
        };
        let pointer = literal.value();
        let escapes_valid = pointer
            .split('~')
            .skip(1)
            .all(|after| after.starts_with('0') || after.starts_with('1'));
        if !pointer.starts_with('/') {
            errors.push(syn::Error::new_spanned(
                literal,
                format!(
                    "`{pointer}` is not a JSON Pointer to a member; start it with `/`, as in \
                     `/{pointer}`"
                ),
            ));
        } else if !escapes_valid {
            errors.push(syn::Error::new_spanned(
                literal,
                format!(
                    "`{pointer}` is not a JSON Pointer: write `~` as `~0`, and `/` within a \
                     member's name as `~1`"
                ),
            ));
        } else {
            pointers.push(pointer);
        }
    }
    errors.finish(Pointers(pointers))
}

fn scope(value: &Expr, about: About) -> syn::Result<Scope> {
    let literal = string(value, about)?;
    let text = literal.value();
    match text.as_str() {
        "user" => return Ok(Scope::User),
        "global" => return Ok(Scope::Global),
        _ => {}
    }
    match text
        .strip_prefix("custom(")
        .and_then(|rest| rest.strip_suffix(')'))
    {
        Some(name) => Ok(Scope::Custom(name.to_owned())),
        None => Err(invalid_value(
            about,
            literal,
            r#"`"user"`, `"global"` or `"custom(<name>)"`"#,
        )),
    }
}

/// `header("<name>")` or `json("<pointer>")`.
fn message_key(value: &Expr, about: About) -> syn::Result<MessageKey> {
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
        return match unwrap_group(argument) {
            Expr::Path(field) if field.path.get_ident().is_some() => Ok(MessageKey::Field(
                field.path.get_ident().expect("checked").clone(),
            )),
            _ => Err(syn::Error::new_spanned(
                argument,
                "expected the name of a field of the request message, as in `field(request_id)`",
            )),
        };
    }
    let Some(Lit::Str(literal)) = literal(argument) else {
        return Err(expected());
    };
    let text = literal.value();
    if function.path.is_ident("header") {
        let token = |byte: u8| byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte);
        if text.is_empty() || !text.bytes().all(token) {
            return Err(syn::Error::new_spanned(
                literal,
                format!(
                    "`{text}` is not a header name; use letters, digits and `-`, as in \
                     `Nats-Msg-Id` or `message-id`"
                ),
            ));
        }
        Ok(MessageKey::Header(text))
    } else if function.path.is_ident("json") {
        if !(text.is_empty() || text.starts_with('/')) {
            return Err(syn::Error::new_spanned(
                literal,
                format!("`{text}` is not a JSON Pointer; start it with `/`, as in `/{text}`"),
            ));
        }
        Ok(MessageKey::Json(text))
    } else {
        Err(expected())
    }
}

/// A value without the invisible groups `macro_rules!` adds.
fn unwrap_group(value: &Expr) -> &Expr {
    match value {
        Expr::Group(group) => unwrap_group(&group.expr),
        other => other,
    }
}

fn on_conflict(value: &Expr, about: About) -> syn::Result<OnConflict> {
    let literal = string(value, about)?;
    let text = literal.value();
    if text == "reject" {
        return Ok(OnConflict::Reject);
    }
    match text
        .strip_prefix("wait(")
        .and_then(|rest| rest.strip_suffix(')'))
    {
        Some(wait) => millis(literal, wait).map(OnConflict::Wait),
        None => Err(invalid_value(
            about,
            literal,
            r#"`"reject"` or `"wait(<duration>)"`, as in `"wait(5s)"`"#,
        )),
    }
}

/// The check of an argument whose value is one of `words`.
fn choice(words: &'static Words) -> impl FnOnce(&Expr, About) -> syn::Result<Choice> {
    move |value, about| {
        let literal = string(value, about)?;
        let text = literal.value();
        match words.words.iter().find(|(word, _)| *word == text) {
            Some(&(_, variant)) => Ok(Choice {
                enum_name: words.enum_name,
                variant,
            }),
            None => {
                let valid = words
                    .words
                    .iter()
                    .map(|(word, _)| *word)
                    .collect::<Vec<_>>();
                Err(invalid_value(about, literal, &one_of(&valid)))
            }
        }
    }
}

fn invalid_value(about: About, literal: &LitStr, expected: &str) -> syn::Error {
    syn::Error::new_spanned(
        literal,
        format!(
            "invalid `{}` value `{}`; expected {expected}",
            about.name,
            literal.value()
        ),
    )
}

/// `"a"`, `"b"` or `"c"`, each in backticks.
fn one_of(words: &[&str]) -> String {
    let quoted = words
        .iter()
        .map(|word| format!("`\"{word}\"`"))
        .collect::<Vec<_>>();
    match quoted.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::*;

    fn errors(tokens: TokenStream) -> Vec<String> {
        match parse(tokens) {
            Ok(args) => panic!("expected errors, got {args:?}"),
            Err(error) => error.into_iter().map(|error| error.to_string()).collect(),
        }
    }

    fn value<T>(given: Option<Given<T>>) -> Option<T> {
        given.map(|given| given.value)
    }

    #[test]
    fn no_arguments_is_no_settings() {
        let args = parse(quote!()).unwrap();
        assert!(args.ttl.is_none() && args.scope.is_none() && args.key_syntax.is_none());
        assert!(args.extent.is_none());
    }

    #[test]
    fn each_argument_reaches_its_field_whatever_the_written_order() {
        let args = parse(quote!(
            key_syntax = "strict",
            ttl = "1h",
            scope = "custom(tenant)"
        ))
        .unwrap();
        assert_eq!(
            value(args.key_syntax),
            Some(Choice {
                enum_name: "KeySyntax",
                variant: "Strict"
            })
        );
        assert_eq!(value(args.ttl), Some(Millis(3_600_000)));
        assert_eq!(value(args.scope), Some(Scope::Custom("tenant".into())));
        assert!(args.lease.is_none() && args.required.is_none());
        assert!(args.extent.is_some());
    }

    #[test]
    fn every_error_is_reported_at_once() {
        let all = errors(quote!(
            tll = "1h",
            ttl = "1x",
            scope = "users",
            ttl = "2h",
            required = "yes",
            lease = 60
        ));
        assert_eq!(
            all,
            [
                "unknown argument `tll`; expected one of `ttl`, `scope`, `required`, `lease`, \
                 `on_conflict`, `store_server_errors`, `fingerprint`, `fingerprint_omit`, `fingerprint_only`, `on_store_error`, `key_syntax`, `resume_after`, `keep_headers`, `key`",
                "repeated argument `ttl`; give each argument at most once",
                "unit `x` is not supported in the duration `1x`; use `ms`, `s`, `m`, `h` or `d`",
                r#"invalid `scope` value `users`; expected `"user"`, `"global"` or `"custom(<name>)"`"#,
                "expected `true` or `false` for `required`, as in `required = false`",
                r#"expected a string for `lease`, as in `lease = "60s"`"#,
            ]
        );
    }

    #[test]
    fn a_path_is_no_argument_even_if_it_starts_with_one() {
        assert_eq!(
            errors(quote!(ttl::x = "1h")),
            [
                "unknown argument `ttl::x`; expected one of `ttl`, `scope`, `required`, `lease`, \
                 `on_conflict`, `store_server_errors`, `fingerprint`, `fingerprint_omit`, `fingerprint_only`, `on_store_error`, `key_syntax`, `resume_after`, `keep_headers`, `key`"
            ]
        );
    }

    #[test]
    fn a_repeat_is_refused_even_if_the_first_was() {
        assert_eq!(
            errors(quote!(required, required = true, required = false)),
            [
                "expected `required = ...`, as in `required = false`",
                "repeated argument `required`; give each argument at most once",
                "repeated argument `required`; give each argument at most once",
            ]
        );
    }

    /// Zero parses: that `ttl`, `lease` and a wait must be positive is `Policy::validate`'s
    /// rule, checked where the expansion is compiled (`tests/ui/fail/zero_duration.rs`).
    #[test]
    fn on_conflict_takes_reject_or_a_wait() {
        let on_conflict = |tokens| value(parse(tokens).unwrap().on_conflict);
        assert_eq!(
            on_conflict(quote!(on_conflict = "reject")),
            Some(OnConflict::Reject)
        );
        assert_eq!(
            on_conflict(quote!(on_conflict = "wait(1m 30s)")),
            Some(OnConflict::Wait(Millis(90_000)))
        );
        assert_eq!(
            on_conflict(quote!(on_conflict = "wait(0s)")),
            Some(OnConflict::Wait(Millis(0)))
        );
        assert_eq!(
            errors(quote!(on_conflict = "queue")),
            [
                r#"invalid `on_conflict` value `queue`; expected `"reject"` or `"wait(<duration>)"`, as in `"wait(5s)"`"#
            ]
        );
        assert_eq!(
            errors(quote!(on_conflict = "wait(5x)")),
            ["unit `x` is not supported in the duration `5x`; use `ms`, `s`, `m`, `h` or `d`"]
        );
    }

    /// The name is passed on as written: its rules are `Policy::validate`'s, checked where
    /// the expansion is compiled (`tests/ui/fail/{invalid,reserved}_custom_scope.rs`).
    #[test]
    fn a_custom_scope_keeps_its_name() {
        let scope = |tokens| value(parse(tokens).unwrap().scope);
        for name in ["api-key_2", "Tenant", "", "user"] {
            let tokens: TokenStream = format!(r#"scope = "custom({name})""#).parse().unwrap();
            assert_eq!(scope(tokens), Some(Scope::Custom(name.into())), "{name}");
        }
        assert_eq!(scope(quote!(scope = "global")), Some(Scope::Global));
    }

    #[test]
    fn arguments_need_a_value() {
        assert_eq!(
            errors(quote!(required)),
            ["expected `required = ...`, as in `required = false`"]
        );
        assert_eq!(
            errors(quote!(ttl("24h"))),
            [r#"expected `ttl = ...`, as in `ttl = "24h"`"#]
        );
    }

    #[test]
    fn a_message_key_is_a_header_or_a_json_pointer() {
        let key = |tokens| value(parse(tokens).unwrap().key);
        assert_eq!(
            key(quote!(key = header("Nats-Msg-Id"))),
            Some(MessageKey::Header("Nats-Msg-Id".into()))
        );
        assert_eq!(
            key(quote!(key = json("/order/id"))),
            Some(MessageKey::Json("/order/id".into()))
        );
        assert_eq!(key(quote!(ttl = "1h")), None);
        assert_eq!(
            key(quote!(key = field(request_id), scope = "global")),
            Some(MessageKey::Field(syn::parse_quote!(request_id))),
            "a gRPC method's key, which takes a scope"
        );
        assert_eq!(
            errors(quote!(key = header("Nats-Msg-Id"), scope = "global")),
            [
                "`scope` does not apply to a message handler: its keys belong to its stream (or \
              queue) and consumer; remove `scope`"
            ]
        );
        assert_eq!(
            errors(quote!(key = "Nats-Msg-Id")),
            [
                r#"expected `header("<name>")` or `json("<pointer>")` (a message handler), or `field(<name>)` (a gRPC method), for `key`, as in `key = header("Nats-Msg-Id")`"#
            ]
        );
        assert_eq!(
            errors(quote!(key = header("Nats Msg"))),
            [
                "`Nats Msg` is not a header name; use letters, digits and `-`, as in `Nats-Msg-Id` or `message-id`"
            ]
        );
        assert_eq!(
            errors(quote!(key = json("order_id"))),
            ["`order_id` is not a JSON Pointer; start it with `/`, as in `/order_id`"]
        );
        assert_eq!(
            errors(quote!(key = body("/id"))),
            [
                r#"expected `header("<name>")` or `json("<pointer>")` (a message handler), or `field(<name>)` (a gRPC method), for `key`, as in `key = header("Nats-Msg-Id")`"#
            ]
        );
    }

    #[test]
    fn fingerprint_members_are_json_pointers_and_one_kind_at_a_time() {
        let omit = |tokens| value(parse(tokens).unwrap().fingerprint_omit);
        assert_eq!(
            omit(quote!(fingerprint_omit = ["/clientTimestamp", "/a~1b/0"])),
            Some(Pointers(vec!["/clientTimestamp".into(), "/a~1b/0".into()]))
        );
        assert_eq!(
            errors(quote!(fingerprint_omit = ["clientTimestamp", "/a~2"])),
            [
                "`clientTimestamp` is not a JSON Pointer to a member; start it with `/`, as in \
                 `/clientTimestamp`",
                "`/a~2` is not a JSON Pointer: write `~` as `~0`, and `/` within a member's \
                 name as `~1`",
            ]
        );
        assert_eq!(
            errors(quote!(fingerprint_only = "/amount")),
            [
                r#"expected a list of JSON Pointers for `fingerprint_only`, as in `fingerprint_only = ["/amount", "/currency"]`"#
            ]
        );
        assert_eq!(
            errors(quote!(fingerprint_omit = ["/a"], fingerprint_only = ["/b"])),
            [
                "give `fingerprint_omit` or `fingerprint_only`, not both: one leaves the members \
                 it names out of the fingerprint, the other keeps only those"
            ]
        );
    }

    #[test]
    fn the_defaults_parse_to_valid_values() {
        for (name, default) in ARGUMENTS {
            let text: TokenStream = format!("{name} = {default}").parse().unwrap();
            assert!(parse(text).is_ok(), "{name}");
        }
    }
}
