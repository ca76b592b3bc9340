//! A check from start to end, in one direction: the settings make a plan; the plan says what
//! will be sent; the preflight learns what the cases build on; every case runs in order
//! within the budget it declared (or is skipped with the setting it needs); the report
//! gathers their verdicts.

use tokio::time::Instant;

use crate::{
    cases::{Case, Context, Judgement},
    duration,
    plan::{self, Plan},
    preflight::{self, Baseline},
    progress::Progress,
    session::Session,
    settings::{Settings, SettingsError},
    verdict::{CaseReport, Report},
    wire::{Abort, Wire},
};

/// A check of one endpoint, ready to run.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use idem_check::{Check, Settings, Verdict};
///
/// let mut settings = Settings::post("http://127.0.0.1:3000/payments", r#"{"amount":9800,"currency":"JPY"}"#)?;
/// settings.add_header("Authorization: Bearer alice")?;
/// let check = Check::new(settings)?;
/// eprintln!("{}", check.statement());
/// let report = check.run().await?;
/// for case in &report.cases {
///     println!("{} {} {} ({})", case.name, case.verdict, case.summary, case.basis);
/// }
/// assert!(!report.failed());
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Check {
    settings: Settings,
    plan: Plan,
    progress: bool,
}

impl Check {
    /// A check of what `settings` describe.
    ///
    /// # Errors
    ///
    /// When the settings contradict each other or a body is not JSON.
    pub fn new(settings: Settings) -> Result<Self, SettingsError> {
        settings.validate()?;
        let plan = Plan::of(&settings);
        Ok(Self {
            settings,
            plan,
            progress: false,
        })
    }

    /// Shows a progress line on stderr while the check runs, if stderr is a terminal.
    #[must_use]
    pub fn with_progress(mut self, progress: bool) -> Self {
        self.progress = progress;
        self
    }

    /// What the check will send, to where, within how long: to be said before it runs.
    #[must_use]
    pub fn statement(&self) -> String {
        let endpoint = &self.settings.endpoint;
        let runnable = Case::ALL
            .iter()
            .filter(|case| case.unmet(&self.plan).is_none())
            .count();
        format!(
            "idem-check: {} {}\n  at most {} requests to {} within {}; {runnable} of {} cases \
             can run with these settings",
            endpoint.method,
            endpoint.url,
            self.max_requests(),
            plan::hosts(&self.settings).join(", "),
            duration::show(self.plan.max_time()),
            Case::ALL.len()
        )
    }

    /// The most requests the check sends, count reads included: the preflight's and every
    /// case's budget.
    #[must_use]
    pub fn max_requests(&self) -> usize {
        self.plan.preflight_requests()
            + Case::ALL
                .iter()
                .map(|case| case.budget(&self.plan))
                .sum::<usize>()
    }

    /// Runs the preflight and every case.
    ///
    /// # Errors
    ///
    /// An [`Abort`] when the target cannot be checked (unreachable, not a working JSON
    /// request, a count URL that does not count it) or stops answering, or the check runs out
    /// of its time: then there is no report, since a partial one would read as complete.
    pub async fn run(&self) -> Result<Report, Abort> {
        let started = Instant::now();
        let wire = Wire::new(
            self.max_requests(),
            self.plan.max_time(),
            self.settings.request_timeout,
        );
        let mut progress = if self.progress {
            Progress::on_terminal()
        } else {
            Progress::silent()
        };
        let session = Session::new(&self.settings, &wire, &progress);
        wire.allow(self.plan.preflight_requests());
        let ran = match preflight::run(&session).await {
            Ok(baseline) => self
                .run_cases(&session, &baseline, &progress)
                .await
                .map(|cases| (baseline, cases)),
            Err(abort) => Err(abort),
        };
        progress.finish();
        let (baseline, cases) = ran?;
        Ok(Report {
            target: format!(
                "{} {}",
                self.settings.endpoint.method, self.settings.endpoint.url
            ),
            key_style: baseline.key_style,
            notes: baseline.notes,
            cases,
            requests: wire.sent(),
            elapsed: started.elapsed(),
        })
    }

    /// Every case in order, each within its own budget, under the plan the preflight
    /// settled.
    async fn run_cases(
        &self,
        session: &Session<'_>,
        baseline: &Baseline,
        progress: &Progress,
    ) -> Result<Vec<CaseReport>, Abort> {
        let plan = self.plan.with_key_style(baseline.key_style);
        let mut ctx = Context::new(session, &plan, baseline);
        let mut reports = Vec::with_capacity(Case::ALL.len());
        for (index, case) in Case::ALL.into_iter().enumerate() {
            progress.case(index + 1, Case::ALL.len(), case.name());
            let started = Instant::now();
            let judgement = match case.unmet(&plan) {
                Some(why) => Judgement::skipped(why),
                None => {
                    session.wire.allow(case.budget(&plan));
                    case.run(&mut ctx)
                        .await
                        .map_err(|abort| abort.during(case.name()))?
                }
            };
            let concluded = judgement.conclude(case.basis());
            reports.push(CaseReport {
                name: case.name(),
                title: case.title(),
                verdict: concluded.verdict,
                basis: case.basis(),
                rests_on: case.rests_on(),
                summary: concluded.summary,
                notes: concluded.notes,
                exchanges: concluded.exchanges,
                elapsed: started.elapsed(),
            });
        }
        Ok(reports)
    }
}
