//! idem-check against deliberately wrong servers: each defect is reported by the case that
//! exists to catch it, and by no other; and a correct server, or one that makes a choice the
//! draft allows (comparing raw bytes, waiting instead of 409, storing its 5xx, reading keys
//! its own way), is never reported as failing. A verdict goes as far as its rule: breaking a
//! MUST of the draft or a declaration fails, a SHOULD warns.
//!
//! The servers are one reference implementation written for these tests (not idem), with
//! one switch per defect: `support/reference_server.rs`.

mod support;

use std::time::Duration;

use idem_check::{Abort, Check, KeyStyle, OnServerError, Report, Settings, Verdict};
use support::{
    check,
    reference_server::{self, Config, Flaws},
    settings, verdict,
};

/// A reference server with `flaws`, and the settings that check it.
async fn server(flaws: Flaws) -> Settings {
    let addr = reference_server::start(Config {
        flaws,
        ..Config::default()
    })
    .await;
    settings(addr)
}

/// Every case whose verdict is not `pass`, with its verdict; the retention case, which these
/// settings do not wait for, is left out.
fn not_passed(report: &Report) -> Vec<(&'static str, Verdict)> {
    report
        .cases
        .iter()
        .filter(|case| case.verdict != Verdict::Pass)
        .filter(|case| !(case.name == "retention" && case.verdict == Verdict::Skipped))
        .map(|case| (case.name, case.verdict))
        .collect()
}

async fn not_passed_with(flaws: Flaws) -> Vec<(&'static str, Verdict)> {
    not_passed(&check(server(flaws).await).await)
}

/// The reference server passes every case, the retention one included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_correct_server_passes_every_case() {
    let addr = reference_server::start(Config {
        ttl: Duration::from_secs(1),
        ..Config::default()
    })
    .await;
    let mut settings = settings(addr);
    settings.ttl = Some(Duration::from_secs(1));
    settings.wait_ttl = true;
    let report = check(settings).await;
    let all: Vec<&str> = report.cases.iter().map(|case| case.name).collect();
    assert_eq!(report.names(Verdict::Pass), all);
}

/// Every case that sends a key twice fails, but key-forms: two spellings that run twice are
/// also what a server that reads keys as opaque strings does, which the draft allows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_ignores_the_key_fails_every_case_that_sends_it_twice() {
    let report = check(
        server(Flaws {
            ignores_key: true,
            ..Flaws::default()
        })
        .await,
    )
    .await;
    assert_eq!(
        report.names(Verdict::Fail),
        [
            "replay",
            "other-body",
            "in-flight",
            "no-key",
            "timeout-retry",
            "concurrent",
            "reordered-json",
        ]
    );
    assert_eq!(verdict(&report, "key-forms"), Verdict::Warn);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_replays_across_users_fails_the_scope_case() {
    let found = not_passed_with(Flaws {
        unscoped: true,
        ..Flaws::default()
    })
    .await;
    assert_eq!(found, [("scope", Verdict::Fail)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_does_not_compare_bodies_fails_case_2() {
    let found = not_passed_with(Flaws {
        no_body_compare: true,
        ..Flaws::default()
    })
    .await;
    assert_eq!(found, [("other-body", Verdict::Fail)]);
}

/// The article's Redis sketch without error handling: a failed run leaves its key
/// "processing", and every retry meets 409 until the key expires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_leaves_a_key_processing_after_a_failure_fails_case_7() {
    let found = not_passed_with(Flaws {
        stuck_after_failure: true,
        ..Flaws::default()
    })
    .await;
    assert_eq!(found, [("server-error", Verdict::Fail)]);
}

/// The same defect by another road: the operation runs inside the request, as a plain axum
/// handler does, so the client that gives up cancels it halfway, and its key stays
/// "processing". Only the client that gives up meets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_whose_runs_are_cancelled_with_their_client_fails_case_5() {
    let found = not_passed_with(Flaws {
        cancelled_with_client: true,
        ..Flaws::default()
    })
    .await;
    assert_eq!(found, [("timeout-retry", Verdict::Fail)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_answers_500_to_a_bad_key_fails_the_key_cases() {
    let found = not_passed_with(Flaws {
        error_on_bad_key: true,
        ..Flaws::default()
    })
    .await;
    assert_eq!(
        found,
        [
            ("malformed-key", Verdict::Fail),
            ("long-key", Verdict::Fail)
        ]
    );
}

/// The draft says a refusal SHOULD point to documentation, and shows Problem Details as the
/// way: a server that answers `text/plain` gets a warning, not a failure, and one line for
/// every refusal of the same kind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_problem_details_warns_in_that_case_only() {
    let report = check(
        server(Flaws {
            no_problem_details: true,
            ..Flaws::default()
        })
        .await,
    )
    .await;
    assert_eq!(not_passed(&report), [("problem-details", Verdict::Warn)]);
    let case = report.case("problem-details").unwrap();
    assert!(case.summary.contains("text/plain"), "{}", case.summary);
    assert!(case.notes.is_empty(), "one line for all: {:?}", case.notes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_keeps_keys_past_its_declared_ttl_fails_case_6() {
    let addr = reference_server::start(Config {
        flaws: Flaws {
            never_expires: true,
            ..Flaws::default()
        },
        ttl: Duration::from_secs(1),
    })
    .await;
    let mut settings = settings(addr);
    settings.ttl = Some(Duration::from_secs(1));
    settings.wait_ttl = true;
    assert_eq!(check(settings).await.names(Verdict::Fail), ["retention"]);
}

/// A 5xx declared stored but run again, and one declared run again but stored, both fail;
/// a 5xx stored as declared passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_7_holds_the_server_to_its_declared_5xx_policy() {
    let stores = Flaws {
        stores_failures: true,
        ..Flaws::default()
    };
    for (flaws, declared, expected) in [
        (stores, OnServerError::Stored, Verdict::Pass),
        (stores, OnServerError::Rerun, Verdict::Fail),
        (Flaws::default(), OnServerError::Stored, Verdict::Fail),
    ] {
        let mut settings = server(flaws).await;
        settings.on_server_error = declared;
        let report = check(settings).await;
        assert_eq!(verdict(&report, "server-error"), expected, "{declared:?}");
        let others: Vec<&str> = report
            .names(Verdict::Fail)
            .into_iter()
            .filter(|name| *name != "server-error")
            .collect();
        assert!(others.is_empty(), "{others:?}");
    }
}

/// A lock that covers only the lookup, behind a handler that takes its time: every request
/// that arrives while one runs finds no record and runs too. Only requests that last show
/// it, so the cases that send the slow request catch it, the concurrent one included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lookup_only_lock_behind_a_slow_handler_fails_the_cases_of_requests_in_flight() {
    let report = check(
        server(Flaws {
            lookup_only_lock: true,
            ..Flaws::default()
        })
        .await,
    )
    .await;
    assert_eq!(
        not_passed(&report),
        [
            ("in-flight", Verdict::Fail),
            ("timeout-retry", Verdict::Fail),
            ("concurrent", Verdict::Fail),
        ]
    );
    let concurrent = report.case("concurrent").unwrap();
    assert!(
        concurrent.summary.contains("claimed more than once"),
        "{}",
        concurrent.summary
    );
    assert!(
        concurrent.detail().contains("count of /payments"),
        "{}",
        concurrent.detail()
    );
}

/// Two identical requests without a key are two operations where keys are optional: a server
/// that answers the second as a replay of the first makes one payment of two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_deduplicates_requests_without_a_key_fails_case_4() {
    let optional = Flaws {
        key_optional: true,
        ..Flaws::default()
    };
    let mut settings = server(optional).await;
    settings.key_required = false;
    let report = check(settings).await;
    assert_eq!(not_passed(&report), []);
    assert!(
        report
            .case("no-key")
            .unwrap()
            .summary
            .contains("ran as two")
    );

    let mut settings = server(Flaws {
        dedups_keyless: true,
        ..optional
    })
    .await;
    settings.key_required = false;
    let report = check(settings).await;
    assert_eq!(not_passed(&report), [("no-key", Verdict::Fail)]);
    let no_key = report.case("no-key").unwrap();
    assert!(
        no_key.summary.contains("deduplicates"),
        "{}",
        no_key.summary
    );

    // Declared required, the same server runs a request without a key: that fails too.
    let report = check(server(optional).await).await;
    assert_eq!(not_passed(&report), [("no-key", Verdict::Fail)]);
}

/// A server that refuses the draft's sf-string keys and takes bare ones is checked to the
/// end from the default settings, in bare keys, and the report says so; key-forms runs the
/// other way round and warns that the draft's own spelling is refused. With the style chosen,
/// the check stops and names the flag to pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_refuses_quoted_keys_is_checked_in_bare_keys() {
    let mut settings = server(Flaws {
        bare_keys_only: true,
        ..Flaws::default()
    })
    .await;
    settings.key_style = None;
    let report = check(settings.clone()).await;
    assert_eq!(report.key_style, KeyStyle::Bare);
    assert_eq!(not_passed(&report), [("key-forms", Verdict::Warn)]);
    let note = report.notes.join("\n");
    assert!(note.contains("keys were sent bare"), "{note}");
    assert!(note.contains("Invalid Idempotency-Key"), "{note}");
    let forms = report.case("key-forms").unwrap();
    assert!(
        forms.summary.contains("draft's own spelling"),
        "{}",
        forms.summary
    );

    settings.key_style = Some(KeyStyle::SfString);
    let abort = Check::new(settings).unwrap().run().await.unwrap_err();
    assert!(matches!(abort, Abort::Unusable(_)), "{abort}");
    assert!(
        abort.to_string().contains("pass --key-style bare"),
        "{abort}"
    );
}

/// A replay sent as 409: the stored body, with the status of a request in flight. The draft
/// says a retry after the first finished SHOULD get its result: the cases that retry a
/// finished request warn, and none takes those 409s for refusals of a request in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replays_sent_as_409_warn() {
    let report = check(
        server(Flaws {
            replays_as_409: true,
            ..Flaws::default()
        })
        .await,
    )
    .await;
    assert_eq!(report.names(Verdict::Fail), Vec::<&str>::new());
    for name in ["replay", "in-flight", "timeout-retry"] {
        let case = report.case(name).unwrap();
        assert_eq!(case.verdict, Verdict::Warn, "{name}: {}", case.summary);
        assert!(case.summary.contains("SHOULD"), "{name}: {}", case.summary);
    }
    assert!(
        report
            .case("replay")
            .unwrap()
            .summary
            .contains("a replay sent as 409")
    );
}

/// Choices the draft allows are never failures. Comparing raw bytes (the draft leaves the
/// fingerprint to the server) passes, and says how the server compares.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn comparing_raw_bytes_passes() {
    let report = check(
        server(Flaws {
            raw_bytes: true,
            ..Flaws::default()
        })
        .await,
    )
    .await;
    assert_eq!(not_passed(&report), []);
    let reordered = report.case("reordered-json").unwrap();
    assert!(
        reordered.summary.contains("compares the raw bytes"),
        "{}",
        reordered.summary
    );
}

/// A duplicate that waits for the first request and gets its answer passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_for_the_first_request_passes() {
    let report = check(
        server(Flaws {
            waits_in_flight: true,
            ..Flaws::default()
        })
        .await,
    )
    .await;
    assert_eq!(not_passed(&report), []);
    let in_flight = report.case("in-flight").unwrap();
    assert!(
        in_flight.summary.contains("waited"),
        "{}",
        in_flight.summary
    );
}

/// A 409 without `Retry-After` is allowed, but risky: a warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_409_without_retry_after_warns() {
    let report = check(
        server(Flaws {
            no_retry_after: true,
            ..Flaws::default()
        })
        .await,
    )
    .await;
    assert_eq!(report.names(Verdict::Fail), Vec::<&str>::new());
    let in_flight = report.case("in-flight").unwrap();
    assert_eq!(in_flight.verdict, Verdict::Warn);
    assert!(in_flight.summary.contains("Retry-After"));
}

/// Keys read strictly as the draft's sf-strings: a bare key is refused, which passes (and
/// the malformed key's 400 too: a strict server passes both).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_read_as_sf_strings_only_pass() {
    let report = check(
        server(Flaws {
            strict_keys: true,
            ..Flaws::default()
        })
        .await,
    )
    .await;
    assert_eq!(not_passed(&report), []);
    let forms = report.case("key-forms").unwrap();
    assert!(
        forms.summary.contains("bare key was refused"),
        "{}",
        forms.summary
    );
}

/// Keys read as opaque strings: `"k"` and `k` are two keys, which warns with both readings
/// explained, never fails. Such a reader takes a malformed sf-string as a key of its own,
/// which warns too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_read_as_opaque_strings_warn() {
    let report = check(
        server(Flaws {
            opaque_keys: true,
            ..Flaws::default()
        })
        .await,
    )
    .await;
    assert_eq!(
        not_passed(&report),
        [
            ("malformed-key", Verdict::Warn),
            ("key-forms", Verdict::Warn)
        ]
    );
    let forms = report.case("key-forms").unwrap();
    assert!(forms.summary.contains("opaque string"), "{}", forms.summary);
    assert!(
        forms.summary.contains("resends its own bytes"),
        "{}",
        forms.summary
    );
}
