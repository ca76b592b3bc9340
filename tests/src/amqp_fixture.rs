//! RabbitMQ for the message tests: the shared broker's URL, and queues of the test's own.
//!
//! Tests read the URL from `IDEM_TEST_AMQP_URL` and skip, saying so, when it is unset. Every
//! test declares queues of its own, `q<random>`, deleted by [`TestQueue::delete`].

use bytes::Bytes;
use lapin::{
    BasicProperties, Channel, Connection, ConnectionProperties,
    options::{BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions, QueueDeleteOptions},
    types::{AMQPValue, FieldTable, ShortString},
};
use serde_json::Value;

/// The shared RabbitMQ, or `None` (with a note on stderr) when `IDEM_TEST_AMQP_URL` is unset.
pub fn amqp_url(test: &str) -> Option<String> {
    match std::env::var("IDEM_TEST_AMQP_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            eprintln!("skipped {test}: IDEM_TEST_AMQP_URL is not set");
            None
        }
    }
}

/// A new connection to `url`.
pub async fn connect(url: &str) -> Connection {
    Connection::connect(url, ConnectionProperties::default())
        .await
        .expect("RabbitMQ answers")
}

/// A queue of the test's own, whose rejected messages go to a dead-letter queue of its own.
#[derive(Debug)]
pub struct TestQueue {
    /// The channel the test publishes on, with publisher confirms.
    pub channel: Channel,
    /// The queue's name.
    pub name: String,
    /// Its dead-letter queue's name.
    pub dead: String,
    _connection: Connection,
}

impl TestQueue {
    /// Declares the queue and its dead-letter queue on the broker at `url`.
    pub async fn create(url: &str) -> Self {
        let connection = connect(url).await;
        let channel = connection.create_channel().await.unwrap();
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .unwrap();
        let name = format!("q{:016x}", rand::random::<u64>());
        let dead = format!("{name}.dead");
        channel
            .queue_declare(
                dead.as_str().into(),
                QueueDeclareOptions::default(),
                FieldTable::default(),
            )
            .await
            .unwrap();
        let mut arguments = FieldTable::default();
        arguments.insert(
            "x-dead-letter-exchange".into(),
            AMQPValue::LongString("".into()),
        );
        arguments.insert(
            "x-dead-letter-routing-key".into(),
            AMQPValue::LongString(dead.as_str().into()),
        );
        channel
            .queue_declare(
                name.as_str().into(),
                QueueDeclareOptions::default(),
                arguments,
            )
            .await
            .unwrap();
        Self {
            channel,
            name,
            dead,
            _connection: connection,
        }
    }

    /// Publishes `body` as JSON with the message id `id`, and waits for the broker's confirm.
    pub async fn publish(&self, id: &str, body: &Value) {
        let properties = BasicProperties::default()
            .with_message_id(ShortString::from(id))
            .with_content_type(ShortString::from("application/json"));
        self.channel
            .basic_publish(
                "".into(),
                self.name.as_str().into(),
                BasicPublishOptions::default(),
                Bytes::from(body.to_string()).as_ref(),
                properties,
            )
            .await
            .expect("published")
            .await
            .expect("confirmed");
    }

    /// The number of messages ready in `queue` (not those delivered and unacknowledged).
    pub async fn ready(&self, queue: &str) -> u32 {
        let passive = QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        };
        self.channel
            .queue_declare(queue.into(), passive, FieldTable::default())
            .await
            .unwrap()
            .message_count()
    }

    /// Deletes both queues.
    pub async fn delete(self) {
        for queue in [&self.name, &self.dead] {
            let _ = self
                .channel
                .queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
                .await;
        }
    }
}
