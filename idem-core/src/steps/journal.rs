//! The journal of one run of an operation: which steps it found recorded, which it reached,
//! and how it stopped. The run's [`Steps`](super::Steps) write it; the flow reads it when the
//! handler returns, to complete the operation, suspend it, or stop it.

use tokio::time::Instant;

use super::lease::{LeaseClock, LeaseView};
use crate::{
    scope::StoreKey,
    store::{LeaseToken, operation::RecordedStep},
};

/// The record this run holds: set by the flow before the handler runs under a claim, absent
/// when the handler runs without a record (then steps just run).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Holder {
    pub(crate) key: StoreKey,
    pub(crate) token: LeaseToken,
    /// The largest step output recorded: the route's `max_stored_body`.
    pub(crate) max_output: usize,
}

/// Why a run stopped before its operation completed, as its steps saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// A step failed and may pass later: the operation stays open and resumes.
    Retryable,
    /// A step ended the operation: whatever the handler answers is its result.
    Terminal,
    /// The run does not match the recorded steps (a step renamed or moved, an output that
    /// does not read back, a step that cannot be recorded): the operation stops and is not
    /// resumed on its own. Says why.
    Changed(String),
    /// Another run took the key over: this run's writes are refused.
    Fenced,
}

/// The detail of the 500 `steps-changed` answer of a run that stopped for `why`.
pub(crate) fn changed_detail(why: &str) -> String {
    format!(
        "this operation was interrupted and run again, and this run does not match the steps \
         recorded for it: {why}"
    )
}

/// What a run's steps did, for the flow to settle the operation by.
#[derive(Debug, Default)]
pub(crate) struct Journal {
    held: Option<Holder>,
    /// The held lease, as this run's clock sees it.
    lease: Option<LeaseClock>,
    /// The steps recorded: those the claim found, then those this run recorded.
    recorded: Vec<RecordedStep>,
    /// How many of `recorded` this run has reached.
    reached: usize,
    /// Whether this run began a step (its effect may exist even if it was not recorded).
    began: bool,
    stop: Option<Stop>,
    /// How often the operation was suspended before this run.
    suspensions: u32,
}

/// The next step of a run, as the journal sees it.
pub(crate) enum Next {
    /// It ended in an earlier run: its recorded output.
    Recorded(bytes::Bytes),
    /// It runs now, as step `index`; `held` is the record to write its output to.
    Run { index: usize, held: Option<Holder> },
    /// An earlier run started it (its start mark is recorded) and did not record its end:
    /// its outcome is unknown. Its output, if any run learns it, is step `index`.
    Started { index: usize, held: Option<Holder> },
}

impl Journal {
    /// The run holds `held` under `lease`, and found `recorded` steps after `suspensions`
    /// suspensions.
    pub(crate) fn hold(
        &mut self,
        held: Holder,
        lease: LeaseClock,
        recorded: Vec<RecordedStep>,
        suspensions: u32,
    ) {
        self.held = Some(held);
        self.lease = Some(lease);
        self.recorded = recorded;
        self.suspensions = suspensions;
    }

    /// The record this run holds, if any.
    pub(crate) fn held(&self) -> Option<Holder> {
        self.held
    }

    /// The held lease, as it stands now; `None` when the run holds no record.
    pub(crate) fn lease(&self) -> Option<LeaseView> {
        self.lease.map(|lease| lease.view(Instant::now()))
    }

    /// The store confirmed the lease, by a renewal sent at `sent` for `lease`.
    pub(crate) fn lease_confirmed(&mut self, sent: Instant, lease: std::time::Duration) {
        if let Some(clock) = &mut self.lease {
            clock.confirmed(sent, lease);
        }
    }

    /// The store answered that the lease is lost.
    pub(crate) fn lease_lost(&mut self) {
        if let Some(clock) = &mut self.lease {
            clock.lost();
        }
    }

    /// The step called `name`, reached next: its recorded output, or its turn to run. A name
    /// other than the recorded one at this place, or one this run reached already, stops the
    /// run.
    pub(crate) fn next(&mut self, name: &str) -> Result<Next, Stop> {
        if let Some(stop) = &self.stop {
            return Err(stop.clone());
        }
        let index = self.reached;
        if let Some(earlier) = self.recorded[..index].iter().position(|s| s.name() == name) {
            return Err(self.stop(Stop::Changed(format!(
                "the step `{name}` is reached twice in one run (as step {} and {}); give each \
                 step its own name",
                earlier + 1,
                index + 1
            ))));
        }
        match self.recorded.get(index) {
            Some(step) if step.name() == name && step.is_start_mark() => self.started(name),
            Some(step) if step.name() == name => {
                self.reached += 1;
                Ok(Next::Recorded(step.output().clone()))
            }
            Some(step) => {
                let recorded = step.name().to_owned();
                Err(self.stop(Stop::Changed(format!(
                    "step {} is `{name}` in this run and `{recorded}` in the recorded one",
                    index + 1
                ))))
            }
            None => {
                self.began = true;
                Ok(Next::Run {
                    index,
                    held: self.held,
                })
            }
        }
    }

    /// The step called `name`, whose start mark is the next recorded: its output, recorded
    /// after the mark, or the news that its outcome is unknown.
    fn started(&mut self, name: &str) -> Result<Next, Stop> {
        self.reached += 1;
        let index = self.reached;
        match self.recorded.get(index) {
            Some(ended) if ended.name() == name && !ended.is_start_mark() => {
                self.reached += 1;
                Ok(Next::Recorded(ended.output().clone()))
            }
            Some(other) => {
                let other = other.name().to_owned();
                Err(self.stop(Stop::Changed(format!(
                    "the step `{name}` was started and is followed by `{other}` in the \
                     recorded steps, not by its own end"
                ))))
            }
            None => {
                self.began = true;
                Ok(Next::Started {
                    index,
                    held: self.held,
                })
            }
        }
    }

    /// The step at `index` ended and its output is recorded.
    pub(crate) fn recorded(&mut self, step: RecordedStep) {
        debug_assert_eq!(self.recorded.len(), self.reached);
        self.recorded.push(step);
        self.reached += 1;
    }

    /// The run stops, for `stop`; the first reason given stands.
    pub(crate) fn stop(&mut self, stop: Stop) -> Stop {
        self.stop.get_or_insert(stop).clone()
    }

    /// How the run ended, once the handler returned: how it stopped, if it did, or the
    /// recorded steps it never reached.
    pub(crate) fn ending(&mut self) -> Option<Stop> {
        if self.stop.is_none()
            && let Some(missed) = self.recorded.get(self.reached)
        {
            let missed = format!(
                "the run ended before reaching the recorded step {} (`{}`)",
                self.reached + 1,
                missed.name()
            );
            self.stop = Some(Stop::Changed(missed));
        }
        self.stop.clone()
    }

    /// Whether the operation has anything of its steps to keep: a step this run began, or
    /// one an earlier run recorded. Such an operation is suspended, never released.
    pub(crate) fn stepped(&self) -> bool {
        self.began || !self.recorded.is_empty() || self.suspensions > 0
    }

    /// How often the operation was suspended before this run.
    pub(crate) fn suspensions(&self) -> u32 {
        self.suspensions
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn step(name: &str) -> RecordedStep {
        RecordedStep::new(name, Bytes::from_static(b"1"))
    }

    fn holding(recorded: Vec<RecordedStep>) -> Journal {
        let mut journal = Journal::default();
        let held = Holder {
            key: StoreKey::from_bytes([1; 32]),
            token: LeaseToken::from_u128(1),
            max_output: 1024,
        };
        let lease = LeaseClock::new(held.token, Instant::now(), std::time::Duration::ZERO);
        journal.hold(held, lease, recorded, 1);
        journal
    }

    #[test]
    fn recorded_steps_are_skipped_in_order_then_the_next_one_runs() {
        let mut journal = holding(vec![step("bank"), step("ledger")]);
        assert!(matches!(journal.next("bank"), Ok(Next::Recorded(_))));
        assert!(matches!(journal.next("ledger"), Ok(Next::Recorded(_))));
        assert!(matches!(
            journal.next("mail"),
            Ok(Next::Run { index: 2, .. })
        ));
        journal.recorded(step("mail"));
        assert_eq!(journal.ending(), None);
        assert!(journal.stepped());
    }

    #[test]
    fn a_renamed_step_stops_the_run_and_keeps_stopping_it() {
        let mut journal = holding(vec![step("bank"), step("ledger")]);
        assert!(matches!(journal.next("bank"), Ok(Next::Recorded(_))));
        let Err(Stop::Changed(why)) = journal.next("books") else {
            panic!("a renamed step ran");
        };
        assert_eq!(
            why,
            "step 2 is `books` in this run and `ledger` in the recorded one"
        );
        assert!(matches!(journal.next("ledger"), Err(Stop::Changed(_))));
        assert!(matches!(journal.ending(), Some(Stop::Changed(_))));
    }

    #[test]
    fn a_run_that_ends_before_a_recorded_step_has_changed() {
        let mut journal = holding(vec![step("bank"), step("ledger")]);
        assert!(matches!(journal.next("bank"), Ok(Next::Recorded(_))));
        let Some(Stop::Changed(why)) = journal.ending() else {
            panic!("a skipped step went unnoticed");
        };
        assert!(why.contains("`ledger`"), "{why}");
    }

    #[test]
    fn a_name_reached_twice_stops_the_run() {
        let mut journal = holding(Vec::new());
        assert!(matches!(
            journal.next("charge"),
            Ok(Next::Run { index: 0, .. })
        ));
        journal.recorded(step("charge"));
        assert!(matches!(journal.next("charge"), Err(Stop::Changed(_))));
    }

    #[test]
    fn a_start_mark_with_its_end_gives_the_output_and_without_it_says_started() {
        let mark = RecordedStep::start_mark("sms");
        let mut ended = holding(vec![mark.clone(), step("sms"), step("ledger")]);
        assert!(matches!(ended.next("sms"), Ok(Next::Recorded(out)) if out == "1"));
        assert!(matches!(ended.next("ledger"), Ok(Next::Recorded(_))));
        assert_eq!(ended.ending(), None);

        let mut unknown = holding(vec![step("bank"), mark.clone()]);
        assert!(matches!(unknown.next("bank"), Ok(Next::Recorded(_))));
        assert!(matches!(
            unknown.next("sms"),
            Ok(Next::Started { index: 2, .. })
        ));
        // The output a run learns goes after the mark.
        unknown.recorded(step("sms"));
        assert_eq!(unknown.ending(), None);

        let mut changed = holding(vec![mark, step("mail")]);
        assert!(matches!(changed.next("sms"), Err(Stop::Changed(_))));
    }

    #[test]
    fn the_first_reason_to_stop_stands() {
        let mut journal = holding(Vec::new());
        journal.stop(Stop::Terminal);
        assert_eq!(journal.stop(Stop::Retryable), Stop::Terminal);
        assert_eq!(journal.ending(), Some(Stop::Terminal));
    }

    #[test]
    fn an_operation_without_steps_has_nothing_to_keep() {
        let mut journal = Journal::default();
        assert!(!journal.stepped());
        assert_eq!(journal.ending(), None);
    }
}
