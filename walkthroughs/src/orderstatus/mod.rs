//! Order status: an axum API producing order events to Kafka, a consumer group projecting them
//! into a store, and the API serving each order's status from the store — written against
//! rdkafka's API (`service.rs`), compiled here on `kafkasim::rdkafka` ([`service`]) and in
//! `tests/orderstatus_rdkafka.rs` on real rdkafka against kafkasim's loopback broker.
//!
//! - the API (`api-0`): `POST /orders/{id}/{status}` produces an order event keyed by the order
//!   (idempotent producer, acks=all); `GET /orders/{id}` serves the status from the store;
//! - the projector group (`projector-N`, 1–3 replicas, versions v1/v2 for rollouts): at-least-
//!   once, manual async commits after processing, processing off the recv loop on a worker per
//!   partition; the store ([`model::Store`]) is shared state standing for a database.
//!
//! Customers place orders and advance them (placed → paid → shipped → delivered, or
//! cancelled). The swarm draws projector crashes, restarts and rollouts, network partitions of
//! projectors and the API, broker faults (a broker down, lost produce responses, refused
//! commits); the churn swarm adds frequent projector restarts, crashes and rollouts with short
//! session timeouts and slow processing.
//!
//! Oracles: Q1–Q9 ([`kafkasim::models::install`]), the list-append checker on the topic (the
//! API's produces and the final logs), and the service's own model: every placed order's final
//! status is served once faults heal ([`ORDER_SERVED`]), and no served status goes backwards
//! ([`STATUS_MONOTONIC`]).
//!
//! Planted bug ([`Variant::LateCommit`], humus #757): the commit after processing is not fenced;
//! a worker that processed a record before a rebalance and finishes after it commits a partition
//! its member no longer holds, with the member's new generation — accepted, it moves the new owner's committed offset
//! back. Q2 (`q2-monotonic-commits`) finds it.

pub mod model;
pub mod observe;
mod simulation;

pub use simulation::{PARTITIONS, run};

use sim::Oracle;

/// The orders topic.
pub const TOPIC: &str = "orders";
/// The projector's consumer group.
pub const GROUP: &str = "orderstatus";
/// The oracle that every placed order's final status is served once faults heal.
pub const ORDER_SERVED: Oracle = Oracle::new("order-served");
/// The oracle that no served status goes backwards.
pub const STATUS_MONOTONIC: Oracle = Oracle::new("status-monotonic");
/// Q2's oracle (the planted bug's).
pub const Q2: Oracle = Oracle::new(kafkasim::models::Q2);

/// Which order-status system runs, under which swarm.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Variant {
    /// Workers fenced by ownership epoch; the default swarm.
    Correct,
    /// Workers fenced; the churn swarm.
    CorrectChurn,
    /// Late commits after a rebalance, unfenced (the planted bug); the default swarm.
    LateCommit,
    /// The planted bug under the churn swarm.
    LateCommitChurn,
}

impl Variant {
    /// Every variant, correct first.
    pub const ALL: [Variant; 4] =
        [Variant::Correct, Variant::CorrectChurn, Variant::LateCommit, Variant::LateCommitChurn];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Correct => "correct",
            Variant::CorrectChurn => "correct, churn swarm",
            Variant::LateCommit => "planted: late commit after a rebalance",
            Variant::LateCommitChurn => "planted: late commit after a rebalance, churn swarm",
        }
    }

    /// The oracle that must catch it (none for a correct variant).
    pub fn oracle(self) -> Option<Oracle> {
        self.planted().then_some(Q2)
    }

    /// The simulation's name for this variant.
    pub fn simulation(self) -> &'static str {
        match self {
            Variant::Correct => "orderstatus",
            Variant::CorrectChurn => "orderstatus_churn",
            Variant::LateCommit => "orderstatus_late_commit",
            Variant::LateCommitChurn => "orderstatus_late_commit_churn",
        }
    }

    /// Whether it has the planted bug.
    pub fn planted(self) -> bool {
        matches!(self, Variant::LateCommit | Variant::LateCommitChurn)
    }

    /// Whether it runs under the churn swarm.
    pub fn churn(self) -> bool {
        matches!(self, Variant::CorrectChurn | Variant::LateCommitChurn)
    }
}

/// The service on `kafkasim::rdkafka` (the source is `service.rs`, shared with the real-rdkafka
/// test).
#[allow(missing_docs)]
pub mod service {
    use super::model::*;
    use kafkasim::rdkafka as kafka;
    include!("service.rs");

    /// `Consumer::commit` with `CommitMode::Sync`: kafkasim::rdkafka's future resolves with the
    /// coordinator's answer (no commit callback runs for it, as in librdkafka).
    async fn commit_sync(consumer: &impl Consumer<ProjectorContext>, offsets: &TopicPartitionList) -> KafkaResult<()> {
        consumer.commit(offsets, kafka::consumer::CommitMode::Sync).await
    }

    /// `Consumer::commit` with `CommitMode::Async`: kafkasim::rdkafka's returns a future (the
    /// commit is queued at the call, and an async commit's future is ready at once).
    fn commit_async(consumer: &impl Consumer<ProjectorContext>, offsets: &TopicPartitionList) -> KafkaResult<()> {
        use futures::FutureExt;
        consumer.commit(offsets, kafka::consumer::CommitMode::Async).now_or_never().unwrap_or(Ok(()))
    }

    /// Closes the consumer and waits until it is closed: kafkasim::rdkafka's
    /// `StreamConsumer::close` runs what rdkafka's drop does (revoke callbacks, the queued
    /// commits, LeaveGroup) and resolves once the commits were answered and the group left —
    /// rdkafka's drop blocks until then; here the node must not return before it.
    async fn close(consumer: Arc<Projector>) {
        match Arc::try_unwrap(consumer) {
            Ok(consumer) => consumer.close().await,
            // A handle still held elsewhere (none is, once the workers ended): dropping the last
            // one closes the consumer without waiting.
            Err(shared) => drop(shared),
        }
    }
}
