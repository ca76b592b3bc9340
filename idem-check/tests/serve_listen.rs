//! `idem-check serve` on an address that is taken says so in one sentence, with the address
//! and the flag that chooses another, and exits 2, as for any setting it cannot use.

use std::process::Command;

#[test]
fn a_busy_address_gets_one_sentence_and_status_2() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let output = Command::new(env!("CARGO_BIN_EXE_idem-check"))
        .args(["serve", "--addr", &addr])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(output.stdout.is_empty(), "{output:?}");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(&format!("idem-check serve: cannot listen on {addr}: ")),
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
