//! Cases 10 and 11, the key itself: a malformed key and an over-long one are refused with a
//! 4xx, never a 5xx.

use http::HeaderValue;

use crate::{
    cases::{About, Context, Judgement},
    exchange::Answer,
    plan::Plan,
    session::fresh_key,
    settings::KeyStyle,
    show,
    verdict::Basis,
    wire::Abort,
};

pub(super) const MALFORMED: About = About {
    name: "malformed-key",
    title: "a malformed key",
    basis: Basis::DraftMust,
    rests_on: "the draft's key is an sf-string, and a value that does not parse is as if \
               absent (RFC 9651): a request the client must correct, which the server MUST \
               fail with one of the draft's errors (400)",
    needs: &[],
};

pub(super) const LONG: About = About {
    name: "long-key",
    title: "an over-long key",
    basis: Basis::DraftMust,
    rests_on: "a key of 256 characters is a valid sf-string (RFC 9651 parsers take 1024): \
               the server runs it, or refuses it by its own published limit as a request the \
               client must correct, with one of the draft's errors",
    needs: &[],
};

/// One request.
pub(super) fn budget(_: &Plan) -> usize {
    1
}

/// The length of the over-long key: one more than idem's and Stripe's limit of 255.
const LONG_KEY_LEN: usize = 256;

/// A malformed key: an sf-string that is never closed, which no RFC 9651 parser takes; for a
/// server that takes bare keys only, an empty value.
pub(super) async fn malformed(ctx: &mut Context<'_>) -> Result<Judgement, Abort> {
    let bare = ctx.key_style() == KeyStyle::Bare;
    let value = if bare {
        HeaderValue::from_static("")
    } else {
        HeaderValue::from_str(&format!("\"{}", fresh_key().as_str())).expect("visible ASCII")
    };
    let what = if bare {
        "an empty key"
    } else {
        "an sf-string that is never closed"
    };
    refused(ctx, MALFORMED.name, value, what, !bare).await
}

/// A key of 256 characters, written in the style keys are written in.
pub(super) async fn long(ctx: &mut Context<'_>) -> Result<Judgement, Abort> {
    let key = "k".repeat(LONG_KEY_LEN);
    let (value, what) = match ctx.key_style() {
        KeyStyle::Bare => (key, format!("a key of {LONG_KEY_LEN} characters")),
        KeyStyle::SfString | KeyStyle::Both => (
            format!("\"{key}\""),
            format!(
                "a key of {LONG_KEY_LEN} characters (a header value of {} bytes with its \
                 quotes)",
                LONG_KEY_LEN + 2
            ),
        ),
    };
    let value = HeaderValue::from_str(&value).expect("visible ASCII");
    refused(ctx, LONG.name, value, &what, false).await
}

/// Sends the endpoint's request with the key `value` and judges the refusal. A 2xx warns
/// when `accepting_is_risky`, and is noted otherwise.
async fn refused(
    ctx: &mut Context<'_>,
    name: &'static str,
    value: HeaderValue,
    what: &str,
    accepting_is_risky: bool,
) -> Result<Judgement, Abort> {
    let exchange = ctx.send(ctx.request(Some(value), ctx.body())).await?;
    ctx.keep_refusal(name, &exchange);
    let mut judgement = Judgement::of([exchange.clone()]);
    let Some(answer) = exchange.answer() else {
        judgement.defect(format!(
            "{what} got no answer: {}",
            show::summary(&exchange)
        ));
        return Ok(judgement);
    };
    judge(&mut judgement, answer, what, accepting_is_risky);
    Ok(judgement)
}

/// Judges the answer to a bad key: a 4xx, never a 5xx.
fn judge(judgement: &mut Judgement, answer: &Answer, what: &str, accepting_is_risky: bool) {
    let status = answer.status.as_u16();
    match status {
        400 => judgement.pass(format!("{what}: 400")),
        _ if answer.status.is_client_error() => {
            judgement.pass(format!("{what}: {status}"));
            judgement.note(format!(
                "the draft's answer to a request the client must correct is 400, not {status}"
            ));
        }
        _ if answer.succeeded() && accepting_is_risky => judgement.warn(format!(
            "{what} was accepted ({status}): the draft's key is an sf-string, and a value that \
             does not parse is as if absent (the draft's answer to a missing key is 400); a \
             server that reads malformed keys its own way may read a retry's key another way"
        )),
        _ if answer.succeeded() => {
            judgement.pass(format!("{what} was accepted ({status})"));
            judgement.note("idem and Stripe refuse keys over 255 characters");
        }
        _ => judgement.defect(format!(
            "{what} was answered {status}: a bad key is the client's mistake, to be refused \
             with 400 Problem Details that say what is wrong, not a server error"
        )),
    }
}
