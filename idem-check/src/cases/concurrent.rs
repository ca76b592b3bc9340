//! N requests with one key at once (a double click, a retry storm): one of them runs, every
//! other gets its answer or a 409, and there is one effect. Claiming a key and starting the
//! work must be one atomic step; a read-then-write check lets two of them through.

use futures_util::future::join_all;

use crate::{
    answer,
    cases::{Case, Context, Judgement, context::effects, expect},
    count::Effects,
    show,
    wire::{Abort, Answer, Exchange},
};

pub(super) async fn run(ctx: &mut Context<'_>) -> Result<Judgement, Abort> {
    let n = ctx.settings.concurrency;
    let key = Context::fresh_key();
    let probe = ctx.keyed(&key);
    let before = ctx.read(ctx.counter.as_ref()).await?;
    // Every request has a connection of its own; `join_all` starts them all at once.
    let sent = join_all((0..n).map(|_| ctx.send(probe.clone()))).await;
    let exchanges = sent.into_iter().collect::<Result<Vec<Exchange>, Abort>>()?;
    let after = ctx.read(ctx.counter.as_ref()).await?;
    for exchange in &exchanges {
        ctx.keep_refusal(Case::Concurrent, exchange);
    }
    let mut judgement = Judgement::of(exchanges.iter().cloned());
    judge(&mut judgement, &exchanges, effects(before, after));
    Ok(judgement)
}

/// Judges `n` simultaneous answers: one body among the successes, 409 for the rest, one
/// effect.
fn judge(judgement: &mut Judgement, exchanges: &[Exchange], effects: Option<Effects>) {
    let n = exchanges.len();
    let successes: Vec<&Answer> = exchanges
        .iter()
        .filter(|e| e.succeeded())
        .filter_map(Exchange::answer)
        .collect();
    let conflicts: Vec<&Answer> = exchanges
        .iter()
        .filter_map(Exchange::answer)
        .filter(|answer| answer.status == 409)
        .collect();
    judge_others(judgement, exchanges);
    let Some(first) = successes.first() else {
        judgement.fail(format!(
            "none of {n} requests with one key got the operation's answer"
        ));
        return;
    };
    let differing = successes[1..]
        .iter()
        .filter(|answer| !expect::same_answer(first, answer))
        .count();
    if differing > 0 {
        judgement.fail(format!(
            "{} of {n} requests with one key ran: their answers differ, so the key was claimed \
             more than once",
            differing + 1
        ));
    }
    if let Some(conflict) = conflicts.first() {
        expect::conflict_says_when(judgement, conflict);
    }
    expect::new_effects(
        judgement,
        effects,
        1,
        &format!("{n} requests with one key at once"),
    );
    let replayed = successes
        .iter()
        .filter(|answer| answer::is_replayed(answer))
        .count();
    judgement.pass(format!(
        "{n} at once: {} answered {} with one body ({replayed} marked replayed), {} answered \
         409{}",
        successes.len(),
        first.status.as_u16(),
        conflicts.len(),
        expect::counted(effects)
    ));
}

/// Judges the answers that are neither the operation's answer nor a 409.
fn judge_others(judgement: &mut Judgement, exchanges: &[Exchange]) {
    for exchange in exchanges {
        let status = exchange.status();
        if exchange.succeeded() || status.is_some_and(|status| status == 409) {
            continue;
        }
        match status.map(|status| status.as_u16()) {
            Some(status @ (429 | 503)) => judgement.warn(format!(
                "a simultaneous duplicate was answered {status}, which clients retry, but the \
                 draft says 409"
            )),
            _ => judgement.fail(format!(
                "a simultaneous duplicate was answered {}",
                show::outcome(exchange)
            )),
        }
    }
}
