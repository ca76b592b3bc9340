//! The values of the single-valued arguments: a bool, a duration, a scope, what to do on a
//! conflict, a word among a few. Each parser takes the expression written after `name =` and
//! refuses it on its own tokens, with a message that says the valid set.

use syn::{Expr, Lit, LitStr};

use super::{
    keyword::About,
    syntax::{literal, string},
};
use crate::duration;

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

/// A variant of one of `__private`'s enums, named by a word: `fingerprint = "raw"` is
/// `FingerprintMode::Raw`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Choice {
    pub(crate) enum_name: &'static str,
    pub(crate) variant: &'static str,
}

/// The words of an argument that names a variant of one of `__private`'s enums.
pub(super) struct Words {
    enum_name: &'static str,
    /// Each word, with the variant it names.
    words: &'static [(&'static str, &'static str)],
}

pub(super) static FINGERPRINT: Words = Words {
    enum_name: "FingerprintMode",
    words: &[("json", "Json"), ("raw", "Raw")],
};

pub(super) static ON_STORE_ERROR: Words = Words {
    enum_name: "OnStoreError",
    words: &[("fail", "Fail"), ("run", "RunWithoutRecord")],
};

pub(super) static KEY_SYNTAX: Words = Words {
    enum_name: "KeySyntax",
    words: &[("lenient", "Lenient"), ("strict", "Strict")],
};

pub(super) fn boolean(value: &Expr, about: About) -> syn::Result<bool> {
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

pub(super) fn duration(value: &Expr, about: About) -> syn::Result<Millis> {
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
pub(super) fn resume_after(value: &Expr, about: About) -> syn::Result<Option<Millis>> {
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

pub(super) fn scope(value: &Expr, about: About) -> syn::Result<Scope> {
    let literal = string(value, about)?;
    let text = literal.value();
    match text.as_str() {
        "user" => return Ok(Scope::User),
        "global" => return Ok(Scope::Global),
        _ => {}
    }
    match call_of("custom", &text) {
        Some(name) => Ok(Scope::Custom(name.to_owned())),
        None => Err(invalid_value(
            about,
            literal,
            r#"`"user"`, `"global"` or `"custom(<name>)"`"#,
        )),
    }
}

pub(super) fn on_conflict(value: &Expr, about: About) -> syn::Result<OnConflict> {
    let literal = string(value, about)?;
    let text = literal.value();
    if text == "reject" {
        return Ok(OnConflict::Reject);
    }
    match call_of("wait", &text) {
        Some(wait) => millis(literal, wait).map(OnConflict::Wait),
        None => Err(invalid_value(
            about,
            literal,
            r#"`"reject"` or `"wait(<duration>)"`, as in `"wait(5s)"`"#,
        )),
    }
}

/// What is between the parentheses of `name(..)` written inside a string (`"wait(5s)"`).
fn call_of<'a>(name: &str, text: &'a str) -> Option<&'a str> {
    text.strip_prefix(name)?
        .strip_prefix('(')?
        .strip_suffix(')')
}

/// The parser of an argument whose value is one of `words`.
pub(super) fn choice(words: &'static Words) -> impl FnOnce(&Expr, About) -> syn::Result<Choice> {
    move |value, about| {
        let literal = string(value, about)?;
        let text = literal.value();
        match words.words.iter().find(|(word, _)| *word == text) {
            Some(&(_, variant)) => Ok(Choice {
                enum_name: words.enum_name,
                variant,
            }),
            None => {
                let valid = words.words.iter().map(|(word, _)| *word);
                Err(invalid_value(about, literal, &one_of(valid)))
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
fn one_of<'a>(words: impl Iterator<Item = &'a str>) -> String {
    let quoted = words
        .map(|word| format!("`\"{word}\"`"))
        .collect::<Vec<_>>();
    match quoted.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}
