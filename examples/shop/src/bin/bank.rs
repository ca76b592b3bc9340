//! `cargo run -p shop --bin bank -- --addr 127.0.0.1:4000`: the shop's bank as a process of
//! its own (see `shop::bank_cli`).

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    shop::bank_cli::run(std::env::args().skip(1)).await
}
