//! Case 5: the client gives up on the slow request, then retries with the same key, as the
//! article's client does: through 409s, honouring `Retry-After`, until it has an answer.
//! The answer is the first request's result, and there is one effect. Every retry is listed
//! in the report: this case retries because retrying is what it checks.

use std::time::Duration;

use tokio::time::Instant;

use crate::{
    answer,
    cases::{Case, Context, Judgement, context::effects, expect},
    count::Effects,
    show,
    wire::{Abort, Answer, Exchange, Outcome, Probe},
};

/// The most retries after the client gave up.
pub(crate) const MAX_RETRIES: usize = 10;

/// The shortest and longest wait between two retries; the wait is `Retry-After` within these.
const MIN_WAIT: Duration = Duration::from_millis(100);
const MAX_WAIT: Duration = Duration::from_secs(5);

pub(super) async fn run(ctx: &mut Context<'_>) -> Result<Judgement, Abort> {
    let Some(slow) = ctx.baseline().slow else {
        return Ok(Judgement::skipped(
            "needs a request the server takes seconds to answer: --slow-url and/or --slow-body",
        ));
    };
    let key = Context::fresh_key();
    let probe = ctx
        .slow_request(&key)
        .expect("a slow baseline has a slow variant");
    let before = ctx.read(ctx.slow_counter.as_ref()).await?;
    let first = ctx
        .send(Probe {
            give_up_after: Some(slow.give_up_after),
            ..probe.clone()
        })
        .await?;
    let mut judgement = Judgement::of([first.clone()]);
    if let Outcome::Answered(answer) = &first.outcome {
        judgement.undecided(format!(
            "the slow request was answered ({}) in {}, before the client gave up after {}: \
             make it slower or lower --timeout-ms",
            answer.status.as_u16(),
            show::duration(first.elapsed),
            show::duration(slow.give_up_after)
        ));
        return Ok(judgement);
    }
    // Long enough for a correct server to finish the first request, whatever it answers
    // meanwhile: three times its measured time, and ten seconds more.
    let patience = slow.took * 3 + Duration::from_secs(10);
    let retries = retry_through_conflicts(ctx, &probe, patience).await?;
    for retry in &retries {
        ctx.keep_refusal(Case::TimeoutRetry, retry);
        judgement.saw(retry.clone());
    }
    let effects = effects(before, ctx.read(ctx.slow_counter.as_ref()).await?);
    judge_last(&mut judgement, &retries, effects);
    expect::new_effects(
        &mut judgement,
        effects,
        1,
        "a request given up on and its retries",
    );
    Ok(judgement)
}

/// Retries `probe` until an answer other than 409, `MAX_RETRIES`, or `patience`.
async fn retry_through_conflicts(
    ctx: &Context<'_>,
    probe: &Probe,
    patience: Duration,
) -> Result<Vec<Exchange>, Abort> {
    let until = Instant::now() + patience;
    let mut retries = Vec::new();
    loop {
        let retry = ctx.send(probe.clone()).await?;
        let wait = match retry.answer() {
            Some(answer) if answer.status == 409 => answer::retry_after(&answer.headers)
                .unwrap_or(Duration::from_millis(500))
                .clamp(MIN_WAIT, MAX_WAIT),
            _ => Duration::ZERO,
        };
        retries.push(retry);
        if wait.is_zero() || retries.len() == MAX_RETRIES || Instant::now() + wait > until {
            return Ok(retries);
        }
        ctx.sleep(wait, "Retry-After of a 409").await?;
    }
}

/// Judges the last retry's answer: the operation's, not a 409 or an error.
fn judge_last(judgement: &mut Judgement, retries: &[Exchange], effects: Option<Effects>) {
    let last = retries.last().expect("at least one retry is sent");
    let Some(answer) = last.answer() else {
        judgement.fail(format!("the retry got no answer: {}", show::outcome(last)));
        return;
    };
    let status = answer.status.as_u16();
    if status == 409 {
        judgement.fail(format!(
            "still 409 after {} retries: the key stayed in flight after its client gave up (a \
             handler cancelled with its connection, or a key left \"processing\")",
            retries.len()
        ));
    } else if !answer.status.is_success() {
        judgement.fail(format!(
            "after the client gave up, its retry was answered {status}, not the first \
             request's result"
        ));
    } else {
        passed(judgement, retries, answer, effects);
    }
}

/// The pass's account: the way to the answer, and the evidence that it is the first run's.
fn passed(
    judgement: &mut Judgement,
    retries: &[Exchange],
    answer: &Answer,
    effects: Option<Effects>,
) {
    let conflicts = retries
        .iter()
        .filter(|retry| retry.status().is_some_and(|status| status == 409))
        .count();
    let replayed = answer::is_replayed(answer);
    let path = match conflicts {
        0 => String::new(),
        1 => ", through one 409".to_owned(),
        n => format!(", through {n} 409s"),
    };
    let marked = if replayed {
        " marked Idempotent-Replayed"
    } else {
        ""
    };
    judgement.pass(format!(
        "the retry got {}{marked}{path}{}",
        answer.status.as_u16(),
        expect::counted(effects)
    ));
    if effects.is_none() && !replayed && conflicts == 0 {
        judgement.warn(
            "no sign that the retry got the first request's result: it was neither marked \
             Idempotent-Replayed nor preceded by a 409, and no --slow-count-url counts the \
             effects",
        );
    } else if effects.is_none() {
        judgement.note("effects not counted: give --slow-count-url (or --count-url)");
    }
}
