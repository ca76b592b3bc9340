//! `cargo run -p shop --bin checkout -- --url URL --user NAME --amount N --currency CUR
//! [--timeout-ms MS] [--key KEY]`: pays once at the shop. See `shop::checkout`.

use std::{fmt, io::IsTerminal, process::ExitCode, time::Instant};

use shop::checkout::{Command, USAGE};
use tracing_subscriber::{
    EnvFilter,
    fmt::{format::Writer, time::FormatTime},
};

/// Log lines start with the seconds since the command started: `  3.0s`.
struct Since(Instant);

impl FormatTime for Since {
    fn format_time(&self, w: &mut Writer<'_>) -> fmt::Result {
        write!(w, "{:>5.1}s", self.0.elapsed().as_secs_f64())
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| EnvFilter::new("idem_client=info")),
        )
        .with_timer(Since(Instant::now()))
        .with_target(false)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
    let checkout = match Command::parse(std::env::args().skip(1)) {
        Ok(Command::Pay(checkout)) => checkout,
        Ok(Command::Help) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            eprintln!("checkout: {error}");
            return ExitCode::from(2);
        }
    };
    // Not locked across the call: the retry log writes to stderr meanwhile.
    if checkout
        .run(&mut std::io::stdout(), &mut std::io::stderr())
        .await
    {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
