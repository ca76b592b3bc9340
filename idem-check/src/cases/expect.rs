//! The judgements several cases share: "a retry after the first finished gets its answer",
//! "this many new effects", "a 409 that says when to come back".

use crate::{
    cases::Judgement,
    compare::{self, Sameness},
    count::Effects,
    exchange::{Answer, Exchange, IDEMPOTENT_REPLAYED},
    show,
};

/// How a retry's answer relates to the first request's.
#[derive(Debug)]
enum Retry<'a> {
    /// The same status and body: the first answer again.
    Replayed(&'a Answer),
    /// A 2xx with another body: the request ran again.
    RanAgain(String),
    /// Another answer that is no new run of its own: a refusal, another status.
    Other(&'a Answer),
    /// No answer.
    NoAnswer,
}

impl<'a> Retry<'a> {
    /// How `again` answers, after `first` was answered.
    pub(crate) fn of(first: &Answer, again: &'a Exchange) -> Self {
        let Some(answer) = again.answer() else {
            return Self::NoAnswer;
        };
        match compare::compare(&first.body, &answer.body) {
            Sameness::Differs(difference) if answer.succeeded() && first.succeeded() => {
                Self::RanAgain(difference)
            }
            Sameness::Bytes | Sameness::Json if answer.status == first.status => {
                Self::Replayed(answer)
            }
            _ => Self::Other(answer),
        }
    }
}

/// Judges `again` as a retry of the first request once it had finished: the draft says the
/// retry SHOULD get the first request's result, and a second run of the operation is what
/// the header exists to prevent. A new run is a defect; another answer that is no run of its
/// own (a 409 for a finished request, another status) warns. Answers whether it is the
/// first answer again.
pub(crate) fn retry_got_first(
    judgement: &mut Judgement,
    first: &Answer,
    again: &Exchange,
    what: &str,
) -> bool {
    match Retry::of(first, again) {
        Retry::Replayed(answer) => {
            replayed(judgement, first, answer, what);
            true
        }
        Retry::RanAgain(difference) => {
            judgement.defect(format!(
                "{what} got another answer than the first ({difference}): the request ran again"
            ));
            false
        }
        Retry::Other(answer) => {
            judgement.warn(not_the_result(first, answer, what));
            false
        }
        Retry::NoAnswer => {
            judgement.defect(format!("{what} got no answer: {}", show::summary(again)));
            false
        }
    }
}

/// The warning for a retry that got neither the first answer nor a run of its own.
pub(crate) fn not_the_result(first: &Answer, answer: &Answer, what: &str) -> String {
    let status = answer.status.as_u16();
    let body = if same_body(first, answer) {
        format!(", with the first answer's body: a replay sent as {status}")
    } else {
        String::new()
    };
    format!(
        "{what} was answered {status} where the first request was answered {}{body}; the draft \
         says a retry after the first request finished SHOULD get its result",
        first.status.as_u16()
    )
}

/// The first answer again: noted when its JSON is written otherwise, warned when its replay
/// marker says something other than `true`.
fn replayed(judgement: &mut Judgement, first: &Answer, answer: &Answer, what: &str) {
    if compare::compare(&first.body, &answer.body) == Sameness::Json {
        judgement.note(format!(
            "{what} got the first answer's JSON, written with other bytes"
        ));
    }
    if answer.replay_header() == Some(false) {
        judgement.warn(format!(
            "{what} carries Idempotent-Replayed: {}; only `true` marks a replay",
            answer.header_text(IDEMPOTENT_REPLAYED)
        ));
    }
}

/// Whether two answers have the same body (as bytes or as JSON), whatever their status.
pub(crate) fn same_body(first: &Answer, second: &Answer) -> bool {
    !matches!(
        compare::compare(&first.body, &second.body),
        Sameness::Differs(_)
    )
}

/// Whether two answers have the same status and body (as bytes or as JSON).
pub(crate) fn same_answer(first: &Answer, second: &Answer) -> bool {
    first.status == second.status && same_body(first, second)
}

/// Judges the new effects the count saw: `expected` of them.
pub(crate) fn new_effects(
    judgement: &mut Judgement,
    effects: Option<&Effects>,
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
    judgement.defect(format!(
        "{what}: {} where {} expected ({})",
        effects_shown(seen),
        match expected {
            0 => "none was".to_owned(),
            1 => "one was".to_owned(),
            n => format!("{n} were"),
        },
        effects.shown()
    ));
}

/// `no new effect`, `one new effect`, `3 new effects`.
pub(crate) fn effects_shown(seen: usize) -> String {
    match seen {
        0 => "no new effect".to_owned(),
        1 => "one new effect".to_owned(),
        n => format!("{n} new effects"),
    }
}

/// How the count read, for a pass's summary: ` (count of /payments: 3 → 4)`.
pub(crate) fn counted(effects: Option<&Effects>) -> String {
    effects.map_or_else(String::new, |effects| format!(" ({})", effects.shown()))
}

/// Judges a 409 for a request in flight: it should say when to come back.
pub(crate) fn conflict_says_when(judgement: &mut Judgement, answer: &Answer) {
    if answer.retry_after().is_none() {
        judgement.warn(
            "the 409 has no readable Retry-After: the client cannot know when the first \
             request will be done, and either retries too soon or waits too long",
        );
    }
}

/// ` with Retry-After: 1`, or nothing.
pub(crate) fn retry_after_shown(answer: &Answer) -> String {
    match answer.headers.get(http::header::RETRY_AFTER) {
        Some(value) => format!(
            " with Retry-After: {}",
            String::from_utf8_lossy(value.as_bytes())
        ),
        None => String::new(),
    }
}
