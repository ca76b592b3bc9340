//! What the tests of idem-check share: a reference server with switchable defects, and
//! settings that exercise every case against a server on a loopback port.

#![allow(dead_code, unreachable_pub)]

pub mod reference_server;

use std::{net::SocketAddr, time::Duration};

use http::HeaderMap;
use idem_check::{Check, KeyStyle, Report, Settings, Variant, Verdict};

/// The body every check sends.
pub const BODY: &str = r#"{"amount":9800,"currency":"JPY"}"#;

/// How long the slow variant of the reference server takes, at the least.
pub const SLOW_MS: u64 = 600;

/// When the client gives up on the slow request (and sends case 3's duplicate): a third of
/// the server's least time for it, so that both land while it runs however loaded the
/// machine is. The default, half of a measured time, would follow the load of the moment.
pub const GIVE_UP_MS: u64 = SLOW_MS / 3;

/// Settings that run every case but the retention one against the payments of the server
/// at `addr`: two principals, a count, a slow and a failing variant, both key spellings.
pub fn settings(addr: SocketAddr) -> Settings {
    let base = format!("http://{addr}");
    let url = |path: &str| format!("{base}{path}").parse().unwrap();
    let mut settings = Settings::post(&format!("{base}/payments"), BODY).unwrap();
    settings.add_header("Authorization: Bearer alice").unwrap();
    settings
        .add_other_header("Authorization: Bearer bob")
        .unwrap();
    settings.count_url = Some(url("/payments"));
    settings.key_style = Some(KeyStyle::Both);
    settings.slow = Some(Variant {
        url: Some(url(&format!("/payments?delay_ms={SLOW_MS}"))),
        body: None,
        headers: HeaderMap::new(),
        count_url: Some(url("/payments")),
    });
    settings.give_up_after = Some(Duration::from_millis(GIVE_UP_MS));
    settings.failing = Some(Variant {
        url: Some(url("/payments?fail=1")),
        body: None,
        headers: HeaderMap::new(),
        count_url: Some(url("/payments")),
    });
    settings
}

/// Runs the check; the whole report is printed, so a failing test shows it.
pub async fn check(settings: Settings) -> Report {
    let report = Check::new(settings)
        .expect("valid settings")
        .run()
        .await
        .expect("the check runs to its end");
    println!("{}", idem_check::report::text(&report, false));
    report
}

/// The verdict of the case `name`.
pub fn verdict(report: &Report, name: &str) -> Verdict {
    report
        .case(name)
        .unwrap_or_else(|| panic!("no case {name}"))
        .verdict
}
