//! On RabbitMQ: each key's effect happens once, whatever the broker redelivers, counted by
//! the handler's effect. Against the shared broker (`IDEM_TEST_AMQP_URL`), each test in
//! queues of its own.

use std::time::Duration;

use idem::{
    Idempotency, MemoryStore,
    message::{MessageService, Runner, amqp::RabbitMq},
};
use idem_tests::{
    amqp_fixture::{TestQueue, amqp_url, connect},
    eventually,
    message_fixture::{
        Effects, Running, Watched, by_amqp_message_id, by_event_id, describe, event, stats_reach,
    },
};

const WITHIN: Duration = Duration::from_secs(30);

fn runner(idem: &Idempotency, service: MessageService) -> Runner {
    Runner::new(idem.clone(), service)
        .concurrency(4)
        .backoff(Duration::from_millis(20), Duration::from_millis(200))
}

async fn source(url: &str, queue: &TestQueue) -> (lapin::Connection, RabbitMq) {
    let connection = connect(url).await;
    let channel = connection.create_channel().await.unwrap();
    (
        connection,
        RabbitMq::new(channel, queue.name.as_str()).prefetch(8),
    )
}

/// Waits until the queue has nothing ready, and `settled` holds.
async fn empty(queue: &TestQueue) {
    let empty = eventually(WITHIN, async || queue.ready(&queue.name).await == 0).await;
    assert!(empty, "the queue still has messages");
}

#[tokio::test]
#[cfg_attr(not(idem_test_amqp), ignore = "set IDEM_TEST_AMQP_URL")]
async fn a_message_published_twice_runs_once() {
    let Some(url) = amqp_url("amqp_published_twice") else {
        return;
    };
    let queue = TestQueue::create(&url).await;
    let effects = Effects::new();
    let (_connection, rabbit) = source(&url, &queue).await;
    let idem = Idempotency::new(MemoryStore::default());
    let running = Running::start(
        runner(&idem, by_amqp_message_id.with_state(effects.clone())),
        rabbit,
    );
    queue.publish("m-1", &event("a", "ok")).await;
    queue.publish("m-1", &event("a", "ok")).await;
    stats_reach(&running.stats, WITHIN, |s| {
        s.completed() == 1 && s.duplicates() == 1
    })
    .await;
    empty(&queue).await;
    assert_eq!(effects.runs("a"), 1, "{}", describe(&running.stats));
    running.stop().await.unwrap();
    queue.delete().await;
}

#[tokio::test]
#[cfg_attr(not(idem_test_amqp), ignore = "set IDEM_TEST_AMQP_URL")]
async fn a_channel_closed_before_the_ack_redelivers_and_the_redelivery_does_not_run() {
    let Some(url) = amqp_url("amqp_channel_closed") else {
        return;
    };
    let queue = TestQueue::create(&url).await;
    let effects = Effects::new();
    let idem = Idempotency::new(MemoryStore::default());
    let (first_connection, first) = source(&url, &queue).await;
    let held = Watched::holding_acks(first);
    let running = Running::start(runner(&idem, by_event_id.with_state(effects.clone())), held);
    queue.publish("m-1", &event("k", "ok")).await;
    // Completed and stored; the ack is held.
    stats_reach(&running.stats, WITHIN, |s| s.completed() == 1).await;
    first_connection
        .close(200, "the test closes it before the ack".into())
        .await
        .unwrap();
    drop(running);

    let (_connection, second) = source(&url, &queue).await;
    let watched = Watched::new(second);
    let attempts = std::sync::Arc::clone(&watched.attempts);
    let running = Running::start(
        runner(&idem, by_event_id.with_state(effects.clone())),
        watched,
    );
    stats_reach(&running.stats, WITHIN, |s| s.duplicates() == 1).await;
    empty(&queue).await;
    assert_eq!(
        *attempts.lock().unwrap(),
        [2],
        "delivered again, redelivered = true"
    );
    assert_eq!(effects.runs("k"), 1, "{}", describe(&running.stats));
    assert_eq!(running.stats.completed(), 0);
    running.stop().await.unwrap();
    queue.delete().await;
}

#[tokio::test]
#[cfg_attr(not(idem_test_amqp), ignore = "set IDEM_TEST_AMQP_URL")]
async fn poison_and_failing_messages_are_dead_lettered_and_the_consumer_keeps_going() {
    let Some(url) = amqp_url("amqp_poison") else {
        return;
    };
    let queue = TestQueue::create(&url).await;
    let effects = Effects::new();
    let idem = Idempotency::new(MemoryStore::default());
    let (_connection, rabbit) = source(&url, &queue).await;
    let running = Running::start(
        runner(&idem, by_event_id.with_state(effects.clone())).max_attempts(2),
        rabbit,
    );
    queue.publish("m-1", &event("first", "ok")).await;
    stats_reach(&running.stats, WITHIN, |s| s.completed() == 1).await;
    queue.publish("m-2", &event("first", "other")).await;
    queue.publish("m-3", &event("never", "terminal")).await;
    queue.publish("m-4", &event("flaky", "fail")).await;
    queue.publish("m-5", &event("after", "ok")).await;
    stats_reach(&running.stats, WITHIN, |s| {
        s.ended() == 3 && s.completed() == 2
    })
    .await;
    let dead = eventually(WITHIN, async || queue.ready(&queue.dead).await == 3).await;
    assert!(
        dead,
        "three messages in the dead-letter queue: {}",
        describe(&running.stats)
    );
    empty(&queue).await;
    assert_eq!(effects.attempts("first"), 1, "the other payload never ran");
    assert_eq!(effects.attempts("never"), 1);
    assert_eq!(
        effects.attempts("flaky"),
        2,
        "failed on each of the 2 attempts"
    );
    assert_eq!(effects.runs("after"), 1, "the consumer kept going");
    assert_eq!(effects.total(), 2);
    running.stop().await.unwrap();
    queue.delete().await;
}

#[tokio::test]
#[cfg_attr(not(idem_test_amqp), ignore = "set IDEM_TEST_AMQP_URL")]
async fn two_consumers_with_a_slow_handler_run_each_key_once() {
    let Some(url) = amqp_url("amqp_two_consumers") else {
        return;
    };
    let queue = TestQueue::create(&url).await;
    let effects = Effects::new();
    let idem = Idempotency::new(MemoryStore::default());
    let mut runners = Vec::new();
    let mut connections = Vec::new();
    for _ in 0..2 {
        let (connection, rabbit) = source(&url, &queue).await;
        connections.push(connection);
        let rabbit = rabbit.longest_delay(Duration::from_millis(300));
        runners.push(Running::start(
            runner(&idem, by_event_id.with_state(effects.clone())),
            rabbit,
        ));
    }
    // Five events, each published twice under two message ids, back to back: the copies
    // overlap with their slow originals on the other consumer.
    for id in 0..5 {
        for copy in 0..2 {
            queue
                .publish(&format!("m-{id}-{copy}"), &event(&format!("e{id}"), "slow"))
                .await;
        }
    }
    let counted = eventually(WITHIN, async || {
        let completed: u64 = runners.iter().map(|r| r.stats.completed()).sum();
        let duplicates: u64 = runners.iter().map(|r| r.stats.duplicates()).sum();
        completed == 5 && duplicates == 5
    })
    .await;
    let counters: Vec<_> = runners.iter().map(|r| describe(&r.stats)).collect();
    assert!(counted, "{counters:?}");
    empty(&queue).await;
    for id in 0..5 {
        assert_eq!(effects.runs(&format!("e{id}")), 1, "e{id}: {counters:?}");
    }
    for running in runners {
        running.stop().await.unwrap();
    }
    queue.delete().await;
}
