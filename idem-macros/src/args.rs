//! The attribute's arguments: `#[idempotent(ttl = "24h", scope = "user", ...)]`.
//!
//! Every argument is checked here, at expansion time: the runtime receives typed values
//! (`Duration`, `Scope`, ...), never strings. All errors are collected and reported at once.

use proc_macro2::{Span, TokenStream};
use syn::{
    Expr, Lit, LitStr, Meta, Token, parse::Parser, punctuated::Punctuated, spanned::Spanned,
};

use crate::duration::{self, DurationError};

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
            values: &[("fail", "Fail"), ("run", "Run")],
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

const TTL: usize = 0;
const LEASE: usize = 3;

/// A checked argument value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Value {
    /// A positive duration, in milliseconds.
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

    pub(crate) fn extend(&mut self, result: Result<(), syn::Error>) {
        if let Err(error) = result {
            self.push(error);
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
    let args = Args { settings };
    errors.extend(check_ttl_covers_lease(&args, &metas));
    errors.finish(args)
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
        Text::Duration => positive_duration(literal, &string, &format!("`{}`", argument.name))
            .map(Value::Duration),
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

fn positive_duration(literal: &LitStr, text: &str, what: &str) -> syn::Result<u64> {
    match duration::parse_millis(text) {
        Ok(0) => Err(syn::Error::new_spanned(
            literal,
            format!("{what} must be greater than zero"),
        )),
        Ok(millis) => Ok(millis),
        Err(error) => Err(syn::Error::new_spanned(literal, error.message(text))),
    }
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
    match custom_scope_name_error(name) {
        Some(message) => Err(syn::Error::new_spanned(literal, message)),
        None => Ok(Scope::Custom(name.to_owned())),
    }
}

/// What is wrong with a custom scope name, if anything. The rules are `Policy::validate`'s
/// in idem-core, which also checks the policy the expansion builds; this spells them out on
/// the literal, and a test keeps the two in agreement.
pub(crate) fn custom_scope_name_error(name: &str) -> Option<String> {
    let valid = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-';
    if name.is_empty() || !name.chars().all(valid) {
        return Some(format!(
            "invalid custom scope name `{name}`; use lowercase letters, digits, `_` and `-`"
        ));
    }
    if name == "user" || name == "global" {
        // `Scope::Custom("user")` would hash its keys like `Scope::User` does.
        return Some(format!(
            "the custom scope name `{name}` is reserved; use `scope = \"{name}\"` or another name"
        ));
    }
    None
}

fn on_conflict(argument: &Argument, literal: &LitStr, value: &str) -> syn::Result<Option<u64>> {
    if value == "reject" {
        return Ok(None);
    }
    match value
        .strip_prefix("wait(")
        .and_then(|rest| rest.strip_suffix(')'))
    {
        Some(wait) => positive_duration(literal, wait, "the `on_conflict` wait").map(Some),
        None => Err(invalid_value(
            argument,
            literal,
            value,
            r#"`"reject"` or `"wait(<duration>)"`, as in `"wait(5s)"`"#,
        )),
    }
}

/// A TTL shorter than the lease would forget a result sooner than an interrupted request
/// blocks its key: almost certainly swapped values. The error is on whichever of the two
/// the user wrote, the TTL when both.
fn check_ttl_covers_lease(args: &Args, metas: &Punctuated<Meta, Token![,]>) -> syn::Result<()> {
    let given = |index: usize| {
        args.settings
            .iter()
            .find_map(|setting| match setting.value {
                Value::Duration(millis) if setting.argument == &ARGUMENTS[index] => Some(millis),
                _ => None,
            })
    };
    let (ttl, lease) = (given(TTL), given(LEASE));
    if ttl.is_none() && lease.is_none() {
        return Ok(());
    }
    let default = |index: usize| {
        let literal = ARGUMENTS[index].default.trim_matches('"');
        duration::parse_millis(literal).map_err(|error: DurationError| {
            syn::Error::new(Span::call_site(), error.message(literal))
        })
    };
    let ttl_millis = ttl.map_or_else(|| default(TTL), Ok)?;
    let lease_millis = lease.map_or_else(|| default(LEASE), Ok)?;
    if ttl_millis >= lease_millis {
        return Ok(());
    }
    let describe = |millis: u64, given: Option<u64>| match given {
        Some(_) => duration::display(millis),
        None => format!("{}, the default", duration::display(millis)),
    };
    let blamed = if ttl.is_some() { "ttl" } else { "lease" };
    let span = metas
        .iter()
        .find_map(|meta| match meta {
            Meta::NameValue(name_value) if name_value.path.is_ident(blamed) => {
                Some(name_value.value.span())
            }
            _ => None,
        })
        .unwrap_or_else(Span::call_site);
    Err(syn::Error::new(
        span,
        format!(
            "`ttl` ({}) is shorter than `lease` ({}): a result would be forgotten sooner than an \
             interrupted request blocks its key; make `ttl` at least as long as `lease`",
            describe(ttl_millis, ttl),
            describe(lease_millis, lease),
        ),
    ))
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

    #[test]
    fn on_conflict_takes_reject_or_a_positive_wait() {
        assert_eq!(
            values(quote!(on_conflict = "reject")),
            [("on_conflict", Value::OnConflict(None))]
        );
        assert_eq!(
            values(quote!(on_conflict = "wait(1m 30s)")),
            [("on_conflict", Value::OnConflict(Some(90_000)))]
        );
        assert_eq!(
            errors(quote!(on_conflict = "wait(0s)")),
            ["the `on_conflict` wait must be greater than zero"]
        );
        assert_eq!(
            errors(quote!(on_conflict = "queue")),
            [
                r#"invalid `on_conflict` value `queue`; expected `"reject"` or `"wait(<duration>)"`, as in `"wait(5s)"`"#
            ]
        );
    }

    #[test]
    fn custom_scope_names_are_checked() {
        assert_eq!(
            errors(quote!(scope = "custom(Tenant)")),
            ["invalid custom scope name `Tenant`; use lowercase letters, digits, `_` and `-`"]
        );
        assert_eq!(
            errors(quote!(scope = "custom()")),
            ["invalid custom scope name ``; use lowercase letters, digits, `_` and `-`"]
        );
        assert_eq!(
            errors(quote!(scope = "custom(user)")),
            ["the custom scope name `user` is reserved; use `scope = \"user\"` or another name"]
        );
        assert_eq!(
            values(quote!(scope = "custom(api-key_2)")),
            [("scope", Value::Scope(Scope::Custom("api-key_2".into())))]
        );
    }

    /// The macro's spelled-out rules for custom scope names are `Policy::validate`'s.
    #[test]
    fn custom_scope_names_follow_policy_validate() {
        use idem_core::{Policy, Scope};

        let mut names: Vec<String> = (0u8..=127)
            .map(|byte| char::from(byte).to_string())
            .collect();
        names.extend(
            [
                "", "user", "global", "users", "global-2", "tenant", "Tenant", "api key", "é",
                "a.b",
            ]
            .map(str::to_owned),
        );
        for name in names {
            let leaked: &'static str = Box::leak(name.clone().into_boxed_str());
            let runtime = Policy::new()
                .scope(Scope::Custom(leaked))
                .validate()
                .is_ok();
            let macro_ = custom_scope_name_error(&name).is_none();
            assert_eq!(macro_, runtime, "{name:?}");
        }
    }

    #[test]
    fn ttl_must_cover_the_lease_given_or_default() {
        assert_eq!(
            errors(quote!(ttl = "30s")),
            [
                "`ttl` (30s) is shorter than `lease` (1m, the default): a result would be \
                 forgotten sooner than an interrupted request blocks its key; make `ttl` at least \
                 as long as `lease`"
            ]
        );
        assert_eq!(
            errors(quote!(lease = "2d")),
            [
                "`ttl` (1d, the default) is shorter than `lease` (2d): a result would be \
                 forgotten sooner than an interrupted request blocks its key; make `ttl` at least \
                 as long as `lease`"
            ]
        );
        assert!(parse(quote!(ttl = "1m", lease = "60s")).is_ok());
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
