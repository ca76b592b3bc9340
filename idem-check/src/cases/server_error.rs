//! Case 7: a retry after a 5xx gets what the server declares: the stored 5xx again
//! (`--on-5xx stored`, as Stripe), or a new run (`--on-5xx rerun`, idem's default). A key left
//! "in flight" by the failure (409 to every retry) fails either way: that is the article's
//! own Redis sketch without error handling.

use crate::{
    cases::{About, Context, Judgement, expect},
    count::Effects,
    exchange::{Answer, Exchange},
    plan::{Listing, Need, Plan},
    session::fresh_key,
    settings::OnServerError,
    show,
    verdict::Basis,
    wire::Abort,
};

pub(super) const ABOUT: About = About {
    name: "server-error",
    title: "a retry after a 5xx",
    basis: Basis::Declared,
    rests_on: "what the server declares it does after a 5xx (--on-5xx): a retry gets the \
               stored 5xx, or runs again; never a conflict, since the first request has ended",
    needs: &[Need::FailingRequest],
};

/// The failing request and its retry, counted.
pub(super) fn budget(plan: &Plan) -> usize {
    2 + plan.reads(Listing::Failing)
}

pub(super) async fn run(ctx: &mut Context<'_>) -> Result<Judgement, Abort> {
    let probe = ctx.failing_request(&fresh_key());
    let before = ctx.read(Listing::Failing).await?;
    let first = ctx.send(probe.clone()).await?;
    let mut judgement = Judgement::of([first.clone()]);
    let Some(failed) = first
        .answer()
        .filter(|answer| answer.status.is_server_error())
    else {
        judgement.undecided(format!(
            "the failing variant was answered {}, not 5xx: case 7 needs a request the server \
             fails",
            show::summary(&first)
        ));
        return Ok(judgement);
    };
    let again = ctx.send(probe).await?;
    let after = ctx.read(Listing::Failing).await?;
    judgement.saw(again.clone());
    ctx.keep_refusal(ABOUT.name, &again);
    let retry = Retry {
        failed,
        again: &again,
        declared: ctx.session.settings.on_server_error,
        effects: ctx.effects(Listing::Failing, before, after),
        marks_replays: ctx.marks_replays,
    };
    retry.judge(&mut judgement);
    Ok(judgement)
}

/// A retry after a 5xx, and what the case knows to judge it.
struct Retry<'a> {
    failed: &'a Answer,
    again: &'a Exchange,
    declared: OnServerError,
    effects: Option<Effects>,
    marks_replays: bool,
}

impl Retry<'_> {
    /// Judges the retry against the declared policy.
    fn judge(&self, judgement: &mut Judgement) {
        let Some(answer) = self.again.answer() else {
            judgement.defect(format!(
                "the retry after a 5xx got no answer: {}",
                show::summary(self.again)
            ));
            return;
        };
        if answer.status == 409 {
            judgement.defect(
                "the retry after a 5xx was answered 409: the failed request left its key in \
                 flight, though it had ended with its 5xx, so the operation can be neither \
                 retried nor replayed for as long as the server keeps the key so",
            );
            return;
        }
        match self.declared {
            OnServerError::Stored => self.stored(judgement, answer),
            OnServerError::Rerun => self.rerun(judgement, answer),
        }
        // A failed run made nothing; a run after it made one thing if it succeeded.
        let expected = usize::from(self.declared == OnServerError::Rerun && answer.succeeded());
        if !judgement.has_defect() {
            expect::new_effects(
                judgement,
                self.effects.as_ref(),
                expected,
                "the retry after a 5xx",
            );
        }
    }

    /// Declared stored: the retry gets the same 5xx.
    fn stored(&self, judgement: &mut Judgement, answer: &Answer) {
        let status = self.failed.status.as_u16();
        if answer.succeeded() {
            judgement.defect(format!(
                "the retry after a {status} ran again ({}), but the server declares its 5xx \
                 stored (--on-5xx stored): a client told the outcome is final sees it change",
                answer.status.as_u16()
            ));
        } else if !expect::same_answer(self.failed, answer) {
            judgement.defect(format!(
                "the retry after a {status} was answered {} with another body, not the stored \
                 5xx the server declares (--on-5xx stored): it ran again",
                answer.status.as_u16()
            ));
        } else {
            let marked = if answer.is_replayed() {
                ", marked Idempotent-Replayed"
            } else {
                ""
            };
            judgement.pass(format!("the stored {status} again{marked}, as declared"));
        }
    }

    /// Declared rerun: the retry is not a replay of the 5xx.
    fn rerun(&self, judgement: &mut Judgement, answer: &Answer) {
        let status = answer.status.as_u16();
        if answer.is_replayed() {
            judgement.defect(format!(
                "the {} was replayed (Idempotent-Replayed: true), but the server declares that \
                 a retry after a 5xx runs again (--on-5xx rerun)",
                self.failed.status.as_u16()
            ));
        } else if answer.succeeded() || !expect::same_answer(self.failed, answer) {
            judgement.pass(format!("the retry ran again and got {status}, as declared"));
        } else if self.marks_replays {
            judgement.pass(format!(
                "{status} again, not marked a replay by a server that marks its replays: run \
                 again, as declared"
            ));
        } else {
            judgement.undecided(format!(
                "{status} again with the same body, not marked a replay, from a server that does \
                 not mark its replays: a new run cannot be told from the stored 5xx"
            ));
        }
    }
}
