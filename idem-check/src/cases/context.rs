//! What every case works with: the session to send with, the plan, what the preflight
//! learnt, and what earlier cases met (the refusals, for the Problem Details case; whether
//! the server marks its replays).

use std::time::Duration;

use bytes::Bytes;
use http::HeaderValue;
use idem_client::IdempotencyKey;

use crate::{
    count::Effects,
    exchange::{Exchange, Probe},
    plan::{Listing, Plan},
    preflight::{Baseline, SlowBaseline},
    session::{self, Session},
    settings::KeyStyle,
    wire::Abort,
};

/// Everything a case needs.
#[derive(Debug)]
pub(crate) struct Context<'a> {
    pub(crate) session: &'a Session<'a>,
    pub(crate) plan: &'a Plan,
    pub(crate) baseline: &'a Baseline,
    /// Every 400, 409 and 422 met so far, with where it was met (a case's name).
    pub(crate) refusals: Vec<(&'static str, Exchange)>,
    /// Whether the server marks its replays `Idempotent-Replayed: true` (case 1 learns it):
    /// then an unmarked answer identical to an earlier one is a run of its own.
    pub(crate) marks_replays: bool,
}

impl<'a> Context<'a> {
    /// A context for the cases, once the preflight has learnt `baseline`.
    pub(crate) fn new(session: &'a Session<'a>, plan: &'a Plan, baseline: &'a Baseline) -> Self {
        let refusals = baseline
            .refusal
            .iter()
            .map(|exchange| ("the preflight", exchange.clone()))
            .collect();
        Self {
            session,
            plan,
            baseline,
            refusals,
            marks_replays: false,
        }
    }

    /// How keys are written.
    pub(crate) fn key_style(&self) -> KeyStyle {
        self.baseline.key_style
    }

    /// The body of the endpoint's request.
    pub(crate) fn body(&self) -> Bytes {
        self.session.settings.endpoint.body.clone()
    }

    /// The header value of `key` in the style keys are written in.
    pub(crate) fn key_header(&self, key: &IdempotencyKey) -> HeaderValue {
        session::key_header(self.key_style(), key)
    }

    /// The endpoint's request with `key` (a header value, or none) and `body`.
    pub(crate) fn request(&self, key: Option<HeaderValue>, body: Bytes) -> Probe {
        self.session.request(key, body)
    }

    /// The endpoint's request with `key` and its own body.
    pub(crate) fn keyed(&self, key: &IdempotencyKey) -> Probe {
        self.session.keyed(self.key_style(), key)
    }

    /// The slow request with `key`; only for a case that needs it.
    pub(crate) fn slow_request(&self, key: &IdempotencyKey) -> Probe {
        self.session
            .slow_request(self.key_style(), key)
            .expect("a case that needs the slow request runs only with one")
    }

    /// How the slow request behaved in the preflight; only for a case that needs it.
    pub(crate) fn slow(&self) -> SlowBaseline {
        self.baseline
            .slow
            .expect("a case that needs the slow request runs only with one")
    }

    /// The failing request with `key`; only for a case that needs it.
    pub(crate) fn failing_request(&self, key: &IdempotencyKey) -> Probe {
        self.session
            .failing_request(self.key_style(), key)
            .expect("a case that needs the failing request runs only with one")
    }

    /// Sends `probe`.
    pub(crate) async fn send(&self, probe: Probe) -> Result<Exchange, Abort> {
        self.session.send(probe).await
    }

    /// Sleeps, showing why.
    pub(crate) async fn sleep(&self, duration: Duration, why: &str) -> Result<(), Abort> {
        self.session.sleep(duration, why).await
    }

    /// Reads the count of `listing`, when there is one.
    pub(crate) async fn read(&self, listing: Listing) -> Result<Option<usize>, Abort> {
        self.session.read(listing).await
    }

    /// The count of `listing` before and after, when both were read.
    pub(crate) fn effects(
        &self,
        listing: Listing,
        before: Option<usize>,
        after: Option<usize>,
    ) -> Option<Effects> {
        self.session.effects(listing, before, after)
    }

    /// Keeps a 400, 409 or 422 met by the case `name` for the Problem Details case.
    pub(crate) fn keep_refusal(&mut self, name: &'static str, exchange: &Exchange) {
        if exchange
            .status()
            .is_some_and(|status| matches!(status.as_u16(), 400 | 409 | 422))
        {
            self.refusals.push((name, exchange.clone()));
        }
    }
}
