//! Tells the tests which shared servers this build was configured for, so that a test that
//! needs one is reported `ignored` (with the variable to set) rather than `ok` when it is not.
//!
//! `cfg(idem_test_redis)` when `IDEM_TEST_REDIS_URL` is set, `cfg(idem_test_postgres)` when
//! `IDEM_TEST_DATABASE_URL` is, `cfg(idem_test_nats)` and `cfg(idem_test_amqp)` when
//! `IDEM_TEST_NATS_URL` and `IDEM_TEST_AMQP_URL` are; cargo rebuilds the tests when one changes.

fn main() {
    for (variable, cfg) in [
        ("IDEM_TEST_REDIS_URL", "idem_test_redis"),
        ("IDEM_TEST_DATABASE_URL", "idem_test_postgres"),
        ("IDEM_TEST_NATS_URL", "idem_test_nats"),
        ("IDEM_TEST_AMQP_URL", "idem_test_amqp"),
    ] {
        println!("cargo::rerun-if-env-changed={variable}");
        println!("cargo::rustc-check-cfg=cfg({cfg})");
        if std::env::var(variable).is_ok_and(|url| !url.is_empty()) {
            println!("cargo::rustc-cfg={cfg}");
        }
    }
}
