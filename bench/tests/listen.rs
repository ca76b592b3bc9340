//! A benchmark server whose address is taken says so in one sentence, with the address and how
//! to choose another, and exits with a failure status, rather than a raw `Os { code: 98, .. }`.

use std::process::Command;

#[test]
fn a_busy_address_gets_one_sentence_and_a_failure_status() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let output = Command::new(env!("CARGO_BIN_EXE_idem-bench"))
        .args(["bare", &addr])
        .env_remove("BENCH_REDIS_URL")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(&format!("idem-bench: cannot listen on {addr}: ")),
        "{stderr}"
    );
    assert!(
        stderr.ends_with(
            "; choose another address with the second argument (idem-bench SERVER HOST:PORT), \
             or the ports of bench/run.sh with BENCH_PORT\n"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("in use") && !stderr.contains("Os {"),
        "{stderr}"
    );
}
