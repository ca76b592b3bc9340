//! Case 6: after the declared retention, the same key is a new request. The check waits the
//! TTL and a margin (a tenth of it, at most a minute, and a second: for a store that
//! expires on a timer) only when asked to (`--wait-ttl`).

use std::time::Duration;

use crate::{
    answer,
    cases::{Case, Context, Judgement, expect, pair::Pair},
    show,
    wire::{Abort, Answer},
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
    let wait = ttl + margin(ttl);
    if !ctx.settings.wait_ttl {
        return Ok(Judgement::skipped(format!(
            "would wait {} (the TTL and a margin): add --wait-ttl",
            show::duration(wait)
        )));
    }
    let key = Context::fresh_key();
    let requests = (ctx.keyed(&key), ctx.keyed(&key));
    let mut judgement = Judgement::default();
    let between = Some((wait, "the retention period"));
    let Some(pair) = Pair::send(ctx, Case::Retention, &mut judgement, requests, between).await?
    else {
        return Ok(judgement);
    };
    let what = format!("the same key {} later", show::duration(wait));
    if let Some(answer) = pair.second_answer(&mut judgement, &what) {
        judge(
            &mut judgement,
            &pair,
            answer,
            (ttl, &what),
            ctx.marks_replays,
        );
    }
    Ok(judgement)
}

/// Judges the answer after the TTL: a new run, told from a replay by its marker, its body or
/// the count.
fn judge(
    judgement: &mut Judgement,
    pair: &Pair,
    answer: &Answer,
    (ttl, what): (Duration, &str),
    marks_replays: bool,
) {
    let status = answer.status.as_u16();
    let same = expect::same_answer(&pair.first, answer);
    let new_effect = pair.effects.map(|effects| effects.new_effects() > 0);
    let ttl = show::duration(ttl);
    if !answer.status.is_success() {
        judgement.fail(format!(
            "{what} (TTL {ttl}) was answered {status}, not run as a new request"
        ));
    } else if answer::is_replayed(answer) || (same && new_effect == Some(false)) {
        judgement.fail(format!(
            "{what} was still replayed: the declared retention of {ttl} is not what the server \
             does"
        ));
    } else if same && new_effect.is_none() && !marks_replays {
        judgement.undecided(
            "the answer after the TTL is the first answer again, not marked a replay: without \
             --count-url, a new request cannot be told from a replay",
        );
    } else {
        judgement.pass(format!(
            "{what}, it ran as a new request ({status}){}",
            expect::counted(pair.effects)
        ));
        expect::new_effects(judgement, pair.effects, 1, what);
    }
}
