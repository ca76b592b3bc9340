//! What the settings make possible, read once: which requests and listings there are, what
//! a case may need of them ([`Need`]), how many count reads a listing costs, the check's time
//! bound, and the hosts it will talk to. Cases read the plan; the plan knows no case.

use std::time::Duration;

use crate::{
    body, duration,
    settings::{KeyStyle, Settings, Variant},
};

/// The listings a case may count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Listing {
    /// What the endpoint creates (`--count-url`).
    Endpoint,
    /// What the slow request creates (`--slow-count-url`, or `--count-url` for the
    /// endpoint's URL).
    Slow,
    /// What the failing request creates.
    Failing,
}

/// A setting a case cannot run without.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Need {
    /// A request the server takes seconds over (`--slow-url`, `--slow-body`).
    SlowRequest,
    /// A request the server answers 5xx (`--fail-url`, `--fail-body`, `--fail-header`).
    FailingRequest,
    /// A second principal's credentials (`--other-header`).
    SecondPrincipal,
    /// The declared retention, waited out (`--ttl`, `--wait-ttl`).
    WaitedRetention,
    /// Keys sent in the other spelling too (`--key-style both`, or `bare`).
    OtherKeySpelling,
    /// A body that is a JSON object of two members or more.
    ReorderableBody,
}

/// Which cases can run, and what they count.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub(crate) counted: bool,
    pub(crate) slow: bool,
    pub(crate) slow_counted: bool,
    pub(crate) failing: bool,
    pub(crate) fail_counted: bool,
    pub(crate) ttl: Option<Duration>,
    pub(crate) waits_ttl: bool,
    pub(crate) two_principals: bool,
    /// `None` until the preflight has found which spelling the server takes, when the
    /// settings leave it open.
    pub(crate) key_style: Option<KeyStyle>,
    pub(crate) key_required: bool,
    pub(crate) reorderable: bool,
    pub(crate) concurrency: usize,
    max_time: Option<Duration>,
}

/// The check's time bound when `--max-time` is not given: two minutes, two more with a slow
/// request, and the retention and its margin when the check waits it out.
const BASE_TIME: Duration = Duration::from_secs(120);
const SLOW_TIME: Duration = Duration::from_secs(120);

/// The count reads around the part of a case that is counted: one before, one after.
const READS: usize = 2;

impl Plan {
    pub(crate) fn of(settings: &Settings) -> Self {
        let counted = settings.count_url.is_some();
        let variant_counted =
            |variant: &Variant| variant.count_url.is_some() || (variant.url.is_none() && counted);
        Self {
            counted,
            slow: settings.slow.is_some(),
            slow_counted: settings.slow.as_ref().is_some_and(variant_counted),
            failing: settings.failing.is_some(),
            fail_counted: settings.failing.as_ref().is_some_and(variant_counted),
            ttl: settings.ttl,
            waits_ttl: settings.wait_ttl && settings.ttl.is_some(),
            two_principals: !settings.other_headers.is_empty(),
            key_style: settings.key_style,
            key_required: settings.key_required,
            reorderable: body::reordered(&settings.endpoint.body).is_some(),
            concurrency: settings.concurrency,
            max_time: settings.max_time,
        }
    }

    /// The plan once the preflight has settled how keys are written.
    pub(crate) fn with_key_style(&self, style: KeyStyle) -> Self {
        Self {
            key_style: Some(style),
            ..self.clone()
        }
    }

    /// The count reads a counted step of `listing` costs: none without a listing.
    pub(crate) fn reads(&self, listing: Listing) -> usize {
        let counted = match listing {
            Listing::Endpoint => self.counted,
            Listing::Slow => self.slow_counted,
            Listing::Failing => self.fail_counted,
        };
        if counted { READS } else { 0 }
    }

    /// Why a case that needs `need` cannot run with these settings; `None` when it can. An
    /// open key style counts as sf-strings, which leave the other spelling unsent; the
    /// preflight may still settle on bare keys, and then the case runs.
    pub(crate) fn unmet(&self, need: Need) -> Option<String> {
        let why = match need {
            Need::SlowRequest if !self.slow => {
                "needs a request the server takes seconds to answer: --slow-url and/or --slow-body"
                    .to_owned()
            }
            Need::FailingRequest if !self.failing => {
                "needs a request the server answers 5xx: --fail-url, --fail-body and/or \
                 --fail-header (and --on-5xx stored|rerun, as the server declares)"
                    .to_owned()
            }
            Need::SecondPrincipal if !self.two_principals => {
                "needs a second principal's credentials: --other-header 'Authorization: ...'"
                    .to_owned()
            }
            Need::WaitedRetention => match self.ttl {
                None => "needs the retention the server declares: --ttl (and --wait-ttl to \
                         wait it out)"
                    .to_owned(),
                Some(ttl) if !self.waits_ttl => format!(
                    "would wait {} (the TTL and a margin): add --wait-ttl",
                    duration::show(retention_wait(ttl))
                ),
                Some(_) => return None,
            },
            Need::OtherKeySpelling if matches!(self.key_style, None | Some(KeyStyle::SfString)) => {
                "needs keys in the other spelling too: --key-style both (an sf-string, then the \
                 same key bare), or bare (the other way round)"
                    .to_owned()
            }
            Need::ReorderableBody if !self.reorderable => {
                "the body is not a JSON object of two members or more: nothing to reorder"
                    .to_owned()
            }
            _ => return None,
        };
        Some(why)
    }

    /// Whether the requests of a case that needs the other spelling are to be announced:
    /// unless sf-strings were chosen, the preflight may settle on bare keys.
    pub(crate) fn may_spell_keys_both_ways(&self) -> bool {
        self.key_style != Some(KeyStyle::SfString)
    }

    /// The most requests the preflight sends: the endpoint's request (and once more in the
    /// other key spelling, after a refusal), counted; the other body; the slow request,
    /// counted.
    pub(crate) fn preflight_requests(&self) -> usize {
        let first = 2 + self.reads(Listing::Endpoint);
        let other_body = 1;
        let slow = usize::from(self.slow) * (1 + self.reads(Listing::Slow));
        first + other_body + slow
    }

    /// The time bound: `--max-time`, or the default for these settings.
    pub(crate) fn max_time(&self) -> Duration {
        self.max_time.unwrap_or_else(|| {
            let mut bound = BASE_TIME;
            if self.slow {
                bound += SLOW_TIME;
            }
            if let (true, Some(ttl)) = (self.waits_ttl, self.ttl) {
                bound += retention_wait(ttl);
            }
            bound
        })
    }
}

/// How long after its first request the retention case sends the second: the TTL, and a
/// margin of a tenth of it (at most a minute) and a second, for a store that expires keys on
/// a timer.
pub(crate) fn retention_wait(ttl: Duration) -> Duration {
    ttl + (ttl / 10).min(Duration::from_secs(60)) + Duration::from_secs(1)
}

/// The hosts a check talks to, `host:port`, each once, in the order the settings name them.
pub(crate) fn hosts(settings: &Settings) -> Vec<String> {
    let variants = [&settings.slow, &settings.failing]
        .into_iter()
        .flatten()
        .flat_map(|variant| variant.url.iter().chain(variant.count_url.iter()));
    let urls = std::iter::once(&settings.endpoint.url)
        .chain(settings.count_url.as_ref())
        .chain(variants);
    let mut hosts: Vec<String> = Vec::new();
    for url in urls {
        let host = format!(
            "{}:{}",
            url.host_str().unwrap_or_default(),
            url.port_or_known_default().unwrap_or_default()
        );
        if !hosts.contains(&host) {
            hosts.push(host);
        }
    }
    hosts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_retention_wait_has_a_margin() {
        assert_eq!(
            retention_wait(Duration::from_secs(10)),
            Duration::from_secs(12)
        );
        assert_eq!(
            retention_wait(Duration::from_secs(86_400)),
            Duration::from_secs(86_461)
        );
    }

    #[test]
    fn needs_name_the_flag_that_meets_them() {
        let mut settings = Settings::post("http://h/x", r#"{"a":1}"#).unwrap();
        let plan = Plan::of(&settings);
        assert!(
            plan.unmet(Need::SlowRequest)
                .unwrap()
                .contains("--slow-url")
        );
        assert!(plan.unmet(Need::ReorderableBody).is_some());
        assert!(plan.unmet(Need::OtherKeySpelling).is_some());
        assert!(
            plan.with_key_style(KeyStyle::Bare)
                .unmet(Need::OtherKeySpelling)
                .is_none()
        );
        settings.ttl = Some(Duration::from_secs(10));
        assert!(
            Plan::of(&settings)
                .unmet(Need::WaitedRetention)
                .unwrap()
                .contains("would wait 12.0 s")
        );
        settings.wait_ttl = true;
        assert!(Plan::of(&settings).unmet(Need::WaitedRetention).is_none());
    }
}
