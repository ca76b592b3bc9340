//! Compile tests: every supported handler shape expands and routes; every mistake is one
//! error on the user's tokens, without a cascade (`TRYBUILD=overwrite` rewrites `.stderr`).

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/ui/pass/*.rs");
    cases.compile_fail("tests/ui/fail/*.rs");
}
