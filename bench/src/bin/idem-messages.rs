//! `idem-messages`: messages per second through the message runner (`#[idempotent(key =
//! json("/id"))]` on a `MemoryStore`) against the bare JetStream consumer loop, in one
//! interleaved run on one stream (docs/benchmarks.md, *Message handlers*).
//!
//! ```sh
//! cargo run --release -p idem-bench --bin idem-messages -- [messages] [rounds]
//! ```
//!
//! Both read the same messages (a small JSON event each) from durable pull consumers of their
//! own, parse the event, count it, and acknowledge it with a double ack, N at a time: the bare
//! loop with a semaphore and a task per message, the runner with its `concurrency(N)`. The
//! only difference is idempotency: the key claimed, the fingerprint, the completion stored.
//! Reads `IDEM_BENCH_NATS_URL` (default `nats://127.0.0.1:4222`).

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use async_nats::jetstream::{self, AckKind, consumer::PullConsumer, stream};
use axum::{Json, extract::State};
use futures_util::StreamExt;
use idem::{
    Idempotency, MemoryStore, idempotent,
    message::{Runner, nats::JetStream},
};
use serde::Deserialize;
use tokio::sync::Semaphore;

#[derive(Deserialize)]
struct Event {
    id: u64,
    amount: u64,
}

/// What the handler does, in both loops: read the event, count it.
fn handle(counter: &AtomicU64, event: &Event) {
    std::hint::black_box((event.id, event.amount));
    counter.fetch_add(1, Ordering::SeqCst);
}

#[idempotent(key = json("/id"), lease = "10s", ttl = "1h")]
async fn counted(State(counter): State<Arc<AtomicU64>>, Json(event): Json<Event>) {
    handle(&counter, &event);
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let messages: u64 = args
        .next()
        .map_or(20_000, |n| n.parse().expect("a number of messages"));
    let rounds: usize = args
        .next()
        .map_or(3, |n| n.parse().expect("a number of rounds"));
    let url =
        std::env::var("IDEM_BENCH_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    let context = jetstream::new(async_nats::connect(&url).await.expect("NATS answers"));
    let name = format!("BENCH{:08x}", rand_suffix());
    let subject = format!("{}.events", name.to_lowercase());
    context
        .create_stream(stream::Config {
            name: name.clone(),
            subjects: vec![subject.clone()],
            ..Default::default()
        })
        .await
        .expect("the stream");
    publish(&context, &subject, messages).await;
    println!(
        "{messages} messages of {} bytes; {rounds} rounds, interleaved",
        event_body(0).len()
    );
    println!("concurrency | bare loop (msg/s) | runner (msg/s) | runner / bare");
    for concurrency in [1, 16] {
        let (mut bare, mut runner) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            let bare_consumer =
                consumer(&context, &name, &format!("bare{concurrency}x{round}")).await;
            bare.push(bare_loop(bare_consumer, messages, concurrency).await);
            let runner_consumer =
                consumer(&context, &name, &format!("runner{concurrency}x{round}")).await;
            runner.push(run(context.clone(), runner_consumer, messages, concurrency).await);
        }
        let (bare, runner) = (median(bare), median(runner));
        println!(
            "{concurrency:>11} | {bare:>17.0} | {runner:>14.0} | {:.2}",
            runner / bare
        );
    }
    let _ = context.delete_stream(&name).await;
}

fn rand_suffix() -> u32 {
    std::process::id() ^ (Instant::now().elapsed().subsec_nanos())
}

fn event_body(id: u64) -> String {
    format!(r#"{{"id":{id},"amount":9800,"currency":"JPY"}}"#)
}

async fn publish(context: &jetstream::Context, subject: &str, messages: u64) {
    let mut acks = Vec::new();
    for id in 0..messages {
        let ack = context
            .publish(subject.to_owned(), event_body(id).into())
            .await
            .expect("published");
        acks.push(ack);
        if acks.len() == 1000 {
            for ack in acks.drain(..) {
                ack.await.expect("stored");
            }
        }
    }
    for ack in acks {
        ack.await.expect("stored");
    }
}

async fn consumer(context: &jetstream::Context, stream: &str, name: &str) -> PullConsumer {
    context
        .get_stream(stream)
        .await
        .unwrap()
        .create_consumer(jetstream::consumer::pull::Config {
            durable_name: Some(name.to_owned()),
            ack_wait: Duration::from_secs(30),
            ..Default::default()
        })
        .await
        .unwrap()
}

/// The bare consumer loop: a task per message, `concurrency` at a time; parse, count, double
/// ack. Answers messages per second.
async fn bare_loop(consumer: PullConsumer, messages: u64, concurrency: usize) -> f64 {
    let counter = Arc::new(AtomicU64::new(0));
    let permits = Arc::new(Semaphore::new(concurrency));
    let started = Instant::now();
    let mut stream = consumer
        .stream()
        .max_messages_per_batch(concurrency.max(16))
        .messages()
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for _ in 0..messages {
        let permit = Arc::clone(&permits).acquire_owned().await.unwrap();
        let message = stream.next().await.unwrap().unwrap();
        let counter = Arc::clone(&counter);
        tasks.push(tokio::spawn(async move {
            let event: Event = serde_json::from_slice(&message.payload).expect("an event");
            handle(&counter, &event);
            message.double_ack_with(AckKind::Ack).await.expect("acked");
            drop(permit);
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(counter.load(Ordering::SeqCst), messages);
    messages as f64 / started.elapsed().as_secs_f64()
}

/// The runner: `#[idempotent(key = json("/id"))]` on a fresh `MemoryStore`, `concurrency` at
/// a time. Answers messages per second.
async fn run(
    context: jetstream::Context,
    consumer: PullConsumer,
    messages: u64,
    concurrency: usize,
) -> f64 {
    let counter = Arc::new(AtomicU64::new(0));
    let idem = Idempotency::new(MemoryStore::default());
    let runner = Runner::new(idem.clone(), counted.with_state(Arc::clone(&counter)))
        .concurrency(concurrency);
    let stats = runner.stats();
    let source = JetStream::new(context, consumer).batch(concurrency.max(16));
    let started = Instant::now();
    let done = async {
        while stats.completed() < messages {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    };
    runner.run(source, done).await.expect("the runner runs");
    let elapsed = started.elapsed();
    assert_eq!(
        counter.load(Ordering::SeqCst),
        messages,
        "each message ran once"
    );
    idem.shutdown().await;
    messages as f64 / elapsed.as_secs_f64()
}

fn median(mut rates: Vec<f64>) -> f64 {
    rates.sort_by(f64::total_cmp);
    rates[rates.len() / 2]
}
