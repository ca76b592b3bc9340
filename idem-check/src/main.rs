//! `idem-check`: checks an HTTP API's Idempotency-Key handling; `idem-check serve` runs an
//! idempotent endpoint with faults for testing clients. See `idem_check::cli` and
//! [docs/check.md](https://github.com/idem-rs/idem/blob/main/docs/check.md).

use std::{io::IsTerminal, process::ExitCode};

use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> ExitCode {
    // `serve` logs each run and each fault; a check logs nothing unless RUST_LOG asks.
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("idem_check=info")),
        )
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
    idem_check::cli::main(std::env::args_os()).await
}
