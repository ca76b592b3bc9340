//! The report as JUnit XML, which CI systems (GitLab, Jenkins, GitHub's test reporters) read:
//! a failure is a `<failure>`, a skipped case `<skipped>`, a warning a passing test case
//! whose `<system-out>` says so. The suite's properties say how keys were written, and its
//! `<system-out>` what the preflight found.

use std::fmt::Write as _;

use crate::{CaseReport, Report, Verdict};

/// The report as a JUnit `<testsuites>` document with one `<testsuite>`.
#[must_use]
pub fn junit(report: &Report) -> String {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let seconds = report.elapsed.as_secs_f64();
    let (tests, failures, skipped) = (
        report.cases.len(),
        report.count(Verdict::Fail),
        report.count(Verdict::Skipped),
    );
    let _ = writeln!(
        out,
        "<testsuites name=\"idem-check\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" \
         skipped=\"{skipped}\" time=\"{seconds:.3}\">"
    );
    let _ = writeln!(
        out,
        "  <testsuite name=\"idem-check {}\" tests=\"{tests}\" failures=\"{failures}\" \
         errors=\"0\" skipped=\"{skipped}\" time=\"{seconds:.3}\">",
        escape(&report.target)
    );
    let _ = writeln!(
        out,
        "    <properties><property name=\"key-style\" value=\"{}\"/></properties>",
        report.key_style.as_str()
    );
    if !report.notes.is_empty() {
        let _ = writeln!(
            out,
            "    <system-out>{}</system-out>",
            escape(&report.notes.join("\n"))
        );
    }
    for case in &report.cases {
        testcase(&mut out, case);
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

/// One `<testcase>`.
fn testcase(out: &mut String, case: &CaseReport) {
    let _ = write!(
        out,
        "    <testcase classname=\"idem-check\" name=\"{}: {}\" time=\"{:.3}\"",
        case.name,
        escape(case.title),
        case.elapsed.as_secs_f64()
    );
    let body = match case.verdict {
        Verdict::Pass => None,
        Verdict::Fail => Some(format!(
            "<failure message=\"{}\" type=\"fail\">{}</failure>",
            escape(&case.summary),
            escape(&case.detail())
        )),
        Verdict::Warn => Some(format!(
            "<system-out>warn: {}</system-out>",
            escape(&case.detail())
        )),
        Verdict::Skipped => Some(format!("<skipped message=\"{}\"/>", escape(&case.summary))),
    };
    match body {
        None => out.push_str("/>\n"),
        Some(body) => {
            let _ = writeln!(out, ">\n      {body}\n    </testcase>");
        }
    }
}

/// Text as XML character data or an attribute value. Characters XML 1.0 cannot hold at all
/// (control characters a server may send back) become U+FFFD.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\t' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || matches!(c, '\u{FFFE}' | '\u{FFFF}') => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_for_xml() {
        assert_eq!(escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
        assert_eq!(escape("x\u{1}y\nz"), "x\u{FFFD}y&#10;z");
    }
}
