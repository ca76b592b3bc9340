//! What a case concludes, built up as it reads the answers: every defect and warning it
//! finds, and the one-line account of a pass. How far a defect goes is not the case's to
//! say: it fails a case that rests on a MUST of the draft or on a declaration, and warns in
//! one that rests on a SHOULD ([`Basis`]).

use crate::{exchange::Exchange, show, verdict::Basis, verdict::Verdict};

/// A case's findings. The verdict is the worst of them: any defect fails the case (or warns,
/// under a SHOULD), else any warning warns, else it passes; a skipped case says why and which
/// setting would run it.
#[derive(Debug, Default)]
pub(crate) struct Judgement {
    defects: Vec<String>,
    warnings: Vec<String>,
    notes: Vec<String>,
    passed: Option<String>,
    skipped: Option<String>,
    exchanges: Vec<Exchange>,
}

/// A judgement concluded: the verdict, its one-line summary, the notes and the transcript.
#[derive(Debug)]
pub(crate) struct Conclusion {
    pub(crate) verdict: Verdict,
    pub(crate) summary: String,
    pub(crate) notes: Vec<String>,
    pub(crate) exchanges: Vec<String>,
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
    pub(crate) fn defect(&mut self, why: impl Into<String>) {
        self.defects.push(why.into());
    }

    /// Allowed, but risky; or what a SHOULD of the draft asks, not done.
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

    /// Whether a defect was found so far.
    pub(crate) fn has_defect(&self) -> bool {
        !self.defects.is_empty()
    }

    /// The verdict under `basis`. A line said twice (the same refusal met by several
    /// requests) is reported once.
    pub(crate) fn conclude(self, basis: Basis) -> Conclusion {
        let exchanges = self.exchanges.iter().map(show::exchange).collect();
        let (defects, warnings) = if basis.can_fail() {
            (self.defects, self.warnings)
        } else {
            (
                Vec::new(),
                self.defects.into_iter().chain(self.warnings).collect(),
            )
        };
        let (verdict, summary, mut notes) = if !defects.is_empty() {
            let mut defects = defects.into_iter();
            let first = defects.next().unwrap_or_default();
            (Verdict::Fail, first, defects.chain(warnings).collect())
        } else if let Some(why) = self.skipped {
            (Verdict::Skipped, why, warnings)
        } else if !warnings.is_empty() {
            let mut warnings = warnings.into_iter();
            let first = warnings.next().unwrap_or_default();
            (Verdict::Warn, first, warnings.collect())
        } else {
            let summary = self.passed.unwrap_or_else(|| "as expected".to_owned());
            (Verdict::Pass, summary, Vec::new())
        };
        notes.extend(self.notes);
        let mut said = vec![summary.clone()];
        notes.retain(|note| {
            let new = !said.contains(note);
            if new {
                said.push(note.clone());
            }
            new
        });
        Conclusion {
            verdict,
            summary,
            notes,
            exchanges,
        }
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
        assert_eq!(judgement.conclude(Basis::DraftMust).verdict, Verdict::Pass);

        let mut judgement = Judgement::default();
        judgement.pass("fine");
        judgement.warn("w");
        let concluded = judgement.conclude(Basis::DraftMust);
        assert_eq!(
            (concluded.verdict, concluded.summary.as_str()),
            (Verdict::Warn, "w")
        );

        let mut judgement = Judgement::default();
        judgement.warn("w");
        judgement.defect("f1");
        judgement.defect("f2");
        judgement.undecided("u");
        let concluded = judgement.conclude(Basis::Declared);
        assert_eq!(
            (concluded.verdict, concluded.summary.as_str()),
            (Verdict::Fail, "f1")
        );
        assert_eq!(concluded.notes, ["f2", "w"]);

        let mut judgement = Judgement::default();
        judgement.undecided("u");
        assert_eq!(
            judgement.conclude(Basis::DraftMust).verdict,
            Verdict::Skipped
        );
    }

    #[test]
    fn a_defect_against_a_should_warns() {
        let mut judgement = Judgement::default();
        judgement.defect("f");
        judgement.warn("w");
        let concluded = judgement.conclude(Basis::DraftShould);
        assert_eq!(
            (concluded.verdict, concluded.summary.as_str()),
            (Verdict::Warn, "f")
        );
        assert_eq!(concluded.notes, ["w"]);
    }

    #[test]
    fn a_line_said_twice_is_reported_once() {
        let mut judgement = Judgement::default();
        for _ in 0..7 {
            judgement.defect("the same");
        }
        judgement.note("n");
        judgement.note("n");
        let concluded = judgement.conclude(Basis::DraftMust);
        assert_eq!(concluded.summary, "the same");
        assert_eq!(concluded.notes, ["n"]);
    }
}
