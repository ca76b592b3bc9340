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
    // One line per kind of finding, naming every refusal it is about.
    let mut findings: Vec<(Finding, Vec<String>)> = Vec::new();
    let mut judgement = Judgement::default();
    for (name, exchange) in &ctx.refusals {
        let answer = exchange.answer().expect("only answers are kept");
        let at = format!("the {} of {name}", answer.status.as_u16());
        let found = judge(answer);
        if !found.is_empty() {
            judgement.saw(exchange.clone());
        }
        for finding in found {
            match findings.iter_mut().find(|(kind, _)| *kind == finding) {
                Some((_, ats)) => ats.push(at.clone()),
                None => findings.push((finding, vec![at.clone()])),
            }
        }
    }
    let linked = findings
        .iter()
        .filter(|(finding, _)| matches!(finding, Finding::LinkOnly(_)))
        .map(|(_, ats)| ats.len())
        .sum();
    for (finding, ats) in findings {
        finding.report(&mut judgement, &ats);
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
    /// One line for every refusal `ats` names.
    fn report(&self, judgement: &mut Judgement, ats: &[String]) {
        let (who, is) = match ats {
            [one] => (one.clone(), "is"),
            [init @ .., last] => (format!("{} and {last}", init.join(", ")), "are"),
            [] => return,
        };
        let has = if ats.len() == 1 { "has" } else { "have" };
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
