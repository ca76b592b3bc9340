//! Every 400, 409 and 422 the other cases met (the refusals the draft names: a missing or bad
//! key, a request in flight, a key reused) is RFC 9457 Problem Details:
//! `application/problem+json`, a JSON object with `type`, `title`, and a `status` equal to the
//! answer's. This case sends nothing of its own.

use idem_client::ProblemDetails;

use crate::{
    answer,
    cases::{Case, Context, Judgement},
    wire::Answer,
};

pub(super) fn run(ctx: &Context<'_>) -> Judgement {
    if ctx.refusals.is_empty() {
        return Judgement::skipped("no 400, 409 or 422 was met by the other cases");
    }
    let mut judgement = Judgement::default();
    for (case, exchange) in &ctx.refusals {
        let answer = exchange.answer().expect("only answers are kept");
        let findings = judgement.findings();
        judge(&mut judgement, *case, answer);
        if judgement.findings() > findings {
            judgement.saw(exchange.clone());
        }
    }
    let mut statuses: Vec<u16> = ctx
        .refusals
        .iter()
        .filter_map(|(_, exchange)| exchange.status().map(|status| status.as_u16()))
        .collect();
    statuses.sort_unstable();
    statuses.dedup();
    let statuses: Vec<String> = statuses.iter().map(u16::to_string).collect();
    judgement.pass(format!(
        "{} refusals ({}), each application/problem+json with type, title and status",
        ctx.refusals.len(),
        statuses.join(", ")
    ));
    judgement
}

/// Judges one refusal met by `case`.
fn judge(judgement: &mut Judgement, case: Case, answer: &Answer) {
    let status = answer.status.as_u16();
    let at = format!("the {status} of {}", case.name());
    let media = answer::media_type(&answer.headers);
    if media.as_deref() != Some("application/problem+json") {
        judgement.fail(format!(
            "{at} is {}, not application/problem+json: clients cannot read what went wrong \
             the one way the draft's examples show",
            media.unwrap_or_else(|| "without a Content-Type".to_owned())
        ));
        return;
    }
    let Some(problem) = ProblemDetails::from_json(&answer.body) else {
        judgement.fail(format!(
            "{at} is application/problem+json, but not a JSON object"
        ));
        return;
    };
    match problem.status() {
        Some(member) if member != status => judgement.fail(format!(
            "{at} says \"status\": {member} in its body: RFC 9457 asks for the answer's own"
        )),
        Some(_) => {}
        None => judgement.warn(format!("{at} has no numeric \"status\" member")),
    }
    if problem.type_uri() == "about:blank" {
        judgement.warn(format!(
            "{at} has no \"type\" (about:blank): a client cannot tell this problem from another \
             {status}"
        ));
    }
    if problem.title().is_none() {
        judgement.warn(format!("{at} has no \"title\""));
    }
}
