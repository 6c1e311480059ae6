//! Producers (rdkafka's `producer`): [`FutureProducer`] and what it is made of.
//!
//! Files, one concept each, each using only those above it in this list: `settings`
//! (configuration read), `partitioner`, `metadata` (the cache), `idempotence` (KIP-98 state),
//! `delivery` (reports), `batch` (encoding), `sender` (the background task), `future_producer`.

pub mod batch;
pub mod delivery;
pub mod future_producer;
pub mod idempotence;
pub mod metadata;
pub mod partitioner;
pub(crate) mod sender;
pub mod settings;

pub use future_producer::{Canceled, Delivery, DeliveryFuture, FutureProducer, FutureRecord, OwnedDeliveryResult};
