//! What every case works with: the settings, the wire, the counters, what the preflight
//! learnt, and the refusals met so far (for the Problem Details case).

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, header};
use idem_client::{IdempotencyKey, KeyForm};

use crate::{
    cases::Case,
    count::{Counter, Effects},
    progress::Progress,
    settings::{KeyStyle, Settings, Variant},
    wire::{Abort, Exchange, Principal, Probe, Wire},
};

/// What the preflight learnt, for the cases to build on.
#[derive(Debug)]
pub(crate) struct Baseline {
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

/// Everything a case needs.
#[derive(Debug)]
pub(crate) struct Context<'a> {
    pub(crate) settings: &'a Settings,
    pub(crate) wire: &'a Wire,
    pub(crate) progress: &'a Progress,
    pub(crate) counter: Option<Counter>,
    pub(crate) slow_counter: Option<Counter>,
    pub(crate) fail_counter: Option<Counter>,
    /// What the preflight learnt; set before any case runs.
    pub(crate) baseline: Option<Baseline>,
    /// Every 400, 409 and 422 met so far, with the case that met it.
    pub(crate) refusals: Vec<(Case, Exchange)>,
    /// Whether the server marks its replays `Idempotent-Replayed: true` (case 1 learns it):
    /// then an unmarked answer identical to an earlier one is a run of its own.
    pub(crate) marks_replays: bool,
}

impl<'a> Context<'a> {
    /// A context for `settings`, before the preflight.
    pub(crate) fn new(settings: &'a Settings, wire: &'a Wire, progress: &'a Progress) -> Self {
        let endpoint_counter = |url: &Option<reqwest::Url>| {
            url.clone()
                .map(|url| Counter::new(url, settings.endpoint.headers.clone()))
        };
        let variant_counter = |variant: &Option<Variant>| {
            let variant = variant.as_ref()?;
            match (&variant.count_url, &variant.url) {
                (Some(url), _) => endpoint_counter(&Some(url.clone())),
                (None, None) => endpoint_counter(&settings.count_url),
                (None, Some(_)) => None,
            }
        };
        Self {
            settings,
            wire,
            progress,
            counter: endpoint_counter(&settings.count_url),
            slow_counter: variant_counter(&settings.slow),
            fail_counter: variant_counter(&settings.failing),
            baseline: None,
            refusals: Vec::new(),
            marks_replays: false,
        }
    }

    /// What the preflight learnt.
    pub(crate) fn baseline(&self) -> &Baseline {
        self.baseline
            .as_ref()
            .expect("the preflight runs before the cases")
    }

    /// A fresh key: one per operation, as a client makes them.
    pub(crate) fn fresh_key() -> IdempotencyKey {
        IdempotencyKey::random()
    }

    /// The header value of `key` in the style the settings ask for.
    pub(crate) fn key_header(&self, key: &IdempotencyKey) -> HeaderValue {
        match self.settings.key_style {
            KeyStyle::SfString | KeyStyle::Both => KeyForm::Quoted.header_value(key),
            KeyStyle::Bare => KeyForm::Bare.header_value(key),
        }
    }

    /// The endpoint's request with `key` (a header value, or none) and `body`.
    pub(crate) fn request(&self, key: Option<HeaderValue>, body: Bytes) -> Probe {
        let endpoint = &self.settings.endpoint;
        Probe {
            method: endpoint.method.clone(),
            url: endpoint.url.clone(),
            headers: with_json_type(endpoint.headers.clone()),
            key,
            body: Some(body),
            principal: Principal::First,
            give_up_after: None,
        }
    }

    /// The endpoint's request with `key` and its own body.
    pub(crate) fn keyed(&self, key: &IdempotencyKey) -> Probe {
        self.request(
            Some(self.key_header(key)),
            self.settings.endpoint.body.clone(),
        )
    }

    /// The same request as the second principal: their headers replace the first's.
    pub(crate) fn as_second_principal(&self, mut probe: Probe) -> Probe {
        for (name, value) in &self.settings.other_headers {
            probe.headers.insert(name, value.clone());
        }
        probe.principal = Principal::Second;
        probe
    }

    /// The slow variant with `key`, if there is one.
    pub(crate) fn slow_request(&self, key: &IdempotencyKey) -> Option<Probe> {
        let variant = self.settings.slow.as_ref()?;
        Some(self.variant(variant, key))
    }

    /// The failing variant with `key`, if there is one.
    pub(crate) fn failing_request(&self, key: &IdempotencyKey) -> Option<Probe> {
        let variant = self.settings.failing.as_ref()?;
        Some(self.variant(variant, key))
    }

    fn variant(&self, variant: &Variant, key: &IdempotencyKey) -> Probe {
        let mut probe = self.keyed(key);
        if let Some(url) = &variant.url {
            probe.url = url.clone();
        }
        if let Some(body) = &variant.body {
            probe.body = Some(body.clone());
        }
        for (name, value) in &variant.headers {
            probe.headers.insert(name, value.clone());
        }
        probe
    }

    /// Sends `probe`, showing what the check waits for.
    pub(crate) async fn send(&self, probe: Probe) -> Result<Exchange, Abort> {
        self.progress.waiting_for(&probe);
        let exchange = self.wire.send(probe).await;
        self.progress.answered();
        exchange
    }

    /// Sleeps, showing why.
    pub(crate) async fn sleep(&self, duration: Duration, why: &str) -> Result<(), Abort> {
        self.progress.sleeping(duration, why);
        let slept = self.wire.sleep(duration).await;
        self.progress.answered();
        slept
    }

    /// Reads `counter`, when there is one.
    pub(crate) async fn read(&self, counter: Option<&Counter>) -> Result<Option<usize>, Abort> {
        match counter {
            Some(counter) => counter.read(self.wire).await.map(Some),
            None => Ok(None),
        }
    }

    /// Keeps a 400, 409 or 422 for the Problem Details case.
    pub(crate) fn keep_refusal(&mut self, case: Case, exchange: &Exchange) {
        if exchange
            .status()
            .is_some_and(|status| matches!(status.as_u16(), 400 | 409 | 422))
        {
            self.refusals.push((case, exchange.clone()));
        }
    }
}

/// The count before and after, when both were read.
pub(crate) fn effects(before: Option<usize>, after: Option<usize>) -> Option<Effects> {
    Some(Effects {
        before: before?,
        after: after?,
    })
}

/// `headers` with `Content-Type: application/json` unless they name another type.
fn with_json_type(mut headers: HeaderMap) -> HeaderMap {
    headers
        .entry(header::CONTENT_TYPE)
        .or_insert(HeaderValue::from_static("application/json"));
    headers
}
