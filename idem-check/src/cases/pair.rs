//! The shape most cases share: a first request with a fresh key, which must succeed, then a
//! second request with the same key, counted around the second.

use std::time::Duration;

use crate::{
    cases::{Case, Context, Judgement, context::effects},
    count::Effects,
    show,
    wire::{Abort, Answer, Exchange, Probe},
};

/// The first answer, the second exchange, and the count around the second.
#[derive(Debug)]
pub(crate) struct Pair {
    pub(crate) first: Answer,
    pub(crate) second: Exchange,
    pub(crate) effects: Option<Effects>,
}

impl Pair {
    /// Sends `first`; if it succeeds, waits `between` (the retention period, or nothing), and
    /// sends `second`, counting around it. A first request that does not succeed fails the
    /// case (`None`): the same request had succeeded in the preflight.
    pub(crate) async fn send(
        ctx: &mut Context<'_>,
        case: Case,
        judgement: &mut Judgement,
        (first, second): (Probe, Probe),
        between: Option<(Duration, &str)>,
    ) -> Result<Option<Self>, Abort> {
        let first = ctx.send(first).await?;
        judgement.saw(first.clone());
        let Some(answer) = first.answer().filter(|_| first.succeeded()).cloned() else {
            judgement.fail(format!(
                "the request itself, with a fresh key, was answered {}",
                show::outcome(&first)
            ));
            return Ok(None);
        };
        let before = ctx.read(ctx.counter.as_ref()).await?;
        if let Some((wait, why)) = between {
            ctx.sleep(wait, why).await?;
        }
        let second = ctx.send(second).await?;
        let after = ctx.read(ctx.counter.as_ref()).await?;
        judgement.saw(second.clone());
        ctx.keep_refusal(case, &second);
        Ok(Some(Self {
            first: answer,
            second,
            effects: effects(before, after),
        }))
    }

    /// The second answer; `None`, with the failure judged, when there was none.
    pub(crate) fn second_answer(&self, judgement: &mut Judgement, what: &str) -> Option<&Answer> {
        let answer = self.second.answer();
        if answer.is_none() {
            judgement.fail(format!(
                "{what} got no answer: {}",
                show::outcome(&self.second)
            ));
        }
        answer
    }
}
