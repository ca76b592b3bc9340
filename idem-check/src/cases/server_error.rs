//! Case 7: a retry after a 5xx gets what the server declares: the stored 5xx again
//! (`--on-5xx stored`, as Stripe), or a new run (`--on-5xx rerun`, idem's default). A key left
//! "in flight" by the failure (409 to every retry) fails either way: that is the article's
//! own Redis sketch without error handling.

use crate::{
    answer,
    cases::{Case, Context, Judgement, context::effects, expect},
    count::Effects,
    settings::OnServerError,
    show,
    wire::{Abort, Answer, Exchange},
};

pub(super) async fn run(ctx: &mut Context<'_>) -> Result<Judgement, Abort> {
    let key = Context::fresh_key();
    let Some(probe) = ctx.failing_request(&key) else {
        return Ok(Judgement::skipped(
            "needs a request the server answers 5xx: --fail-url, --fail-body and/or \
             --fail-header (and --on-5xx stored|rerun, as the server declares)",
        ));
    };
    let before = ctx.read(ctx.fail_counter.as_ref()).await?;
    let first = ctx.send(probe.clone()).await?;
    let mut judgement = Judgement::of([first.clone()]);
    let Some(failed) = first
        .answer()
        .filter(|answer| answer.status.is_server_error())
    else {
        judgement.undecided(format!(
            "the failing variant was answered {}, not 5xx: case 7 needs a request the server \
             fails",
            show::outcome(&first)
        ));
        return Ok(judgement);
    };
    let again = ctx.send(probe).await?;
    let after = ctx.read(ctx.fail_counter.as_ref()).await?;
    judgement.saw(again.clone());
    ctx.keep_refusal(Case::ServerError, &again);
    let declared = ctx.settings.on_server_error;
    judge(
        &mut judgement,
        failed,
        &again,
        declared,
        effects(before, after),
    );
    Ok(judgement)
}

/// Judges the retry after the 5xx `failed` against the declared policy.
fn judge(
    judgement: &mut Judgement,
    failed: &Answer,
    again: &Exchange,
    declared: OnServerError,
    effects: Option<Effects>,
) {
    let Some(answer) = again.answer() else {
        judgement.fail(format!(
            "the retry after a 5xx got no answer: {}",
            show::outcome(again)
        ));
        return;
    };
    if answer.status == 409 {
        judgement.fail(
            "the retry after a 5xx was answered 409: the failed request left its key in flight, \
             so the operation can neither be retried nor replayed until the key expires",
        );
        return;
    }
    match declared {
        OnServerError::Stored => stored(judgement, failed, again, answer),
        OnServerError::Rerun => rerun(judgement, failed, answer),
    }
    // A failed run made nothing; a run after it made one thing if it succeeded.
    let expected = usize::from(declared == OnServerError::Rerun && answer.status.is_success());
    if !judgement.has_failed() {
        expect::new_effects(judgement, effects, expected, "the retry after a 5xx");
    }
}

/// Declared stored: the retry gets the same 5xx.
fn stored(judgement: &mut Judgement, failed: &Answer, again: &Exchange, answer: &Answer) {
    let status = failed.status.as_u16();
    if answer.status.is_success() {
        judgement.fail(format!(
            "the retry after a {status} ran again ({}), but the server declares its 5xx stored \
             (--on-5xx stored): a client told the outcome is final sees it change",
            answer.status.as_u16()
        ));
    } else if expect::replay_of(judgement, failed, again, "the retry after a 5xx") {
        let marked = if answer::is_replayed(answer) {
            ", marked Idempotent-Replayed"
        } else {
            ""
        };
        judgement.pass(format!("the stored {status} again{marked}, as declared"));
    }
}

/// Declared rerun: the retry is not a replay of the 5xx.
fn rerun(judgement: &mut Judgement, failed: &Answer, answer: &Answer) {
    let status = answer.status.as_u16();
    let same = expect::same_answer(failed, answer);
    if answer::is_replayed(answer) {
        judgement.fail(format!(
            "the {} was replayed (Idempotent-Replayed: true), but the server declares that a \
             retry after a 5xx runs again (--on-5xx rerun)",
            failed.status.as_u16()
        ));
    } else if answer.status.is_success() {
        judgement.pass(format!("the retry ran again and got {status}, as declared"));
    } else if same {
        judgement.pass(format!(
            "{status} again, not marked a replay: run again, as declared"
        ));
        judgement.note("the second 5xx has the same body as the first; only its missing Idempotent-Replayed says it ran again");
    } else {
        judgement.pass(format!("the retry ran again and got {status}, as declared"));
    }
}
