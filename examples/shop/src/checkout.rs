//! `checkout`: the shop's command-line client. It pays once through
//! [`idem_client`]: one key for the payment, retried through timeouts, 409 and 5xx.
//!
//! ```text
//! cargo run -p shop --bin checkout -- --url http://127.0.0.1:3000 --user alice \
//!     --amount 9800 --currency JPY [--timeout-ms 3000] [--key KEY]
//! ```
//!
//! The final payment JSON goes to stdout (exit 0); a final failure prints the Problem
//! Details, or the transport error, to stderr (exit 1). A usage error exits 2. Each retry is
//! logged on stderr (`RUST_LOG` filters, `idem_client=info` by default).

use std::{fmt, io::Write, time::Duration};

use idem_client::{ClientError, IdempotencyKey, RetryPolicy};
use serde_json::json;

/// The usage text of `--help`.
pub const USAGE: &str = "\
usage: checkout --url URL --user NAME --amount N --currency CUR [--timeout-ms MS] [--key KEY]

Pays once at the shop: POST URL/payments, retried with one Idempotency-Key through
timeouts, 409 (in flight) and 5xx, until the payment's answer or a final error.

options:
  --url URL         the shop, as http://127.0.0.1:3000
  --user NAME       who pays (sent as `Authorization: Bearer NAME`)
  --amount N        in the currency's minor unit, 1 to 100000000
  --currency CUR    ISO 4217 code, as JPY
  --timeout-ms MS   how long one attempt may take (default 30000)
  --key KEY         the payment's Idempotency-Key (default: a new random one); send the
                    same key again to retry a payment without paying twice
  -h, --help        this text

stdout: the payment JSON (exit 0). stderr: each retry, then the Problem Details or the
error of a final failure (exit 1).
";

/// What the command line asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Pay.
    Pay(Checkout),
    /// Print the usage text.
    Help,
}

/// One payment to make.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkout {
    /// The shop's base URL, without a trailing `/`.
    pub url: String,
    /// The paying user.
    pub user: String,
    /// The amount.
    pub amount: i64,
    /// The currency.
    pub currency: String,
    /// One attempt's timeout, if given.
    pub timeout: Option<Duration>,
    /// The key, if given.
    pub key: Option<IdempotencyKey>,
}

/// A command line that could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageError(String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

impl Command {
    /// Reads the command line `args`, without the program name.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Self, UsageError> {
        let mut args = args.into_iter();
        let (mut url, mut user, mut amount, mut currency, mut timeout, mut key) =
            (None, None, None, None, None, None);
        while let Some(arg) = args.next() {
            if arg == "-h" || arg == "--help" {
                return Ok(Self::Help);
            }
            let (flag, inline) = match arg.split_once('=') {
                Some((flag, value)) => (flag.to_owned(), Some(value.to_owned())),
                None => (arg.clone(), None),
            };
            let slot = match flag.as_str() {
                "--url" => &mut url,
                "--user" => &mut user,
                "--amount" => &mut amount,
                "--currency" => &mut currency,
                "--timeout-ms" => &mut timeout,
                "--key" => &mut key,
                _ => return Err(UsageError(format!("unknown argument {arg:?}; see --help"))),
            };
            let value = match inline {
                Some(value) => value,
                None => args
                    .next()
                    .ok_or_else(|| UsageError(format!("{flag} needs a value; see --help")))?,
            };
            *slot = Some(value);
        }
        let required = |value: Option<String>, flag: &str| {
            value.ok_or_else(|| UsageError(format!("{flag} is required; see --help")))
        };
        let url = required(url, "--url")?;
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(UsageError(format!(
                "--url {url:?} is not an http:// URL, as in http://127.0.0.1:3000"
            )));
        }
        let user = required(user, "--user")?;
        let amount = required(amount, "--amount")?;
        let amount = amount
            .parse()
            .map_err(|_| UsageError(format!("--amount {amount:?} is not a whole number")))?;
        let timeout = match timeout {
            None => None,
            Some(ms) => Some(Duration::from_millis(ms.parse().map_err(|_| {
                UsageError(format!(
                    "--timeout-ms {ms:?} is not a number of milliseconds"
                ))
            })?)),
        };
        let key = match key {
            None => None,
            Some(key) => Some(
                IdempotencyKey::new(key.as_str())
                    .map_err(|error| UsageError(format!("--key {key:?}: {error}")))?,
            ),
        };
        Ok(Self::Pay(Checkout {
            url: url.trim_end_matches('/').to_owned(),
            user,
            amount,
            currency: required(currency, "--currency")?,
            timeout,
            key,
        }))
    }
}

impl Checkout {
    /// The retry policy: the client's defaults, with `--timeout-ms` as the attempt timeout.
    pub fn policy(&self) -> RetryPolicy {
        let policy = RetryPolicy::new();
        match self.timeout {
            Some(timeout) => policy.attempt_timeout(timeout),
            None => policy,
        }
    }

    /// Pays, and writes what the user sees: the payment on `stdout`, or the failure on
    /// `stderr`. Returns whether the payment was made.
    pub async fn run(&self, stdout: &mut impl Write, stderr: &mut impl Write) -> bool {
        let key = self.key.clone().unwrap_or_else(IdempotencyKey::random);
        let request = reqwest::Client::new()
            .post(format!("{}/payments", self.url))
            .bearer_auth(&self.user)
            .json(&json!({ "amount": self.amount, "currency": self.currency }));
        // Writes to a closed terminal have nowhere to be reported; the exit code still says.
        match self.policy().send_with_key(&key, request).await {
            Ok(answer) => {
                let _ = stdout.write_all(answer.body());
                let _ = writeln!(stdout);
                let replayed = if answer.is_replayed() {
                    ", replayed"
                } else {
                    ""
                };
                let _ = writeln!(
                    stderr,
                    "checkout: {} after {} attempt(s){replayed}; Idempotency-Key {}",
                    answer.status(),
                    answer.attempts(),
                    key.as_str()
                );
                true
            }
            Err(error) => {
                report(stderr, &error);
                false
            }
        }
    }
}

/// The Problem Details of a final answer (its body as sent), then the error and its causes.
fn report(stderr: &mut impl Write, error: &ClientError) {
    if let Some(answer) = error.answer() {
        let _ = stderr.write_all(answer.body());
        let _ = writeln!(stderr);
    }
    let mut line = format!("checkout: {error}");
    let mut cause = std::error::Error::source(error);
    while let Some(error) = cause {
        line.push_str(&format!(": {error}"));
        cause = error.source();
    }
    let _ = writeln!(stderr, "{line}");
    // When the budget ran out, the payment may have been made: the same key finds out.
    if error.gave_up().is_some() {
        let _ = writeln!(
            stderr,
            "checkout: to try again without paying twice: --key {}",
            error.key().as_str()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Command, UsageError> {
        Command::parse(args.iter().map(|arg| arg.to_string()))
    }

    #[test]
    fn the_documented_interface() {
        let command = parse(&[
            "--url",
            "http://127.0.0.1:3000/",
            "--user",
            "alice",
            "--amount=9800",
            "--currency",
            "JPY",
            "--timeout-ms",
            "3000",
            "--key",
            "order-1",
        ])
        .unwrap();
        let Command::Pay(checkout) = command else {
            panic!("{command:?}");
        };
        assert_eq!(checkout.url, "http://127.0.0.1:3000");
        assert_eq!(checkout.user, "alice");
        assert_eq!(checkout.amount, 9800);
        assert_eq!(checkout.currency, "JPY");
        assert_eq!(checkout.timeout, Some(Duration::from_secs(3)));
        assert_eq!(checkout.key.unwrap().as_str(), "order-1");
        assert_eq!(
            checkout_policy(&[
                "--url",
                "http://h",
                "--user",
                "u",
                "--amount",
                "1",
                "--currency",
                "JPY"
            ])
            .get_attempt_timeout(),
            RetryPolicy::DEFAULT_ATTEMPT_TIMEOUT
        );
        assert_eq!(parse(&["--help"]), Ok(Command::Help));
    }

    fn checkout_policy(args: &[&str]) -> RetryPolicy {
        match parse(args).unwrap() {
            Command::Pay(checkout) => checkout.policy(),
            Command::Help => panic!("help"),
        }
    }

    #[test]
    fn mistakes_are_explained() {
        let base = [
            "--url",
            "http://h",
            "--user",
            "u",
            "--amount",
            "1",
            "--currency",
            "JPY",
        ];
        for (extra, says) in [
            (&["--amount", "lots"][..], "not a whole number"),
            (&["--timeout-ms", "3s"], "milliseconds"),
            (&["--key", "has space"], "--key"),
            (&["--key"], "needs a value"),
            (&["--colour", "red"], "unknown argument"),
            (&["--url", "127.0.0.1:3000"], "not an http:// URL"),
        ] {
            let args: Vec<&str> = base.iter().chain(extra).copied().collect();
            let error = parse(&args).unwrap_err();
            assert!(error.to_string().contains(says), "{extra:?}: {error}");
        }
        let error = parse(&["--url", "http://h"]).unwrap_err();
        assert!(error.to_string().contains("--user is required"), "{error}");
    }
}
