//! Case 6: after the declared retention, the same key is a new request. The check waits the
//! TTL and a margin (a tenth of it, at most a minute, and a second: for a store that
//! expires on a timer) only when asked to (`--wait-ttl`).

use std::time::Duration;

use crate::{
    answer,
    cases::{Context, Judgement, context::effects, expect},
    show,
    wire::Abort,
};

/// How long after the TTL the retry is sent.
pub(crate) fn margin(ttl: Duration) -> Duration {
    (ttl / 10).min(Duration::from_secs(60)) + Duration::from_secs(1)
}

pub(super) async fn run(ctx: &mut Context<'_>) -> Result<Judgement, Abort> {
    let Some(ttl) = ctx.settings.ttl else {
        return Ok(Judgement::skipped(
            "needs the retention the server declares: --ttl (and --wait-ttl to wait it out)",
        ));
    };
    if !ctx.settings.wait_ttl {
        return Ok(Judgement::skipped(format!(
            "would wait {} (the TTL and a margin): add --wait-ttl",
            show::duration(ttl + margin(ttl))
        )));
    }
    let key = Context::fresh_key();
    let first = ctx.send(ctx.keyed(&key)).await?;
    let mut judgement = Judgement::of([first.clone()]);
    let Some(first_answer) = first.answer().filter(|_| first.succeeded()) else {
        judgement.fail(format!(
            "the request itself, with a fresh key, was answered {}",
            show::outcome(&first)
        ));
        return Ok(judgement);
    };
    let before = ctx.read(ctx.counter.as_ref()).await?;
    ctx.sleep(ttl + margin(ttl), "the retention period").await?;
    let again = ctx.send(ctx.keyed(&key)).await?;
    let after = ctx.read(ctx.counter.as_ref()).await?;
    judgement.saw(again.clone());
    let effects = effects(before, after);
    let waited = show::duration(ttl + margin(ttl));
    let Some(answer) = again.answer() else {
        judgement.fail(format!(
            "the retry after {waited} got no answer: {}",
            show::outcome(&again)
        ));
        return Ok(judgement);
    };
    let status = answer.status.as_u16();
    let replayed = answer::is_replayed(answer);
    let same = expect::same_answer(first_answer, answer);
    let new_effect = effects.map(|effects| effects.new_effects() > 0);
    if !answer.status.is_success() {
        judgement.fail(format!(
            "{waited} after the first request (TTL {}), the same key was answered {status}, not \
             run as a new request",
            show::duration(ttl)
        ));
    } else if replayed || (same && new_effect == Some(false)) {
        judgement.fail(format!(
            "{waited} after the first request, the key was still replayed: the declared \
             retention of {} is not what the server does",
            show::duration(ttl)
        ));
    } else if same && new_effect.is_none() && !ctx.marks_replays {
        judgement.undecided(
            "the answer after the TTL is the first answer again, not marked a replay: without \
             --count-url, a new request cannot be told from a replay",
        );
    } else {
        judgement.pass(format!(
            "{waited} later, the same key ran as a new request ({status}){}",
            expect::counted(effects)
        ));
        expect::new_effects(&mut judgement, effects, 1, "the same key after the TTL");
    }
    Ok(judgement)
}
