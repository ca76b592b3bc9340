//! The same key from another principal never gets the first principal's answer: keys are
//! scoped to whoever sends them (the draft's security considerations). The second principal's
//! request runs as their own, and the first principal's listing does not change.

use crate::{
    cases::{
        About, Context, Judgement, expect,
        pair::{self, Pair},
    },
    exchange::Answer,
    plan::{Listing, Need, Plan},
    session::fresh_key,
    verdict::Basis,
    wire::Abort,
};

pub(super) const ABOUT: About = About {
    name: "scope",
    title: "the same key from another principal",
    basis: Basis::Declared,
    rests_on: "the second principal --other-header declares, whose requests are their own: \
               one principal's stored answer is never another's (the draft's security \
               considerations: a lookup key combined with who the client is)",
    needs: &[Need::SecondPrincipal],
};

/// A pair, counted in the first principal's listing.
pub(super) fn budget(plan: &Plan) -> usize {
    pair::REQUESTS + plan.reads(Listing::Endpoint)
}

pub(super) async fn run(ctx: &mut Context<'_>) -> Result<Judgement, Abort> {
    let key = fresh_key();
    let requests = (
        ctx.keyed(&key),
        ctx.session.as_second_principal(ctx.keyed(&key)),
    );
    let mut judgement = Judgement::default();
    let Some(pair) = Pair::send(ctx, ABOUT.name, &mut judgement, requests, None).await? else {
        return Ok(judgement);
    };
    if let Some(answer) = pair.second_answer(&mut judgement, "the second principal's request") {
        judge(&mut judgement, &pair, answer, ctx.marks_replays);
    }
    expect::new_effects(
        &mut judgement,
        pair.effects.as_ref(),
        0,
        "the second principal's request, in the first principal's listing",
    );
    Ok(judgement)
}

/// Judges the second principal's answer. An unmarked answer identical to the first
/// principal's is taken for a replay unless the server is known to mark its replays.
fn judge(judgement: &mut Judgement, pair: &Pair, answer: &Answer, marks_replays: bool) {
    let status = answer.status.as_u16();
    let same = expect::same_answer(&pair.first, answer);
    if answer.is_replayed() || (same && !marks_replays) {
        judgement.defect(
            "the second principal got the first principal's answer with the same key: keys are \
             not scoped to who sends them, so anyone who learns a key reads its result",
        );
    } else if answer.succeeded() {
        let how = if same {
            judgement.note(
                "the second principal's answer has the same body as the first's, but is not \
                 marked a replay (this server marks its replays): a run of its own",
            );
            "not marked a replay"
        } else {
            "with another answer"
        };
        judgement.pass(format!(
            "the second principal's request ran as their own ({status}), {how}{}",
            first_principals(pair)
        ));
    } else if matches!(status, 401 | 403) {
        judgement.undecided(format!(
            "the second principal was refused ({status}): check --other-header"
        ));
    } else if matches!(status, 409 | 422) {
        judgement.warn(format!(
            "the second principal's request was refused with {status}: the key is shared across \
             principals, so one user's key blocks another's and tells them it is in use"
        ));
    } else {
        judgement.defect(format!(
            "the second principal's request was answered {status}"
        ));
    }
}

/// The count, which is the first principal's listing: ` (the first principal's count of
/// /payments: 5 → 5)`.
fn first_principals(pair: &Pair) -> String {
    pair.effects.as_ref().map_or_else(String::new, |effects| {
        format!(" (the first principal's {})", effects.shown())
    })
}
