//! The load benchmark's server (see `bench/run.sh`): one of the idem servers of
//! [`idem_bench::server`], answering `POST /payments` on ADDR.
//!
//! `idem-bench SERVER [ADDR]`: SERVER is `bare`, `layer` or `attribute`; ADDR defaults to
//! 127.0.0.1:3100. `BENCH_WORKERS` sets the number of tokio worker threads (default 1, so the
//! load generator has the other core).
//!
//! `BENCH_CONFIG` chooses the configuration: `user` (the default) scopes keys to the caller,
//! whom a principal resolver reads from `Authorization`, and keeps records in
//! `MemoryStore::default()`, bounded, as a service would run it; `global` scopes every key
//! globally and keeps records in a roomy `MemoryStore` that never evicts during a run;
//! `steps` is `global` with a handler that runs two local steps before its work
//! ([`Server::steps_router`]; the bare server serves the plain handler).
//!
//! With `BENCH_STORE_ENTRIES=N` the records are in a `MemoryStore` bounded at N records
//! instead: the store's size measured apart from the flow (a store of a few thousand records
//! stays in the CPU's caches, one of 100,000 does not). With `BENCH_REDIS_URL=redis://...`
//! they are in a `RedisStore` on that server (`bench/redis-wait.sh`), which waits for
//! `BENCH_REDIS_WAIT_REPLICAS` replicas (default: none, asynchronous) for at most
//! `BENCH_REDIS_WAIT_TIMEOUT_MS` (default 100) after each claim and completion. With
//! `BENCH_POSTGRES_URL=postgres://...` or `BENCH_MYSQL_URL=mysql://...` they are in a
//! `PostgresStore` or a `MySqlStore` in that database's `idempotency_records`, migrated at
//! start; with `BENCH_SQLITE_URL=sqlite:///path/to/file.db`, in a `SqliteStore` in that file,
//! created if missing (`bench/run.sh`'s configuration `sql`).
//!
//! With `BENCH_SPIN=N` every request first does N rounds of arithmetic on one stack slot (no
//! allocation, no call; about 4.6 ns each on the benchmark machine): the bare handler slowed
//! to an idem server's throughput, which tells what a lower throughput alone costs the kernel
//! per request (docs/benchmarks.md, *Where a first request and a replay spend their time*).

use std::{process::ExitCode, time::Duration};

use idem::{
    MemoryStore, mysql::MySqlStore, postgres::PostgresStore, redis::Durability, redis::RedisStore,
    sqlite::SqliteStore, store::Store,
};
use idem_bench::server::{Scoping, Server, bounded_store, roomy_store};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("idem-bench: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let server: Server = args
        .next()
        .ok_or("usage: idem-bench SERVER [ADDR]; SERVER is `bare`, `layer` or `attribute`")?
        .parse()?;
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:3100".to_owned());
    let (scoping, steps) = match std::env::var("BENCH_CONFIG") {
        Ok(name) if name == "steps" => (Scoping::Global, true),
        Ok(name) => (name.parse()?, false),
        Err(_) => (Scoping::User, false),
    };
    let workers = match std::env::var("BENCH_WORKERS") {
        Ok(workers) => workers.parse()?,
        Err(_) => 1,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let (postgres, mysql, sqlite) = (
            std::env::var("BENCH_POSTGRES_URL"),
            std::env::var("BENCH_MYSQL_URL"),
            std::env::var("BENCH_SQLITE_URL"),
        );
        let app = match std::env::var("BENCH_REDIS_URL") {
            Ok(url) => router(server, scoping, steps, redis_store(&url).await?),
            Err(_) if postgres.is_ok() => {
                let store = PostgresStore::connect(&postgres?).await?;
                store.migrate().await?;
                router(server, scoping, steps, store)
            }
            Err(_) if mysql.is_ok() => {
                let store = MySqlStore::connect(&mysql?).await?;
                store.migrate().await?;
                router(server, scoping, steps, store)
            }
            Err(_) if sqlite.is_ok() => {
                let store = SqliteStore::connect(&sqlite?).await?;
                store.migrate().await?;
                router(server, scoping, steps, store)
            }
            Err(_) if std::env::var_os("BENCH_STORE_ENTRIES").is_some() => {
                let entries = std::env::var("BENCH_STORE_ENTRIES")?.parse()?;
                router(server, scoping, steps, bounded_store(entries))
            }
            Err(_) => match scoping {
                Scoping::User => router(server, scoping, steps, MemoryStore::default()),
                Scoping::Global => router(server, scoping, steps, roomy_store()),
            },
        };
        let app = match std::env::var("BENCH_SPIN") {
            Ok(rounds) => with_spin(app, rounds.parse()?),
            Err(_) => app,
        };
        let listener = tokio::net::TcpListener::bind(&addr).await.map_err(|error| {
            format!(
                "cannot listen on {addr}: {error}; choose another address with the second \
                 argument (idem-bench SERVER HOST:PORT), or the ports of bench/run.sh with BENCH_PORT"
            )
        })?;
        println!("idem-bench {server} listening on {addr}");
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await?;
        Ok::<(), Box<dyn std::error::Error>>(())
    })?;
    Ok(())
}

/// The router of `server`, its keys scoped as `scoping` says and its records in `store`; with
/// `steps`, the `steps` configuration's handler.
fn router(server: Server, scoping: Scoping, steps: bool, store: impl Store) -> axum::Router {
    if steps {
        server.steps_router(store)
    } else {
        server.router(scoping, store)
    }
}

/// A `RedisStore` on `url`, with the durability `BENCH_REDIS_WAIT_REPLICAS` and
/// `BENCH_REDIS_WAIT_TIMEOUT_MS` ask for.
async fn redis_store(url: &str) -> Result<RedisStore, Box<dyn std::error::Error>> {
    let number = |name: &str, default: u64| -> Result<u64, Box<dyn std::error::Error>> {
        match std::env::var(name) {
            Ok(value) => Ok(value.parse()?),
            Err(_) => Ok(default),
        }
    };
    let replicas = number("BENCH_REDIS_WAIT_REPLICAS", 0)?;
    let timeout = Duration::from_millis(number("BENCH_REDIS_WAIT_TIMEOUT_MS", 100)?);
    let durability = match replicas {
        0 => Durability::Async,
        replicas => Durability::replicas(u32::try_from(replicas)?, timeout),
    };
    let store = RedisStore::builder()
        .prefix(format!("idem-bench:{}:", std::process::id()))?
        .durability(durability)
        .connect(url)
        .await?;
    println!("idem-bench: records in Redis at {url}, claims wait for {durability}");
    Ok(store)
}

/// `app` with `rounds` of busy arithmetic before every request: a server slowed by work that
/// touches one stack slot and makes no call, to tell what a lower throughput alone costs the
/// kernel per request. A fixed amount of work, not of time, so that interrupts landing in it
/// are not taken out of it.
fn with_spin(app: axum::Router, rounds: u64) -> axum::Router {
    app.layer(tower::util::MapRequestLayer::new(
        move |request: axum::extract::Request| {
            let mut value = std::hint::black_box(1u64);
            for _ in 0..rounds {
                value =
                    std::hint::black_box(value.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
            std::hint::black_box(value);
            request
        },
    ))
}
