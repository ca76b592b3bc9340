//! The command line (and the same settings from a TOML file), and what the binary does with
//! it: exit status 0 when no case failed, 1 when one did, 2 for bad usage or a target that
//! cannot be checked.
//!
//! The spellings scripts rely on:
//!
//! ```text
//! idem-check --url URL --body JSON [-X METHOD] [-H 'Name: value']...
//!            [--other-header 'Name: value']... [--count-url URL] [--format text|json|junit]
//! ```

use std::{
    ffi::OsString, io::IsTerminal, net::SocketAddr, path::PathBuf, process::ExitCode,
    time::Duration,
};

use bytes::Bytes;
use clap::{Args, Parser, Subcommand, ValueEnum};
use http::Method;
use serde::Deserialize;

use crate::{
    Check, KeyStyle, OnServerError, Settings, SettingsError, Variant,
    duration::parse_duration,
    report::{self, Format},
    serve::ServeOptions,
    settings::{header_line, http_url},
};

/// Exit status: no case failed.
pub const EXIT_PASSED: u8 = 0;
/// Exit status: a case failed.
pub const EXIT_FAILED: u8 = 1;
/// Exit status: bad usage, or a target that cannot be checked.
pub const EXIT_USAGE: u8 = 2;

#[derive(Debug, Parser)]
#[command(
    name = "idem-check",
    version,
    about = "Checks an HTTP API's Idempotency-Key handling from outside: the seven cases and \
             eight more on the draft's rules, with a verdict per case",
    after_help = "Exit status: 0 when no case failed, 1 when one did, 2 for bad usage or a \
                  target that cannot be checked.\nEvery case, what it sends and how it \
                  decides: docs/check.md.",
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<ServeCommand>,
    #[command(flatten)]
    check: CheckArgs,
}

#[derive(Debug, Subcommand)]
enum ServeCommand {
    /// Runs an idempotent endpoint (idem, memory store) with faults on demand, for testing
    /// clients.
    Serve(ServeArgs),
}

/// The settings of a check, as flags or as the keys of a TOML file (`--config`), spelled the
/// same without the dashes in front: `count-url = "..."`, `header = ["..."]`.
#[derive(Debug, Default, Args, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct CheckArgs {
    /// A TOML file with these settings; flags given too take precedence.
    #[arg(long, value_name = "FILE")]
    #[serde(skip)]
    config: Option<PathBuf>,
    /// The endpoint, as http://127.0.0.1:3000/payments.
    #[arg(long, value_name = "URL")]
    url: Option<String>,
    /// The method [default: POST].
    #[arg(short = 'X', long, value_name = "METHOD")]
    method: Option<String>,
    /// The JSON body, or @FILE to read it from a file.
    #[arg(long, value_name = "JSON")]
    body: Option<String>,
    /// A header sent with every request (credentials); repeatable.
    #[arg(short = 'H', long = "header", value_name = "'Name: value'")]
    #[serde(default)]
    header: Vec<String>,
    /// Case 2's body (same key, other body) [default: --body with one member changed].
    #[arg(long, value_name = "JSON")]
    other_body: Option<String>,
    /// A header of a second principal, replacing -H's of the same name; repeatable. Enables
    /// the scope case.
    #[arg(long, value_name = "'Name: value'")]
    #[serde(default)]
    other_header: Vec<String>,
    /// A listing of what the endpoint creates (a JSON array, or {"items": [...]}), read with
    /// -H's headers: "exactly one effect", not just "the same answer".
    #[arg(long, value_name = "URL")]
    count_url: Option<String>,
    /// How keys are written [default: sf-strings, the draft's form; bare keys if the server
    /// refuses those and takes bare ones, as the report then says].
    #[arg(long, value_enum, value_name = "STYLE")]
    key_style: Option<KeyStyleArg>,
    /// The server runs requests without a key (case 4 then expects two identical requests
    /// without a key to run as two operations, not a 400).
    #[arg(long)]
    #[serde(default)]
    key_optional: bool,
    /// The URL of a request the server takes seconds to answer [default: --url]. Enables the
    /// in-flight and timeout cases, and the concurrent case sends it (with --slow-body, or
    /// alone).
    #[arg(long, value_name = "URL")]
    slow_url: Option<String>,
    /// The body of the slow request [default: --body].
    #[arg(long, value_name = "JSON")]
    slow_body: Option<String>,
    /// A listing of what the slow request creates [default: --count-url, when --slow-url is
    /// not given].
    #[arg(long, value_name = "URL")]
    slow_count_url: Option<String>,
    /// How long the client waits for the slow request before it gives up [default: half the
    /// time the slow request takes].
    #[arg(long, value_name = "MS")]
    timeout_ms: Option<u64>,
    /// The retention the server declares for its keys, as 24h or 2s.
    #[arg(long, value_name = "DURATION")]
    ttl: Option<String>,
    /// Waits out the retention to check case 6.
    #[arg(long)]
    #[serde(default)]
    wait_ttl: bool,
    /// The URL of a request the server answers 5xx [default: --url]. Enables case 7.
    #[arg(long, value_name = "URL")]
    fail_url: Option<String>,
    /// The body of the failing request [default: --body].
    #[arg(long, value_name = "JSON")]
    fail_body: Option<String>,
    /// A header that makes the server answer 5xx; repeatable.
    #[arg(long, value_name = "'Name: value'")]
    #[serde(default)]
    fail_header: Vec<String>,
    /// A listing of what the failing request creates [default: --count-url, when --fail-url
    /// is not given].
    #[arg(long, value_name = "URL")]
    fail_count_url: Option<String>,
    /// What the server declares it does after a 5xx: runs the retry again, or replays the
    /// stored 5xx [default: rerun].
    #[arg(long = "on-5xx", value_enum, value_name = "POLICY")]
    #[serde(rename = "on-5xx")]
    on_5xx: Option<OnServerErrorArg>,
    /// How many requests with one key the concurrent case sends at once [default: 8].
    #[arg(long, value_name = "N")]
    concurrency: Option<usize>,
    /// The longest one request may take, as 30s [default: 30s].
    #[arg(long, value_name = "DURATION")]
    request_timeout: Option<String>,
    /// The longest the whole check may take [default: 2 min, 4 with a slow request, and the
    /// TTL with --wait-ttl].
    #[arg(long, value_name = "DURATION")]
    max_time: Option<String>,
    /// The report's format [default: text].
    #[arg(long, value_enum, value_name = "FORMAT")]
    format: Option<FormatArg>,
    /// Colours in the text report [default: auto, when stdout is a terminal and NO_COLOR is
    /// unset].
    #[arg(long, value_enum, value_name = "WHEN")]
    color: Option<ColorArg>,
}

#[derive(Clone, Copy, Debug, ValueEnum, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum KeyStyleArg {
    SfString,
    Bare,
    Both,
}

#[derive(Clone, Copy, Debug, ValueEnum, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum OnServerErrorArg {
    Rerun,
    Stored,
}

#[derive(Clone, Copy, Debug, ValueEnum, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum FormatArg {
    Text,
    Json,
    Junit,
}

#[derive(Clone, Copy, Debug, ValueEnum, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum ColorArg {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Args)]
struct ServeArgs {
    /// Where to listen.
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:4100")]
    addr: SocketAddr,
    /// How long a completed key is kept, as 24h or 2s.
    #[arg(long, value_name = "DURATION", default_value = "24h")]
    ttl: String,
    /// What a 5xx does to its key.
    #[arg(
        long = "on-5xx",
        value_enum,
        value_name = "POLICY",
        default_value = "rerun"
    )]
    on_5xx: OnServerErrorArg,
    /// How long each run takes (per request: ?delay_ms=).
    #[arg(long, value_name = "MS", default_value_t = 0)]
    delay_ms: u64,
    /// How many runs of each key answer 500 first (per request: ?fail_first=).
    #[arg(long, value_name = "N", default_value_t = 0)]
    fail_first: u32,
    /// How many requests with each key are processed and then dropped without an answer
    /// (per request: ?drop_first=).
    #[arg(long, value_name = "N", default_value_t = 0)]
    drop_first: u32,
}

/// What the command line asks for.
#[derive(Debug)]
pub enum Command {
    /// Check an endpoint and print the report.
    Check {
        /// What to check.
        settings: Box<Settings>,
        /// The report's format.
        format: Format,
        /// Whether the text report is coloured.
        color: bool,
    },
    /// Run the faulty server.
    Serve {
        /// Where to listen.
        addr: SocketAddr,
        /// How it behaves.
        options: ServeOptions,
    },
}

/// A command line that cannot be run: the text to print, and the exit status (0 for
/// `--help` and `--version`, 2 otherwise).
#[derive(Debug)]
pub struct Usage {
    /// What to print.
    pub message: String,
    /// The exit status.
    pub status: u8,
}

impl From<SettingsError> for Usage {
    fn from(error: SettingsError) -> Self {
        Self {
            message: format!("idem-check: {error}\n"),
            status: EXIT_USAGE,
        }
    }
}

/// Reads the command line, `args` with the program's name first.
///
/// # Errors
///
/// [`Usage`] for `--help`, `--version`, and anything that cannot be run.
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Command, Usage> {
    let cli = Cli::try_parse_from(args).map_err(|error| Usage {
        message: error.render().to_string(),
        status: if error.use_stderr() {
            EXIT_USAGE
        } else {
            EXIT_PASSED
        },
    })?;
    match cli.command {
        Some(ServeCommand::Serve(serve)) => serve_command(serve),
        None => check_command(cli.check),
    }
}

fn serve_command(args: ServeArgs) -> Result<Command, Usage> {
    let ttl =
        parse_duration(&args.ttl).map_err(|why| SettingsError::new(format!("--ttl: {why}")))?;
    if ttl < Duration::from_secs(1) {
        // The runtime renews a lease every third of it; a shorter TTL (and lease) would
        // only make it spin.
        return Err(
            SettingsError::new(format!("--ttl {}: keep keys at least 1s", args.ttl)).into(),
        );
    }
    Ok(Command::Serve {
        addr: args.addr,
        options: ServeOptions {
            ttl,
            on_server_error: args.on_5xx.into(),
            delay: Duration::from_millis(args.delay_ms),
            fail_first: args.fail_first,
            drop_first: args.drop_first,
        },
    })
}

fn check_command(flags: CheckArgs) -> Result<Command, Usage> {
    let args = match flags.config.clone() {
        Some(path) => flags.over(read_config(&path)?),
        None => flags,
    };
    let format = match args.format.unwrap_or(FormatArg::Text) {
        FormatArg::Text => Format::Text,
        FormatArg::Json => Format::Json,
        FormatArg::Junit => Format::Junit,
    };
    let color = match args.color.unwrap_or(ColorArg::Auto) {
        ColorArg::Always => true,
        ColorArg::Never => false,
        ColorArg::Auto => std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
    };
    let settings = args.settings()?;
    Ok(Command::Check {
        settings: Box::new(settings),
        format,
        color,
    })
}

fn read_config(path: &std::path::Path) -> Result<CheckArgs, SettingsError> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| SettingsError::new(format!("--config {}: {error}", path.display())))?;
    toml::from_str(&text)
        .map_err(|error| SettingsError::new(format!("--config {}: {error}", path.display())))
}

impl CheckArgs {
    /// These flags over the settings of a file: a flag given wins, lists add up.
    fn over(self, file: Self) -> Self {
        let concat =
            |file: Vec<String>, flags: Vec<String>| file.into_iter().chain(flags).collect();
        Self {
            config: self.config,
            url: self.url.or(file.url),
            method: self.method.or(file.method),
            body: self.body.or(file.body),
            header: concat(file.header, self.header),
            other_body: self.other_body.or(file.other_body),
            other_header: concat(file.other_header, self.other_header),
            count_url: self.count_url.or(file.count_url),
            key_style: self.key_style.or(file.key_style),
            key_optional: self.key_optional || file.key_optional,
            slow_url: self.slow_url.or(file.slow_url),
            slow_body: self.slow_body.or(file.slow_body),
            slow_count_url: self.slow_count_url.or(file.slow_count_url),
            timeout_ms: self.timeout_ms.or(file.timeout_ms),
            ttl: self.ttl.or(file.ttl),
            wait_ttl: self.wait_ttl || file.wait_ttl,
            fail_url: self.fail_url.or(file.fail_url),
            fail_body: self.fail_body.or(file.fail_body),
            fail_header: concat(file.fail_header, self.fail_header),
            fail_count_url: self.fail_count_url.or(file.fail_count_url),
            on_5xx: self.on_5xx.or(file.on_5xx),
            concurrency: self.concurrency.or(file.concurrency),
            request_timeout: self.request_timeout.or(file.request_timeout),
            max_time: self.max_time.or(file.max_time),
            format: self.format.or(file.format),
            color: self.color.or(file.color),
        }
    }

    fn settings(self) -> Result<Settings, SettingsError> {
        let mut settings = self.endpoint()?;
        for line in &self.other_header {
            settings.add_other_header(line)?;
        }
        settings.other_body = body_arg("--other-body", self.other_body.as_deref())?;
        settings.count_url = optional_url("--count-url", self.count_url.as_deref())?;
        settings.key_style = self.key_style.map(Into::into);
        settings.key_required = !self.key_optional;
        settings.slow = variant(
            "--slow",
            (self.slow_url.as_deref(), self.slow_body.as_deref()),
            &[],
            self.slow_count_url.as_deref(),
        )?;
        settings.give_up_after = self.timeout_ms.map(Duration::from_millis);
        settings.ttl = optional_duration("--ttl", self.ttl.as_deref())?;
        settings.wait_ttl = self.wait_ttl;
        settings.failing = variant(
            "--fail",
            (self.fail_url.as_deref(), self.fail_body.as_deref()),
            &self.fail_header,
            self.fail_count_url.as_deref(),
        )?;
        settings.on_server_error = self.on_5xx.map_or(OnServerError::Rerun, Into::into);
        self.bounds(&mut settings)?;
        Ok(settings)
    }

    /// The request under test: `--url`, `--body`, `-X` and `-H`.
    fn endpoint(&self) -> Result<Settings, SettingsError> {
        let url = self.url.as_deref().ok_or_else(|| {
            SettingsError::new("--url is required (the endpoint to check); see --help")
        })?;
        let body = body_arg("--body", self.body.as_deref())?.ok_or_else(|| {
            SettingsError::new("--body is required (the request's JSON); see --help")
        })?;
        let method = match self.method.as_deref() {
            None => Method::POST,
            Some(method) => method
                .to_ascii_uppercase()
                .parse()
                .map_err(|_| SettingsError::new(format!("-X {method:?} is not an HTTP method")))?,
        };
        let mut settings = Settings::new(method, url, body)?;
        for line in &self.header {
            settings.add_header(line)?;
        }
        Ok(settings)
    }

    /// `--concurrency`, `--request-timeout` and `--max-time`.
    fn bounds(&self, settings: &mut Settings) -> Result<(), SettingsError> {
        if let Some(concurrency) = self.concurrency {
            settings.concurrency = concurrency;
        }
        let timeout = optional_duration("--request-timeout", self.request_timeout.as_deref())?;
        if let Some(timeout) = timeout {
            settings.request_timeout = timeout;
        }
        settings.max_time = optional_duration("--max-time", self.max_time.as_deref())?;
        Ok(())
    }
}

/// A variant of the request from its flags (`--slow-url`, `--slow-body`, ...); none when
/// neither a URL, a body nor a header is given.
fn variant(
    flag: &str,
    (url, body): (Option<&str>, Option<&str>),
    headers: &[String],
    count_url: Option<&str>,
) -> Result<Option<Variant>, SettingsError> {
    if url.is_none() && body.is_none() && headers.is_empty() {
        if count_url.is_some() {
            return Err(SettingsError::new(format!(
                "{flag}-count-url needs {flag}-url or {flag}-body, the request it counts"
            )));
        }
        return Ok(None);
    }
    let mut variant = Variant {
        url: optional_url(&format!("{flag}-url"), url)?,
        body: body_arg(&format!("{flag}-body"), body)?,
        headers: http::HeaderMap::new(),
        count_url: optional_url(&format!("{flag}-count-url"), count_url)?,
    };
    for line in headers {
        let (name, value) = header_line(&format!("{flag}-header"), line)?;
        variant.headers.insert(name, value);
    }
    Ok(Some(variant))
}

/// A body given as JSON text, or as `@FILE`.
fn body_arg(flag: &str, text: Option<&str>) -> Result<Option<Bytes>, SettingsError> {
    let Some(text) = text else {
        return Ok(None);
    };
    let body = match text.strip_prefix('@') {
        Some(path) => Bytes::from(
            std::fs::read(path)
                .map_err(|error| SettingsError::new(format!("{flag} @{path}: {error}")))?,
        ),
        None => Bytes::copy_from_slice(text.as_bytes()),
    };
    crate::settings::json_body(flag, &body)?;
    Ok(Some(body))
}

fn optional_url(flag: &str, text: Option<&str>) -> Result<Option<reqwest::Url>, SettingsError> {
    text.map(|text| http_url(flag, text)).transpose()
}

fn optional_duration(flag: &str, text: Option<&str>) -> Result<Option<Duration>, SettingsError> {
    text.map(|text| {
        parse_duration(text).map_err(|why| SettingsError::new(format!("{flag}: {why}")))
    })
    .transpose()
}

impl From<KeyStyleArg> for KeyStyle {
    fn from(style: KeyStyleArg) -> Self {
        match style {
            KeyStyleArg::SfString => Self::SfString,
            KeyStyleArg::Bare => Self::Bare,
            KeyStyleArg::Both => Self::Both,
        }
    }
}

impl From<OnServerErrorArg> for OnServerError {
    fn from(policy: OnServerErrorArg) -> Self {
        match policy {
            OnServerErrorArg::Rerun => Self::Rerun,
            OnServerErrorArg::Stored => Self::Stored,
        }
    }
}

/// The binary: parses `args`, runs the check or the server, and answers the exit status.
pub async fn main(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    match parse(args) {
        Err(usage) => {
            if usage.status == EXIT_PASSED {
                print!("{}", usage.message);
            } else {
                eprint!("{}", usage.message);
            }
            ExitCode::from(usage.status)
        }
        Ok(Command::Serve { addr, options }) => run_server(addr, options).await,
        Ok(Command::Check {
            settings,
            format,
            color,
        }) => run_check(*settings, format, color).await,
    }
}

async fn run_check(settings: Settings, format: Format, color: bool) -> ExitCode {
    let check = match Check::new(settings) {
        Ok(check) => check.with_progress(true),
        Err(error) => {
            eprintln!("idem-check: {error}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    eprintln!("{}", check.statement());
    match check.run().await {
        Ok(report) => {
            print!("{}", report::render(&report, format, color));
            ExitCode::from(if report.failed() {
                EXIT_FAILED
            } else {
                EXIT_PASSED
            })
        }
        Err(abort) => {
            eprintln!("idem-check: {abort}\nidem-check: no report: the check could not finish");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

async fn run_server(addr: SocketAddr, options: ServeOptions) -> ExitCode {
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!(
                "idem-check serve: cannot listen on {addr}: {error}; choose another address with --addr HOST:PORT"
            );
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let addr = listener.local_addr().unwrap_or(addr);
    println!(
        "idem-check serve: listening on http://{addr}\n  POST /payments (idempotent), GET /payments, GET /runs\n  ttl {}, 5xx {}, delay {}, fail_first {}, drop_first {}",
        crate::duration::show(options.ttl),
        match options.on_server_error {
            OnServerError::Rerun => "released (rerun)",
            OnServerError::Stored => "stored",
        },
        crate::duration::show(options.delay),
        options.fail_first,
        options.drop_first
    );
    match crate::serve::serve(listener, options, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await
    {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("idem-check serve: {error}");
            ExitCode::FAILURE
        }
    }
}
