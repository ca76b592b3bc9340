//! The key itself: a malformed one and an over-long one are refused with 400, never a 500;
//! and, under `--key-style both`, `"k"` and `k` name the same key.

use http::HeaderValue;

use crate::{
    cases::{Case, Context, Judgement, context::effects, expect},
    settings::KeyStyle,
    show,
    wire::Abort,
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
    Ok(judgement)
}

/// Under `--key-style both`: a key sent as an sf-string, then bare, is one key.
pub(super) async fn forms(ctx: &mut Context<'_>) -> Result<Judgement, Abort> {
    if ctx.settings.key_style != KeyStyle::Both {
        return Ok(Judgement::skipped(
            "needs a server that takes both spellings: --key-style both",
        ));
    }
    let key = Context::fresh_key();
    let before = ctx.read(ctx.counter.as_ref()).await?;
    let quoted = ctx.send(ctx.keyed(&key)).await?;
    let bare_value = idem_core::client::KeyForm::Bare.header_value(&key);
    let bare = ctx
        .send(ctx.request(Some(bare_value), ctx.settings.endpoint.body.clone()))
        .await?;
    let after = ctx.read(ctx.counter.as_ref()).await?;
    ctx.keep_refusal(Case::KeyForms, &bare);
    let mut judgement = Judgement::of([quoted.clone(), bare.clone()]);
    let Some(first) = quoted.answer().filter(|_| quoted.succeeded()) else {
        judgement.fail(format!(
            "the request itself, with a fresh sf-string key, was answered {}",
            show::outcome(&quoted)
        ));
        return Ok(judgement);
    };
    let effects = effects(before, after);
    if expect::replay_of(&mut judgement, first, &bare, "the same key sent bare") {
        judgement.pass(format!(
            "\"{0}\" then {0}: the second got the first's answer{1}",
            short(key.as_str()),
            expect::counted(effects)
        ));
    }
    expect::new_effects(&mut judgement, effects, 1, "one key in its two spellings");
    Ok(judgement)
}

fn short(key: &str) -> String {
    format!("{}…", &key[..8.min(key.len())])
}
