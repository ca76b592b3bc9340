//! The same key from another principal never gets the first principal's answer: keys are
//! scoped to whoever sends them (the draft's security considerations). The second principal's
//! request runs as their own, and the first principal's listing does not change.

use crate::{
    answer,
    cases::{Case, Context, Judgement, expect, pair::Pair},
    wire::{Abort, Answer},
};

pub(super) async fn run(ctx: &mut Context<'_>) -> Result<Judgement, Abort> {
    if ctx.settings.other_headers.is_empty() {
        return Ok(Judgement::skipped(
            "needs a second principal's credentials: --other-header 'Authorization: ...'",
        ));
    }
    let key = Context::fresh_key();
    let requests = (ctx.keyed(&key), ctx.as_second_principal(ctx.keyed(&key)));
    let mut judgement = Judgement::default();
    let Some(pair) = Pair::send(ctx, Case::Scope, &mut judgement, requests, None).await? else {
        return Ok(judgement);
    };
    if let Some(answer) = pair.second_answer(&mut judgement, "the second principal's request") {
        judge(&mut judgement, &pair, answer, ctx.marks_replays);
    }
    expect::new_effects(
        &mut judgement,
        pair.effects,
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
    if answer::is_replayed(answer) || (same && !marks_replays) {
        judgement.fail(
            "the second principal got the first principal's answer with the same key: keys are \
             not scoped to who sends them, so anyone who learns a key reads its result",
        );
    } else if answer.status.is_success() {
        if same {
            judgement.note(
                "the second principal's answer has the same body as the first's, but is not \
                 marked a replay (this server marks its replays): a run of its own",
            );
        }
        judgement.pass(format!(
            "the second principal's request ran as their own ({status}), with another answer{}",
            expect::counted(pair.effects)
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
        judgement.fail(format!(
            "the second principal's request was answered {status}"
        ));
    }
}
