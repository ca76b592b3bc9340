//! Case 1: the same key and body twice. The second answer is the first one again (status and
//! body), marked a replay if the server marks them, and there is one effect.

use crate::{
    cases::{About, Context, Judgement, expect},
    count::Effects,
    exchange::Answer,
    plan::{Listing, Plan},
    verdict::Basis,
    wire::Abort,
};

pub(super) const ABOUT: About = About {
    name: "replay",
    title: "same key, same body, twice",
    basis: Basis::DraftMust,
    rests_on: "the draft's purpose, a MUST in its introduction: duplicate records MUST NOT be \
               allowed; a retry after the first finished SHOULD get its result",
    needs: &[],
};

/// The preflight's request again, counted.
pub(super) fn budget(plan: &Plan) -> usize {
    1 + plan.reads(Listing::Endpoint)
}

const WHAT: &str = "the retry with the same key and body";

pub(super) async fn run(ctx: &mut Context<'_>) -> Result<Judgement, Abort> {
    let first = ctx.baseline.first.clone();
    let before = ctx.read(Listing::Endpoint).await?;
    let second = ctx.send(ctx.keyed(&ctx.baseline.key)).await?;
    let after = ctx.read(Listing::Endpoint).await?;
    ctx.keep_refusal(ABOUT.name, &second);
    let mut judgement = Judgement::of([first.clone(), second.clone()]);
    let first = first
        .answer()
        .expect("the preflight keeps only an answered request");
    if first.is_replayed() {
        judgement.warn(
            "the first request with a fresh key was answered as a replay (Idempotent-Replayed: \
             true): the server took it for an earlier request, where the draft says a first \
             request SHOULD be processed normally",
        );
    }
    let replayed = expect::retry_got_first(&mut judgement, first, &second, WHAT);
    let effects = ctx.effects(Listing::Endpoint, before, after);
    expect::new_effects(&mut judgement, effects.as_ref(), 0, WHAT);
    if let (true, Some(second)) = (replayed, second.answer()) {
        ctx.marks_replays = second.is_replayed();
        let first_effects = ctx.baseline.first_effects.clone();
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
    let marked = match second.replay_header() {
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
            "; one effect (count of {}: {} → {}, then unchanged)",
            first.listing, first.before, first.after
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
