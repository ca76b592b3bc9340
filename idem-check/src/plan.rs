//! What a check will do, said before it does it: how many requests at most, to which hosts,
//! within how long. The wire enforces both bounds.

use std::time::Duration;

use crate::{
    cases::Case,
    duration,
    settings::{KeyStyle, Settings, Variant},
};

/// Which cases can run, and what they count.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub(crate) counted: bool,
    pub(crate) slow: bool,
    pub(crate) slow_counted: bool,
    pub(crate) failing: bool,
    pub(crate) fail_counted: bool,
    pub(crate) waits_ttl: bool,
    pub(crate) two_principals: bool,
    pub(crate) both_key_forms: bool,
    pub(crate) concurrency: usize,
}

/// The check's time bound when `--max-time` is not given: two minutes, two more with a slow
/// request, and the retention and its margin when the check waits it out.
const BASE_TIME: Duration = Duration::from_secs(120);
const SLOW_TIME: Duration = Duration::from_secs(120);

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
            waits_ttl: settings.wait_ttl && settings.ttl.is_some(),
            two_principals: !settings.other_headers.is_empty(),
            both_key_forms: settings.key_style == KeyStyle::Both,
            concurrency: settings.concurrency,
        }
    }

    /// The requests of the preflight: the count around the first request, the other body
    /// under a fresh key, the slow request and its count.
    fn preflight_requests(&self) -> usize {
        let reads = |counted: bool| if counted { 2 } else { 0 };
        2 + reads(self.counted) + usize::from(self.slow) * (1 + reads(self.slow_counted))
    }

    /// The most requests the check sends, count reads included.
    pub(crate) fn max_requests(&self) -> usize {
        self.preflight_requests()
            + Case::ALL
                .iter()
                .map(|case| case.max_requests(self))
                .sum::<usize>()
    }

    /// The cases that will run, as far as the settings tell.
    pub(crate) fn runnable(&self) -> usize {
        Case::ALL
            .iter()
            .filter(|case| match case {
                Case::InFlight | Case::TimeoutRetry => self.slow,
                Case::Retention => self.waits_ttl,
                Case::ServerError => self.failing,
                Case::Scope => self.two_principals,
                Case::KeyForms => self.both_key_forms,
                _ => true,
            })
            .count()
    }

    /// The time bound: `--max-time`, or the default for these settings.
    pub(crate) fn max_time(&self, settings: &Settings) -> Duration {
        settings.max_time.unwrap_or_else(|| {
            let mut bound = BASE_TIME;
            if self.slow {
                bound += SLOW_TIME;
            }
            if let (true, Some(ttl)) = (self.waits_ttl, settings.ttl) {
                bound += ttl + crate::cases::retention_margin(ttl);
            }
            bound
        })
    }

    /// What the check is about to do, in two lines.
    pub(crate) fn statement(&self, settings: &Settings) -> String {
        let endpoint = &settings.endpoint;
        let mut hosts: Vec<String> = Vec::new();
        let urls = std::iter::once(&endpoint.url)
            .chain(settings.count_url.as_ref())
            .chain(variant_urls(settings));
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
        format!(
            "idem-check: {} {}\n  at most {} requests to {} within {}; {} of {} cases can run \
             with these settings",
            endpoint.method,
            endpoint.url,
            self.max_requests(),
            hosts.join(", "),
            duration::show(self.max_time(settings)),
            self.runnable(),
            Case::ALL.len()
        )
    }
}

fn variant_urls(settings: &Settings) -> impl Iterator<Item = &reqwest::Url> {
    [&settings.slow, &settings.failing]
        .into_iter()
        .flatten()
        .flat_map(|variant| variant.url.iter().chain(variant.count_url.iter()))
}
