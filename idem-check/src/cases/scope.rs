//! The same key from another principal never gets the first principal's answer: keys are
//! scoped to whoever sends them (the draft's security considerations). The second principal's
//! request runs as their own, and the first principal's listing does not change.

use crate::{
    answer,
    cases::{Case, Context, Judgement, context::effects, expect},
    show,
    wire::Abort,
};

pub(super) async fn run(ctx: &mut Context<'_>) -> Result<Judgement, Abort> {
    if ctx.settings.other_headers.is_empty() {
        return Ok(Judgement::skipped(
            "needs a second principal's credentials: --other-header 'Authorization: ...'",
        ));
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
    let second = ctx.send(ctx.as_second_principal(ctx.keyed(&key))).await?;
    let after = ctx.read(ctx.counter.as_ref()).await?;
    judgement.saw(second.clone());
    ctx.keep_refusal(Case::Scope, &second);
    let effects = effects(before, after);
    let Some(answer) = second.answer() else {
        judgement.fail(format!(
            "the second principal's request got no answer: {}",
            show::outcome(&second)
        ));
        return Ok(judgement);
    };
    let status = answer.status.as_u16();
    let same = expect::same_answer(first_answer, answer);
    if answer::is_replayed(answer) || (same && !ctx.marks_replays) {
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
            expect::counted(effects)
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
    expect::new_effects(
        &mut judgement,
        effects,
        0,
        "the second principal's request, in the first principal's listing",
    );
    Ok(judgement)
}
