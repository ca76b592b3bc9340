//! Tells the shop's tests whether a PostgreSQL server was configured for this build, so that
//! the test that needs one is reported `ignored` (with the variable to set) rather than `ok`
//! when it is not: `cfg(idem_test_postgres)` when `IDEM_TEST_DATABASE_URL` is set, as in the
//! workspace's `tests/` package. Cargo rebuilds when the variable changes.

fn main() {
    println!("cargo::rerun-if-env-changed=IDEM_TEST_DATABASE_URL");
    println!("cargo::rustc-check-cfg=cfg(idem_test_postgres)");
    if std::env::var("IDEM_TEST_DATABASE_URL").is_ok_and(|url| !url.is_empty()) {
        println!("cargo::rustc-cfg=idem_test_postgres");
    }
}
