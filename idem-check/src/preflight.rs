//! Before any case: is there a working request to check? The endpoint's request with a fresh
//! key must succeed with JSON; the count URL must count it as one; the other body must be a
//! valid request of its own; the slow request must succeed, be counted, and be slow enough.
//! Otherwise the check stops with exit status 2 and says what to fix: every verdict after
//! it would rest on a setting that does not work.
//!
//! A refusal of the first request may be about how its key is written (a server that takes
//! only bare keys, or only sf-strings): the preflight then sends it once more with a fresh key
//! in the other spelling. When that one succeeds, the check goes on with it if the settings
//! left the key style open, and says so in the report; when the user chose the style, it
//! stops and names the flag to pass.

use std::time::Duration;

use bytes::Bytes;
use idem_client::{IdempotencyKey, ProblemDetails};

use crate::{
    body,
    count::Effects,
    exchange::{Exchange, Probe},
    plan::Listing,
    session::{Session, fresh_key},
    settings::KeyStyle,
    show,
    wire::Abort,
};

/// The shortest slow request that the in-flight and timeout cases can use.
const MIN_SLOW: Duration = Duration::from_millis(200);

/// What the preflight learnt, for the cases to build on.
#[derive(Debug)]
pub(crate) struct Baseline {
    /// How keys are written from now on.
    pub(crate) key_style: KeyStyle,
    /// What the report says about it, when the preflight chose it.
    pub(crate) notes: Vec<String>,
    /// A refusal the preflight met (of the other key spelling), for the Problem Details case.
    pub(crate) refusal: Option<Exchange>,
    /// The key of the preflight's first request, which case 1 sends again.
    pub(crate) key: IdempotencyKey,
    /// That request and its 2xx answer.
    pub(crate) first: Exchange,
    /// The count around it.
    pub(crate) first_effects: Option<Effects>,
    /// Case 2's body, and how it differs from the endpoint's.
    pub(crate) other_body: Bytes,
    pub(crate) other_body_note: String,
    /// The slow request, if there is one.
    pub(crate) slow: Option<SlowBaseline>,
}

/// How long the slow request took, and how long the client waits for it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SlowBaseline {
    pub(crate) took: Duration,
    pub(crate) give_up_after: Duration,
}

/// Learns what the cases build on.
pub(crate) async fn run(session: &Session<'_>) -> Result<Baseline, Abort> {
    let first = first_request(session).await?;
    let (other_body, other_body_note) = other_body(session)?;
    let other = session
        .send(session.request(
            Some(crate::session::key_header(first.key_style, &fresh_key())),
            other_body.clone(),
        ))
        .await?;
    if !other.succeeded() {
        return Err(Abort::Unusable(format!(
            "the other body ({other_body_note}), sent with a fresh key, was answered {}: case 2 \
             needs another valid request; give one with --other-body\n{}",
            show::summary(&other),
            show::exchange(&other)
        )));
    }
    let slow = match session.slow_request(first.key_style, &fresh_key()) {
        Some(probe) => Some(slow_baseline(session, probe).await?),
        None => None,
    };
    Ok(Baseline {
        key_style: first.key_style,
        notes: first.notes,
        refusal: first.refusal,
        key: first.key,
        first: first.exchange,
        first_effects: first.effects,
        other_body,
        other_body_note,
        slow,
    })
}

/// The preflight's first request, and how its key ended up written.
struct First {
    key_style: KeyStyle,
    notes: Vec<String>,
    refusal: Option<Exchange>,
    key: IdempotencyKey,
    exchange: Exchange,
    effects: Option<Effects>,
}

/// Sends the endpoint's request, in the other key spelling too after a refusal; it must
/// succeed with JSON and add one to the endpoint's count.
async fn first_request(session: &Session<'_>) -> Result<First, Abort> {
    let chosen = session.settings.key_style;
    let style = chosen.unwrap_or(KeyStyle::SfString);
    let before = session.read(Listing::Endpoint).await?;
    let key = fresh_key();
    let exchange = session.send(session.keyed(style, &key)).await?;
    let mut first = First {
        key_style: style,
        notes: Vec::new(),
        refusal: None,
        key,
        exchange,
        effects: None,
    };
    if refused(&first.exchange) {
        first = other_spelling(session, chosen, first).await?;
    }
    usable(&first.exchange, "the request")?;
    let after = session.read(Listing::Endpoint).await?;
    first.effects = session.effects(Listing::Endpoint, before, after);
    counted_once(
        session,
        Listing::Endpoint,
        first.effects.as_ref(),
        "the request",
    )?;
    Ok(first)
}

/// Whether an answer is a refusal that may be about the key's spelling: 400, or 422 (what
/// many validators answer for a header that does not match its pattern).
fn refused(exchange: &Exchange) -> bool {
    exchange
        .status()
        .is_some_and(|status| matches!(status.as_u16(), 400 | 422))
}

/// After `first` was refused: the same request once more, with a fresh key in the other
/// spelling. Goes on with it when the style was left open and it succeeded; stops, naming the
/// flag, when the style was chosen; keeps `first` (to be judged unusable) when both spellings
/// are refused.
async fn other_spelling(
    session: &Session<'_>,
    chosen: Option<KeyStyle>,
    first: First,
) -> Result<First, Abort> {
    let other = match first.key_style {
        KeyStyle::SfString | KeyStyle::Both => KeyStyle::Bare,
        KeyStyle::Bare => KeyStyle::SfString,
    };
    let key = fresh_key();
    let retry = session.send(session.keyed(other, &key)).await?;
    let refusal = refusal_text(&first.exchange);
    let spelling = |style: KeyStyle| match style {
        KeyStyle::Bare => "a bare key",
        KeyStyle::SfString | KeyStyle::Both => "an sf-string key",
    };
    if !retry.succeeded() {
        return Err(Abort::Unusable(format!(
            "{}\n(the same request with {} was answered {} too: the refusal is not about how \
             the key is written)",
            unusable(&first.exchange, "the request"),
            spelling(other),
            show::summary(&retry)
        )));
    }
    if let Some(style) = chosen {
        let flag = match other {
            KeyStyle::Bare => "--key-style bare",
            KeyStyle::SfString | KeyStyle::Both => "--key-style sf-string (or no --key-style)",
        };
        return Err(Abort::Unusable(format!(
            "the request with {} was refused ({refusal}), and the same request with {} \
             succeeded: this server does not take --key-style {}; pass {flag}\n{}\n{}",
            spelling(style),
            spelling(other),
            style.as_str(),
            show::exchange(&first.exchange),
            show::exchange(&retry)
        )));
    }
    let note = format!(
        "keys were sent bare: the server refused the draft's sf-string key ({refusal}) and took \
         the same request with a bare key, as Stripe's are; --key-style bare says so and saves \
         this request"
    );
    Ok(First {
        key_style: other,
        notes: vec![note],
        refusal: Some(first.exchange),
        key,
        exchange: retry,
        effects: None,
    })
}

/// A refusal in a few words: its status, and its Problem Details' title or its body.
fn refusal_text(exchange: &Exchange) -> String {
    let Some(answer) = exchange.answer() else {
        return show::summary(exchange);
    };
    let said = ProblemDetails::from_json(&answer.body)
        .and_then(|problem| problem.title().or(problem.detail()).map(str::to_owned))
        .unwrap_or_else(|| show::body_text(&answer.body));
    let said: String = said.chars().take(80).collect();
    if said.is_empty() {
        answer.status.as_u16().to_string()
    } else {
        format!("{}: {said}", answer.status.as_u16())
    }
}

/// `listing`'s count, read around one request, must have moved by exactly one.
fn counted_once(
    session: &Session<'_>,
    listing: Listing,
    effects: Option<&Effects>,
    what: &str,
) -> Result<(), Abort> {
    let Some(effects) = effects.filter(|effects| effects.after != effects.before + 1) else {
        return Ok(());
    };
    let moved = if effects.after == effects.before {
        format!("left the count at {} unchanged", effects.before)
    } else {
        format!(
            "moved the count from {} to {}",
            effects.before, effects.after
        )
    };
    let flag = match listing {
        Listing::Endpoint => "--count-url",
        Listing::Slow => "--slow-count-url",
        Listing::Failing => "--fail-count-url",
    };
    let url = session.counter(listing).expect("counted").url();
    Err(Abort::Unusable(format!(
        "{what}, sent once with a fresh key, {moved} at {url}: {flag} must list what this \
         request creates, for the principal of -H, and nothing else may add to it during the \
         check"
    )))
}

/// The request must have succeeded, with a JSON body or none.
fn usable(exchange: &Exchange, what: &str) -> Result<(), Abort> {
    let Some(answer) = exchange.answer() else {
        return Err(Abort::Unusable(format!(
            "{what} got no answer: {}",
            show::summary(exchange)
        )));
    };
    if !answer.succeeded() {
        return Err(Abort::Unusable(unusable(exchange, what)));
    }
    if !answer.body.is_empty()
        && serde_json::from_slice::<serde::de::IgnoredAny>(&answer.body).is_err()
    {
        return Err(Abort::Unusable(format!(
            "{what} was answered {} with a body that is not JSON ({}): idem-check checks JSON \
             APIs, and compares answers as JSON\n{}",
            answer.status.as_u16(),
            answer
                .media_type()
                .unwrap_or_else(|| "no Content-Type".to_owned()),
            show::exchange(exchange)
        )));
    }
    Ok(())
}

/// Why a request that was not answered a 2xx cannot be checked.
fn unusable(exchange: &Exchange, what: &str) -> String {
    format!(
        "{what}, sent with a fresh key, was answered {}: the cases need a request that \
         succeeds; check the URL, the body and the headers (-H)\n{}",
        show::summary(exchange),
        show::exchange(exchange)
    )
}

/// Case 2's body: `--other-body`, or the endpoint's with one member changed.
fn other_body(session: &Session<'_>) -> Result<(Bytes, String), Abort> {
    if let Some(body) = &session.settings.other_body {
        return Ok((body.clone(), "given with --other-body".to_owned()));
    }
    body::other_body(&session.settings.endpoint.body).ok_or_else(|| {
        Abort::Unusable(
            "--body has no number, boolean or string member to change for case 2 (same key, \
             other body): give the other request with --other-body"
                .to_owned(),
        )
    })
}

/// Sends the slow request once: it must succeed, be counted, and take long enough.
async fn slow_baseline(session: &Session<'_>, probe: Probe) -> Result<SlowBaseline, Abort> {
    let what = "the slow request";
    let before = session.read(Listing::Slow).await?;
    let exchange = session.send(probe).await?;
    usable(&exchange, what)?;
    let after = session.read(Listing::Slow).await?;
    let effects = session.effects(Listing::Slow, before, after);
    counted_once(session, Listing::Slow, effects.as_ref(), what)?;
    let took = exchange.elapsed;
    let chosen = session.settings.give_up_after;
    let give_up_after = chosen.unwrap_or(took / 2);
    let long_enough = match chosen {
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
