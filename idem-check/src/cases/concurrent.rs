//! N requests with one key at once (a double click, a retry storm): one of them runs, every
//! other gets its answer or a 409, and there is one effect. Claiming a key and starting the
//! work must be one atomic step; a lock that covers only the lookup lets them all through.
//!
//! A race needs requests that last: on an endpoint that answers in a millisecond, requests
//! sent at once still reach the handler one after another, and a lookup-only lock looks
//! atomic. So the requests are the slow request when there is one, and the report says
//! when they did not overlap. A 409 is read for what it is: a refusal while the first ran,
//! or an answer to a finished operation (its body is the first's answer, or it was sent
//! after the first answer came back), which is a replay sent as 409.

use futures_util::future::join_all;

use crate::{
    cases::{About, Context, Judgement, expect},
    count::Effects,
    exchange::{Answer, Exchange, Probe},
    plan::{Listing, Plan},
    session::fresh_key,
    show,
    verdict::Basis,
    wire::Abort,
};

pub(super) const ABOUT: About = About {
    name: "concurrent",
    title: "simultaneous requests with one key",
    basis: Basis::DraftMust,
    rests_on: "the draft's enforcement scenarios: a request retried before the original \
               completed MUST get a conflict error; no duplicate records",
    needs: &[],
};

/// The listing the requests are counted in: the slow request's, when they are slow ones.
fn listing(plan: &Plan) -> Listing {
    if plan.slow {
        Listing::Slow
    } else {
        Listing::Endpoint
    }
}

/// N requests, counted.
pub(super) fn budget(plan: &Plan) -> usize {
    plan.concurrency + plan.reads(listing(plan))
}

pub(super) async fn run(ctx: &mut Context<'_>) -> Result<Judgement, Abort> {
    let key = fresh_key();
    let slow = ctx.plan.slow;
    let probe: Probe = if slow {
        ctx.slow_request(&key)
    } else {
        ctx.keyed(&key)
    };
    let listing = listing(ctx.plan);
    let before = ctx.read(listing).await?;
    // Every request has a connection of its own; `join_all` starts them all at once.
    let sent = join_all((0..ctx.plan.concurrency).map(|_| ctx.send(probe.clone()))).await;
    let exchanges = sent.into_iter().collect::<Result<Vec<Exchange>, Abort>>()?;
    let after = ctx.read(listing).await?;
    for exchange in &exchanges {
        ctx.keep_refusal(ABOUT.name, exchange);
    }
    let mut judgement = Judgement::of(exchanges.iter().cloned());
    let effects = ctx.effects(listing, before, after);
    let what = if slow { " (as the slow request)" } else { "" };
    let late = judge(&mut judgement, &exchanges, effects.as_ref(), what);
    if !slow && late > 0 {
        judgement.note(format!(
            "{late} of the {} requests reached the server after the first had finished (they \
             got its answer): sent at once to a fast endpoint, requests still run one after \
             another, so a race that only a lasting request shows could not show; give \
             --slow-url and/or --slow-body",
            exchanges.len()
        ));
    }
    Ok(judgement)
}

/// What a 409 among simultaneous answers was.
#[derive(Debug, PartialEq, Eq)]
enum Conflict {
    /// A refusal while the first ran.
    InFlight,
    /// An answer to the finished operation: its body, or sent after its answer came back.
    Finished,
}

/// Reads a 409 against the successes: the first's answer sent as 409, or a 409 to a request
/// sent after a success had come back, answers a finished operation.
fn conflict(exchange: &Exchange, answer: &Answer, successes: &[&Exchange]) -> Conflict {
    let replays_a_success = successes.iter().any(|success| {
        success
            .answer()
            .is_some_and(|first| !first.body.is_empty() && expect::same_body(first, answer))
    });
    let after_a_success = successes
        .iter()
        .any(|success| success.ended() <= exchange.started);
    if replays_a_success || after_a_success {
        Conflict::Finished
    } else {
        Conflict::InFlight
    }
}

/// Simultaneous answers, sorted: the operation's answers and the 409s, read for what they
/// were.
struct Answers<'a> {
    n: usize,
    /// The first 2xx, and every other 2xx.
    first: &'a Answer,
    others: Vec<&'a Answer>,
    /// 2xx answers with another body than the first's: runs of their own.
    differing: usize,
    /// 409s while the first ran.
    in_flight: Vec<&'a Answer>,
    /// 409s that answered the finished operation.
    finished: usize,
}

impl<'a> Answers<'a> {
    /// Sorts `exchanges`; `None` when none got the operation's answer.
    fn of(exchanges: &'a [Exchange]) -> Option<Self> {
        let successes: Vec<&Exchange> = exchanges.iter().filter(|e| e.succeeded()).collect();
        let mut answers = successes.iter().filter_map(|success| success.answer());
        let first = answers.next()?;
        let others: Vec<&Answer> = answers.collect();
        let conflicts: Vec<(&Answer, Conflict)> = exchanges
            .iter()
            .filter_map(|exchange| Some((exchange, exchange.answer()?)))
            .filter(|(_, answer)| answer.status == 409)
            .map(|(exchange, answer)| (answer, conflict(exchange, answer, &successes)))
            .collect();
        let in_flight: Vec<&Answer> = conflicts
            .iter()
            .filter(|(_, kind)| *kind == Conflict::InFlight)
            .map(|(answer, _)| *answer)
            .collect();
        Some(Self {
            n: exchanges.len(),
            first,
            differing: others
                .iter()
                .filter(|answer| !expect::same_answer(first, answer))
                .count(),
            others,
            finished: conflicts.len() - in_flight.len(),
            in_flight,
        })
    }

    /// How many reached the server after the first had finished: the 2xx that got its
    /// answer, and the 409s that answered the finished operation.
    fn late(&self) -> usize {
        self.others.len() - self.differing + self.finished
    }

    /// The pass's account: `1 answered 201, 7 answered 409 while it ran`.
    fn shown(&self) -> String {
        let status = self.first.status.as_u16();
        let succeeded = match self.others.len() {
            0 => format!("1 answered {status}"),
            others => {
                let replayed = std::iter::once(self.first)
                    .chain(self.others.iter().copied())
                    .filter(|answer| answer.is_replayed())
                    .count();
                format!(
                    "{} answered {status} with one body ({replayed} marked replayed)",
                    others + 1
                )
            }
        };
        let conflicts = match (self.in_flight.len(), self.finished) {
            (0, 0) => "none answered 409".to_owned(),
            (in_flight, 0) => format!("{in_flight} answered 409 while it ran"),
            (in_flight, finished) => {
                format!("{in_flight} answered 409 while it ran and {finished} after")
            }
        };
        format!("{succeeded}, {conflicts}")
    }
}

/// Judges `n` simultaneous answers: one body among the successes, 409 for the rest, one
/// effect. `what` says what the requests were. Answers how many reached the server after the
/// first had finished.
fn judge(
    judgement: &mut Judgement,
    exchanges: &[Exchange],
    effects: Option<&Effects>,
    what: &str,
) -> usize {
    let n = exchanges.len();
    judge_others(judgement, exchanges);
    let Some(answers) = Answers::of(exchanges) else {
        judgement.defect(format!(
            "none of {n} requests with one key got the operation's answer"
        ));
        return 0;
    };
    if answers.differing > 0 {
        judgement.defect(format!(
            "{} of {n} requests with one key ran: their answers differ, so the key was claimed \
             more than once",
            answers.differing + 1
        ));
    }
    if let Some(conflict) = answers.in_flight.first() {
        expect::conflict_says_when(judgement, conflict);
    }
    if answers.finished > 0 {
        judgement.warn(format!(
            "{} of {n} were answered 409 after the first had finished (with its body, or sent \
             after its answer came back): replays sent as 409, where the draft says a retry \
             after the first finished SHOULD get its result",
            answers.finished
        ));
    }
    expect::new_effects(
        judgement,
        effects,
        1,
        &format!("{n} requests with one key at once"),
    );
    judgement.pass(format!(
        "{} at once{what}: {}{}",
        answers.n,
        answers.shown(),
        expect::counted(effects)
    ));
    answers.late()
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
            _ => judgement.defect(format!(
                "a simultaneous duplicate was answered {}",
                show::summary(exchange)
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bytes::Bytes;
    use http::{HeaderMap, StatusCode};
    use tokio::time::Instant;

    use super::*;
    use crate::{
        exchange::{Principal, Received},
        verdict::{Basis, Verdict},
    };

    /// An exchange sent `at` ms after `zero`, answered `status` with `body` after `took` ms.
    fn exchange(zero: Instant, at: u64, took: u64, status: u16, body: &str) -> Exchange {
        Exchange {
            probe: Probe {
                method: http::Method::POST,
                url: "http://h/x".parse().unwrap(),
                headers: HeaderMap::new(),
                key: None,
                body: None,
                principal: Principal::First,
                give_up_after: None,
            },
            received: Received::Answered(Answer {
                status: StatusCode::from_u16(status).unwrap(),
                headers: HeaderMap::new(),
                body: Bytes::from(body.to_owned()),
            }),
            started: zero + Duration::from_millis(at),
            elapsed: Duration::from_millis(took),
        }
    }

    fn verdict(exchanges: &[Exchange]) -> (Verdict, String) {
        let mut judgement = Judgement::default();
        judge(&mut judgement, exchanges, None, "");
        let concluded = judgement.conclude(Basis::DraftMust);
        (concluded.verdict, concluded.summary)
    }

    const PAID: &str = r#"{"id":"pay_1"}"#;
    const BUSY: &str = r#"{"title":"in flight"}"#;

    #[test]
    fn refusals_while_the_first_runs_are_read_as_in_flight() {
        let zero = Instant::now();
        let (verdict, summary) = verdict(&[
            exchange(zero, 0, 600, 201, PAID),
            exchange(zero, 1, 5, 409, BUSY),
            exchange(zero, 2, 5, 409, BUSY),
        ]);
        assert_eq!(verdict, Verdict::Warn, "{summary}");
        assert!(summary.contains("no readable Retry-After"), "{summary}");
    }

    #[test]
    fn a_409_that_carries_the_first_answer_is_a_replay_sent_as_409() {
        let zero = Instant::now();
        let (verdict, summary) = verdict(&[
            exchange(zero, 0, 1, 201, PAID),
            exchange(zero, 0, 2, 409, PAID),
        ]);
        assert_eq!(verdict, Verdict::Warn);
        assert!(
            summary.contains("1 of 2 were answered 409 after"),
            "{summary}"
        );
    }

    #[test]
    fn a_409_sent_after_the_first_answer_came_back_answers_a_finished_operation() {
        let zero = Instant::now();
        let (verdict, summary) = verdict(&[
            exchange(zero, 0, 1, 201, PAID),
            exchange(zero, 3, 1, 409, BUSY),
        ]);
        assert_eq!(verdict, Verdict::Warn);
        assert!(
            summary.contains("after the first had finished"),
            "{summary}"
        );
    }

    #[test]
    fn two_runs_fail() {
        let zero = Instant::now();
        let (verdict, summary) = verdict(&[
            exchange(zero, 0, 600, 201, PAID),
            exchange(zero, 1, 600, 201, r#"{"id":"pay_2"}"#),
        ]);
        assert_eq!(verdict, Verdict::Fail);
        assert!(summary.contains("claimed more than once"), "{summary}");
    }
}
