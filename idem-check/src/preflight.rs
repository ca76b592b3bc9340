//! Before any case: is there a working request to check? The endpoint's request with a fresh
//! key must succeed with JSON; the count URL must count it as one; the other body must be a
//! valid request of its own; the slow request must succeed, be counted, and be slow enough.
//! Otherwise the check stops with exit status 2 and says what to fix: every verdict after
//! it would rest on a setting that does not work.

use std::time::Duration;

use bytes::Bytes;

use crate::{
    body,
    cases::{Baseline, Context, SlowBaseline, context::effects},
    count::Effects,
    show,
    wire::{Abort, Exchange, Probe},
};

/// The shortest slow request that the in-flight and timeout cases can use.
const MIN_SLOW: Duration = Duration::from_millis(200);

/// Learns what the cases build on.
pub(crate) async fn run(ctx: &Context<'_>) -> Result<Baseline, Abort> {
    let key = Context::fresh_key();
    let (first, first_effects) = counted_success(ctx, ctx.keyed(&key), Which::Endpoint).await?;
    let (other_body, other_body_note) = other_body(ctx)?;
    let other = ctx
        .send(ctx.request(
            Some(ctx.key_header(&Context::fresh_key())),
            other_body.clone(),
        ))
        .await?;
    if !other.succeeded() {
        return Err(Abort::Unusable(format!(
            "the other body ({other_body_note}), sent with a fresh key, was answered {}: case 2 \
             needs another valid request; give one with --other-body\n{}",
            show::outcome(&other),
            show::exchange(&other)
        )));
    }
    let slow = match ctx.slow_request(&Context::fresh_key()) {
        Some(probe) => Some(slow_baseline(ctx, probe).await?),
        None => None,
    };
    Ok(Baseline {
        key,
        first,
        first_effects,
        other_body,
        other_body_note,
        slow,
    })
}

/// Which request a preflight step sends, for its messages and its counter.
#[derive(Clone, Copy)]
enum Which {
    Endpoint,
    Slow,
}

/// Sends `probe`, which must succeed with JSON and add one to its count.
async fn counted_success(
    ctx: &Context<'_>,
    probe: Probe,
    which: Which,
) -> Result<(Exchange, Option<Effects>), Abort> {
    let (counter, what, flag) = match which {
        Which::Endpoint => (ctx.counter.as_ref(), "the request", "--count-url"),
        Which::Slow => (
            ctx.slow_counter.as_ref(),
            "the slow request",
            "--slow-count-url",
        ),
    };
    let before = ctx.read(counter).await?;
    let exchange = ctx.send(probe).await?;
    usable(&exchange, what)?;
    let after = ctx.read(counter).await?;
    let effects = effects(before, after);
    if let Some(effects) = effects.filter(|effects| effects.after != effects.before + 1) {
        let moved = if effects.after == effects.before {
            format!("left the count at {} unchanged", effects.before)
        } else {
            format!(
                "moved the count from {} to {}",
                effects.before, effects.after
            )
        };
        return Err(Abort::Unusable(format!(
            "{what}, sent once with a fresh key, {moved} at {}: {flag} must list what this \
             request creates, for the principal of -H, and nothing else may add to it during \
             the check",
            counter.expect("counted").url(),
        )));
    }
    Ok((exchange, effects))
}

/// The request must have succeeded, with a JSON body or none.
fn usable(exchange: &Exchange, what: &str) -> Result<(), Abort> {
    let Some(answer) = exchange.answer() else {
        return Err(Abort::Unusable(format!(
            "{what} got no answer: {}",
            show::outcome(exchange)
        )));
    };
    if !answer.status.is_success() {
        return Err(Abort::Unusable(format!(
            "{what}, sent with a fresh key, was answered {}: the cases need a request that \
             succeeds; check the URL, the body and the headers (-H)\n{}",
            answer.status.as_u16(),
            show::exchange(exchange)
        )));
    }
    if !answer.body.is_empty()
        && serde_json::from_slice::<serde::de::IgnoredAny>(&answer.body).is_err()
    {
        return Err(Abort::Unusable(format!(
            "{what} was answered {} with a body that is not JSON ({}): idem-check checks JSON \
             APIs, and compares answers as JSON\n{}",
            answer.status.as_u16(),
            crate::answer::media_type(&answer.headers)
                .unwrap_or_else(|| "no Content-Type".to_owned()),
            show::exchange(exchange)
        )));
    }
    Ok(())
}

/// Case 2's body: `--other-body`, or the endpoint's with one member changed.
fn other_body(ctx: &Context<'_>) -> Result<(Bytes, String), Abort> {
    if let Some(body) = &ctx.settings.other_body {
        return Ok((body.clone(), "given with --other-body".to_owned()));
    }
    body::other_body(&ctx.settings.endpoint.body).ok_or_else(|| {
        Abort::Unusable(
            "--body has no number, boolean or string member to change for case 2 (same key, \
             other body): give the other request with --other-body"
                .to_owned(),
        )
    })
}

/// Sends the slow request once: it must succeed, be counted, and take long enough.
async fn slow_baseline(ctx: &Context<'_>, probe: Probe) -> Result<SlowBaseline, Abort> {
    let (exchange, _) = counted_success(ctx, probe, Which::Slow).await?;
    let took = exchange.elapsed;
    let give_up_after = ctx.settings.give_up_after.unwrap_or(took / 2);
    let long_enough = match ctx.settings.give_up_after {
        Some(after) => took > after + after / 4,
        None => took >= MIN_SLOW,
    };
    if !long_enough {
        return Err(Abort::Unusable(format!(
            "the slow request was answered in {}: the in-flight and timeout cases need one the \
             server takes longer over than the client waits (--timeout-ms, {} here), and at \
             least {}\n{}",
            show::duration(took),
            show::duration(give_up_after),
            show::duration(MIN_SLOW),
            show::exchange(&exchange)
        )));
    }
    Ok(SlowBaseline {
        took,
        give_up_after,
    })
}
