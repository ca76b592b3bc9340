//! Message handlers: one effect per message on a broker that delivers at least once.
//!
//! (Module docs: see docs/messages.md.)

mod door;
mod error;
mod handler;
mod key;
mod route;
mod runner;
mod source;
mod verdict;

#[cfg(feature = "nats")]
#[cfg_attr(docsrs, doc(cfg(feature = "nats")))]
pub mod nats;

#[cfg(feature = "amqp")]
#[cfg_attr(docsrs, doc(cfg(feature = "amqp")))]
pub mod amqp;

pub use self::{
    error::MessageError,
    handler::{MessageHandler, MessageService},
    key::{MessageKey, MessageKeyError},
    route::path_segment,
    runner::{Runner, RunnerError, RunnerStats},
    source::{BrokerError, Delivery, MessageSource, Requirements},
};
