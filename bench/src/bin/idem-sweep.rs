//! The PostgreSQL sweeper on its own (see `bench/sweep.sh`): sweeps a records table at the pace
//! given on the command line, next to a service that serves from it, until interrupted.
//!
//! `idem-sweep DATABASE_URL BUSY [BATCH [TABLE]]`
//!
//! BUSY is the sweeper's busy fraction (`SweepPace::busy`: `1` sweeps batch after batch without
//! resting, `0.1` is the default pace), BATCH its batch size (default 1000), TABLE the records
//! table (default `idempotency_records`). It sweeps every second, and on SIGINT or SIGTERM stops
//! the sweeper and prints how long it ran.

use std::time::{Duration, Instant};

use idem::{postgres::PostgresStore, postgres::SweepPace};
use tokio::signal::unix::{SignalKind, signal};

const USAGE: &str = "usage: idem-sweep DATABASE_URL BUSY [BATCH [TABLE]]";

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(url), Some(busy)) = (args.first(), args.get(1)) else {
        return Err(USAGE.into());
    };
    let batch: u32 = args.get(2).map_or(Ok(1000), |b| b.parse())?;
    let table = args.get(3).map_or("idempotency_records", String::as_str);
    let pace = SweepPace::default().batch(batch).busy(busy.parse()?)?;
    let store = PostgresStore::builder()
        .table(table)?
        .max_connections(1)
        .connect(url)
        .await?;
    let started = Instant::now();
    let sweeper = store.spawn_sweeper_with(Duration::from_secs(1), pace);
    let mut terminate = signal(SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
    sweeper.stop().await;
    println!(
        "swept for {:.1} s at busy {busy}, batches of {batch}",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
