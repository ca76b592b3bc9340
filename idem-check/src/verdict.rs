//! Verdicts: what a case concluded, what that rests on, and why.

use std::{fmt, time::Duration};

use serde::Serialize;

use crate::settings::KeyStyle;

/// What a case concluded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// The server did what the case expects.
    Pass,
    /// The server broke the rule the case rests on, a MUST of the draft or what the user
    /// declared; the detail says what was sent and what came back.
    Fail,
    /// Allowed by the draft, but risky (a 409 without `Retry-After`, say), or what a SHOULD
    /// of the draft asks, not done.
    Warn,
    /// Not run: a setting would enable it (the detail names it), or the server's answers
    /// could not decide it.
    Skipped,
}

impl Verdict {
    /// `pass`, `fail`, `warn` or `skipped`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Fail => "fail",
            Self::Warn => "warn",
            Self::Skipped => "skipped",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a case's verdict rests on, and so how far it can go: the server's behaviour against
/// a MUST of the draft, or against what the user declared with a flag, fails the case;
/// against a SHOULD of the draft, or one of its examples, it warns.
///
/// ```
/// use idem_check::{Basis, Case};
///
/// assert_eq!(Case::Concurrent.basis(), Basis::DraftMust);
/// assert_eq!(Case::ProblemDetails.basis().as_str(), "draft SHOULD");
/// assert!(!Case::KeyForms.basis().can_fail(), "key-forms warns, never fails");
/// assert!(Case::Scope.basis().can_fail());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Basis {
    /// A MUST of the IETF draft (or of a specification it makes normative, RFC 9651).
    #[serde(rename = "draft MUST")]
    DraftMust,
    /// A SHOULD of the IETF draft, or one of its examples.
    #[serde(rename = "draft SHOULD")]
    DraftShould,
    /// What the user declared with a flag: `--key-optional` (or keys required, without it),
    /// `--on-5xx`, `--ttl`, `--other-header`.
    #[serde(rename = "declared")]
    Declared,
}

impl Basis {
    /// `draft MUST`, `draft SHOULD` or `declared`, as the JSON report writes it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::DraftMust => "draft MUST",
            Self::DraftShould => "draft SHOULD",
            Self::Declared => "declared",
        }
    }

    /// Whether the server's breaking it fails a case (else it warns).
    #[must_use]
    pub fn can_fail(self) -> bool {
        !matches!(self, Self::DraftShould)
    }
}

impl fmt::Display for Basis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One case's result.
#[derive(Clone, Debug)]
pub struct CaseReport {
    /// The case's stable name: `replay`, `other-body`, ...
    pub name: &'static str,
    /// What the case checks, in a few words.
    pub title: &'static str,
    /// The verdict.
    pub verdict: Verdict,
    /// What the verdict rests on: a MUST or a SHOULD of the draft, or a declaration.
    pub basis: Basis,
    /// The rule itself, in a few words, with where it is written.
    pub rests_on: &'static str,
    /// One line: why this verdict.
    pub summary: String,
    /// More to know: how the server behaved where the draft leaves a choice.
    pub notes: Vec<String>,
    /// Every request the case sent and what came back, two lines each.
    pub exchanges: Vec<String>,
    /// How long the case took.
    pub elapsed: Duration,
}

impl CaseReport {
    /// The summary and the notes; for a failure or a warning, also what was sent and what
    /// came back.
    #[must_use]
    pub fn detail(&self) -> String {
        let mut lines = vec![self.summary.clone()];
        lines.extend(self.notes.iter().map(|note| format!("note: {note}")));
        if matches!(self.verdict, Verdict::Fail | Verdict::Warn) {
            lines.extend(self.exchanges.iter().cloned());
        }
        lines.join("\n")
    }
}

/// A whole check's result.
#[derive(Clone, Debug)]
pub struct Report {
    /// What was checked: `POST http://127.0.0.1:3000/payments`.
    pub target: String,
    /// How the keys were written: as the settings say, or as the preflight found the server
    /// takes them.
    pub key_style: KeyStyle,
    /// What the preflight found that every case builds on (keys sent bare because the server
    /// refused sf-strings, say).
    pub notes: Vec<String>,
    /// Every case, in order.
    pub cases: Vec<CaseReport>,
    /// How many requests were sent, count reads included.
    pub requests: usize,
    /// How long the check took.
    pub elapsed: Duration,
}

impl Report {
    /// Whether any case failed: the exit status is 1 then.
    #[must_use]
    pub fn failed(&self) -> bool {
        self.cases.iter().any(|case| case.verdict == Verdict::Fail)
    }

    /// The case named `name`.
    #[must_use]
    pub fn case(&self, name: &str) -> Option<&CaseReport> {
        self.cases.iter().find(|case| case.name == name)
    }

    /// How many cases ended with `verdict`.
    #[must_use]
    pub fn count(&self, verdict: Verdict) -> usize {
        self.cases
            .iter()
            .filter(|case| case.verdict == verdict)
            .count()
    }

    /// The names of the cases that ended with `verdict`, in order.
    #[must_use]
    pub fn names(&self, verdict: Verdict) -> Vec<&'static str> {
        self.cases
            .iter()
            .filter(|case| case.verdict == verdict)
            .map(|case| case.name)
            .collect()
    }
}
