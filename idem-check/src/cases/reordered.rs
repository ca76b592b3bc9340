//! The same JSON with its members in another order is the same request: a client that
//! rebuilds its body for a retry (another JSON library, a map without order) gets the first
//! answer. A server whose comparison depends on the order refuses it instead; that is allowed
//! (the draft leaves the fingerprint to the server), and the case tells how it compares: the
//! same members in the same order, spaced otherwise, are the same request to a server that
//! compares the parsed JSON in order, and another to one that compares the raw bytes.

use crate::{
    body,
    cases::{
        About, Context, Judgement, expect,
        pair::{self, Pair},
    },
    exchange::{Answer, Exchange},
    plan::{Listing, Need, Plan},
    session::fresh_key,
    show,
    verdict::Basis,
    wire::Abort,
};

pub(super) const ABOUT: About = About {
    name: "reordered-json",
    title: "reordered JSON members",
    basis: Basis::DraftMust,
    rests_on: "the draft's error scenarios: under a used key, a request is either the same one \
               (its result) or one the client must correct, which the server MUST fail with \
               one of the draft's errors; how it compares bodies is its own (a MAY)",
    needs: &[Need::ReorderableBody],
};

/// A pair, counted, and the same body spaced otherwise after a refusal.
pub(super) fn budget(plan: &Plan) -> usize {
    pair::REQUESTS + 1 + plan.reads(Listing::Endpoint)
}

pub(super) async fn run(ctx: &mut Context<'_>) -> Result<Judgement, Abort> {
    let reordered = body::reordered(&ctx.body()).expect("the case needs a reorderable body");
    let key = fresh_key();
    let requests = (
        ctx.keyed(&key),
        ctx.request(Some(ctx.key_header(&key)), reordered),
    );
    let mut judgement = Judgement::default();
    let what = "the reordered retry";
    let Some(pair) = Pair::send(ctx, ABOUT.name, &mut judgement, requests, None).await? else {
        return Ok(judgement);
    };
    match pair.second.status().map(|status| status.as_u16()) {
        Some(status @ (400 | 409 | 422)) => {
            let respaced = body::respaced(&ctx.body()).expect("an object");
            let probe = ctx.request(Some(ctx.key_header(&key)), respaced);
            let spaced = ctx.send(probe).await?;
            judgement.saw(spaced.clone());
            ctx.keep_refusal(ABOUT.name, &spaced);
            order_sensitive(&mut judgement, &pair.first, status, &spaced);
        }
        Some(status)
            if pair
                .second
                .answer()
                .is_some_and(|a| a.status.is_server_error()) =>
        {
            judgement.defect(format!(
                "{what} was answered {status}, neither the first answer nor one of the draft's \
                 errors for a request the client must correct"
            ));
        }
        _ => {
            if expect::retry_got_first(&mut judgement, &pair.first, &pair.second, what) {
                judgement.pass(format!(
                    "the same members in another order got the first answer{}",
                    expect::counted(pair.effects.as_ref())
                ));
            }
        }
    }
    expect::new_effects(&mut judgement, pair.effects.as_ref(), 0, what);
    Ok(judgement)
}

/// Judges a server that refused the reordered body with `status`, by its answer to the same
/// members in the same order, spaced otherwise.
fn order_sensitive(judgement: &mut Judgement, first: &Answer, status: u16, spaced: &Exchange) {
    let refused = format!("reordered members were refused with {status}");
    let Some(answer) = spaced.answer() else {
        judgement.defect(format!(
            "{refused}, and the same body spaced otherwise got no answer: {}",
            show::summary(spaced)
        ));
        return;
    };
    if expect::same_answer(first, answer) {
        judgement.pass(format!(
            "{refused}, and the same members in the same order, spaced otherwise, got the first \
             answer: the server compares the parsed JSON, with its members in order"
        ));
        judgement.note(
            "a client must resend its members in the order of its first request; one that \
             rebuilds the JSON for a retry gets a refusal instead of its result",
        );
    } else if matches!(answer.status.as_u16(), 400 | 409 | 422) {
        judgement.pass(format!(
            "{refused}, and so was the same body spaced otherwise: the server compares the raw \
             bytes"
        ));
        judgement.note(
            "a client must resend the exact bytes of its first request; one that rebuilds the \
             JSON for a retry gets a refusal instead of its result",
        );
    } else if answer.succeeded() {
        judgement.defect(format!(
            "{refused}, but the same body spaced otherwise ran as a new request ({}): the key \
             did not guard it",
            answer.status.as_u16()
        ));
    } else {
        judgement.defect(format!(
            "{refused}, and the same body spaced otherwise was answered {}",
            answer.status.as_u16()
        ));
    }
}
