//! NATS JetStream for the message tests: the shared server's URL, a `nats-server -js` of the
//! test's own, and a fresh stream with one durable pull consumer per test.
//!
//! Tests read the URL from `IDEM_TEST_NATS_URL` and skip, saying so, when it is unset. Every
//! test works in a stream of its own, `T<random>` on the subjects `t<random>.>`, deleted when
//! the test's [`TestStream`] is dropped, so tests run in parallel.

use std::{
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::Duration,
};

use async_nats::{
    HeaderMap,
    jetstream::{self, consumer::PullConsumer, stream},
};
use bytes::Bytes;
use serde_json::Value;

use crate::eventually;

/// The shared JetStream, or `None` (with a note on stderr) when `IDEM_TEST_NATS_URL` is unset.
pub fn nats_url(test: &str) -> Option<String> {
    match std::env::var("IDEM_TEST_NATS_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            eprintln!("skipped {test}: IDEM_TEST_NATS_URL is not set");
            None
        }
    }
}

/// How the test's consumer delivers.
#[derive(Clone, Copy, Debug)]
pub struct ConsumerSettings {
    /// The consumer's `AckWait`.
    pub ack_wait: Duration,
    /// The consumer's `max_deliver` (-1: unbounded).
    pub max_deliver: i64,
    /// The stream's duplicate window.
    pub duplicate_window: Duration,
}

impl Default for ConsumerSettings {
    fn default() -> Self {
        Self {
            ack_wait: Duration::from_secs(5),
            max_deliver: -1,
            duplicate_window: Duration::from_secs(120),
        }
    }
}

/// A stream of the test's own with one durable pull consumer, `work`.
#[derive(Debug)]
pub struct TestStream {
    /// The JetStream context it lives in.
    pub context: jetstream::Context,
    /// The stream's name.
    pub name: String,
    /// The subject messages are published on.
    pub subject: String,
}

impl TestStream {
    /// A fresh stream on the server at `url`, with its consumer set up by `settings`.
    pub async fn create(url: &str, settings: ConsumerSettings) -> Self {
        let client = async_nats::connect(url).await.expect("NATS answers");
        let context = jetstream::new(client);
        let id = format!("{:016x}", rand::random::<u64>());
        let name = format!("T{id}");
        let subject = format!("t{id}.events");
        context
            .create_stream(stream::Config {
                name: name.clone(),
                subjects: vec![format!("t{id}.>")],
                duplicate_window: settings.duplicate_window,
                ..Default::default()
            })
            .await
            .expect("the stream is created");
        let stream = context.get_stream(&name).await.unwrap();
        stream
            .create_consumer(jetstream::consumer::pull::Config {
                durable_name: Some("work".into()),
                ack_wait: settings.ack_wait,
                max_deliver: settings.max_deliver,
                ..Default::default()
            })
            .await
            .expect("the consumer is created");
        Self {
            context,
            name,
            subject,
        }
    }

    /// The consumer, through `context` (each runner of a test its own connection).
    pub async fn consumer_in(&self, context: &jetstream::Context) -> PullConsumer {
        context
            .get_stream(&self.name)
            .await
            .unwrap()
            .get_consumer("work")
            .await
            .unwrap()
    }

    /// The consumer, through the stream's own connection.
    pub async fn consumer(&self) -> PullConsumer {
        self.consumer_in(&self.context).await
    }

    /// Publishes `body` with the message id `id`; answers whether the server took it as a
    /// duplicate inside its window.
    pub async fn publish(&self, id: &str, body: &Value) -> bool {
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Msg-Id", id);
        let ack = self
            .context
            .publish_with_headers(self.subject.clone(), headers, Bytes::from(body.to_string()))
            .await
            .expect("published")
            .await
            .expect("the stream acknowledged the publication");
        ack.duplicate
    }

    /// The consumer's state: (messages not yet delivered, delivered and not acknowledged,
    /// redelivered).
    pub async fn pending(&self) -> (u64, usize, usize) {
        let info = self.consumer().await.get_info().await.unwrap();
        (info.num_pending, info.num_ack_pending, info.num_redelivered)
    }

    /// Waits until every message was delivered and settled (acknowledged or ended).
    pub async fn drained(&self, within: Duration) {
        let drained = eventually(within, async || {
            let (pending, ack_pending, _) = self.pending().await;
            pending == 0 && ack_pending == 0
        })
        .await;
        assert!(
            drained,
            "the consumer still has messages: {:?}",
            self.pending().await
        );
    }

    /// Deletes the stream.
    pub async fn delete(self) {
        let _ = self.context.delete_stream(&self.name).await;
    }
}

/// A `nats-server -js` of the test's own on a free port, with a temporary store directory;
/// killed (and its directory deleted) when dropped.
#[derive(Debug)]
pub struct NatsServer {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl NatsServer {
    /// Starts one, or says why it cannot (`nats-server` not on `PATH`) and answers `None`.
    pub async fn start() -> Option<Self> {
        let found = Command::new("nats-server")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if !found {
            eprintln!("skipped: `nats-server` is not on PATH");
            return None;
        }
        let dir = std::env::temp_dir().join(format!("idem-nats-{:016x}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).expect("a directory for the server");
        let port = crate::free_port();
        let child = Command::new("nats-server")
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string()])
            .args(["-sd", &dir.display().to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("cannot start nats-server");
        let server = Self { child, port, dir };
        let up = eventually(Duration::from_secs(10), async || {
            async_nats::connect(server.url()).await.is_ok()
        })
        .await;
        assert!(up, "nats-server did not come up");
        Some(server)
    }

    /// Its URL.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
