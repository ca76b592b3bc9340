//! The report as one JSON object, the shape scripts rely on.

use serde::Serialize;

use crate::{Report, Verdict};

#[derive(Serialize)]
struct Document<'a> {
    target: &'a str,
    requests: usize,
    elapsed_ms: u128,
    failed: bool,
    cases: Vec<Case<'a>>,
}

#[derive(Serialize)]
struct Case<'a> {
    name: &'a str,
    verdict: Verdict,
    detail: String,
    title: &'a str,
    exchanges: &'a [String],
}

/// `{"target", "requests", "elapsed_ms", "failed", "cases": [{"name", "verdict", "detail",
/// "title", "exchanges"}]}`, on one line. `verdict` is `pass`, `fail`, `warn` or `skipped`;
/// `detail` says why, and for a failure or a warning also what was sent and what came back.
///
/// ```
/// use std::time::Duration;
/// use idem_check::{CaseReport, Report, Verdict, report};
///
/// let report = Report {
///     target: "POST http://127.0.0.1:3000/payments".into(),
///     cases: vec![CaseReport {
///         name: "no-key",
///         title: "no key",
///         verdict: Verdict::Pass,
///         summary: "400".into(),
///         notes: vec![],
///         exchanges: vec![],
///         elapsed: Duration::from_millis(3),
///     }],
///     requests: 1,
///     elapsed: Duration::from_millis(5),
/// };
/// let json: serde_json::Value = serde_json::from_str(&report::json(&report)).unwrap();
/// assert_eq!(json["cases"][0]["name"], "no-key");
/// assert_eq!(json["cases"][0]["verdict"], "pass");
/// assert_eq!(json["cases"][0]["detail"], "400");
/// ```
#[must_use]
pub fn json(report: &Report) -> String {
    let document = Document {
        target: &report.target,
        requests: report.requests,
        elapsed_ms: report.elapsed.as_millis(),
        failed: report.failed(),
        cases: report
            .cases
            .iter()
            .map(|case| Case {
                name: case.name,
                verdict: case.verdict,
                detail: case.detail(),
                title: case.title,
                exchanges: &case.exchanges,
            })
            .collect(),
    };
    let mut text = serde_json::to_string(&document).expect("the report serializes");
    text.push('\n');
    text
}
