//! What the preflight and the cases send with: the settings, the wire, the progress line and
//! a counter per listing, and the requests made from the settings (the endpoint's, its slow
//! and failing variants, the second principal's).

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, header};
use idem_client::{IdempotencyKey, KeyForm};

use crate::{
    count::{Counter, Effects},
    exchange::{Exchange, Principal, Probe},
    plan::Listing,
    progress::Progress,
    settings::{KeyStyle, Settings, Variant},
    wire::{Abort, Wire},
};

/// The means to send, shared by the preflight and every case.
#[derive(Debug)]
pub(crate) struct Session<'a> {
    pub(crate) settings: &'a Settings,
    pub(crate) wire: &'a Wire,
    progress: &'a Progress,
    endpoint_counter: Option<Counter>,
    slow_counter: Option<Counter>,
    fail_counter: Option<Counter>,
}

impl<'a> Session<'a> {
    pub(crate) fn new(settings: &'a Settings, wire: &'a Wire, progress: &'a Progress) -> Self {
        let counter = |url: Option<&reqwest::Url>| {
            url.map(|url| Counter::new(url.clone(), settings.endpoint.headers.clone()))
        };
        // A variant at the endpoint's URL creates what the endpoint creates; one elsewhere
        // is counted only by a listing of its own.
        let variant_counter = |variant: &Option<Variant>| {
            let variant = variant.as_ref()?;
            match (&variant.count_url, &variant.url) {
                (Some(url), _) => counter(Some(url)),
                (None, None) => counter(settings.count_url.as_ref()),
                (None, Some(_)) => None,
            }
        };
        Self {
            settings,
            wire,
            progress,
            endpoint_counter: counter(settings.count_url.as_ref()),
            slow_counter: variant_counter(&settings.slow),
            fail_counter: variant_counter(&settings.failing),
        }
    }

    /// The counter of `listing`, if the settings give one.
    pub(crate) fn counter(&self, listing: Listing) -> Option<&Counter> {
        match listing {
            Listing::Endpoint => self.endpoint_counter.as_ref(),
            Listing::Slow => self.slow_counter.as_ref(),
            Listing::Failing => self.fail_counter.as_ref(),
        }
    }

    /// Reads the count of `listing`, when there is one.
    pub(crate) async fn read(&self, listing: Listing) -> Result<Option<usize>, Abort> {
        match self.counter(listing) {
            Some(counter) => counter.read(self.wire).await.map(Some),
            None => Ok(None),
        }
    }

    /// The count of `listing` before and after, when both were read.
    pub(crate) fn effects(
        &self,
        listing: Listing,
        before: Option<usize>,
        after: Option<usize>,
    ) -> Option<Effects> {
        self.counter(listing)?.effects(before, after)
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

    /// The endpoint's request with `key` written in `style`, and its own body.
    pub(crate) fn keyed(&self, style: KeyStyle, key: &IdempotencyKey) -> Probe {
        self.request(
            Some(key_header(style, key)),
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
    pub(crate) fn slow_request(&self, style: KeyStyle, key: &IdempotencyKey) -> Option<Probe> {
        let variant = self.settings.slow.as_ref()?;
        Some(self.variant(variant, style, key))
    }

    /// The failing variant with `key`, if there is one.
    pub(crate) fn failing_request(&self, style: KeyStyle, key: &IdempotencyKey) -> Option<Probe> {
        let variant = self.settings.failing.as_ref()?;
        Some(self.variant(variant, style, key))
    }

    fn variant(&self, variant: &Variant, style: KeyStyle, key: &IdempotencyKey) -> Probe {
        let mut probe = self.keyed(style, key);
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
}

/// A fresh key: one per operation, as a client makes them.
pub(crate) fn fresh_key() -> IdempotencyKey {
    IdempotencyKey::random()
}

/// The header value of `key` in `style`: an sf-string unless keys are bare.
pub(crate) fn key_header(style: KeyStyle, key: &IdempotencyKey) -> HeaderValue {
    match style {
        KeyStyle::SfString | KeyStyle::Both => KeyForm::Quoted.header_value(key),
        KeyStyle::Bare => KeyForm::Bare.header_value(key),
    }
}

/// `headers` with `Content-Type: application/json` unless they name another type.
fn with_json_type(mut headers: HeaderMap) -> HeaderMap {
    headers
        .entry(header::CONTENT_TYPE)
        .or_insert(HeaderValue::from_static("application/json"));
    headers
}
