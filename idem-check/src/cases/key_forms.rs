//! Case 12, the key's two spellings. The draft's key is an sf-string: `"k"` is the key k,
//! and a bare `k` is no sf-string at all. Stripe's keys are bare, and many servers read the
//! header as an opaque string, to which `"k"` and `k` are two keys. Both readings give a
//! client that resends its own bytes the right answer; they part only for a client (or a
//! library, or a proxy) that changes the spelling between retries. So the case says which
//! reading the server takes, and warns where a client could be surprised: it never fails.
//!
//! Under `--key-style both` it sends a key as an sf-string, then the same key bare; under
//! `--key-style bare` (or when the preflight found that the server takes bare keys only),
//! the other way round.

use idem_client::KeyForm;

use crate::{
    cases::{
        About, Context, Judgement, expect,
        pair::{self, Pair},
    },
    exchange::Answer,
    plan::{Listing, Need, Plan},
    session::fresh_key,
    settings::KeyStyle,
    verdict::Basis,
    wire::Abort,
};

pub(super) const ABOUT: About = About {
    name: "key-forms",
    title: "\"k\" and k: one key or two",
    basis: Basis::DraftShould,
    rests_on: "the draft's syntax: the key is an sf-string, \"k\" holds k, and a bare k is no \
               sf-string; what a server does with another spelling is its reading to choose",
    needs: &[Need::OtherKeySpelling],
};

/// A pair, counted.
pub(super) fn budget(plan: &Plan) -> usize {
    pair::REQUESTS + plan.reads(Listing::Endpoint)
}

/// The two spellings, in the order they are sent.
#[derive(Clone, Copy, Debug)]
enum Order {
    /// The draft's sf-string, then bare.
    QuotedFirst,
    /// Bare, then the draft's sf-string.
    BareFirst,
}

pub(super) async fn run(ctx: &mut Context<'_>) -> Result<Judgement, Abort> {
    let order = match ctx.key_style() {
        KeyStyle::Bare => Order::BareFirst,
        KeyStyle::SfString | KeyStyle::Both => Order::QuotedFirst,
    };
    let key = fresh_key();
    let (first, second) = match order {
        Order::QuotedFirst => (KeyForm::Quoted, KeyForm::Bare),
        Order::BareFirst => (KeyForm::Bare, KeyForm::Quoted),
    };
    let request = |form: KeyForm| ctx.request(Some(form.header_value(&key)), ctx.body());
    let requests = (request(first), request(second));
    let shown = |form: KeyForm| match form {
        KeyForm::Quoted => format!("\"{}\"", short(key.as_str())),
        _ => short(key.as_str()),
    };
    let spellings = format!("{} then {}", shown(first), shown(second));
    let mut judgement = Judgement::default();
    let Some(pair) = Pair::send(ctx, ABOUT.name, &mut judgement, requests, None).await? else {
        return Ok(judgement);
    };
    if let Some(answer) = pair.second_answer(&mut judgement, "the other spelling") {
        judge(&mut judgement, &pair, answer, order, &spellings);
    }
    Ok(judgement)
}

/// Judges the answer to the other spelling of a used key.
fn judge(judgement: &mut Judgement, pair: &Pair, answer: &Answer, order: Order, spellings: &str) {
    let counted = expect::counted(pair.effects.as_ref());
    let new_effect = pair
        .effects
        .as_ref()
        .is_some_and(|effects| effects.new_effects() > 0);
    let status = answer.status.as_u16();
    let same = expect::same_answer(&pair.first, answer);
    if answer.succeeded() && same && !new_effect {
        judgement.pass(format!(
            "{spellings}: the second got the first's answer, so both spellings name one \
             key{counted}"
        ));
        return;
    }
    if answer.succeeded() {
        judgement.warn(format!(
            "{spellings}: the second ran as a new request ({status}{}): the server reads the \
             header as an opaque string, to which the two spellings are two keys; a client \
             that resends its own bytes gets the right answer, but one that changes the \
             spelling between retries (to the draft's sf-string, or from it) runs the \
             operation twice",
            pair.effects
                .as_ref()
                .map_or_else(String::new, |effects| format!(", {}", effects.shown()))
        ));
        return;
    }
    match (order, answer.status.is_client_error()) {
        (Order::QuotedFirst, true) => {
            judgement.pass(format!(
                "{spellings}: the bare key was refused ({status}), as the draft's syntax has it: \
                 only an sf-string is a key{counted}"
            ));
            judgement.note(
                "a client that sends bare keys (as Stripe's do) is refused, and learns to send \
                 sf-strings",
            );
        }
        (Order::BareFirst, true) => judgement.warn(format!(
            "{spellings}: the draft's own spelling, an sf-string, was refused ({status}): a \
             client that follows the draft cannot use this server"
        )),
        (_, false) => judgement.warn(format!(
            "{spellings}: the other spelling was answered {status}: a spelling the server does \
             not take is a request the client must correct, to be refused with 400"
        )),
    }
}

fn short(key: &str) -> String {
    format!("{}…", &key[..8.min(key.len())])
}
