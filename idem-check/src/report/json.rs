//! The report as one JSON object, the shape scripts rely on.

use serde::Serialize;

use crate::{Basis, Report, Verdict};

#[derive(Serialize)]
struct Document<'a> {
    target: &'a str,
    key_style: &'a str,
    notes: &'a [String],
    requests: usize,
    elapsed_ms: u128,
    failed: bool,
    cases: Vec<Case<'a>>,
}

#[derive(Serialize)]
struct Case<'a> {
    name: &'a str,
    verdict: Verdict,
    basis: Basis,
    source: &'a str,
    detail: String,
    title: &'a str,
    exchanges: &'a [String],
}

/// `{"target", "key_style", "notes", "requests", "elapsed_ms", "failed", "cases": [{"name",
/// "verdict", "basis", "source", "detail", "title", "exchanges"}]}`, on one line. `verdict`
/// is `pass`, `fail`, `warn` or `skipped`; `basis` is what it rests on, `draft MUST`,
/// `draft SHOULD` or `declared`, and `source` the rule; `detail` says why, and for a failure
/// or a warning also what was sent and what came back.
///
/// ```
/// use std::time::Duration;
/// use idem_check::{Basis, CaseReport, KeyStyle, Report, Verdict, report};
///
/// let report = Report {
///     target: "POST http://127.0.0.1:3000/payments".into(),
///     key_style: KeyStyle::SfString,
///     notes: vec![],
///     cases: vec![CaseReport {
///         name: "no-key",
///         title: "no key",
///         verdict: Verdict::Pass,
///         basis: Basis::Declared,
///         rests_on: "keys required",
///         summary: "400".into(),
///         notes: vec![],
///         exchanges: vec![],
///         elapsed: Duration::from_millis(3),
///     }],
///     requests: 1,
///     elapsed: Duration::from_millis(5),
/// };
/// let json: serde_json::Value = serde_json::from_str(&report::json(&report)).unwrap();
/// assert_eq!(json["key_style"], "sf-string");
/// assert_eq!(json["cases"][0]["name"], "no-key");
/// assert_eq!(json["cases"][0]["verdict"], "pass");
/// assert_eq!(json["cases"][0]["basis"], "declared");
/// assert_eq!(json["cases"][0]["detail"], "400");
/// ```
#[must_use]
pub fn json(report: &Report) -> String {
    let document = Document {
        target: &report.target,
        key_style: report.key_style.as_str(),
        notes: &report.notes,
        requests: report.requests,
        elapsed_ms: report.elapsed.as_millis(),
        failed: report.failed(),
        cases: report
            .cases
            .iter()
            .map(|case| Case {
                name: case.name,
                verdict: case.verdict,
                basis: case.basis,
                source: case.rests_on,
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
