//! `cargo run -p shop --bin checkout -- --url URL --user NAME --amount N --currency CUR
//! [--timeout-ms MS] [--key KEY]`: pays once at the shop. See `shop::checkout`.

use std::process::ExitCode;

use shop::checkout::{Command, USAGE};
use tracing_subscriber::{EnvFilter, fmt::time::uptime};

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| EnvFilter::new("idem_core::client=info")),
        )
        .with_timer(uptime())
        .with_target(false)
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
