//! `idem-check`: the seven cases of idempotency keys and eight more on the draft's rules for
//! keys, scopes and errors, run from outside against any HTTP API, in any language; and
//! `idem-check serve`, a real idempotent endpoint with faults on demand, for testing clients.
//!
//! Idempotency-Key bugs never show in happy-path tests. A server that ignores the key, that
//! replays one user's answer to another, that does not compare bodies, that leaves a key
//! "processing" forever after a crash, that answers 500 to a malformed key, or that answers
//! its refusals without Problem Details works perfectly until the day a client retries. This
//! crate sends the requests that show each of those, and says which case caught what, with
//! what was sent and what came back. Each verdict rests on a rule of a stated level: the
//! server's behaviour against a MUST of the IETF draft, or against what the user declared with
//! a flag, fails a case; against a SHOULD of the draft, or one of its examples, it warns.
//!
//! ```text
//! idem-check --url http://127.0.0.1:3000/payments --body '{"amount":9800,"currency":"JPY"}' \
//!     -H 'Authorization: Bearer alice' --other-header 'Authorization: Bearer bob' \
//!     --count-url http://127.0.0.1:3000/payments
//! ```
//!
//! The binary is the usual way in; the library runs the same check from a test:
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use idem_check::{Check, Settings};
//!
//! let mut settings = Settings::post("http://127.0.0.1:3000/payments", r#"{"amount":9800,"currency":"JPY"}"#)?;
//! settings.add_header("Authorization: Bearer alice")?;
//! settings.count_url = Some("http://127.0.0.1:3000/payments".parse()?);
//! let report = Check::new(settings)?.run().await?;
//! assert!(!report.failed(), "{}", idem_check::report::text(&report, false));
//! # Ok(()) }
//! ```
//!
//! [docs/check.md](https://github.com/idem-rs/idem/blob/main/docs/check.md) in the repository has every case: what it sends, and how it decides.

pub mod cli;
pub mod duration;
pub mod report;
pub mod serve;

// From the leaves up: what an exchange is, how it is sent, shown and compared; the settings
// and the plan they make; the session, the preflight and the cases that send; the verdicts;
// and the check, which runs them in that order.
mod body;
mod compare;
mod count;
mod exchange;
mod progress;
mod show;
mod wire;

mod plan;
mod settings;

mod cases;
mod preflight;
mod session;

mod check;
mod verdict;

pub use crate::{
    cases::Case,
    check::Check,
    settings::{Endpoint, KeyStyle, OnServerError, Settings, SettingsError, Variant},
    verdict::{Basis, CaseReport, Report, Verdict},
    wire::Abort,
};
