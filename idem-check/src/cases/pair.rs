//! The shape most cases share: a first request with a fresh key, which must succeed, then a
//! second request with the same key, counted around the second in the endpoint's listing.

use std::time::Duration;

use crate::{
    cases::{Context, Judgement},
    count::Effects,
    exchange::{Answer, Exchange, Probe},
    plan::Listing,
    show,
};

/// The first answer, the second exchange, and the count around the second.
#[derive(Debug)]
pub(crate) struct Pair {
    pub(crate) first: Answer,
    pub(crate) second: Exchange,
    pub(crate) effects: Option<Effects>,
}

/// The requests a pair sends: the first, and the second of one count read before and after.
pub(crate) const REQUESTS: usize = 2;

impl Pair {
    /// Sends `first`; if it succeeds, waits `between` (the retention period, or nothing), and
    /// sends `second`, counting around it. A first request that does not succeed is a defect
    /// (`None`): the same request had succeeded in the preflight. `name` is the case's, for
    /// the refusals it keeps.
    pub(crate) async fn send(
        ctx: &mut Context<'_>,
        name: &'static str,
        judgement: &mut Judgement,
        (first, second): (Probe, Probe),
        between: Option<(Duration, &str)>,
    ) -> Result<Option<Self>, crate::wire::Abort> {
        let first = ctx.send(first).await?;
        judgement.saw(first.clone());
        let Some(answer) = first.answer().filter(|_| first.succeeded()).cloned() else {
            judgement.defect(format!(
                "the request itself, with a fresh key, was answered {}",
                show::summary(&first)
            ));
            return Ok(None);
        };
        let before = ctx.read(Listing::Endpoint).await?;
        if let Some((wait, why)) = between {
            ctx.sleep(wait, why).await?;
        }
        let second = ctx.send(second).await?;
        let after = ctx.read(Listing::Endpoint).await?;
        judgement.saw(second.clone());
        ctx.keep_refusal(name, &second);
        Ok(Some(Self {
            first: answer,
            second,
            effects: ctx.effects(Listing::Endpoint, before, after),
        }))
    }

    /// The second answer; `None`, with the defect judged, when there was none.
    pub(crate) fn second_answer(&self, judgement: &mut Judgement, what: &str) -> Option<&Answer> {
        let answer = self.second.answer();
        if answer.is_none() {
            judgement.defect(format!(
                "{what} got no answer: {}",
                show::summary(&self.second)
            ));
        }
        answer
    }
}
