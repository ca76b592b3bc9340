//! The key itself: a malformed one and an over-long one are refused with 400, never a 500;
//! and, under `--key-style both`, `"k"` and `k` name the same key.

use http::HeaderValue;
use idem_client::KeyForm;

use crate::{
    cases::{Case, Context, Judgement, expect, pair::Pair},
    settings::KeyStyle,
    show,
    wire::{Abort, Answer},
};

/// The length of the over-long key: one more than idem's and Stripe's limit of 255.
const LONG_KEY_LEN: usize = 256;

/// A malformed key: an sf-string that is never closed, which no RFC 9651 parser takes; for a
/// server that takes bare keys only, an empty value.
pub(super) async fn malformed(ctx: &mut Context<'_>) -> Result<Judgement, Abort> {
    let bare = ctx.settings.key_style == KeyStyle::Bare;
    let value = if bare {
        HeaderValue::from_static("")
    } else {
        let key = Context::fresh_key();
        HeaderValue::from_str(&format!("\"{}", key.as_str())).expect("visible ASCII")
    };
    let what = if bare {
        "an empty key"
    } else {
        "an sf-string that is never closed"
    };
    refused(ctx, Case::MalformedKey, value, what, !bare).await
}

/// A key of 256 characters.
pub(super) async fn long(ctx: &mut Context<'_>) -> Result<Judgement, Abort> {
    let key = "k".repeat(LONG_KEY_LEN);
    let value = match ctx.settings.key_style {
        KeyStyle::Bare => key,
        KeyStyle::SfString | KeyStyle::Both => format!("\"{key}\""),
    };
    let value = HeaderValue::from_str(&value).expect("visible ASCII");
    refused(ctx, Case::LongKey, value, "a 256-character key", false).await
}

/// Sends the endpoint's request with the key `value` and judges the refusal. A 2xx warns
/// when `accepting_is_risky`, and is noted otherwise.
async fn refused(
    ctx: &mut Context<'_>,
    case: Case,
    value: HeaderValue,
    what: &str,
    accepting_is_risky: bool,
) -> Result<Judgement, Abort> {
    let exchange = ctx
        .send(ctx.request(Some(value), ctx.settings.endpoint.body.clone()))
        .await?;
    ctx.keep_refusal(case, &exchange);
    let mut judgement = Judgement::of([exchange.clone()]);
    let Some(answer) = exchange.answer() else {
        judgement.fail(format!(
            "{what} got no answer: {}",
            show::outcome(&exchange)
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
                "the draft's answer to a malformed key is 400, not {status}"
            ));
        }
        _ if answer.status.is_success() && accepting_is_risky => judgement.warn(format!(
            "{what} was accepted ({status}): the draft asks 400 for a key that is not an \
             sf-string, and a server that reads malformed keys its own way may read the retry's \
             key another way"
        )),
        _ if answer.status.is_success() => {
            judgement.pass(format!("{what} was accepted ({status})"));
            judgement.note("idem and Stripe refuse keys over 255 characters");
        }
        _ => judgement.fail(format!(
            "{what} was answered {status}: a bad key is the client's mistake, to be refused \
             with 400 Problem Details that say what is wrong, not a server error"
        )),
    }
}

/// Under `--key-style both`: a key sent as an sf-string, then bare, is one key.
pub(super) async fn forms(ctx: &mut Context<'_>) -> Result<Judgement, Abort> {
    if ctx.settings.key_style != KeyStyle::Both {
        return Ok(Judgement::skipped(
            "needs a server that takes both spellings: --key-style both",
        ));
    }
    let key = Context::fresh_key();
    let bare = KeyForm::Bare.header_value(&key);
    let requests = (
        ctx.keyed(&key),
        ctx.request(Some(bare), ctx.settings.endpoint.body.clone()),
    );
    let mut judgement = Judgement::default();
    let what = "the same key sent bare";
    let Some(pair) = Pair::send(ctx, Case::KeyForms, &mut judgement, requests, None).await? else {
        return Ok(judgement);
    };
    if expect::replay_of(&mut judgement, &pair.first, &pair.second, what) {
        judgement.pass(format!(
            "\"{0}\" then {0}: the second got the first's answer{1}",
            short(key.as_str()),
            expect::counted(pair.effects)
        ));
    }
    expect::new_effects(&mut judgement, pair.effects, 0, what);
    Ok(judgement)
}

fn short(key: &str) -> String {
    format!("{}…", &key[..8.min(key.len())])
}
