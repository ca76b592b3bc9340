//! What a case concludes, built up as it reads the answers: every failure and warning it
//! finds, and the one-line account of a pass.

use crate::{show, verdict::Verdict, wire::Exchange};

/// A case's findings. The verdict is the worst of them: any failure fails the case, else any
/// warning warns, else it passes; a skipped case says why and which setting would run it.
#[derive(Debug, Default)]
pub(crate) struct Judgement {
    failures: Vec<String>,
    warnings: Vec<String>,
    notes: Vec<String>,
    passed: Option<String>,
    skipped: Option<String>,
    exchanges: Vec<Exchange>,
}

impl Judgement {
    /// A case that did not run, and why.
    pub(crate) fn skipped(why: impl Into<String>) -> Self {
        Self {
            skipped: Some(why.into()),
            ..Self::default()
        }
    }

    /// Findings about `exchanges`.
    pub(crate) fn of(exchanges: impl IntoIterator<Item = Exchange>) -> Self {
        Self {
            exchanges: exchanges.into_iter().collect(),
            ..Self::default()
        }
    }

    /// Adds an exchange the findings are about.
    pub(crate) fn saw(&mut self, exchange: Exchange) {
        self.exchanges.push(exchange);
    }

    /// The server did what the case exists to catch.
    pub(crate) fn fail(&mut self, why: impl Into<String>) {
        self.failures.push(why.into());
    }

    /// Allowed, but risky.
    pub(crate) fn warn(&mut self, why: impl Into<String>) {
        self.warnings.push(why.into());
    }

    /// Worth knowing, whatever the verdict.
    pub(crate) fn note(&mut self, what: impl Into<String>) {
        self.notes.push(what.into());
    }

    /// What the server did, when nothing failed.
    pub(crate) fn pass(&mut self, what: impl Into<String>) {
        self.passed = Some(what.into());
    }

    /// Marks the case skipped after it ran: its answers could not decide it.
    pub(crate) fn undecided(&mut self, why: impl Into<String>) {
        self.skipped = Some(why.into());
    }

    /// How many failures and warnings so far.
    pub(crate) fn findings(&self) -> usize {
        self.failures.len() + self.warnings.len()
    }

    /// Whether anything failed so far.
    pub(crate) fn has_failed(&self) -> bool {
        !self.failures.is_empty()
    }

    /// The verdict, its one-line summary, the notes and the transcript.
    pub(crate) fn conclude(self) -> (Verdict, String, Vec<String>, Vec<String>) {
        let transcript = self.exchanges.iter().map(show::exchange).collect();
        let (verdict, summary, mut notes) = if !self.failures.is_empty() {
            let mut failures = self.failures.into_iter();
            let first = failures.next().unwrap_or_default();
            (
                Verdict::Fail,
                first,
                failures.chain(self.warnings).collect(),
            )
        } else if let Some(why) = self.skipped {
            (Verdict::Skipped, why, self.warnings)
        } else if !self.warnings.is_empty() {
            let mut warnings = self.warnings.into_iter();
            let first = warnings.next().unwrap_or_default();
            (Verdict::Warn, first, warnings.collect())
        } else {
            let summary = self.passed.unwrap_or_else(|| "as expected".to_owned());
            (Verdict::Pass, summary, Vec::new())
        };
        notes.extend(self.notes);
        (verdict, summary, notes, transcript)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worst_finding_decides() {
        let mut judgement = Judgement::default();
        judgement.pass("fine");
        judgement.note("n");
        assert_eq!(judgement.conclude().0, Verdict::Pass);

        let mut judgement = Judgement::default();
        judgement.pass("fine");
        judgement.warn("w");
        let (verdict, summary, ..) = judgement.conclude();
        assert_eq!((verdict, summary.as_str()), (Verdict::Warn, "w"));

        let mut judgement = Judgement::default();
        judgement.warn("w");
        judgement.fail("f1");
        judgement.fail("f2");
        judgement.undecided("u");
        let (verdict, summary, notes, _) = judgement.conclude();
        assert_eq!((verdict, summary.as_str()), (Verdict::Fail, "f1"));
        assert_eq!(notes, ["f2", "w"]);

        let mut judgement = Judgement::default();
        judgement.undecided("u");
        assert_eq!(judgement.conclude().0, Verdict::Skipped);
    }
}
