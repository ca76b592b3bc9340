//! `cargo run -p shop`: the shop on 127.0.0.1:3000, with the store `IDEM_STORE` names
//! (memory by default). See the README next to this crate.

use std::{io::IsTerminal, process::ExitCode};

use shop::{
    Backend, Config, Shop,
    config::Command,
    events::{EventNames, Events},
};
use tokio::sync::watch;
use tracing_subscriber::EnvFilter;

/// The log filter when `RUST_LOG` is unset. PostgreSQL's notices, such as "relation
/// \"shop_payments\" already exists, skipping" each time the shop creates its tables at start,
/// reach sqlx at its INFO level, where they would crowd the start-up: they are shown from
/// WARN up, and so are the NATS client's connection events. `RUST_LOG=info` shows them too.
const DEFAULT_LOG_FILTER: &str = "info,sqlx::postgres::notice=warn,async_nats=warn";

#[tokio::main]
async fn main() -> ExitCode {
    init_logs();
    // `shop bank --addr ...`: the bank, as a process of its own.
    if std::env::args().nth(1).as_deref() == Some("bank") {
        return shop::bank_cli::run(std::env::args().skip(2)).await;
    }
    let config = match Config::parse(std::env::args().skip(1), |name| std::env::var(name).ok()) {
        Ok(Command::Run(config)) => config,
        Ok(Command::Help) => {
            print!("{}", shop::config::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            eprintln!("shop: {error}");
            return ExitCode::from(2);
        }
    };
    match run(*config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("shop: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Logs to stderr, filtered by `RUST_LOG`, in colour only on a terminal (and then unless
/// `NO_COLOR` is set): a file or a pipe gets plain text.
fn init_logs() {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_LOG_FILTER));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if std::io::stderr().is_terminal() {
        logs.init();
    } else {
        logs.with_ansi(false).init();
    }
}

async fn run(config: Config) -> Result<(), Box<dyn std::error::Error>> {
    let backend = Backend::open_with(&config.store, config.memory_max_entries)
        .await?
        .with_runtime(config.max_ttl, config.resume_after);
    let events = match &config.nats_url {
        Some(url) => Some(
            Events::connect(url, EventNames::default())
                .await
                .map_err(|error| format!("SHOP_NATS_URL: {error}"))?,
        ),
        None => None,
    };
    let listener = shop::server::bind(config.addr, "--addr HOST:PORT or SHOP_ADDR")?;
    let addr = listener.local_addr()?;
    let shop = Shop::on(&backend, config.settings.clone(), events.clone());
    shop.bank().set_down(config.bank_down);
    // Before the banner: from the moment it says the shop listens, SIGTERM means a graceful
    // shutdown.
    let shutdown = shop::shutdown_signal();
    println!("{}", banner(&addr.to_string(), &backend, &config));
    // One signal stops both the server and the receipts consumer.
    let (stop, stopped) = watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop.send(true);
    });
    let until_stopped = |mut stopped: watch::Receiver<bool>| async move {
        let _ = stopped.wait_for(|stop| *stop).await;
    };
    let receipts = events.map(|events| {
        let (shop, idem) = (shop.clone(), backend.idem.clone());
        tokio::spawn(shop::receipts::run_receipts(
            events,
            shop,
            idem,
            until_stopped(stopped.clone()),
        ))
    });
    let grpc = match config.grpc_addr {
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|error| format!("SHOP_GRPC_ADDR: cannot listen on {addr}: {error}"))?;
            println!(
                "shop: the gRPC API (shop.v1.Payments, with reflection) listens on {}",
                listener.local_addr()?
            );
            let (shop, idem) = (shop.clone(), backend.idem.clone());
            Some(tokio::spawn(shop::grpc::serve_grpc(
                listener,
                shop,
                idem,
                until_stopped(stopped.clone()),
            )))
        }
        None => None,
    };
    let router = shop::app(shop, backend.idem.clone());
    // The OpenAPI document is made now: a route it cannot describe stops the shop here.
    shop::openapi::prepare(&router).await?;
    // Transfers whose users gave up are finished by the shop itself, through its own router.
    backend.idem.resumer(router.clone()).start()?;
    shop::serve(
        listener,
        router,
        backend.idem.clone(),
        config.connections,
        until_stopped(stopped),
    )
    .await?;
    if let Some(grpc) = grpc {
        grpc.await?
            .map_err(|error| format!("the gRPC API: {error}"))?;
        // Calls whose clients left may still be storing their results.
        backend.idem.shutdown().await;
    }
    if let Some(receipts) = receipts {
        receipts.await??;
    }
    // The resumer's last runs, and the runner's last messages, may have left store writes to
    // retry.
    backend.idem.shutdown().await;
    backend.close().await;
    println!("shop: stopped");
    Ok(())
}

/// Where the shop listens, what it stores where, and a few requests to paste.
fn banner(addr: &str, backend: &Backend, config: &Config) -> String {
    let delay = config.settings.transfer_delay.as_millis();
    let payment_delay = config.settings.payment_delay.as_millis();
    let mut bank = match &config.settings.bank_url {
        Some(url) => format!("\ntransfers go to the bank at {url} (SHOP_BANK_URL)"),
        None => "\ntransfers go to a bank this process starts on a loopback port".to_owned(),
    };
    if payment_delay > 0 {
        bank.push_str(&format!(
            "\npayments take {payment_delay} ms (SHOP_PAYMENT_DELAY_MS)"
        ));
    }
    if config.bank_down {
        bank.push_str("\nthe bank is down: refunds fail with 502 (SHOP_BANK_DOWN=1)");
    }
    if let Some(max_ttl) = config.max_ttl {
        bank.push_str(&format!(
            "\nidempotency records are kept {} ms at most (SHOP_MAX_TTL_MS)",
            max_ttl.as_millis()
        ));
    }
    if config.settings.admin_token.is_some() {
        bank.push_str(
            "\nthe admin API is on: GET and DELETE /admin/idempotency-keys (SHOP_ADMIN_TOKEN)",
        );
    }
    if let Some(url) = &config.nats_url {
        bank.push_str(&format!(
            "\npayments are published on shop.payments.created (stream SHOP at {url}); receipts: GET /receipts"
        ));
    }
    format!(
        "shop: listening on http://{addr}
idempotency records: {records}
payments, refunds, transfers: {ledger}
transfers take {delay} ms (SHOP_TRANSFER_DELAY_MS); the API is described at http://{addr}/openapi.json{bank}

try it (each new operation gets a new key; a retry sends the same one):
  H=http://{addr}; A='Authorization: Bearer alice'; K=$(cat /proc/sys/kernel/random/uuid)
  curl -i $H/payments -H \"$A\" -H 'Content-Type: application/json' -H \"Idempotency-Key: $K\" -d '{{\"amount\":9800,\"currency\":\"JPY\"}}'
  curl -i $H/payments -H \"$A\" -H 'Content-Type: application/json' -H \"Idempotency-Key: $K\" -d '{{\"amount\":9800,\"currency\":\"JPY\"}}'   # the same answer, Idempotent-Replayed: true
  curl -i $H/payments -H \"$A\" -H 'Content-Type: application/json' -H \"Idempotency-Key: $K\" -d '{{\"amount\":1200,\"currency\":\"JPY\"}}'   # 422: the key is already used
  curl -s $H/payments -H \"$A\"
or pay with the client, which retries with one key: cargo run -p shop --bin checkout -- --url $H --user alice --amount 9800 --currency JPY",
        records = backend.records,
        ledger = backend.ledger.describe(),
    )
}
