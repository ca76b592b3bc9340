//! Case 4: no key. Where a key is required (the default; `--key-optional` says otherwise),
//! the answer is 400 and nothing happens.

use crate::{
    cases::{Case, Context, Judgement, context::effects, expect},
    count::Effects,
    show,
    wire::{Abort, Answer},
};

pub(super) async fn run(ctx: &mut Context<'_>) -> Result<Judgement, Abort> {
    let before = ctx.read(ctx.counter.as_ref()).await?;
    let exchange = ctx
        .send(ctx.request(None, ctx.settings.endpoint.body.clone()))
        .await?;
    let after = ctx.read(ctx.counter.as_ref()).await?;
    ctx.keep_refusal(Case::NoKey, &exchange);
    let mut judgement = Judgement::of([exchange.clone()]);
    let effects = effects(before, after);
    let Some(answer) = exchange.answer() else {
        judgement.fail(format!(
            "a request without a key got no answer: {}",
            show::outcome(&exchange)
        ));
        return Ok(judgement);
    };
    judge(&mut judgement, answer, ctx.settings.key_required, effects);
    let ran = answer.status.is_success();
    expect::new_effects(
        &mut judgement,
        effects,
        usize::from(ran),
        "a request without a key",
    );
    Ok(judgement)
}

/// Judges the answer to a request without a key, which is `required` or not.
fn judge(judgement: &mut Judgement, answer: &Answer, required: bool, effects: Option<Effects>) {
    let status = answer.status.as_u16();
    match status {
        400 if required => judgement.pass(format!("400{}", expect::counted(effects))),
        400 => judgement.warn("400: a key is required, though --key-optional declares it optional"),
        _ if answer.status.is_success() && required => judgement.fail(format!(
            "a request without a key was run ({status}): keys are not required, so a client \
             that forgot its key gets no protection from retries (--key-optional if that is \
             intended)"
        )),
        _ if answer.status.is_success() => judgement.pass(format!(
            "{status}: run without idempotency, as --key-optional declares"
        )),
        _ if answer.status.is_client_error() => judgement.warn(format!(
            "refused with {status}; the draft says 400 for a missing key"
        )),
        _ => judgement.fail(format!("a request without a key was answered {status}")),
    }
}
