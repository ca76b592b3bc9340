//! The cases: the article's seven, and eight more on the draft's rules for keys, scopes and
//! errors. Each case's module declares, once, what it is ([`About`]: its name, title, what
//! its verdict rests on and the settings it needs), the most requests it sends
//! (`budget`), and how it runs: a function of the [`Context`] that sends its requests, reads
//! the counts, and returns a [`Judgement`]. [docs/check.md](https://github.com/idem-rs/idem/blob/main/docs/check.md) says, for each, what it sends and
//! how it decides.

mod bad_key;
mod concurrent;
mod context;
mod expect;
mod in_flight;
mod judgement;
mod key_forms;
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

pub(crate) use self::{context::Context, judgement::Judgement};
use crate::{
    plan::{Need, Plan},
    verdict::Basis,
    wire::Abort,
};

/// What a case is, declared once in its module.
#[derive(Debug)]
pub(crate) struct About {
    /// The stable name, as the reports print it.
    pub(crate) name: &'static str,
    /// What the case checks, in a few words.
    pub(crate) title: &'static str,
    /// What its verdict rests on.
    pub(crate) basis: Basis,
    /// The rule, in a few words, with where it is written.
    pub(crate) rests_on: &'static str,
    /// The settings it cannot run without.
    pub(crate) needs: &'static [Need],
}

/// A case, by its stable name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Case {
    /// 1. The same key and body twice: the same answer, one effect.
    Replay,
    /// 2. The same key with another body: 422, no effect.
    OtherBody,
    /// 3. A retry while the first is running: 409 or the first's result, one execution.
    InFlight,
    /// 4. No key: 400 where a key is required; two operations where it is not.
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
    /// `"k"` and `k`: one key or two, and which reading the server takes.
    KeyForms,
    /// A GET with a key is not intercepted.
    SafeMethod,
    /// The same body with its members reordered is the same request.
    ReorderedJson,
    /// Every 400, 409 and 422 met points to what went wrong (Problem Details).
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

    pub(crate) fn about(self) -> &'static About {
        match self {
            Self::Replay => &replay::ABOUT,
            Self::OtherBody => &other_body::ABOUT,
            Self::InFlight => &in_flight::ABOUT,
            Self::NoKey => &no_key::ABOUT,
            Self::TimeoutRetry => &timeout_retry::ABOUT,
            Self::Retention => &retention::ABOUT,
            Self::ServerError => &server_error::ABOUT,
            Self::Concurrent => &concurrent::ABOUT,
            Self::Scope => &scope::ABOUT,
            Self::MalformedKey => &bad_key::MALFORMED,
            Self::LongKey => &bad_key::LONG,
            Self::KeyForms => &key_forms::ABOUT,
            Self::SafeMethod => &safe_method::ABOUT,
            Self::ReorderedJson => &reordered::ABOUT,
            Self::ProblemDetails => &problem_details::ABOUT,
        }
    }

    /// The stable name, as the reports print it.
    #[must_use]
    pub fn name(self) -> &'static str {
        self.about().name
    }

    /// What the case checks, in a few words.
    #[must_use]
    pub fn title(self) -> &'static str {
        self.about().title
    }

    /// What the case's verdict rests on: a MUST or a SHOULD of the draft, or what the user
    /// declared.
    #[must_use]
    pub fn basis(self) -> Basis {
        self.about().basis
    }

    /// The rule the case's verdict rests on, in a few words, with where it is written.
    #[must_use]
    pub fn rests_on(self) -> &'static str {
        self.about().rests_on
    }

    /// Why the case cannot run under `plan`, naming the setting that would run it; `None`
    /// when it can.
    pub(crate) fn unmet(self, plan: &Plan) -> Option<String> {
        self.about().needs.iter().find_map(|need| plan.unmet(*need))
    }

    /// The most requests the case sends under `plan`, count reads included; none when it
    /// cannot run.
    pub(crate) fn budget(self, plan: &Plan) -> usize {
        let needs = self.about().needs;
        let may_run = needs.iter().all(|need| match need {
            // The preflight may still settle on bare keys, and then the case runs.
            Need::OtherKeySpelling => plan.may_spell_keys_both_ways(),
            need => plan.unmet(*need).is_none(),
        });
        if !may_run {
            return 0;
        }
        match self {
            Self::Replay => replay::budget(plan),
            Self::OtherBody => other_body::budget(plan),
            Self::InFlight => in_flight::budget(plan),
            Self::NoKey => no_key::budget(plan),
            Self::TimeoutRetry => timeout_retry::budget(plan),
            Self::Retention => retention::budget(plan),
            Self::ServerError => server_error::budget(plan),
            Self::Concurrent => concurrent::budget(plan),
            Self::Scope => scope::budget(plan),
            Self::MalformedKey | Self::LongKey => bad_key::budget(plan),
            Self::KeyForms => key_forms::budget(plan),
            Self::SafeMethod => safe_method::budget(plan),
            Self::ReorderedJson => reordered::budget(plan),
            Self::ProblemDetails => problem_details::budget(plan),
        }
    }

    /// Runs the case; the check has made sure that what it needs is there.
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
            Self::MalformedKey => bad_key::malformed(ctx).await,
            Self::LongKey => bad_key::long(ctx).await,
            Self::KeyForms => key_forms::run(ctx).await,
            Self::SafeMethod => safe_method::run(ctx).await,
            Self::ReorderedJson => reordered::run(ctx).await,
            Self::ProblemDetails => Ok(problem_details::run(ctx)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_case_is_named_once() {
        let mut names: Vec<&str> = Case::ALL.iter().map(|case| case.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Case::ALL.len());
    }
}
