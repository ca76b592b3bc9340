//! A binary of the shop whose address is taken says so in one sentence, with the address and
//! how to choose another, and exits with a failure status: what a newcomer who starts a second
//! shop on 3000, or a second bank, reads.

use std::process::Command;

#[test]
fn a_busy_address_gets_one_sentence_and_a_failure_status() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    for (args, vars) in [
        (vec!["--addr", addr.as_str()], vec![]),
        (vec![], vec![("SHOP_ADDR", addr.as_str())]),
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_shop"))
            .args(&args)
            .envs(vars.iter().copied())
            .env_remove("IDEM_STORE")
            .env_remove("SHOP_NATS_URL")
            .env("RUST_LOG", "warn")
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1), "{output:?}");
        assert!(output.stdout.is_empty(), "no banner: {output:?}");
        let stderr = String::from_utf8(output.stderr).unwrap();
        // The system's own words in the middle: "Address already in use (os error 98)".
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with(&format!("shop: cannot listen on {addr}: ")),
            "{stderr}"
        );
        assert!(
            stderr.ends_with("; choose another address with --addr HOST:PORT or SHOP_ADDR\n"),
            "{stderr}"
        );
        assert!(
            stderr.contains("in use") && !stderr.contains("Os {"),
            "{stderr}"
        );
    }
}

#[test]
fn a_busy_address_for_the_bank_gets_the_same_sentence() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let output = Command::new(env!("CARGO_BIN_EXE_bank"))
        .args(["--addr", &addr])
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(output.stdout.is_empty(), "{output:?}");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(&format!("bank: cannot listen on {addr}: ")),
        "{stderr}"
    );
    assert!(
        stderr.ends_with("; choose another address with --addr HOST:PORT\n"),
        "{stderr}"
    );
    assert!(
        stderr.contains("in use") && !stderr.contains("Os {"),
        "{stderr}"
    );
}
