//! Case 3: a retry while the first request is still running. The duplicate is sent while the
//! slow request runs; whichever of the two the server took first runs, and the other is
//! answered 409 (ideally with `Retry-After`) or waits and gets the first's result. After a
//! 409 the client comes back once the first is done and gets its result. One effect.
//!
//! The verdict rests on what the server answered and counted, not on the timing: if the two
//! requests reached the server in the other order, the pair is judged the same way; if the
//! slow request was answered before the duplicate was even sent, the case is undecided.

use crate::{
    cases::{About, Context, Judgement, expect},
    exchange::{Answer, Exchange, Probe},
    plan::{Listing, Need, Plan},
    preflight::SlowBaseline,
    session::fresh_key,
    show,
    verdict::Basis,
    wire::Abort,
};

pub(super) const ABOUT: About = About {
    name: "in-flight",
    title: "a retry while the first is running",
    basis: Basis::DraftMust,
    rests_on: "the draft's enforcement scenarios: a request retried before the original \
               completed MUST get a conflict error (SHOULD be 409); no duplicate records",
    needs: &[Need::SlowRequest],
};

/// The slow request, its duplicate, and the retry after a 409, counted.
pub(super) fn budget(plan: &Plan) -> usize {
    3 + plan.reads(Listing::Slow)
}

pub(super) async fn run(ctx: &mut Context<'_>) -> Result<Judgement, Abort> {
    let slow = ctx.slow();
    let probe = ctx.slow_request(&fresh_key());
    let before = ctx.read(Listing::Slow).await?;
    let (first, second) = send_overlapping(ctx, &probe, slow).await?;
    let mut judgement = Judgement::of([first.clone(), second.clone()]);
    if first.ended() <= second.started {
        judgement.undecided(format!(
            "the slow request was answered in {}, before the duplicate was sent after {}: \
             nothing was in flight; make it slower or lower --timeout-ms",
            show::duration(first.elapsed),
            show::duration(slow.give_up_after)
        ));
        return Ok(judgement);
    }
    ctx.keep_refusal(ABOUT.name, &first);
    ctx.keep_refusal(ABOUT.name, &second);
    let summary = match which_ran(&mut judgement, &first, &second) {
        Some((ran, other)) => judge_duplicate(ctx, &mut judgement, &ran, &other, &probe).await?,
        None => None,
    };
    let effects = ctx.effects(Listing::Slow, before, ctx.read(Listing::Slow).await?);
    expect::new_effects(
        &mut judgement,
        effects.as_ref(),
        1,
        "a request and its duplicate in flight",
    );
    if let Some(summary) = summary {
        judgement.pass(format!("{summary}{}", expect::counted(effects.as_ref())));
    }
    Ok(judgement)
}

/// Sends `probe`, and the same again once the client would have given up on the first.
async fn send_overlapping(
    ctx: &Context<'_>,
    probe: &Probe,
    slow: SlowBaseline,
) -> Result<(Exchange, Exchange), Abort> {
    let duplicate = async {
        ctx.sleep(slow.give_up_after, "before the duplicate")
            .await?;
        ctx.send(probe.clone()).await
    };
    let (first, second) = tokio::join!(ctx.send(probe.clone()), duplicate);
    Ok((first?, second?))
}

/// The request that ran (a 2xx) and the other, in whichever order they reached the server;
/// `None`, with the defect judged, when neither can have run.
fn which_ran(
    judgement: &mut Judgement,
    first: &Exchange,
    second: &Exchange,
) -> Option<(Exchange, Exchange)> {
    match (first.succeeded(), second.succeeded()) {
        (true, _) => Some((first.clone(), second.clone())),
        (false, true) => Some((second.clone(), first.clone())),
        (false, false) => {
            judgement.defect(format!(
                "neither request got the operation's answer: {} and {}",
                show::summary(first),
                show::summary(second)
            ));
            None
        }
    }
}

/// Judges the answer to the duplicate; answers the pass's summary, if it can pass.
async fn judge_duplicate(
    ctx: &mut Context<'_>,
    judgement: &mut Judgement,
    ran: &Exchange,
    other: &Exchange,
    probe: &Probe,
) -> Result<Option<String>, Abort> {
    let ran = ran.answer().expect("a 2xx is an answer");
    let Some(answer) = other.answer() else {
        judgement.defect(format!(
            "the duplicate got no answer while the first ran: {}",
            show::summary(other)
        ));
        return Ok(None);
    };
    let status = answer.status.as_u16();
    match status {
        _ if answer.succeeded() => {
            let waited = expect::retry_got_first(judgement, ran, other, "the duplicate in flight");
            Ok(waited.then(|| {
                format!("the duplicate waited and got the first request's answer ({status})")
            }))
        }
        409 => after_conflict(ctx, judgement, ran, answer, probe)
            .await
            .map(Some),
        429 | 503 => {
            judgement.warn(format!(
                "the duplicate was answered {status}, which clients retry, but the draft says 409"
            ));
            Ok(None)
        }
        _ => {
            judgement.defect(format!(
                "the duplicate of a running request was answered {status}: clients do not retry \
                 that, so the caller never learns the first request's result (the draft says a \
                 conflict error, 409)"
            ));
            Ok(None)
        }
    }
}

/// After a 409, the client comes back once the first is done: it gets the first's answer.
async fn after_conflict(
    ctx: &mut Context<'_>,
    judgement: &mut Judgement,
    ran: &Answer,
    conflict: &Answer,
    probe: &Probe,
) -> Result<String, Abort> {
    expect::conflict_says_when(judgement, conflict);
    let again = ctx.send(probe.clone()).await?;
    judgement.saw(again.clone());
    ctx.keep_refusal(ABOUT.name, &again);
    expect::retry_got_first(judgement, ran, &again, "the retry once the first was done");
    let marked = if again.answer().is_some_and(Answer::is_replayed) {
        ", marked Idempotent-Replayed"
    } else {
        ""
    };
    Ok(format!(
        "409{} while the first ran, then its answer{marked}",
        expect::retry_after_shown(conflict)
    ))
}
