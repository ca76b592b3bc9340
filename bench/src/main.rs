//! The load benchmark's server (see `bench/run.sh`): one of the idem servers of
//! [`idem_bench::server`], answering `POST /payments` on ADDR.
//!
//! `idem-bench SERVER [ADDR]`: SERVER is `bare`, `layer` or `attribute`; ADDR defaults to
//! 127.0.0.1:3100. `BENCH_WORKERS` sets the number of tokio worker threads (default 1, so the
//! load generator has the other core).

use idem_bench::server::{Server, roomy_store};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let server: Server = args
        .next()
        .ok_or("usage: idem-bench SERVER [ADDR]; SERVER is `bare`, `layer` or `attribute`")?
        .parse()?;
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:3100".to_owned());
    let workers = match std::env::var("BENCH_WORKERS") {
        Ok(workers) => workers.parse()?,
        Err(_) => 1,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let app = server.router(roomy_store());
        let listener = tokio::net::TcpListener::bind(&addr).await?;
        println!("idem-bench {server} listening on {addr}");
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await
    })?;
    Ok(())
}
