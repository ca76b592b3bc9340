//! The bank as a process of its own: `cargo run -p shop --bin bank -- --addr 127.0.0.1:4000`,
//! or `cargo run -p shop -- bank --addr 127.0.0.1:4000`. A shop that is killed does not take
//! it with it; point a shop at it with `SHOP_BANK_URL=http://127.0.0.1:4000`.
//!
//! A transfer takes `SHOP_TRANSFER_DELAY_MS` (10 s by default), as in the shop's own bank.
//! Its idempotency records are in this process's memory: the bank stays up while shops come
//! and go. `GET /transfers` with `Authorization: Bearer shop` lists what it moved.

use std::{net::SocketAddr, process::ExitCode, time::Duration};

use idem::{Idempotency, MemoryStore};

use crate::{Settings, bank_service};

/// The usage text of the bank's `--help`.
pub const USAGE: &str = "\
usage: bank [--addr HOST:PORT]      (or: shop bank [--addr HOST:PORT])

The shop's bank, as a process of its own: POST /transfers moves money once per key,
GET /transfers lists what it moved for the calling account (Authorization: Bearer shop).

options:
  --addr HOST:PORT   where to listen (default 127.0.0.1:4000; port 0 picks a free one)
  -h, --help         this text

environment:
  SHOP_TRANSFER_DELAY_MS  how long the bank takes per transfer (default 10000)
";

/// Runs the bank with the command line `args` (without the program name, nor `bank`) until
/// SIGINT or SIGTERM; answers the exit status.
pub async fn run(args: impl Iterator<Item = String>) -> ExitCode {
    let (addr, delay) = match settings(args) {
        Ok(Some(settings)) => settings,
        Ok(None) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            eprintln!("bank: {error}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let listener = match crate::server::bind(addr, "--addr HOST:PORT") {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!("bank: {error}");
            return ExitCode::FAILURE;
        }
    };
    let idem = Idempotency::new(MemoryStore::default());
    let app = bank_service::app(bank_service::BankBooks::new(delay), idem.clone());
    match listener.local_addr() {
        Ok(addr) => println!("bank: listening on http://{addr}"),
        Err(error) => eprintln!("bank: {error}"),
    }
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(crate::shutdown_signal())
        .await;
    idem.shutdown().await;
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("bank: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The address and the transfer delay, or `None` for `--help`.
fn settings(
    mut args: impl Iterator<Item = String>,
) -> Result<Option<(SocketAddr, Duration)>, String> {
    let mut addr: SocketAddr = "127.0.0.1:4000".parse().expect("a valid default");
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            "--addr" => {
                let value = args.next().ok_or("--addr needs HOST:PORT")?;
                addr = value.parse().map_err(|_| {
                    format!("--addr {value}: expected HOST:PORT, as 127.0.0.1:4000")
                })?;
            }
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    let delay = match std::env::var("SHOP_TRANSFER_DELAY_MS") {
        Ok(ms) => Duration::from_millis(
            ms.parse()
                .map_err(|_| format!("SHOP_TRANSFER_DELAY_MS={ms}: expected milliseconds"))?,
        ),
        Err(_) => Settings::DEFAULT_TRANSFER_DELAY,
    };
    Ok(Some((addr, delay)))
}
