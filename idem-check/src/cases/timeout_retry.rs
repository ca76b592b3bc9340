//! Case 5: the client gives up on the slow request, then retries with the same key, as the
//! article's client does: through 409s, honouring `Retry-After`, until it has an answer.
//! The answer is the first request's result, and there is one effect. Every retry is listed
//! in the report: this case retries because retrying is what it checks.

use std::time::Duration;

use tokio::time::Instant;

use crate::{
    cases::{About, Context, Judgement, expect},
    count::Effects,
    exchange::{Answer, Exchange, Probe, Received},
    plan::{Listing, Need, Plan},
    session::fresh_key,
    show,
    verdict::Basis,
    wire::Abort,
};

pub(super) const ABOUT: About = About {
    name: "timeout-retry",
    title: "the client gives up, then retries",
    basis: Basis::DraftMust,
    rests_on: "no duplicate records (the draft's introduction, a MUST), and a conflict error \
               only for a request retried before the original completed (its enforcement \
               scenarios); a retry after it SHOULD get its result",
    needs: &[Need::SlowRequest],
};

/// The most retries after the client gave up.
const MAX_RETRIES: usize = 10;

/// The request given up on and its retries, counted.
pub(super) fn budget(plan: &Plan) -> usize {
    1 + MAX_RETRIES + plan.reads(Listing::Slow)
}

/// The shortest and longest wait between two retries; the wait is `Retry-After` within these.
const MIN_WAIT: Duration = Duration::from_millis(100);
const MAX_WAIT: Duration = Duration::from_secs(5);

pub(super) async fn run(ctx: &mut Context<'_>) -> Result<Judgement, Abort> {
    let slow = ctx.slow();
    let probe = ctx.slow_request(&fresh_key());
    let before = ctx.read(Listing::Slow).await?;
    let first = ctx
        .send(Probe {
            give_up_after: Some(slow.give_up_after),
            ..probe.clone()
        })
        .await?;
    let mut judgement = Judgement::of([first.clone()]);
    if let Received::Answered(answer) = &first.received {
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
        ctx.keep_refusal(ABOUT.name, retry);
        judgement.saw(retry.clone());
    }
    let effects = ctx.effects(Listing::Slow, before, ctx.read(Listing::Slow).await?);
    judge_last(&mut judgement, &retries, effects.as_ref());
    expect::new_effects(
        &mut judgement,
        effects.as_ref(),
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
            Some(answer) if answer.status == 409 => answer
                .retry_after()
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
fn judge_last(judgement: &mut Judgement, retries: &[Exchange], effects: Option<&Effects>) {
    let last = retries.last().expect("at least one retry is sent");
    let Some(answer) = last.answer() else {
        judgement.defect(format!("the retry got no answer: {}", show::summary(last)));
        return;
    };
    let status = answer.status.as_u16();
    if status == 409 {
        still_conflict(judgement, retries, effects);
    } else if !answer.succeeded() {
        judgement.warn(format!(
            "after the client gave up, its retry was answered {status}, not the first \
             request's result; the draft says a retry after the first request finished SHOULD \
             get its result"
        ));
    } else {
        passed(judgement, retries, answer, effects);
    }
}

/// Still 409 at the end, long after the first request's time. A server that sends its
/// replays as 409 answers a finished operation so: the count shows the first request's
/// effect, and the 409s' body changed once it finished (from the refusal of a request in
/// flight to its result). That is the draft's SHOULD, a warning. Otherwise the key stayed in
/// flight after its client left.
fn still_conflict(judgement: &mut Judgement, retries: &[Exchange], effects: Option<&Effects>) {
    let bodies: Vec<&Answer> = retries.iter().filter_map(Exchange::answer).collect();
    let changed = match (bodies.first(), bodies.last()) {
        (Some(first), Some(last)) => !expect::same_body(first, last),
        _ => false,
    };
    let finished = effects.is_some_and(|effects| effects.new_effects() > 0);
    let n = retries.len();
    if finished && changed {
        judgement.warn(format!(
            "still 409 after {n} retries, though the first request had finished (one effect, \
             and the 409's body changed when it did): the server sends a finished operation's \
             answer as 409, where the draft says a retry after it SHOULD get its result, and a \
             client that retries a 409 never gets it"
        ));
    } else {
        judgement.defect(format!(
            "still 409 after {n} retries, long after the first request's time: the key stayed \
             in flight after its client gave up (a handler cancelled with its connection, or a \
             key left \"processing\"), and a 409 is for a request still being processed"
        ));
    }
}

/// The pass's account: the way to the answer, and the evidence that it is the first run's.
fn passed(
    judgement: &mut Judgement,
    retries: &[Exchange],
    answer: &Answer,
    effects: Option<&Effects>,
) {
    let conflicts = retries
        .iter()
        .filter(|retry| retry.status().is_some_and(|status| status == 409))
        .count();
    let replayed = answer.is_replayed();
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
