//! The arguments' names: one `syn::custom_keyword!` each, with what messages say about it.
//!
//! The list of the policy's arguments is written once, here, in the order of the
//! documentation and of the generated policy; the documentation's tables are tested against
//! it (`the_argument_tables_are_the_macros`).

use quote::ToTokens;
use syn::parse::Parse;

/// Declares the policy's arguments: each one's keyword, its default as written in the
/// attribute, and an example of it for messages (a value other than the default:
/// `required = false`). A macro because the keyword's type and its name as a string come from
/// the one identifier.
macro_rules! arguments {
    ($($name:ident: default $default:literal, example $example:literal;)*) => {
        /// The policy's arguments' names.
        pub(crate) mod kw {
            $(syn::custom_keyword!($name);)*
        }

        $(
            impl Argument for kw::$name {
                const ABOUT: About = About { name: stringify!($name), example: $example };
            }
        )*

        /// Every policy argument's name and default, in order.
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
    pub(crate) example: &'static str,
}

/// Every argument's name in backticks, for the message about an unknown one:
/// `` `ttl`, `scope`, ..., `key` ``.
pub(super) fn every_name() -> String {
    ARGUMENTS
        .iter()
        .map(|(name, _)| *name)
        .chain([message_kw::key::ABOUT.name])
        .map(|name| format!("`{name}`"))
        .collect::<Vec<_>>()
        .join(", ")
}
