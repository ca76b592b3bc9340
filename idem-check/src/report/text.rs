//! The report as a table, then the detail of every failure and warning.

use std::fmt::Write as _;

use crate::{CaseReport, Report, Verdict, duration};

/// The report for a reader: what the preflight found, one line per case, then what was sent
/// and what came back for each case that failed or warned. ANSI colours when `color`.
#[must_use]
pub fn text(report: &Report, color: bool) -> String {
    let mut out = String::new();
    for note in &report.notes {
        let _ = writeln!(out, "note: {note}");
    }
    if !report.notes.is_empty() {
        out.push('\n');
    }
    let _ = writeln!(out, " #  {:<16} {:<8} why", "case", "verdict");
    for (index, case) in report.cases.iter().enumerate() {
        let verdict = paint(
            case.verdict,
            &format!("{:<8}", case.verdict.as_str()),
            color,
        );
        let _ = writeln!(
            out,
            "{:>2}  {:<16} {verdict} {}",
            index + 1,
            case.name,
            case.summary
        );
    }
    let _ = writeln!(
        out,
        "\n{} cases: {} pass, {} fail, {} warn, {} skipped; {} requests in {}",
        report.cases.len(),
        report.count(Verdict::Pass),
        report.count(Verdict::Fail),
        report.count(Verdict::Warn),
        report.count(Verdict::Skipped),
        report.requests,
        duration::show(report.elapsed)
    );
    for (index, case) in report.cases.iter().enumerate() {
        details(&mut out, index + 1, case, color);
    }
    out
}

/// A case's detail under the table: every failure and warning with its exchanges, and the
/// notes of the others.
fn details(out: &mut String, number: usize, case: &CaseReport, color: bool) {
    if !matches!(case.verdict, Verdict::Fail | Verdict::Warn) && case.notes.is_empty() {
        return;
    }
    let verdict = paint(case.verdict, case.verdict.as_str(), color);
    let _ = writeln!(
        out,
        "\n{verdict} {number} {} ({}; {})",
        case.name, case.title, case.basis
    );
    for line in case.detail().lines() {
        let _ = writeln!(out, "  {line}");
    }
}

fn paint(verdict: Verdict, text: &str, color: bool) -> String {
    if !color {
        return text.to_owned();
    }
    let code = match verdict {
        Verdict::Pass => "32",
        Verdict::Fail => "1;31",
        Verdict::Warn => "33",
        Verdict::Skipped => "2",
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}
