//! The policy an expansion builds: the documented defaults are `Policy::new()`'s, and every
//! argument reaches its setting.

use std::time::Duration;

use axum::http::HeaderName;

use idem::{
    KeySyntax, OnConflict, OnStoreError, Policy, Scope, fingerprint::FingerprintMode, idempotent,
};

/// Annotates a handler with the given arguments and keeps their text, so the test can
/// compare it with the documentation's table.
macro_rules! with_defaults {
    ($($argument:tt)*) => {
        const DEFAULT_ARGUMENTS: &str = stringify!($($argument)*);

        #[idempotent($($argument)*)]
        async fn every_default() {}
    };
}

with_defaults!(
    ttl = "24h",
    scope = "user",
    required = true,
    lease = "60s",
    on_conflict = "reject",
    store_server_errors = false,
    fingerprint = "json",
    fingerprint_omit = [],
    fingerprint_only = [],
    on_store_error = "fail",
    key_syntax = "lenient",
    resume_after = "off",
    keep_headers = []
);

#[idempotent]
async fn no_arguments() {}

#[test]
fn the_documented_defaults_are_policy_new() {
    assert_eq!(every_default.policy(), Policy::new());
    assert_eq!(no_arguments.policy(), Policy::new());
}

/// The rows of the argument table in `docs/macro.md`: `| `name` | values | default |`.
fn documented_defaults() -> Vec<(String, String)> {
    let docs = include_str!("../../docs/macro.md");
    let table = docs
        .split("<!-- arguments:start -->")
        .nth(1)
        .and_then(|rest| rest.split("<!-- arguments:end -->").next())
        .expect("docs/macro.md has the arguments table");
    table
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let name = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            let default = cells.get(3)?.strip_prefix('`')?.strip_suffix('`')?;
            Some((name.to_owned(), default.to_owned()))
        })
        .collect()
}

#[test]
fn the_defaults_tested_here_are_the_documented_ones() {
    let tested: Vec<(String, String)> = DEFAULT_ARGUMENTS
        .split(',')
        .map(|argument| {
            let (name, value) = argument.split_once('=').unwrap();
            (name.trim().to_owned(), value.trim().to_owned())
        })
        .collect();
    assert_eq!(tested, documented_defaults());
}

#[idempotent(
    ttl = "1h 30m",
    scope = "custom(tenant)",
    required = false,
    lease = "1500ms",
    on_conflict = "wait(2s)",
    store_server_errors = true,
    fingerprint = "raw",
    on_store_error = "run",
    key_syntax = "strict",
    resume_after = "30s",
    keep_headers = ["x-request-source", "accept-language"]
)]
async fn every_argument() {}

static KEPT: [HeaderName; 2] = [
    HeaderName::from_static("x-request-source"),
    HeaderName::from_static("accept-language"),
];

#[test]
fn every_argument_reaches_the_policy() {
    let expected = Policy::new()
        .ttl(Duration::from_secs(90 * 60))
        .scope(Scope::Custom("tenant"))
        .required(false)
        .lease(Duration::from_millis(1500))
        .on_conflict(OnConflict::Wait(Duration::from_secs(2)))
        .store_server_errors(true)
        .fingerprint(FingerprintMode::Raw)
        .on_store_error(OnStoreError::RunWithoutRecord)
        .key_syntax(KeySyntax::Strict)
        .resume_after(Duration::from_secs(30))
        .keep_headers(&KEPT);
    assert_eq!(every_argument.policy(), expected);
    assert_eq!(every_argument.policy().validate(), Ok(()));
}

#[idempotent(fingerprint_omit = ["/clientTimestamp", "/trace/id"])]
async fn omitting() {}

#[idempotent(fingerprint_only = ["/amount"])]
async fn keeping_only() {}

#[test]
fn fingerprint_members_reach_the_policy() {
    assert_eq!(
        omitting.policy(),
        Policy::new().fingerprint_omit(&["/clientTimestamp", "/trace/id"])
    );
    assert_eq!(
        keeping_only.policy(),
        Policy::new().fingerprint_only(&["/amount"])
    );
}

#[idempotent(scope = "global", ttl = "1d", lease = "250ms")]
async fn global_day() {}

#[test]
fn durations_keep_their_exact_length() {
    let expected = Policy::new()
        .scope(Scope::Global)
        .ttl(Duration::from_secs(86_400))
        .lease(Duration::from_millis(250));
    assert_eq!(global_day.policy(), expected);
}
