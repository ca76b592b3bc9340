//! Tells the tests which shared servers this build was configured for, so that a test that
//! needs one is reported `ignored` (with the variable to set) rather than `ok` when it is not.
//!
//! `cfg(idem_test_redis)` when `IDEM_TEST_REDIS_URL` is set, `cfg(idem_test_postgres)` when
//! `IDEM_TEST_DATABASE_URL` is, `cfg(idem_test_mysql)` when `IDEM_TEST_MYSQL_URL` is,
//! `cfg(idem_test_nats)` and `cfg(idem_test_amqp)` when
//! `IDEM_TEST_NATS_URL` and `IDEM_TEST_AMQP_URL` are; cargo rebuilds the tests when one changes.
//! `cfg(idem_test_waitaof)` when the `redis-server` on `PATH` has `WAITAOF` (Redis 7.2 and
//! later), which the tests of the append-only-file durability need. `cfg(idem_test_python)`
//! when `IDEM_TEST_PYTHON` names a Python with grpcio-tools, or when `CI` is set: CI runs the
//! cross-language gRPC test whatever, and fails it if that Python is missing.

use std::process::Command;

fn main() {
    for (variable, cfg) in [
        ("IDEM_TEST_REDIS_URL", "idem_test_redis"),
        ("IDEM_TEST_DATABASE_URL", "idem_test_postgres"),
        ("IDEM_TEST_MYSQL_URL", "idem_test_mysql"),
        ("IDEM_TEST_NATS_URL", "idem_test_nats"),
        ("IDEM_TEST_AMQP_URL", "idem_test_amqp"),
    ] {
        println!("cargo::rerun-if-env-changed={variable}");
        println!("cargo::rustc-check-cfg=cfg({cfg})");
        if std::env::var(variable).is_ok_and(|url| !url.is_empty()) {
            println!("cargo::rustc-cfg={cfg}");
        }
    }
    // The cross-language gRPC test needs a Python with grpcio-tools; in CI it always runs, so
    // that a CI without one fails rather than skips it.
    println!("cargo::rerun-if-env-changed=IDEM_TEST_PYTHON");
    println!("cargo::rerun-if-env-changed=CI");
    println!("cargo::rustc-check-cfg=cfg(idem_test_python)");
    let set = |name: &str| std::env::var(name).is_ok_and(|value| !value.is_empty());
    if set("IDEM_TEST_PYTHON") || set("CI") {
        println!("cargo::rustc-cfg=idem_test_python");
    }
    println!("cargo::rerun-if-env-changed=PATH");
    println!("cargo::rustc-check-cfg=cfg(idem_test_waitaof)");
    if redis_server_version().is_some_and(|version| version >= (7, 2)) {
        println!("cargo::rustc-cfg=idem_test_waitaof");
    }
}

/// The major and minor version of the `redis-server` on `PATH`, from `redis-server
/// --version` (`Redis server v=7.0.15 sha=...`).
fn redis_server_version() -> Option<(u32, u32)> {
    let output = Command::new("redis-server")
        .arg("--version")
        .output()
        .ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    let version = text
        .split_whitespace()
        .find_map(|word| word.strip_prefix("v="))?;
    let mut parts = version.split('.').map(str::parse::<u32>);
    Some((parts.next()?.ok()?, parts.next()?.ok()?))
}
