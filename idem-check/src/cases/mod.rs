//! The cases: the article's seven, then the draft's rules on keys, scopes and errors. Each
//! case is a function of the [`Context`] that sends its requests, reads the counts, and
//! returns a [`Judgement`]; `docs/check.md` says, for each, what it sends and how it decides.

mod concurrent;
pub(crate) mod context;
mod expect;
mod in_flight;
mod judgement;
mod keys;
mod no_key;
mod other_body;
mod pair;
mod problem_details;
mod reordered;
mod replay;
mod retention;
mod safe_method;
mod scope;
mod server_error;
mod timeout_retry;

pub(crate) use self::{
    context::{Baseline, Context, SlowBaseline},
    judgement::Judgement,
    retention::margin as retention_margin,
};
use crate::wire::Abort;

/// A case, by its stable name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Case {
    /// 1. The same key and body twice: the same answer, one effect.
    Replay,
    /// 2. The same key with another body: 422, no effect.
    OtherBody,
    /// 3. A retry while the first is running: 409 or the first's result, one execution.
    InFlight,
    /// 4. No key: 400 where a key is required.
    NoKey,
    /// 5. The client gives up, then retries: the first result, one effect.
    TimeoutRetry,
    /// 6. After the retention period: a new request.
    Retention,
    /// 7. After a 5xx: replayed or run again, as declared.
    ServerError,
    /// N requests with one key at once: one effect.
    Concurrent,
    /// The same key from another principal: never the first principal's answer.
    Scope,
    /// A malformed key: 400, not 500.
    MalformedKey,
    /// An over-long key: 400, not 500.
    LongKey,
    /// `"k"` and `k` name the same key (`--key-style both`).
    KeyForms,
    /// A GET with a key is not intercepted.
    SafeMethod,
    /// The same body with its members reordered is the same request.
    ReorderedJson,
    /// Every 400, 409 and 422 met is RFC 9457 Problem Details.
    ProblemDetails,
}

impl Case {
    /// Every case, in the order they run and are reported.
    pub const ALL: [Self; 15] = [
        Self::Replay,
        Self::OtherBody,
        Self::InFlight,
        Self::NoKey,
        Self::TimeoutRetry,
        Self::Retention,
        Self::ServerError,
        Self::Concurrent,
        Self::Scope,
        Self::MalformedKey,
        Self::LongKey,
        Self::KeyForms,
        Self::SafeMethod,
        Self::ReorderedJson,
        Self::ProblemDetails,
    ];

    /// The stable name, as the reports print it.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Replay => "replay",
            Self::OtherBody => "other-body",
            Self::InFlight => "in-flight",
            Self::NoKey => "no-key",
            Self::TimeoutRetry => "timeout-retry",
            Self::Retention => "retention",
            Self::ServerError => "server-error",
            Self::Concurrent => "concurrent",
            Self::Scope => "scope",
            Self::MalformedKey => "malformed-key",
            Self::LongKey => "long-key",
            Self::KeyForms => "key-forms",
            Self::SafeMethod => "safe-method",
            Self::ReorderedJson => "reordered-json",
            Self::ProblemDetails => "problem-details",
        }
    }

    /// What the case checks, in a few words.
    #[must_use]
    pub fn title(self) -> &'static str {
        match self {
            Self::Replay => "same key, same body, twice",
            Self::OtherBody => "same key, other body",
            Self::InFlight => "a retry while the first is running",
            Self::NoKey => "no key",
            Self::TimeoutRetry => "the client gives up, then retries",
            Self::Retention => "a retry after the retention period",
            Self::ServerError => "a retry after a 5xx",
            Self::Concurrent => "simultaneous requests with one key",
            Self::Scope => "the same key from another principal",
            Self::MalformedKey => "a malformed key",
            Self::LongKey => "an over-long key",
            Self::KeyForms => "\"k\" and k name one key",
            Self::SafeMethod => "a GET with a key",
            Self::ReorderedJson => "reordered JSON members",
            Self::ProblemDetails => "Problem Details on 400, 409, 422",
        }
    }

    /// Runs the case.
    pub(crate) async fn run(self, ctx: &mut Context<'_>) -> Result<Judgement, Abort> {
        match self {
            Self::Replay => replay::run(ctx).await,
            Self::OtherBody => other_body::run(ctx).await,
            Self::InFlight => in_flight::run(ctx).await,
            Self::NoKey => no_key::run(ctx).await,
            Self::TimeoutRetry => timeout_retry::run(ctx).await,
            Self::Retention => retention::run(ctx).await,
            Self::ServerError => server_error::run(ctx).await,
            Self::Concurrent => concurrent::run(ctx).await,
            Self::Scope => scope::run(ctx).await,
            Self::MalformedKey => keys::malformed(ctx).await,
            Self::LongKey => keys::long(ctx).await,
            Self::KeyForms => keys::forms(ctx).await,
            Self::SafeMethod => safe_method::run(ctx).await,
            Self::ReorderedJson => reordered::run(ctx).await,
            Self::ProblemDetails => Ok(problem_details::run(ctx)),
        }
    }

    /// The most requests the case sends (count reads included) under `plan`.
    pub(crate) fn max_requests(self, plan: &crate::plan::Plan) -> usize {
        let counts = |reads: usize, counted: bool| if counted { reads } else { 0 };
        match self {
            Self::Replay => 1 + counts(2, plan.counted),
            Self::OtherBody | Self::ReorderedJson => 2 + counts(2, plan.counted),
            Self::InFlight if plan.slow => 3 + counts(2, plan.slow_counted),
            Self::TimeoutRetry if plan.slow => {
                1 + timeout_retry::MAX_RETRIES + counts(2, plan.slow_counted)
            }
            Self::NoKey => 1 + counts(2, plan.counted),
            Self::Retention if plan.waits_ttl => 2 + counts(2, plan.counted),
            Self::ServerError if plan.failing => 2 + counts(2, plan.fail_counted),
            Self::Concurrent => plan.concurrency + counts(2, plan.counted),
            Self::Scope if plan.two_principals => 2 + counts(2, plan.counted),
            Self::MalformedKey | Self::LongKey => 1,
            Self::KeyForms if plan.both_key_forms => 2 + counts(2, plan.counted),
            Self::SafeMethod => 2,
            _ => 0,
        }
    }
}
