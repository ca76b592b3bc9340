//! A GET with a key is not intercepted: safe methods are idempotent already, so a key on one
//! is ignored. The GET goes to the count URL when there is one (a listing answers GET), else
//! to the endpoint's URL; it is sent without a key and with case 1's key, which a POST has
//! used, and the two answers are compared.

use crate::{
    cases::{About, Context, Judgement, expect},
    exchange::{Answer, Probe},
    plan::Plan,
    show,
    verdict::Basis,
    wire::Abort,
};

pub(super) const ABOUT: About = About {
    name: "safe-method",
    title: "a GET with a key",
    basis: Basis::DraftShould,
    rests_on: "the draft makes non-idempotent methods (POST, PATCH) fault-tolerant; a GET is \
               safe already (RFC 9110), and a key on it has nothing to guard",
    needs: &[],
};

/// A GET without a key and with one.
pub(super) fn budget(_: &Plan) -> usize {
    2
}

pub(super) async fn run(ctx: &mut Context<'_>) -> Result<Judgement, Abort> {
    let settings = ctx.session.settings;
    let url = settings
        .count_url
        .clone()
        .unwrap_or_else(|| settings.endpoint.url.clone());
    let get = Probe::get(url, settings.endpoint.headers.clone());
    let plain = ctx.send(get.clone()).await?;
    let keyed = ctx
        .send(Probe {
            key: Some(ctx.key_header(&ctx.baseline.key)),
            ..get
        })
        .await?;
    let mut judgement = Judgement::of([plain.clone(), keyed.clone()]);
    let post = ctx.baseline.first.answer().expect("the preflight's answer");
    match (plain.answer(), keyed.answer()) {
        (Some(without), Some(with)) => judge(&mut judgement, post, without, with),
        _ => judgement.defect(format!(
            "a GET got no answer: {} without a key, {} with one",
            show::summary(&plain),
            show::summary(&keyed)
        )),
    }
    Ok(judgement)
}

/// Judges the GET with a key (`with`) against the same GET without (`without`), knowing the
/// POST's answer under that key.
fn judge(judgement: &mut Judgement, post: &Answer, without: &Answer, with: &Answer) {
    let (status, plain_status) = (with.status.as_u16(), without.status.as_u16());
    let got_the_post = expect::same_answer(post, with) && !expect::same_answer(post, without);
    if with.is_replayed() || got_the_post {
        judgement.defect(
            "a GET with a key that a POST had used got the POST's stored answer: the key was \
             looked up for a safe method",
        );
    } else if status != plain_status && matches!(status, 400 | 409 | 422) {
        judgement.defect(format!(
            "a GET with a key was answered {status}, and {plain_status} without one: the \
             idempotency check intercepted a safe method"
        ));
    } else if status != plain_status {
        judgement.warn(format!(
            "a GET was answered {plain_status} without a key and {status} with one"
        ));
    } else {
        judgement.pass(format!(
            "GET answered {status} with and without a key, not replayed"
        ));
    }
}
