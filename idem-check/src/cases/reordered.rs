//! The same JSON with its members in another order is the same request: a client that
//! rebuilds its body for a retry (another JSON library, a map without order) gets the first
//! answer. A server that compares the raw bytes refuses it instead; that is allowed, and noted.

use crate::{
    body,
    cases::{Case, Context, Judgement, expect, pair::Pair},
    wire::Abort,
};

pub(super) async fn run(ctx: &mut Context<'_>) -> Result<Judgement, Abort> {
    let Some(reordered) = body::reordered(&ctx.settings.endpoint.body) else {
        return Ok(Judgement::skipped(
            "the body is not a JSON object of two members or more: nothing to reorder",
        ));
    };
    let key = Context::fresh_key();
    let requests = (
        ctx.keyed(&key),
        ctx.request(Some(ctx.key_header(&key)), reordered),
    );
    let mut judgement = Judgement::default();
    let what = "the reordered retry";
    let Some(pair) = Pair::send(ctx, Case::ReorderedJson, &mut judgement, requests, None).await?
    else {
        return Ok(judgement);
    };
    match pair.second.status().map(|status| status.as_u16()) {
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
            if expect::replay_of(&mut judgement, &pair.first, &pair.second, what) {
                judgement.pass(format!(
                    "the same members in another order got the first answer{}",
                    expect::counted(pair.effects)
                ));
            }
        }
    }
    expect::new_effects(&mut judgement, pair.effects, 0, what);
    Ok(judgement)
}
