//! What the examples share: the address from `--addr HOST:PORT`, and serving a router there
//! until Ctrl-C, with a sentence (not a raw error) when the address is taken.

use std::{net::SocketAddr, process::ExitCode};

use axum::Router;
use idem::Idempotency;

/// Serves `app` where the arguments say (`default` without `--addr`) until Ctrl-C, then lets
/// handlers whose clients left store their results. `name` is the example's, for its messages.
pub(crate) async fn serve(name: &str, default: &str, app: Router, idem: Idempotency) -> ExitCode {
    let usage = format!("usage: {name} [--addr HOST:PORT] (default {default})");
    let addr = match address(std::env::args().skip(1), default) {
        Ok(Some(addr)) => addr,
        Ok(None) => {
            println!("{usage}");
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            eprintln!("{name}: {error}; {usage}");
            return ExitCode::from(2);
        }
    };
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!(
                "{name}: cannot listen on {addr}: {error}; choose another address with --addr HOST:PORT"
            );
            return ExitCode::FAILURE;
        }
    };
    match listener.local_addr() {
        Ok(bound) => println!("listening on http://{bound}"),
        Err(error) => eprintln!("{name}: {error}"),
    }
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await;
    // A handler whose client left keeps running; let it store its result before exiting.
    idem.shutdown().await;
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{name}: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The address the arguments name (`--addr HOST:PORT` or `--addr=HOST:PORT`), `default`
/// without one, or `None` for `--help`.
fn address(
    mut args: impl Iterator<Item = String>,
    default: &str,
) -> Result<Option<SocketAddr>, String> {
    let mut value = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--help" | "-h" => return Ok(None),
            "--addr" => value = Some(args.next().ok_or("--addr needs a value")?),
            other => match other.strip_prefix("--addr=") {
                Some(addr) => value = Some(addr.to_owned()),
                None => return Err(format!("unknown argument `{other}`")),
            },
        }
    }
    let value = value.unwrap_or_else(|| default.to_owned());
    value
        .parse()
        .map(Some)
        .map_err(|_| format!("{value:?} is not an address; use HOST:PORT, as in 127.0.0.1:3011"))
}
