//! Message handlers against real brokers: JetStream (`IDEM_TEST_NATS_URL`), RabbitMQ
//! (`IDEM_TEST_AMQP_URL`) and, for the faults, a `nats-server` of the test's own and
//! PostgreSQL (`IDEM_TEST_DATABASE_URL`). One test binary: each of these links the brokers'
//! clients, and one link is cheaper than three.

mod amqp;
mod faults;
mod nats;
mod shop;
