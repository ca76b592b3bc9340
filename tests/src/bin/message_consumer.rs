//! A message consumer in a process of its own, for the tests that kill one with `kill -9`:
//! [`write_row`] on a JetStream consumer, records in PostgreSQL, every ack held forever.
//!
//! Reads `NATS_URL`, `DATABASE_URL`, `RECORDS` (the records table), `ROWS` (the rows
//! table) and `STREAM` (whose durable consumer `work` it consumes) from the environment.

use std::{sync::Arc, time::Duration};

use idem::{Idempotency, message::Runner, message::nats::JetStream, postgres::PostgresStore};
use idem_tests::message_fixture::{Rows, Watched, write_row};

#[tokio::main]
async fn main() {
    let var = |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"));
    let store = PostgresStore::builder()
        .table(&var("RECORDS"))
        .unwrap()
        .acquire_timeout(Duration::from_secs(10))
        .connect(&var("DATABASE_URL"))
        .await
        .unwrap();
    let client = async_nats::connect(var("NATS_URL")).await.unwrap();
    let context = async_nats::jetstream::new(client);
    let consumer = context
        .get_stream(var("STREAM"))
        .await
        .unwrap()
        .get_consumer("work")
        .await
        .unwrap();
    let rows = Rows(Arc::from(var("ROWS")));
    let runner = Runner::new(Idempotency::new(store), write_row.with_state(rows));
    println!("consuming");
    runner
        .run(
            Watched::holding_acks(JetStream::new(context, consumer)),
            std::future::pending(),
        )
        .await
        .unwrap();
}
