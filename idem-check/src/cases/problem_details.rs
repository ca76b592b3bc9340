//! Every 400, 409 and 422 the other cases met (the refusals the draft names: a missing or bad
//! key, a request in flight, a key reused) tells the client what went wrong. The draft says
//! such an answer SHOULD carry a body that points to documentation, shows RFC 9457 Problem
//! Details (`application/problem+json`) as the way, and a `Link` header as the other: so this
//! case warns, and never fails. This case sends nothing of its own.

use http::header;
use idem_client::ProblemDetails;

use crate::{
    cases::{About, Context, Judgement},
    exchange::{Answer, Exchange},
    plan::Plan,
    verdict::Basis,
};

pub(super) const ABOUT: About = About {
    name: "problem-details",
    title: "Problem Details on 400, 409, 422",
    basis: Basis::DraftShould,
    rests_on: "the draft's error scenarios: these answers SHOULD carry a body that points to \
               documentation, with RFC 9457 Problem Details as its example (or a Link header)",
    needs: &[],
};

/// Nothing: the case reads what the others met.
pub(super) fn budget(_: &Plan) -> usize {
    0
}

pub(super) fn run(ctx: &Context<'_>) -> Judgement {
    if ctx.refusals.is_empty() {
        return Judgement::skipped("no 400, 409 or 422 was met by the other cases");
    }
    // One line per kind of finding, naming every refusal it is about, and one example of
    // each in the transcript.
    let mut findings: Vec<(Finding, Vec<Met>)> = Vec::new();
    let mut judgement = Judgement::default();
    for (name, exchange) in &ctx.refusals {
        let answer = exchange.answer().expect("only answers are kept");
        let met = Met {
            status: answer.status.as_u16(),
            by: name,
        };
        for finding in judge(answer) {
            match findings.iter_mut().find(|(kind, _)| *kind == finding) {
                Some((_, mets)) => mets.push(met),
                None => {
                    judgement.saw(exchange.clone());
                    findings.push((finding, vec![met]));
                }
            }
        }
    }
    let linked = findings
        .iter()
        .filter(|(finding, _)| matches!(finding, Finding::LinkOnly(_)))
        .map(|(_, mets)| mets.len())
        .sum();
    for (finding, mets) in findings {
        finding.report(&mut judgement, &mets);
    }
    judgement.pass(passed(&ctx.refusals, linked));
    judgement
}

/// The pass's account: how many refusals, of which statuses, and how they point to what went
/// wrong (`linked` of them with a `Link` header only).
fn passed(refusals: &[(&'static str, Exchange)], linked: usize) -> String {
    let mut statuses: Vec<u16> = refusals
        .iter()
        .filter_map(|(_, exchange)| exchange.status().map(|status| status.as_u16()))
        .collect();
    statuses.sort_unstable();
    statuses.dedup();
    let statuses: Vec<String> = statuses.iter().map(u16::to_string).collect();
    let noun = if refusals.len() == 1 {
        "refusal"
    } else {
        "refusals"
    };
    let how = match linked {
        0 => "each application/problem+json with type, title and status".to_owned(),
        _ if linked == refusals.len() => "each with a Link to documentation".to_owned(),
        _ => format!(
            "{} application/problem+json with type, title and status, {linked} with a Link to \
             documentation",
            refusals.len() - linked
        ),
    };
    format!("{} {noun} ({}), {how}", refusals.len(), statuses.join(", "))
}

/// A refusal met: its status, and who met it (a case, or the preflight).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Met {
    status: u16,
    by: &'static str,
}

/// The refusals `mets` names, in order, those of one status met by one case together: `the
/// 422 of other-body, the 7 409s of concurrent and the 400 of long-key`. Answers the text,
/// and whether it names more than one.
fn named(mets: &[Met]) -> (String, bool) {
    let mut groups: Vec<(Met, usize)> = Vec::new();
    for met in mets {
        match groups.iter_mut().find(|(seen, _)| seen == met) {
            Some((_, n)) => *n += 1,
            None => groups.push((*met, 1)),
        }
    }
    let names: Vec<String> = groups
        .iter()
        .map(|(met, n)| match n {
            1 => format!("the {} of {}", met.status, met.by),
            n => format!("the {n} {}s of {}", met.status, met.by),
        })
        .collect();
    let text = match names.as_slice() {
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
        [] => String::new(),
    };
    (text, mets.len() > 1)
}

/// What one refusal lacks.
#[derive(Debug, PartialEq, Eq)]
enum Finding {
    /// Another media type, and no `Link` to documentation either.
    NotProblem(String),
    /// Another media type, with a `Link` to documentation: the draft's other way.
    LinkOnly(String),
    NotAnObject,
    StatusDiffers,
    NoStatus,
    NoType,
    NoTitle,
}

/// What `answer` lacks, if anything.
fn judge(answer: &Answer) -> Vec<Finding> {
    let media = answer.media_type();
    if media.as_deref() != Some("application/problem+json") {
        let media = media.unwrap_or_else(|| "without a Content-Type".to_owned());
        let linked = answer
            .headers
            .get_all(header::LINK)
            .iter()
            .any(|link| link.to_str().is_ok_and(|link| link.contains("describedby")));
        return vec![if linked {
            Finding::LinkOnly(media)
        } else {
            Finding::NotProblem(media)
        }];
    }
    let Some(problem) = ProblemDetails::from_json(&answer.body) else {
        return vec![Finding::NotAnObject];
    };
    let mut found = Vec::new();
    match problem.status() {
        Some(member) if member != answer.status.as_u16() => found.push(Finding::StatusDiffers),
        Some(_) => {}
        None => found.push(Finding::NoStatus),
    }
    if problem.type_uri() == "about:blank" {
        found.push(Finding::NoType);
    }
    if problem.title().is_none() {
        found.push(Finding::NoTitle);
    }
    found
}

impl Finding {
    /// One line for every refusal `mets` names.
    fn report(&self, judgement: &mut Judgement, mets: &[Met]) {
        let (who, several) = named(mets);
        let (is, has) = if several {
            ("are", "have")
        } else {
            ("is", "has")
        };
        match self {
            Self::NotProblem(media) => judgement.defect(format!(
                "{who} {is} {media}, not application/problem+json, and {has} no Link to \
                 documentation: the draft says these answers SHOULD point the client to what \
                 went wrong, and shows Problem Details as the way"
            )),
            Self::LinkOnly(media) => judgement.note(format!(
                "{who} {is} {media} with a Link to documentation (rel=\"describedby\"), the \
                 draft's other way, rather than Problem Details"
            )),
            Self::NotAnObject => judgement.defect(format!(
                "{who} {is} application/problem+json, but not a JSON object"
            )),
            Self::StatusDiffers => judgement.defect(format!(
                "{who} {has} a \"status\" member other than the answer's status, which RFC 9457 \
                 asks to be the same"
            )),
            Self::NoStatus => judgement.warn(format!("{who} {has} no numeric \"status\" member")),
            Self::NoType => judgement.warn(format!(
                "{who} {has} no \"type\" (about:blank): a client cannot tell this problem from \
                 another of the same status"
            )),
            Self::NoTitle => judgement.warn(format!("{who} {has} no \"title\"")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_of_one_kind_are_named_together() {
        let met = |status, by| Met { status, by };
        let mets = [
            met(422, "other-body"),
            met(409, "concurrent"),
            met(409, "concurrent"),
            met(400, "long-key"),
        ];
        assert_eq!(
            named(&mets),
            (
                "the 422 of other-body, the 2 409s of concurrent and the 400 of long-key"
                    .to_owned(),
                true
            )
        );
        assert_eq!(
            named(&[met(400, "the preflight")]),
            ("the 400 of the preflight".to_owned(), false)
        );
    }
}
