//! idem-check against deliberately wrong servers: each classic defect is reported by the case
//! that exists to catch it, and by no other; and a correct server, or one that makes an
//! allowed choice (comparing raw bytes, waiting instead of 409, storing its 5xx), is never
//! reported as failing.
//!
//! The servers are one reference implementation written for these tests (not idem), with
//! one switch per defect: `support/reference_server.rs`.

mod support;

use std::time::Duration;

use idem_check::{OnServerError, Verdict};
use support::{
    check,
    reference_server::{self, Config, Flaws},
    settings, verdict,
};

async fn failed_cases(flaws: Flaws) -> Vec<&'static str> {
    let addr = reference_server::start(Config {
        flaws,
        ..Config::default()
    })
    .await;
    check(settings(addr)).await.names(Verdict::Fail)
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_ignores_the_key_fails_every_case_that_sends_it_twice() {
    let failed = failed_cases(Flaws {
        ignores_key: true,
        ..Flaws::default()
    })
    .await;
    assert_eq!(
        failed,
        [
            "replay",
            "other-body",
            "in-flight",
            "no-key",
            "timeout-retry",
            "concurrent",
            "key-forms",
            "reordered-json",
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_replays_across_users_fails_the_scope_case() {
    let failed = failed_cases(Flaws {
        unscoped: true,
        ..Flaws::default()
    })
    .await;
    assert_eq!(failed, ["scope"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_does_not_compare_bodies_fails_case_2() {
    let failed = failed_cases(Flaws {
        no_body_compare: true,
        ..Flaws::default()
    })
    .await;
    assert_eq!(failed, ["other-body"]);
}

/// The article's Redis sketch without error handling: a failed run leaves its key
/// "processing", and every retry meets 409 until the key expires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_leaves_a_key_processing_after_a_failure_fails_case_7() {
    let failed = failed_cases(Flaws {
        stuck_after_failure: true,
        ..Flaws::default()
    })
    .await;
    assert_eq!(failed, ["server-error"]);
}

/// The same defect by another road: the operation runs inside the request, as a plain axum
/// handler does, so the client that gives up cancels it halfway, and its key stays
/// "processing". Only the client that gives up meets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_whose_runs_are_cancelled_with_their_client_fails_case_5() {
    let failed = failed_cases(Flaws {
        cancelled_with_client: true,
        ..Flaws::default()
    })
    .await;
    assert_eq!(failed, ["timeout-retry"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_answers_500_to_a_bad_key_fails_the_key_cases() {
    let failed = failed_cases(Flaws {
        error_on_bad_key: true,
        ..Flaws::default()
    })
    .await;
    assert_eq!(failed, ["malformed-key", "long-key"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_problem_details_fails_that_case_only() {
    let failed = failed_cases(Flaws {
        no_problem_details: true,
        ..Flaws::default()
    })
    .await;
    assert_eq!(failed, ["problem-details"]);
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
        let addr = reference_server::start(Config {
            flaws,
            ..Config::default()
        })
        .await;
        let mut settings = settings(addr);
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

/// Choices the draft allows are never failures: comparing raw bytes is noted, waiting for
/// the first request passes, a 409 without `Retry-After` warns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_choices_are_not_failures() {
    let addr = reference_server::start(Config {
        flaws: Flaws {
            raw_bytes: true,
            ..Flaws::default()
        },
        ..Config::default()
    })
    .await;
    let report = check(settings(addr)).await;
    assert!(report.names(Verdict::Fail).is_empty());
    let reordered = report.case("reordered-json").unwrap();
    assert_eq!(reordered.verdict, Verdict::Pass);
    assert!(
        reordered.summary.contains("raw bytes"),
        "{}",
        reordered.summary
    );

    let addr = reference_server::start(Config {
        flaws: Flaws {
            waits_in_flight: true,
            ..Flaws::default()
        },
        ..Config::default()
    })
    .await;
    let report = check(settings(addr)).await;
    assert_eq!(report.names(Verdict::Fail), Vec::<&str>::new());
    let in_flight = report.case("in-flight").unwrap();
    assert_eq!(in_flight.verdict, Verdict::Pass);
    assert!(
        in_flight.summary.contains("waited"),
        "{}",
        in_flight.summary
    );

    let addr = reference_server::start(Config {
        flaws: Flaws {
            no_retry_after: true,
            ..Flaws::default()
        },
        ..Config::default()
    })
    .await;
    let report = check(settings(addr)).await;
    assert_eq!(report.names(Verdict::Fail), Vec::<&str>::new());
    assert_eq!(verdict(&report, "in-flight"), Verdict::Warn);
    assert!(
        report
            .case("in-flight")
            .unwrap()
            .summary
            .contains("Retry-After")
    );
}
