//! The judgements several cases share: "this is the first answer again", "this many new
//! effects", "a refusal that says when to come back".

use crate::{
    answer::{self, Sameness},
    cases::Judgement,
    count::Effects,
    show,
    wire::{Answer, Exchange},
};

/// Judges `again` as the first request's answer sent again: the same status and body.
/// Answers whether it is.
pub(crate) fn replay_of(
    judgement: &mut Judgement,
    first: &Answer,
    again: &Exchange,
    what: &str,
) -> bool {
    let Some(answer) = again.answer() else {
        judgement.fail(format!("{what} got no answer: {}", show::outcome(again)));
        return false;
    };
    if answer.status != first.status {
        judgement.fail(format!(
            "{what} was answered {} where the first request was answered {}",
            answer.status.as_u16(),
            first.status.as_u16()
        ));
        return false;
    }
    match answer::compare(&first.body, &answer.body) {
        Sameness::Bytes => {}
        Sameness::Json => judgement.note(format!(
            "{what} got the first answer's JSON, written with other bytes"
        )),
        Sameness::Differs(difference) => {
            judgement.fail(format!(
                "{what} got another answer than the first ({difference}): the request ran again"
            ));
            return false;
        }
    }
    match answer::replay_header(&answer.headers) {
        Some(true) | None => {}
        Some(false) => judgement.warn(format!(
            "{what} carries Idempotent-Replayed: {}; only `true` marks a replay",
            answer::header_text(&answer.headers, answer::IDEMPOTENT_REPLAYED)
        )),
    }
    true
}

/// Whether two answers have the same status and body (as bytes or as JSON).
pub(crate) fn same_answer(first: &Answer, second: &Answer) -> bool {
    first.status == second.status
        && !matches!(
            answer::compare(&first.body, &second.body),
            Sameness::Differs(_)
        )
}

/// Judges the new effects the count saw: `expected` of them.
pub(crate) fn new_effects(
    judgement: &mut Judgement,
    effects: Option<Effects>,
    expected: usize,
    what: &str,
) {
    let Some(effects) = effects else {
        return;
    };
    let seen = effects.new_effects();
    if seen == expected {
        return;
    }
    let counted = match seen {
        0 => "no new effect".to_owned(),
        1 => "one new effect".to_owned(),
        n => format!("{n} new effects"),
    };
    judgement.fail(format!(
        "{what}: {counted} where {} expected ({})",
        match expected {
            0 => "none was".to_owned(),
            1 => "one was".to_owned(),
            n => format!("{n} were"),
        },
        effects.shown()
    ));
}

/// How the count read, for a pass's summary: `; one effect (count 3 → 4)`.
pub(crate) fn counted(effects: Option<Effects>) -> String {
    effects.map_or_else(String::new, |effects| format!(" ({})", effects.shown()))
}

/// Judges a 409: it should say when to come back. Answers the wait it asks for.
pub(crate) fn conflict_says_when(judgement: &mut Judgement, answer: &Answer) {
    if answer::retry_after(&answer.headers).is_none() {
        judgement.warn(
            "the 409 has no readable Retry-After: the client cannot know when the first \
             request will be done, and either retries too soon or waits too long",
        );
    }
}
