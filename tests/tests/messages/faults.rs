//! When something fails: a consumer killed with `kill -9` between its commit
//! and its ack, and the store down while messages arrive. Each key's effect happens once,
//! counted in PostgreSQL rows or the handler's counter; nothing is acknowledged that was not
//! completed. The kill test runs its own `nats-server -js`.

use std::{process::Stdio, sync::Arc, time::Duration};

use idem::{Idempotency, message::Runner, message::nats::JetStream, postgres::PostgresStore};
use idem_tests::{
    eventually,
    gate::Gate,
    message_fixture::{
        Effects, Rows, Running, by_event_id, describe, event, stats_reach, write_row,
    },
    nats_fixture::{ConsumerSettings, NatsServer, TestStream, nats_url},
    postgres_fixture::{Proxy, admin_pool, count, database_url, fresh_name, through},
};
use sqlx::AssertSqlSafe;
use tokio::io::{AsyncBufReadExt, BufReader};

const WITHIN: Duration = Duration::from_secs(30);

#[tokio::test]
#[cfg_attr(not(idem_test_postgres), ignore = "set IDEM_TEST_DATABASE_URL")]
async fn a_consumer_killed_after_its_commit_and_before_its_ack_never_runs_it_again() {
    let Some(database) = database_url("kill_before_ack") else {
        return;
    };
    let Some(nats) = NatsServer::start().await else {
        return;
    };
    let settings = ConsumerSettings {
        ack_wait: Duration::from_secs(2),
        ..ConsumerSettings::default()
    };
    let stream = TestStream::create(&nats.url(), settings).await;
    let admin = admin_pool(&database).await;
    let records = fresh_name(&admin, "r").await;
    let rows = fresh_name(&admin, "p").await;
    sqlx::query(AssertSqlSafe(format!(
        "CREATE TABLE {rows} (id text NOT NULL)"
    )))
    .execute(&admin)
    .await
    .unwrap();
    let store = PostgresStore::builder()
        .table(&records)
        .unwrap()
        .connect(&database)
        .await
        .unwrap();
    store.migrate().await.unwrap();

    let mut consumer = tokio::process::Command::new(env!("CARGO_BIN_EXE_message_consumer"))
        .env("NATS_URL", nats.url())
        .env("DATABASE_URL", &database)
        .env("RECORDS", &records)
        .env("ROWS", &rows)
        .env("STREAM", &stream.name)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the consumer starts");
    let mut lines = BufReader::new(consumer.stdout.take().unwrap()).lines();
    let mut next_line = async || {
        tokio::time::timeout(WITHIN, lines.next_line())
            .await
            .expect("the consumer says what it does")
            .unwrap()
            .expect("the consumer is running")
    };
    assert_eq!(next_line().await, "consuming");
    stream.publish("m-1", &event("paid-1", "ok")).await;
    assert_eq!(next_line().await, "holding the ack of paid-1");
    // Committed: the row and the key's completion, in one transaction.
    assert_eq!(count(&admin, &rows).await, 1);
    consumer.start_kill().unwrap();
    consumer.wait().await.unwrap();

    // Another consumer gets the message again once its AckWait has passed.
    let running = Running::start(
        Runner::new(
            Idempotency::new(store),
            write_row.with_state(Rows(Arc::from(rows.as_str()))),
        ),
        JetStream::new(stream.context.clone(), stream.consumer().await),
    );
    stats_reach(&running.stats, WITHIN, |stats| stats.duplicates() == 1).await;
    stream.drained(WITHIN).await;
    assert_eq!(
        count(&admin, &rows).await,
        1,
        "{}",
        describe(&running.stats)
    );
    assert_eq!(running.stats.completed(), 0);
    running.stop().await.unwrap();
    idem_tests::postgres_fixture::drop_table(&admin, &rows).await;
    idem_tests::postgres_fixture::drop_table(&admin, &records).await;
}

/// A store on a fresh table, reached through `proxy`, whose calls give up after 1 s.
async fn store_through(database: &str, proxy: &Proxy, records: &str) -> PostgresStore {
    let store = PostgresStore::builder()
        .table(records)
        .unwrap()
        .acquire_timeout(Duration::from_millis(500))
        .connect_with(through(database, proxy))
        .await
        .unwrap();
    store.migrate().await.unwrap();
    store
}

#[tokio::test]
#[cfg_attr(
    not(all(idem_test_postgres, idem_test_nats)),
    ignore = "set IDEM_TEST_DATABASE_URL and IDEM_TEST_NATS_URL"
)]
async fn with_the_store_down_nothing_is_acknowledged_and_nothing_is_lost() {
    let (Some(database), Some(nats)) = (database_url("store_down"), nats_url("store_down")) else {
        return;
    };
    let stream = TestStream::create(&nats, ConsumerSettings::default()).await;
    let admin = admin_pool(&database).await;
    let records = fresh_name(&admin, "r").await;
    let proxy = Proxy::start(&database).await;
    let store = store_through(&database, &proxy, &records).await;
    let idem = Idempotency::builder(store)
        .store_timeout(Duration::from_secs(1))
        .build();
    let effects = Effects::with_gate(Gate::closed());
    let running = Running::start(
        Runner::new(idem.clone(), by_event_id.with_state(effects.clone()))
            .backoff(Duration::from_millis(50), Duration::from_millis(200)),
        JetStream::new(stream.context.clone(), stream.consumer().await),
    );

    // The store goes down while a handler runs: its result cannot be stored, and the message
    // is not acknowledged until it is.
    stream.publish("m-0", &event("during", "ok")).await;
    effects.gate.arrival(WITHIN).await;
    proxy.cut();
    effects.gate.lift();
    let kept = eventually(WITHIN, async || idem.pending_completions() == 1).await;
    assert!(
        kept,
        "the result waits in the process: {}",
        describe(&running.stats)
    );

    // Messages arriving meanwhile are claimed nowhere, run nowhere, acknowledged never.
    for id in 1..=3 {
        stream
            .publish(&format!("m-{id}"), &event(&format!("e{id}"), "ok"))
            .await;
    }
    stats_reach(&running.stats, WITHIN, |stats| stats.retried() >= 3).await;
    assert_eq!(
        running.stats.completed() + running.stats.duplicates(),
        0,
        "nothing acknowledged"
    );
    let (pending, ack_pending, _) = stream.pending().await;
    assert_eq!(
        pending + ack_pending as u64,
        4,
        "every message is still the consumer's"
    );
    assert_eq!(
        effects.total(),
        1,
        "only the message that ran before the outage ran"
    );

    proxy.restore();
    stats_reach(&running.stats, WITHIN, |stats| stats.completed() == 4).await;
    stream.drained(WITHIN).await;
    for id in ["during", "e1", "e2", "e3"] {
        assert_eq!(effects.runs(id), 1, "{id}: {}", describe(&running.stats));
    }
    assert_eq!(running.stats.ended(), 0, "nothing lost");
    running.stop().await.unwrap();
    idem.shutdown().await;
    stream.delete().await;
    idem_tests::postgres_fixture::drop_table(&admin, &records).await;
    let _ = count;
}
