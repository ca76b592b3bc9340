//! Case 4: no key. Where a key is required (the default), the answer is 400 and nothing
//! happens. Where `--key-optional` declares that the server runs requests without a key, two
//! identical requests without one are two operations: both run, neither is answered as the
//! other's replay, and the count grows by two.

use crate::{
    cases::{About, Context, Judgement, expect},
    count::Effects,
    exchange::{Answer, Exchange},
    plan::{Listing, Plan},
    show,
    verdict::Basis,
    wire::Abort,
};

pub(super) const ABOUT: About = About {
    name: "no-key",
    title: "no key",
    basis: Basis::Declared,
    rests_on: "keys required (the default), or optional (--key-optional): a request without a \
               key is refused, or run as an operation of its own; the draft's answer to a \
               missing key SHOULD be 400",
    needs: &[],
};

/// One request where keys are required, two where they are not, counted.
pub(super) fn budget(plan: &Plan) -> usize {
    requests(plan.key_required) + plan.reads(Listing::Endpoint)
}

fn requests(key_required: bool) -> usize {
    if key_required { 1 } else { 2 }
}

pub(super) async fn run(ctx: &mut Context<'_>) -> Result<Judgement, Abort> {
    let required = ctx.plan.key_required;
    let before = ctx.read(Listing::Endpoint).await?;
    let mut exchanges = Vec::new();
    for _ in 0..requests(required) {
        let exchange = ctx.send(ctx.request(None, ctx.body())).await?;
        ctx.keep_refusal(ABOUT.name, &exchange);
        exchanges.push(exchange);
    }
    let after = ctx.read(Listing::Endpoint).await?;
    let effects = ctx.effects(Listing::Endpoint, before, after);
    let mut judgement = Judgement::of(exchanges.iter().cloned());
    let Some(answer) = answered(&mut judgement, &exchanges[0]) else {
        return Ok(judgement);
    };
    if required {
        judge_required(&mut judgement, answer, effects.as_ref());
        let ran = usize::from(answer.succeeded());
        expect::new_effects(
            &mut judgement,
            effects.as_ref(),
            ran,
            "a request without a key",
        );
    } else if let Some(second) = answered(&mut judgement, &exchanges[1]) {
        judge_optional(
            &mut judgement,
            (answer, second),
            effects.as_ref(),
            ctx.marks_replays,
        );
    }
    Ok(judgement)
}

/// The answer of `exchange`; `None`, with the defect judged, when there was none.
fn answered<'e>(judgement: &mut Judgement, exchange: &'e Exchange) -> Option<&'e Answer> {
    let answer = exchange.answer();
    if answer.is_none() {
        judgement.defect(format!(
            "a request without a key got no answer: {}",
            show::summary(exchange)
        ));
    }
    answer
}

/// Judges the answer to a request without a key, where keys are required.
fn judge_required(judgement: &mut Judgement, answer: &Answer, effects: Option<&Effects>) {
    let status = answer.status.as_u16();
    match status {
        400 => judgement.pass(format!("400{}", expect::counted(effects))),
        _ if answer.succeeded() => judgement.defect(format!(
            "a request without a key was run ({status}): keys are not required, so a client \
             that forgot its key gets no protection from retries (--key-optional if that is \
             intended)"
        )),
        _ if answer.status.is_client_error() => judgement.warn(format!(
            "refused with {status}; the draft says a missing key SHOULD get 400"
        )),
        _ => judgement.defect(format!(
            "a request without a key was answered {status}, not refused as a request the \
             client must correct (the draft's 400)"
        )),
    }
}

/// Judges two identical requests without a key, where `--key-optional` declares them run:
/// two operations. An identical second answer is told from a run of its own by the replay
/// marker and the count; without either it cannot be, and the case is undecided.
fn judge_optional(
    judgement: &mut Judgement,
    (first, second): (&Answer, &Answer),
    effects: Option<&Effects>,
    marks_replays: bool,
) {
    let statuses = (first.status.as_u16(), second.status.as_u16());
    if !first.succeeded() || !second.succeeded() {
        let refused = if first.succeeded() {
            statuses.1
        } else {
            statuses.0
        };
        judgement.defect(format!(
            "a request without a key was refused ({refused}), though --key-optional declares \
             that the server runs requests without a key"
        ));
        return;
    }
    if second.is_replayed() {
        judgement.defect(
            "the second of two identical requests without a key was answered as a replay of the \
             first (Idempotent-Replayed: true): the server deduplicates requests without a key, \
             so a client that makes the same operation twice on purpose gets it once",
        );
    }
    expect::new_effects(
        judgement,
        effects,
        2,
        "two identical requests without a key",
    );
    if judgement.has_defect() {
        return;
    }
    if expect::same_answer(first, second) && effects.is_none() && !marks_replays {
        judgement.undecided(
            "the two requests without a key got the same answer, not marked a replay: without \
             --count-url, a deduplicated request cannot be told from a second run",
        );
        return;
    }
    judgement.pass(format!(
        "two requests without a key ran as two ({} and {}), as --key-optional declares{}",
        statuses.0,
        statuses.1,
        expect::counted(effects)
    ));
}
