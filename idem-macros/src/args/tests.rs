//! The arguments as the user writes them: each reaches its field, every error is reported at
//! once, on its tokens, in the order the user reads them.

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

/// Both kinds of list go through one parser: the same shape of message, each element refused
/// on its own tokens, every refused element reported.
#[test]
fn a_list_refuses_each_element_on_its_own() {
    let headers = |tokens| value(parse(tokens).unwrap().keep_headers);
    assert_eq!(
        headers(quote!(keep_headers = ["x-source", "x-tenant"])),
        Some(HeaderNames(vec!["x-source".into(), "x-tenant".into()]))
    );
    assert_eq!(
        errors(quote!(keep_headers = ["X-Source", 7, "cookie"])),
        [
            "`X-Source` is not a header name in lowercase; write it as `x-source`",
            r#"expected a header name in quotes, as in `keep_headers = ["x-request-source"]`"#,
            "`cookie` carries credentials, which are never kept: a resumed run is authorized as \
             its recorded principal (see `idem::steps::Resumption`)",
        ]
    );
    assert_eq!(
        errors(quote!(fingerprint_only = ["/amount", 7])),
        [
            r#"expected a JSON Pointer in quotes, as in `fingerprint_only = ["/amount", "/currency"]`"#
        ]
    );
}
