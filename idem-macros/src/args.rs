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
use quote::ToTokens;
use syn::{
    Expr, Lit, LitStr, Meta, Token, parse::Parser, punctuated::Punctuated, spanned::Spanned,
};

use crate::duration;

/// One argument the attribute accepts. The table [`ARGUMENTS`] lists them all.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Argument {
    /// The argument's name, which is also the name of the `Policy` setter it calls.
    pub(crate) name: &'static str,
    /// What its value is.
    kind: Kind,
    /// Its default, as it would be written in the attribute.
    pub(crate) default: &'static str,
    /// A value other than the default, for messages: `required = false`.
    example: &'static str,
}

#[derive(Debug, PartialEq, Eq)]
enum Kind {
    /// `true` or `false`.
    Bool,
    /// A string literal of this form.
    Text(Text),
}

#[derive(Debug, PartialEq, Eq)]
enum Text {
    /// A positive duration literal.
    Duration,
    /// `"user"`, `"global"` or `"custom(<name>)"`.
    Scope,
    /// `"reject"` or `"wait(<duration>)"`.
    OnConflict,
    /// One of a few words, each naming a variant of an enum of `__private`.
    Choice {
        enum_name: &'static str,
        values: &'static [(&'static str, &'static str)],
    },
}

/// Every argument, in the order of the documentation and of the generated policy.
pub(crate) const ARGUMENTS: [Argument; 9] = [
    Argument {
        name: "ttl",
        kind: Kind::Text(Text::Duration),
        default: r#""24h""#,
        example: r#"ttl = "24h""#,
    },
    Argument {
        name: "scope",
        kind: Kind::Text(Text::Scope),
        default: r#""user""#,
        example: r#"scope = "global""#,
    },
    Argument {
        name: "required",
        kind: Kind::Bool,
        default: "true",
        example: "required = false",
    },
    Argument {
        name: "lease",
        kind: Kind::Text(Text::Duration),
        default: r#""60s""#,
        example: r#"lease = "60s""#,
    },
    Argument {
        name: "on_conflict",
        kind: Kind::Text(Text::OnConflict),
        default: r#""reject""#,
        example: r#"on_conflict = "wait(5s)""#,
    },
    Argument {
        name: "store_server_errors",
        kind: Kind::Bool,
        default: "false",
        example: "store_server_errors = true",
    },
    Argument {
        name: "fingerprint",
        kind: Kind::Text(Text::Choice {
            enum_name: "FingerprintMode",
            values: &[("json", "Json"), ("raw", "Raw")],
        }),
        default: r#""json""#,
        example: r#"fingerprint = "raw""#,
    },
    Argument {
        name: "on_store_error",
        kind: Kind::Text(Text::Choice {
            enum_name: "OnStoreError",
            values: &[("fail", "Fail"), ("run", "RunWithoutRecord")],
        }),
        default: r#""fail""#,
        example: r#"on_store_error = "run""#,
    },
    Argument {
        name: "key_syntax",
        kind: Kind::Text(Text::Choice {
            enum_name: "KeySyntax",
            values: &[("lenient", "Lenient"), ("strict", "Strict")],
        }),
        default: r#""lenient""#,
        example: r#"key_syntax = "strict""#,
    },
];

/// A checked argument value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Value {
    /// A duration, in milliseconds. Zero is a valid literal: that a duration must be
    /// positive is a rule of the policy.
    Duration(u64),
    Bool(bool),
    Scope(Scope),
    /// `None` for `"reject"`, else the longest wait in milliseconds.
    OnConflict(Option<u64>),
    /// A variant of one of `__private`'s enums.
    Choice {
        enum_name: &'static str,
        variant: &'static str,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    User,
    Global,
    /// The name as written; `Policy::validate` holds the rules of a custom scope name.
    Custom(String),
}

/// One argument the user gave, checked.
#[derive(Debug)]
pub(crate) struct Setting {
    pub(crate) argument: &'static Argument,
    pub(crate) value: Value,
    /// The span of the value, for the generated setter call.
    pub(crate) span: Span,
}

/// The arguments the user gave, checked, in the order of [`ARGUMENTS`].
#[derive(Debug, Default)]
pub(crate) struct Args {
    pub(crate) settings: Vec<Setting>,
    /// Where the arguments are written; `None` without arguments.
    pub(crate) extent: Option<Extent>,
}

/// Where the arguments are written: the first token of the first one and the last token of
/// the last one. A policy that `Policy::validate` refuses is made by the arguments together,
/// and its error is reported from the one to the other (`expand::idempotent_new`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Extent {
    pub(crate) first: Span,
    pub(crate) last: Span,
}

/// Collects errors so that the user sees all of them at once.
#[derive(Default)]
pub(crate) struct Errors(Option<syn::Error>);

impl Errors {
    pub(crate) fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(errors) => errors.combine(error),
            None => self.0 = Some(error),
        }
    }

    pub(crate) fn finish<T>(self, value: T) -> syn::Result<T> {
        match self.0 {
            Some(errors) => Err(errors),
            None => Ok(value),
        }
    }
}

/// Parses and checks the attribute's arguments.
pub(crate) fn parse(tokens: TokenStream) -> syn::Result<Args> {
    let metas = Punctuated::<Meta, Token![,]>::parse_terminated.parse2(tokens)?;
    let mut errors = Errors::default();
    let mut settings = Vec::new();
    for (argument, value) in known_once(&metas, &mut errors) {
        match check(argument, value) {
            Ok(checked) => settings.push(Setting {
                argument,
                value: checked,
                span: value.span(),
            }),
            Err(error) => errors.push(error),
        }
    }
    settings.sort_by_key(|setting| index_of(setting.argument));
    let extent = extent(&metas);
    errors.finish(Args { settings, extent })
}

fn extent(metas: &Punctuated<Meta, Token![,]>) -> Option<Extent> {
    let span_of = |meta: &Meta, last: bool| {
        let mut tokens = meta.to_token_stream().into_iter();
        let token = if last { tokens.last() } else { tokens.next() };
        token.map_or_else(Span::call_site, |token| token.span())
    };
    Some(Extent {
        first: span_of(metas.first()?, false),
        last: span_of(metas.last()?, true),
    })
}

fn index_of(argument: &Argument) -> usize {
    ARGUMENTS
        .iter()
        .position(|known| known == argument)
        .unwrap_or(usize::MAX)
}

/// The one place that maps names to arguments: refuses unknown and repeated arguments, and
/// arguments without a value, and yields each known argument once with its value.
fn known_once<'a>(
    metas: &'a Punctuated<Meta, Token![,]>,
    errors: &mut Errors,
) -> Vec<(&'static Argument, &'a Expr)> {
    let mut seen = Vec::new();
    let mut known = Vec::new();
    for meta in metas {
        let path = meta.path();
        let Some(argument) = ARGUMENTS
            .iter()
            .find(|argument| path.is_ident(argument.name))
        else {
            let names = ARGUMENTS
                .iter()
                .map(|argument| format!("`{}`", argument.name))
                .collect::<Vec<_>>()
                .join(", ");
            let path = quote::ToTokens::to_token_stream(path).to_string();
            let path = path.replace(' ', "");
            errors.push(syn::Error::new_spanned(
                meta.path(),
                format!("unknown argument `{path}`; expected one of {names}"),
            ));
            continue;
        };
        if seen.contains(&argument.name) {
            errors.push(syn::Error::new_spanned(
                path,
                format!(
                    "repeated argument `{}`; give each argument at most once",
                    argument.name
                ),
            ));
            continue;
        }
        seen.push(argument.name);
        match meta {
            Meta::NameValue(name_value) => known.push((argument, &name_value.value)),
            Meta::Path(_) | Meta::List(_) => errors.push(syn::Error::new_spanned(
                meta,
                format!(
                    "expected `{} = ...`, as in `{}`",
                    argument.name, argument.example
                ),
            )),
        }
    }
    known
}

/// Checks one value against its argument.
fn check(argument: &'static Argument, value: &Expr) -> syn::Result<Value> {
    let text = match (&argument.kind, literal(value)) {
        (Kind::Bool, Some(Lit::Bool(boolean))) => return Ok(Value::Bool(boolean.value)),
        (Kind::Bool, _) => {
            return Err(syn::Error::new_spanned(
                value,
                format!(
                    "expected `true` or `false` for `{}`, as in `{}`",
                    argument.name, argument.example
                ),
            ));
        }
        (Kind::Text(text), Some(Lit::Str(literal))) => (text, literal),
        (Kind::Text(_), _) => {
            return Err(syn::Error::new_spanned(
                value,
                format!(
                    "expected a string for `{}`, as in `{}`",
                    argument.name, argument.example
                ),
            ));
        }
    };
    let (kind, literal) = text;
    let string = literal.value();
    match kind {
        Text::Duration => millis(literal, &string).map(Value::Duration),
        Text::Scope => scope(argument, literal, &string).map(Value::Scope),
        Text::OnConflict => on_conflict(argument, literal, &string).map(Value::OnConflict),
        Text::Choice { enum_name, values } => values
            .iter()
            .find(|(word, _)| *word == string)
            .map(|&(_, variant)| Value::Choice { enum_name, variant })
            .ok_or_else(|| {
                let words = values.iter().map(|(word, _)| *word).collect::<Vec<_>>();
                invalid_value(argument, literal, &string, &one_of(&words))
            }),
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

fn invalid_value(argument: &Argument, literal: &LitStr, value: &str, expected: &str) -> syn::Error {
    syn::Error::new_spanned(
        literal,
        format!(
            "invalid `{}` value `{value}`; expected {expected}",
            argument.name
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

/// The duration `text`, written in `literal`, where an error is reported.
fn millis(literal: &LitStr, text: &str) -> syn::Result<u64> {
    duration::parse_millis(text)
        .map_err(|error| syn::Error::new_spanned(literal, error.message(text)))
}

fn scope(argument: &Argument, literal: &LitStr, value: &str) -> syn::Result<Scope> {
    match value {
        "user" => return Ok(Scope::User),
        "global" => return Ok(Scope::Global),
        _ => {}
    }
    let Some(name) = value
        .strip_prefix("custom(")
        .and_then(|rest| rest.strip_suffix(')'))
    else {
        return Err(invalid_value(
            argument,
            literal,
            value,
            r#"`"user"`, `"global"` or `"custom(<name>)"`"#,
        ));
    };
    Ok(Scope::Custom(name.to_owned()))
}

fn on_conflict(argument: &Argument, literal: &LitStr, value: &str) -> syn::Result<Option<u64>> {
    if value == "reject" {
        return Ok(None);
    }
    match value
        .strip_prefix("wait(")
        .and_then(|rest| rest.strip_suffix(')'))
    {
        Some(wait) => millis(literal, wait).map(Some),
        None => Err(invalid_value(
            argument,
            literal,
            value,
            r#"`"reject"` or `"wait(<duration>)"`, as in `"wait(5s)"`"#,
        )),
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

    fn values(tokens: TokenStream) -> Vec<(&'static str, Value)> {
        parse(tokens)
            .unwrap()
            .settings
            .into_iter()
            .map(|setting| (setting.argument.name, setting.value))
            .collect()
    }

    #[test]
    fn no_arguments_is_no_settings() {
        assert!(values(quote!()).is_empty());
    }

    #[test]
    fn settings_come_in_table_order_whatever_the_written_order() {
        let parsed = values(quote!(
            key_syntax = "strict",
            ttl = "1h",
            scope = "custom(tenant)"
        ));
        assert_eq!(
            parsed,
            [
                ("ttl", Value::Duration(3_600_000)),
                ("scope", Value::Scope(Scope::Custom("tenant".into()))),
                (
                    "key_syntax",
                    Value::Choice {
                        enum_name: "KeySyntax",
                        variant: "Strict"
                    }
                ),
            ]
        );
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
                 `on_conflict`, `store_server_errors`, `fingerprint`, `on_store_error`, `key_syntax`",
                "repeated argument `ttl`; give each argument at most once",
                "unit `x` is not supported in the duration `1x`; use `ms`, `s`, `m`, `h` or `d`",
                r#"invalid `scope` value `users`; expected `"user"`, `"global"` or `"custom(<name>)"`"#,
                "expected `true` or `false` for `required`, as in `required = false`",
                r#"expected a string for `lease`, as in `lease = "60s"`"#,
            ]
        );
    }

    /// Zero parses: that `ttl`, `lease` and a wait must be positive is `Policy::validate`'s
    /// rule, checked where the expansion is compiled (`tests/ui/fail/zero_duration.rs`).
    #[test]
    fn on_conflict_takes_reject_or_a_wait() {
        assert_eq!(
            values(quote!(on_conflict = "reject")),
            [("on_conflict", Value::OnConflict(None))]
        );
        assert_eq!(
            values(quote!(on_conflict = "wait(1m 30s)")),
            [("on_conflict", Value::OnConflict(Some(90_000)))]
        );
        assert_eq!(
            values(quote!(on_conflict = "wait(0s)")),
            [("on_conflict", Value::OnConflict(Some(0)))]
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
        for name in ["api-key_2", "Tenant", "", "user"] {
            let tokens: TokenStream = format!(r#"scope = "custom({name})""#).parse().unwrap();
            assert_eq!(
                values(tokens),
                [("scope", Value::Scope(Scope::Custom(name.into())))],
                "{name}"
            );
        }
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
    fn the_defaults_parse_to_valid_values() {
        for argument in &ARGUMENTS {
            let text: TokenStream = format!("{} = {}", argument.name, argument.default)
                .parse()
                .unwrap();
            assert!(parse(text).is_ok(), "{}", argument.name);
        }
    }
}
