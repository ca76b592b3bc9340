//! Case 2: the same key with another body. The draft answers 422; Stripe 400 (noted); 409
//! misleads clients that retry it (a warning); a 2xx means the server did not compare the
//! bodies. Either way, no new effect.

use crate::{
    cases::{
        About, Context, Judgement, expect,
        pair::{self, Pair},
    },
    exchange::Answer,
    plan::{Listing, Plan},
    session::fresh_key,
    verdict::Basis,
    wire::Abort,
};

pub(super) const ABOUT: About = About {
    name: "other-body",
    title: "same key, other body",
    basis: Basis::DraftMust,
    rests_on: "the draft's error scenarios: a request the client must correct (a key reused \
               with another payload) the server MUST fail with one of the draft's errors; it \
               SHOULD be 422",
    needs: &[],
};

/// A pair, counted.
pub(super) fn budget(plan: &Plan) -> usize {
    pair::REQUESTS + plan.reads(Listing::Endpoint)
}

pub(super) async fn run(ctx: &mut Context<'_>) -> Result<Judgement, Abort> {
    let key = fresh_key();
    let other_body = ctx.baseline.other_body.clone();
    let requests = (
        ctx.keyed(&key),
        ctx.request(Some(ctx.key_header(&key)), other_body),
    );
    let mut judgement = Judgement::default();
    judgement.note(format!("the other body: {}", ctx.baseline.other_body_note));
    let what = "the other body under a used key";
    let Some(pair) = Pair::send(ctx, ABOUT.name, &mut judgement, requests, None).await? else {
        return Ok(judgement);
    };
    if let Some(answer) = pair.second_answer(&mut judgement, what) {
        judge(&mut judgement, &pair, answer);
    }
    expect::new_effects(&mut judgement, pair.effects.as_ref(), 0, what);
    Ok(judgement)
}

fn judge(judgement: &mut Judgement, pair: &Pair, answer: &Answer) {
    let status = answer.status.as_u16();
    let counted = expect::counted(pair.effects.as_ref());
    match status {
        422 => judgement.pass(format!("422, as the draft says{counted}")),
        400 => judgement.pass(format!(
            "400, as Stripe answers (the draft says 422){counted}"
        )),
        409 => judgement.warn(
            "409 (the draft says 422): clients retry a 409, the draft's answer for a request \
             in flight, so a client that reused a key by mistake retries until it gives up",
        ),
        _ if answer.succeeded() && expect::same_answer(&pair.first, answer) => {
            judgement.defect(
                "the first request's answer was replayed to a different request: the server \
                 does not compare request bodies, so a client that reused a key by mistake is \
                 told its new operation succeeded",
            );
        }
        _ if answer.succeeded() => judgement.defect(format!(
            "the other body under a used key was run as a new request ({status}): the key did \
             not guard it"
        )),
        _ if answer.status.is_client_error() => judgement.warn(format!(
            "refused with {status}; the draft says 422 (Stripe 400), which clients recognise"
        )),
        _ => judgement.defect(format!(
            "the other body under a used key was answered {status}, none of the draft's \
             errors (422, or 400, 409)"
        )),
    }
}
