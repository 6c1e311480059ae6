//! The consumer's context (rdkafka's `ConsumerContext`): rebalance callbacks run from
//! `recv()` around each assignment change, and the commit callback for every commit whose
//! result the application did not wait for (`CommitMode::Async`, auto-commits).
//!
//! Order, as librdkafka's rebalance callback as rdkafka wraps it: `pre_rebalance`, then the
//! assignment changes (eager: replaced or cleared; cooperative: incrementally), then
//! `post_rebalance` — on the task that called `recv()`.

use crate::rdkafka::client::ClientContext;
use crate::rdkafka::consumer::inner::Inner;
use crate::rdkafka::error::{KafkaError, KafkaResult};
use crate::rdkafka::topic_partition_list::TopicPartitionList;

/// What a rebalance does (rdkafka's `Rebalance`).
#[derive(Clone, Debug)]
pub enum Rebalance<'a> {
    /// Partitions assigned: eager, the whole new assignment; cooperative, those added.
    Assign(&'a TopicPartitionList),
    /// Partitions revoked: eager, the whole assignment; cooperative, those taken away. When
    /// the assignment was lost (session expired, fenced), `assignment_lost()` is true during
    /// the callbacks.
    Revoke(&'a TopicPartitionList),
    /// The rebalance failed (rdkafka's; this client reports group errors from `recv()` instead
    /// and does not produce this variant).
    Error(KafkaError),
}

/// A consumer's callbacks (rdkafka's `ConsumerContext`); every method has a default that
/// does nothing. rdkafka's `rebalance` (which runs librdkafka's assign itself) is not part of
/// this trait: the consumer changes the assignment between the two callbacks.
pub trait ConsumerContext: ClientContext + Sized {
    /// Before the assignment changes. The consumer is usable: `assignment()`,
    /// `commit(.., CommitMode::Async)`, `store_offset`, `seek`, `pause`.
    #[allow(unused_variables)]
    fn pre_rebalance(&self, base_consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {}

    /// After the assignment changed.
    #[allow(unused_variables)]
    fn post_rebalance(&self, base_consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {}

    /// A commit's result, with the offsets it was for (each carrying its partition's error).
    /// For every commit, as librdkafka's `offset_commit_cb`: one made with `CommitMode::Async`
    /// or an auto-commit is reported from `recv()` (librdkafka serves it from the consumer's
    /// poll); one made with `CommitMode::Sync` from the commit call itself, before it returns.
    #[allow(unused_variables)]
    fn commit_callback(&self, result: KafkaResult<()>, offsets: &TopicPartitionList) {}
}

/// A context with no callbacks (rdkafka's `DefaultConsumerContext`).
#[derive(Clone, Debug, Default)]
pub struct DefaultConsumerContext;

impl ClientContext for DefaultConsumerContext {}
impl ConsumerContext for DefaultConsumerContext {}

/// A consumer handle (rdkafka's `BaseConsumer`): what rebalance callbacks get. It has no
/// `poll` here — messages come from [`StreamConsumer::recv`](crate::rdkafka::consumer::StreamConsumer::recv) — and
/// is not created from a `ClientConfig`.
pub struct BaseConsumer<C: ConsumerContext = DefaultConsumerContext> {
    pub(crate) inner: std::sync::Arc<Inner<C>>,
}

impl<C: ConsumerContext> std::fmt::Debug for BaseConsumer<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BaseConsumer").field("client_id", &self.inner.s.client_id).finish_non_exhaustive()
    }
}
