//! Compiles `proto/payments.proto` (the shop's gRPC API) with the `protoc` that the crate
//! `protoc-bin-vendored` ships, so that a machine needs no `protoc` of its own; and tells the
//! shop's tests whether a PostgreSQL server was configured for this build, so that the test
//! that needs one is reported `ignored` (with the variable to set) rather than `ok` when it is
//! not: `cfg(idem_test_postgres)` when `IDEM_TEST_DATABASE_URL` is set, as in the workspace's
//! `tests/` package. Cargo rebuilds when the variable or the `.proto` changes.

use std::{error::Error, path::PathBuf};

fn main() -> Result<(), Box<dyn Error>> {
    println!("cargo::rerun-if-env-changed=IDEM_TEST_DATABASE_URL");
    println!("cargo::rustc-check-cfg=cfg(idem_test_postgres)");
    if std::env::var("IDEM_TEST_DATABASE_URL").is_ok_and(|url| !url.is_empty()) {
        println!("cargo::rustc-cfg=idem_test_postgres");
    }
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    tonic_prost_build::configure()
        // Server reflection serves the same descriptors.
        .file_descriptor_set_path(out.join("shop_descriptor.bin"))
        .compile_with_config(config, &["proto/payments.proto"], &["proto"])?;
    Ok(())
}
