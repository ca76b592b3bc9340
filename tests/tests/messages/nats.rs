//! On NATS JetStream: each key's effect happens once, whatever the broker
//! redelivers, counted by the handler's effect (not the log). Against the shared JetStream
//! (`IDEM_TEST_NATS_URL`), each test in a stream of its own.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use axum::{Json, extract::State, http::StatusCode};
use idem::{
    Idempotency, MemoryStore, idempotent,
    message::{MessageError, Runner, RunnerError, nats::JetStream},
    steps::{StepError, Steps},
};
use idem_tests::{
    gate::Gate,
    message_fixture::{
        Effects, Running, by_event_id, by_event_id_whenever_sent, by_message_id, describe, event,
        stats_reach,
    },
    nats_fixture::{ConsumerSettings, TestStream, nats_url},
};

const WITHIN: Duration = Duration::from_secs(30);

async fn stream(test: &str, settings: ConsumerSettings) -> Option<TestStream> {
    let url = nats_url(test)?;
    Some(TestStream::create(&url, settings).await)
}

fn runner(service: idem::message::MessageService) -> Runner {
    Runner::new(Idempotency::new(MemoryStore::default()), service)
        .concurrency(4)
        .backoff(Duration::from_millis(20), Duration::from_millis(200))
}

#[tokio::test]
#[cfg_attr(not(idem_test_nats), ignore = "set IDEM_TEST_NATS_URL")]
async fn the_same_message_published_twice_outside_the_duplicate_window_runs_once() {
    let settings = ConsumerSettings {
        duplicate_window: Duration::from_millis(100),
        ..ConsumerSettings::default()
    };
    let Some(stream) = stream("duplicate_window", settings).await else {
        return;
    };
    let effects = Effects::new();
    let running = Running::start(
        runner(by_message_id.with_state(effects.clone())),
        JetStream::new(stream.context.clone(), stream.consumer().await),
    );
    assert!(!stream.publish("m-1", &event("a", "ok")).await);
    stats_reach(&running.stats, WITHIN, |stats| stats.completed() == 1).await;
    // Inside the window the server drops the copy itself; once it has passed, the copy is a
    // second message in the stream, which only the key can tell from the first.
    let mut published_again = false;
    for _ in 0..500 {
        if !stream.publish("m-1", &event("a", "ok")).await {
            published_again = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(published_again, "the duplicate window never passed");
    stats_reach(&running.stats, WITHIN, |stats| stats.duplicates() == 1).await;
    stream.drained(WITHIN).await;
    assert_eq!(effects.runs("a"), 1, "{}", describe(&running.stats));
    running.stop().await.unwrap();
    stream.delete().await;
}

#[tokio::test]
#[cfg_attr(not(idem_test_nats), ignore = "set IDEM_TEST_NATS_URL")]
async fn a_handler_slower_than_ack_wait_is_not_redelivered_and_its_duplicate_waits() {
    let settings = ConsumerSettings {
        ack_wait: Duration::from_secs(1),
        ..ConsumerSettings::default()
    };
    let Some(stream) = stream("slow_handler", settings).await else {
        return;
    };
    let effects = Effects::with_gate(Gate::closed());
    let running = Running::start(
        runner(by_event_id.with_state(effects.clone())),
        JetStream::new(stream.context.clone(), stream.consumer().await),
    );
    stream.publish("m-1", &event("slow", "ok")).await;
    effects.gate.arrival(WITHIN).await;
    // The same event under another message id, while the first is still running: its key is
    // in flight, so it is handed back for later, not run.
    stream.publish("m-2", &event("slow", "ok")).await;
    stats_reach(&running.stats, WITHIN, |stats| stats.deferred() >= 1).await;
    // The handler outlives AckWait three times over; the runner's +WPI keeps the message.
    tokio::time::sleep(3 * settings.ack_wait).await;
    effects.gate.lift();
    stats_reach(&running.stats, WITHIN, |stats| {
        stats.completed() == 1 && stats.duplicates() == 1
    })
    .await;
    stream.drained(WITHIN).await;
    assert_eq!(effects.attempts("slow"), 1, "{}", describe(&running.stats));
    assert_eq!(effects.runs("slow"), 1);
    running.stop().await.unwrap();
    stream.delete().await;
}

#[tokio::test]
#[cfg_attr(not(idem_test_nats), ignore = "set IDEM_TEST_NATS_URL")]
async fn two_consumers_on_one_work_queue_run_each_key_once() {
    let Some(stream) = stream("two_consumers", ConsumerSettings::default()).await else {
        return;
    };
    let effects = Effects::new();
    let store = MemoryStore::default();
    let idem = Idempotency::new(store);
    let mut runners = Vec::new();
    for _ in 0..2 {
        let url = nats_url("two_consumers").unwrap();
        let context = async_nats::jetstream::new(async_nats::connect(&url).await.unwrap());
        let consumer = stream.consumer_in(&context).await;
        let runner =
            Runner::new(idem.clone(), by_event_id.with_state(effects.clone())).concurrency(4);
        runners.push(Running::start(
            runner,
            JetStream::new(context, consumer).batch(4),
        ));
    }
    // Ten events, each published twice under two message ids.
    for copy in 0..2 {
        for id in 0..10 {
            stream
                .publish(&format!("m-{id}-{copy}"), &event(&format!("e{id}"), "ok"))
                .await;
        }
    }
    let counted = idem_tests::eventually(WITHIN, async || {
        let completed: u64 = runners.iter().map(|r| r.stats.completed()).sum();
        let duplicates: u64 = runners.iter().map(|r| r.stats.duplicates()).sum();
        completed == 10 && duplicates == 10
    })
    .await;
    let counters: Vec<_> = runners.iter().map(|r| describe(&r.stats)).collect();
    assert!(counted, "{counters:?}");
    stream.drained(WITHIN).await;
    for id in 0..10 {
        assert_eq!(effects.runs(&format!("e{id}")), 1, "e{id}: {counters:?}");
    }
    for running in runners {
        running.stop().await.unwrap();
    }
    stream.delete().await;
}

#[tokio::test]
#[cfg_attr(not(idem_test_nats), ignore = "set IDEM_TEST_NATS_URL")]
async fn a_poison_message_is_termed_and_the_consumer_keeps_going() {
    let Some(stream) = stream("poison", ConsumerSettings::default()).await else {
        return;
    };
    let effects = Effects::new();
    let running = Running::start(
        runner(by_event_id.with_state(effects.clone())).max_attempts(3),
        JetStream::new(stream.context.clone(), stream.consumer().await),
    );
    stream.publish("m-1", &event("first", "ok")).await;
    stats_reach(&running.stats, WITHIN, |stats| stats.completed() == 1).await;
    // Another payload under a key already used: a poison message, never a replay.
    stream.publish("m-2", &event("first", "other")).await;
    // A handler that always fails terminally, and one that always fails.
    stream.publish("m-3", &event("never", "terminal")).await;
    stream.publish("m-4", &event("flaky", "fail")).await;
    stream.publish("m-5", &event("after", "ok")).await;
    stats_reach(&running.stats, WITHIN, |stats| {
        stats.ended() == 3 && stats.completed() == 2
    })
    .await;
    stream.drained(WITHIN).await;
    assert_eq!(effects.attempts("first"), 1, "the other payload never ran");
    assert_eq!(
        effects.attempts("never"),
        1,
        "a terminal failure is not retried"
    );
    assert_eq!(
        effects.attempts("flaky"),
        3,
        "failed on each of the 3 attempts"
    );
    assert_eq!(effects.runs("first"), 1);
    assert_eq!(effects.runs("after"), 1, "the consumer kept going");
    assert_eq!(effects.total(), 2, "{}", describe(&running.stats));
    running.stop().await.unwrap();
    stream.delete().await;
}

/// A handler that leaves `/sentAt` out of its fingerprint: the same event sent again at another
/// time is a duplicate, acked without running; a change anywhere else is still a poison
/// message.
#[tokio::test]
#[cfg_attr(not(idem_test_nats), ignore = "set IDEM_TEST_NATS_URL")]
async fn a_member_left_out_of_the_fingerprint_does_not_make_another_message() {
    let Some(stream) = stream("sent_at", ConsumerSettings::default()).await else {
        return;
    };
    let effects = Effects::new();
    let running = Running::start(
        runner(by_event_id_whenever_sent.with_state(effects.clone())),
        JetStream::new(stream.context.clone(), stream.consumer().await),
    );
    let sent = |at: &str, does: &str| {
        let mut event = event("a", does);
        event["sentAt"] = at.into();
        event
    };
    stream.publish("m-1", &sent("10:00:00", "ok")).await;
    stats_reach(&running.stats, WITHIN, |stats| stats.completed() == 1).await;
    stream.publish("m-2", &sent("10:00:07", "ok")).await;
    stats_reach(&running.stats, WITHIN, |stats| stats.duplicates() == 1).await;
    stream.publish("m-3", &sent("10:00:09", "other")).await;
    stats_reach(&running.stats, WITHIN, |stats| stats.ended() == 1).await;
    stream.drained(WITHIN).await;
    assert_eq!(effects.attempts("a"), 1, "{}", describe(&running.stats));
    running.stop().await.unwrap();
    stream.delete().await;
}

#[tokio::test]
#[cfg_attr(not(idem_test_nats), ignore = "set IDEM_TEST_NATS_URL")]
async fn settings_that_cannot_work_are_refused_at_start_up() {
    let settings = ConsumerSettings {
        ack_wait: Duration::from_millis(500),
        ..ConsumerSettings::default()
    };
    let Some(stream) = stream("refused", settings).await else {
        return;
    };
    // The handlers' lease is 1 s, longer than this AckWait.
    let running = Running::start(
        runner(by_event_id.with_state(Effects::new())),
        JetStream::new(stream.context.clone(), stream.consumer().await),
    );
    match running.ended().await {
        Err(RunnerError::Refused(why)) => assert!(why.contains("AckWait"), "{why}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    stream.delete().await;
    // A consumer that may deliver again for longer than the TTL (1 h): 2 h of 2 s AckWaits.
    let settings = ConsumerSettings {
        ack_wait: Duration::from_secs(2),
        max_deliver: 3600,
        ..ConsumerSettings::default()
    };
    let stream = TestStream::create(&nats_url("refused").unwrap(), settings).await;
    let running = Running::start(
        runner(by_event_id.with_state(Effects::new())),
        JetStream::new(stream.context.clone(), stream.consumer().await),
    );
    match running.ended().await {
        Err(RunnerError::Refused(why)) => assert!(why.contains("TTL"), "{why}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    stream.delete().await;
}

/// What the two steps of [`two_steps`] did.
#[derive(Clone, Default)]
struct TwoSteps {
    first: Arc<AtomicUsize>,
    second: Arc<AtomicUsize>,
    second_failures: Arc<AtomicUsize>,
}

/// A message handler of two steps, whose second fails while `second_failures` lasts.
#[idempotent(key = json("/id"), lease = "1s", ttl = "1h")]
async fn two_steps(
    State(done): State<TwoSteps>,
    mut steps: Steps,
    Json(_event): Json<serde_json::Value>,
) -> Result<(), MessageError> {
    let first = done.first.clone();
    steps
        .local("first", || async move {
            first.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .await?;
    let done = done.clone();
    steps
        .local("second", || async move {
            let failing = done
                .second_failures
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            if failing {
                return Err(StepError::retryable(StatusCode::SERVICE_UNAVAILABLE));
            }
            done.second.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .await?;
    Ok(())
}

/// A message handler of several steps: the broker's redelivery resumes the message where it
/// stopped, and the step that ended does not run again.
#[tokio::test]
#[cfg_attr(not(idem_test_nats), ignore = "set IDEM_TEST_NATS_URL")]
async fn a_redelivered_message_resumes_after_the_steps_that_ended() {
    let Some(stream) = stream("two_steps", ConsumerSettings::default()).await else {
        return;
    };
    let done = TwoSteps::default();
    done.second_failures.store(2, Ordering::SeqCst);
    let running = Running::start(
        runner(two_steps.with_state(done.clone())),
        JetStream::new(stream.context.clone(), stream.consumer().await),
    );
    stream.publish("m-1", &event("a", "ok")).await;
    stats_reach(&running.stats, WITHIN, |stats| stats.completed() == 1).await;
    stream.drained(WITHIN).await;
    assert_eq!(
        done.second.load(Ordering::SeqCst),
        1,
        "{}",
        describe(&running.stats)
    );
    assert_eq!(
        done.first.load(Ordering::SeqCst),
        1,
        "the first step ran once over three deliveries: {}",
        describe(&running.stats)
    );
    running.stop().await.unwrap();
    stream.delete().await;
}
