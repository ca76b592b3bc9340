//! A check from start to end: the statement of what it will send, the preflight, every case
//! in order, and the report.

use tokio::time::Instant;

use crate::{
    cases::{Case, Context},
    plan::Plan,
    preflight,
    progress::Progress,
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
///     println!("{} {} {}", case.name, case.verdict, case.summary);
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
        self.plan.statement(&self.settings)
    }

    /// The most requests the check sends, count reads included.
    #[must_use]
    pub fn max_requests(&self) -> usize {
        self.plan.max_requests()
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
            self.plan.max_requests(),
            self.plan.max_time(&self.settings),
            self.settings.request_timeout,
        );
        let mut progress = if self.progress {
            Progress::on_terminal()
        } else {
            Progress::silent()
        };
        let cases = self.run_cases(&wire, &progress).await;
        progress.finish();
        Ok(Report {
            target: format!(
                "{} {}",
                self.settings.endpoint.method, self.settings.endpoint.url
            ),
            cases: cases?,
            requests: wire.sent(),
            elapsed: started.elapsed(),
        })
    }

    async fn run_cases(&self, wire: &Wire, progress: &Progress) -> Result<Vec<CaseReport>, Abort> {
        let mut ctx = Context::new(&self.settings, wire, progress);
        ctx.baseline = Some(preflight::run(&ctx).await?);
        let mut reports = Vec::with_capacity(Case::ALL.len());
        for (index, case) in Case::ALL.into_iter().enumerate() {
            progress.case(index + 1, Case::ALL.len(), case.name());
            let started = Instant::now();
            let judgement = case
                .run(&mut ctx)
                .await
                .map_err(|abort| abort.during(case.name()))?;
            let (verdict, summary, notes, exchanges) = judgement.conclude();
            reports.push(CaseReport {
                name: case.name(),
                title: case.title(),
                verdict,
                summary,
                notes,
                exchanges,
                elapsed: started.elapsed(),
            });
        }
        Ok(reports)
    }
}
