//! The same JSON with its members in another order is the same request: a client that
//! rebuilds its body for a retry (another JSON library, a map without order) gets the first
//! answer. A server that compares the raw bytes refuses it instead; that is allowed, and noted.

use crate::{
    body,
    cases::{Case, Context, Judgement, context::effects, expect},
    show,
    wire::Abort,
};

pub(super) async fn run(ctx: &mut Context<'_>) -> Result<Judgement, Abort> {
    let Some(reordered) = body::reordered(&ctx.settings.endpoint.body) else {
        return Ok(Judgement::skipped(
            "the body is not a JSON object of two members or more: nothing to reorder",
        ));
    };
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
    let again = ctx
        .send(ctx.request(Some(ctx.key_header(&key)), reordered))
        .await?;
    let after = ctx.read(ctx.counter.as_ref()).await?;
    judgement.saw(again.clone());
    ctx.keep_refusal(Case::ReorderedJson, &again);
    let effects = effects(before, after);
    match again.status().map(|status| status.as_u16()) {
        Some(status @ (400 | 409 | 422)) => {
            judgement.pass(format!(
                "reordered members were refused with {status}: the server compares raw bytes"
            ));
            judgement.note(
                "a client must resend the exact bytes of its first request; one that rebuilds \
                 the JSON for a retry gets this refusal instead of its result",
            );
        }
        _ => {
            if expect::replay_of(&mut judgement, first_answer, &again, "the reordered retry") {
                judgement.pass(format!(
                    "the same members in another order got the first answer{}",
                    expect::counted(effects)
                ));
            }
        }
    }
    expect::new_effects(&mut judgement, effects, 0, "the reordered retry");
    Ok(judgement)
}
