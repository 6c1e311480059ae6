//! A Kafka client with rdkafka's API shape, running on the run's tokio clock and
//! seeded RNG, dialing through the simulation node's host — no threads of its own, no real
//! sockets inside a simulation. Outside one (a plain tokio runtime) it dials real sockets, so the
//! same code runs against kafkasim on loopback or a real Kafka.
//!
//! Paths mirror rdkafka 0.39's, so a service switches with one `use` under a cfg:
//!
//! ```
//! # #[cfg(any())] use rdkafka as kafka;
//! use kafkasim::rdkafka as kafka;
//! use kafka::config::ClientConfig;
//! use kafka::producer::{FutureProducer, FutureRecord};
//! # let _ = (ClientConfig::new(), FutureRecord::<str, str>::to("t"));
//! ```
//!
//! It has the producer ([`producer::FutureProducer`]) and the consumer with consumer groups
//! ([`consumer::StreamConsumer`]). What differs from rdkafka, and how a service switches between
//! the two, is in the guide (`docs/src/kafkasim.md`, "An rdkafka-shaped client").

pub mod client;
pub mod config;
pub mod consumer;
pub mod error;
pub mod message;
mod net;
pub mod producer;
mod task;
pub mod topic_partition_list;
pub mod util;

pub use config::ClientConfig;
pub use message::{Message, Timestamp};
pub use topic_partition_list::{Offset, TopicPartitionList};
pub use util::Timeout;
