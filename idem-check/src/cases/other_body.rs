//! Case 2: the same key with another body. The draft answers 422; Stripe 400 (noted); 409
//! misleads clients that retry it (a warning); a 2xx means the server did not compare the
//! bodies. Either way, no new effect.

use crate::{
    answer::{self, Sameness},
    cases::{Case, Context, Judgement, context::effects, expect},
    show,
    wire::Abort,
};

pub(super) async fn run(ctx: &mut Context<'_>) -> Result<Judgement, Abort> {
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
    let other = ctx.request(
        Some(ctx.key_header(&key)),
        ctx.baseline().other_body.clone(),
    );
    let second = ctx.send(other).await?;
    let after = ctx.read(ctx.counter.as_ref()).await?;
    judgement.saw(second.clone());
    ctx.keep_refusal(Case::OtherBody, &second);
    judgement.note(format!(
        "the other body: {}",
        ctx.baseline().other_body_note
    ));
    let effects = effects(before, after);
    let Some(answer) = second.answer() else {
        judgement.fail(format!(
            "the other body under a used key got no answer: {}",
            show::outcome(&second)
        ));
        expect::new_effects(
            &mut judgement,
            effects,
            0,
            "the other body under a used key",
        );
        return Ok(judgement);
    };
    let status = answer.status.as_u16();
    match status {
        422 => judgement.pass(format!(
            "422, as the draft says{}",
            expect::counted(effects)
        )),
        400 => judgement.pass(format!(
            "400, as Stripe answers (the draft says 422){}",
            expect::counted(effects)
        )),
        409 => judgement.warn(
            "409 (the draft says 422): clients retry a 409, the draft's answer for a request \
             in flight, so a client that reused a key by mistake retries until it gives up",
        ),
        _ if answer.status.is_success() => {
            match answer::compare(&first_answer.body, &answer.body) {
                Sameness::Bytes | Sameness::Json => judgement.fail(
                    "the first request's answer was replayed to a different request: the server \
                     does not compare request bodies, so a client that reused a key by mistake \
                     is told its new operation succeeded",
                ),
                Sameness::Differs(_) => judgement.fail(format!(
                    "the other body under a used key was run as a new request ({status}): the \
                     key did not guard it"
                )),
            }
        }
        _ if answer.status.is_client_error() => judgement.warn(format!(
            "refused with {status}; the draft says 422 (Stripe 400), which clients recognise"
        )),
        _ => judgement.fail(format!(
            "the other body under a used key was answered {status}, not 422"
        )),
    }
    expect::new_effects(
        &mut judgement,
        effects,
        0,
        "the other body under a used key",
    );
    Ok(judgement)
}
