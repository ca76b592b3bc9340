//! Case 6: after the declared retention, the same key is a new request. The check waits the
//! TTL and a margin ([`retention_wait`]) only when asked to (`--wait-ttl`).

use std::time::Duration;

use crate::{
    cases::{
        About, Context, Judgement, expect,
        pair::{self, Pair},
    },
    exchange::Answer,
    plan::{Listing, Need, Plan, retention_wait},
    session::fresh_key,
    show,
    verdict::Basis,
    wire::Abort,
};

pub(super) const ABOUT: About = About {
    name: "retention",
    title: "a retry after the retention period",
    basis: Basis::Declared,
    rests_on: "the retention the server declares (--ttl), which the draft says it SHOULD \
               publish: after it, the same key is a new request",
    needs: &[Need::WaitedRetention],
};

/// A pair, counted.
pub(super) fn budget(plan: &Plan) -> usize {
    pair::REQUESTS + plan.reads(Listing::Endpoint)
}

pub(super) async fn run(ctx: &mut Context<'_>) -> Result<Judgement, Abort> {
    let ttl = ctx
        .plan
        .ttl
        .expect("the case runs only with a declared TTL");
    let wait = retention_wait(ttl);
    let key = fresh_key();
    let requests = (ctx.keyed(&key), ctx.keyed(&key));
    let mut judgement = Judgement::default();
    let between = Some((wait, "the retention period"));
    let Some(pair) = Pair::send(ctx, ABOUT.name, &mut judgement, requests, between).await? else {
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
    let new_effect = pair
        .effects
        .as_ref()
        .map(|effects| effects.new_effects() > 0);
    let ttl = show::duration(ttl);
    if !answer.status.is_success() {
        judgement.defect(format!(
            "{what} (TTL {ttl}) was answered {status}, not run as a new request"
        ));
    } else if answer.is_replayed() || (same && new_effect == Some(false)) {
        judgement.defect(format!(
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
            expect::counted(pair.effects.as_ref())
        ));
        expect::new_effects(judgement, pair.effects.as_ref(), 1, what);
    }
}
