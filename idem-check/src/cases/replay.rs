//! Case 1: the same key and body twice. The second answer is the first one again (status and
//! body), marked a replay if the server marks them, and there is one effect.

use crate::{
    answer,
    cases::{Context, Judgement, context::effects, expect},
    wire::Abort,
};

pub(super) async fn run(ctx: &mut Context<'_>) -> Result<Judgement, Abort> {
    let first = ctx.baseline().first.clone();
    let before = ctx.read(ctx.counter.as_ref()).await?;
    let second = ctx.send(ctx.keyed(&ctx.baseline().key)).await?;
    let after = ctx.read(ctx.counter.as_ref()).await?;
    let mut judgement = Judgement::of([first.clone(), second.clone()]);
    let first = first
        .answer()
        .expect("the preflight keeps only an answered request");
    if answer::is_replayed(first) {
        judgement.fail(
            "the first request with a fresh key was answered as a replay (Idempotent-Replayed: \
             true): the server took it for an earlier request",
        );
    }
    let replayed = expect::replay_of(
        &mut judgement,
        first,
        &second,
        "the retry with the same key and body",
    );
    let effects = effects(before, after);
    expect::new_effects(
        &mut judgement,
        effects,
        0,
        "the retry with the same key and body",
    );
    if !replayed {
        return Ok(judgement);
    }
    let second = second.answer().expect("replay_of checked the answer");
    ctx.marks_replays = answer::is_replayed(second);
    if answer::replay_header(&second.headers).is_none() {
        judgement.note(
            "replays are not marked Idempotent-Replayed: true (Stripe's header, which the \
             draft does not require)",
        );
    }
    let marked = if ctx.marks_replays {
        ", the second marked Idempotent-Replayed"
    } else {
        ""
    };
    // The preflight counted the first request as one effect; the retry added none.
    let effect = match (ctx.baseline().first_effects, effects) {
        (Some(first), Some(_)) => format!(
            "; one effect (count {} → {}, then unchanged)",
            first.before, first.after
        ),
        _ => String::new(),
    };
    judgement.pass(format!(
        "{} twice, the same body{marked}{effect}",
        first.status.as_u16()
    ));
    if effects.is_none() {
        judgement.note(
            "effects not counted: a server that ignores keys and answers a fixed body passes \
             this case without --count-url",
        );
    }
    Ok(judgement)
}
