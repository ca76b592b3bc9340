//! Case 1: the same key and body twice. The second answer is the first one again (status and
//! body), marked a replay if the server marks them, and there is one effect.

use crate::{
    answer,
    cases::{Context, Judgement, context::effects, expect},
    count::Effects,
    wire::{Abort, Answer},
};

const WHAT: &str = "the retry with the same key and body";

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
    let replayed = expect::replay_of(&mut judgement, first, &second, WHAT);
    let effects = effects(before, after);
    expect::new_effects(&mut judgement, effects, 0, WHAT);
    if let (true, Some(second)) = (replayed, second.answer()) {
        ctx.marks_replays = answer::is_replayed(second);
        let first_effects = ctx.baseline().first_effects;
        passed(&mut judgement, first, second, first_effects.zip(effects));
    }
    Ok(judgement)
}

/// The pass's account: how the replay was marked, and the count, from before the first
/// request (the preflight's) to after the retry.
fn passed(
    judgement: &mut Judgement,
    first: &Answer,
    second: &Answer,
    counted: Option<(Effects, Effects)>,
) {
    let marked = match answer::replay_header(&second.headers) {
        Some(true) => ", the second marked Idempotent-Replayed",
        Some(false) => "",
        None => {
            judgement.note(
                "replays are not marked Idempotent-Replayed: true (Stripe's header, which the \
                 draft does not require)",
            );
            ""
        }
    };
    let effect = match counted {
        Some((first, _)) => format!(
            "; one effect (count {} → {}, then unchanged)",
            first.before, first.after
        ),
        None => {
            judgement.note(
                "effects not counted: a server that ignores keys and answers a fixed body \
                 passes this case without --count-url",
            );
            String::new()
        }
    };
    judgement.pass(format!(
        "{} twice, the same body{marked}{effect}",
        first.status.as_u16()
    ));
}
