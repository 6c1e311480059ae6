//! Order status: an axum API producing order events to Kafka, a consumer group projecting them
//! into a store, and the API serving each order's status from the store — written against
//! rdkafka's API (`service.rs`), compiled here on `kafkasim::rdkafka` and in
//! `tests/orderstatus_rdkafka.rs` on real rdkafka.

pub mod model;
pub mod observe;
