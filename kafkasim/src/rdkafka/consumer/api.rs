//! What every consumer does: the [`Consumer`] trait (rdkafka's) and [`CommitMode`].

use std::future::Future;
use std::sync::Arc;

use crate::rdkafka::consumer::context::{ConsumerContext, DefaultConsumerContext};
use crate::rdkafka::consumer::group::assignor::RebalanceProtocol;
use crate::rdkafka::error::KafkaResult;
use crate::rdkafka::message::BorrowedMessage;
use crate::rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use crate::rdkafka::util::Timeout;

/// Whether a commit's caller waits for the broker's answer (rdkafka's `CommitMode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommitMode {
    /// The commit's future resolves with the broker's answer.
    Sync = 0,
    /// The commit's future resolves at once; the answer goes to
    /// [`ConsumerContext::commit_callback`] from `recv()`.
    Async = 1,
}

/// What every consumer does (rdkafka's `Consumer`). Differences from rdkafka: the methods that
/// block in rdkafka return futures (see the module docs), `client()`, `group_metadata()`,
/// `fetch_metadata()` and `fetch_group_list()` are not here.
pub trait Consumer<C: ConsumerContext = DefaultConsumerContext> {
    /// The context.
    fn context(&self) -> &Arc<C>;

    /// Subscribes to `topics` (replacing the subscription); the group assigns partitions,
    /// applied from `recv()`.
    ///
    /// # Errors
    /// `Subscription("Local: Unknown group")` without `group.id`.
    fn subscribe(&self, topics: &[&str]) -> KafkaResult<()>;

    /// Drops the subscription: the assignment is revoked (from `recv()`) and the group left.
    fn unsubscribe(&self);

    /// Sets the assignment (manual assignment: no rebalances). Each element's offset says where
    /// to start: `Offset::Offset(n)`, `Beginning`, `End`, `OffsetTail(n)`, or `Stored`/`Invalid`
    /// for the committed offset (else `auto.offset.reset`).
    ///
    /// # Errors
    /// None here (rdkafka's signature).
    fn assign(&self, assignment: &TopicPartitionList) -> KafkaResult<()>;

    /// Clears the assignment.
    ///
    /// # Errors
    /// None here.
    fn unassign(&self) -> KafkaResult<()>;

    /// Adds partitions to the assignment (cooperative rebalancing's assign).
    ///
    /// # Errors
    /// None here.
    fn incremental_assign(&self, assignment: &TopicPartitionList) -> KafkaResult<()>;

    /// Removes partitions from the assignment.
    ///
    /// # Errors
    /// None here.
    fn incremental_unassign(&self, assignment: &TopicPartitionList) -> KafkaResult<()>;

    /// Moves a partition's position to `offset`: messages already fetched are dropped, the next
    /// one `recv()` returns is at `offset`. Applied at once: `timeout` is not needed.
    ///
    /// # Errors
    /// `Seek("Local: Unknown partition")` when it is not assigned.
    fn seek<T: Into<Timeout>>(&self, topic: &str, partition: i32, offset: Offset, timeout: T) -> KafkaResult<()>;

    /// Seeks each partition of the list to its offset; each element carries its error.
    ///
    /// # Errors
    /// None here (per-partition errors are in the list).
    fn seek_partitions<T: Into<Timeout>>(
        &self,
        topic_partition_list: TopicPartitionList,
        timeout: T,
    ) -> KafkaResult<TopicPartitionList>;

    /// Commits the list's offsets (`Offset::Offset(n)`: the next offset to read). A future here
    /// (rdkafka's blocks with `CommitMode::Sync`); the commit is queued at the call.
    fn commit(
        &self,
        topic_partition_list: &TopicPartitionList,
        mode: CommitMode,
    ) -> impl Future<Output = KafkaResult<()>> + Send + 'static;

    /// Commits the stored offsets of the assignment not committed yet. `ConsumerCommit(NoOffset)`
    /// when there are none (with `Async`, to `commit_callback`). A future here.
    fn commit_consumer_state(&self, mode: CommitMode) -> impl Future<Output = KafkaResult<()>> + Send + 'static;

    /// Commits `message`'s offset + 1. A future here.
    fn commit_message(
        &self,
        message: &BorrowedMessage<'_>,
        mode: CommitMode,
    ) -> impl Future<Output = KafkaResult<()>> + Send + 'static;

    /// Stores `offset` + 1 for the partition (librdkafka's `rd_kafka_offset_store`), committed
    /// by the next commit of the consumer's state or auto-commit.
    ///
    /// # Errors
    /// `StoreOffset(State)` when the partition is not assigned, `StoreOffset(UnknownPartition)`
    /// when the consumer knows no such partition (librdkafka's `rd_kafka_offset_store`).
    fn store_offset(&self, topic: &str, partition: i32, offset: i64) -> KafkaResult<()>;

    /// Stores `message`'s offset + 1.
    ///
    /// # Errors
    /// As [`Consumer::store_offset`].
    fn store_offset_from_message(&self, message: &BorrowedMessage<'_>) -> KafkaResult<()>;

    /// Stores the list's offsets as given (the next to read) with their metadata.
    ///
    /// # Errors
    /// `StoreOffset(InvalidArgument)` with `enable.auto.offset.store=true`; when none of the
    /// partitions could be stored, the last one's error (`State`, `UnknownPartition`); each
    /// element carries its own.
    fn store_offsets(&self, tpl: &TopicPartitionList) -> KafkaResult<()>;

    /// The subscribed topics (partition -1 each).
    ///
    /// # Errors
    /// None here.
    fn subscription(&self) -> KafkaResult<TopicPartitionList>;

    /// The current assignment.
    ///
    /// # Errors
    /// None here.
    fn assignment(&self) -> KafkaResult<TopicPartitionList>;

    /// Whether the assignment was lost (session expired, fenced, UNKNOWN_MEMBER_ID): true from
    /// the moment the group loses it — before the application polls, as librdkafka sets the flag
    /// on its group thread (`rd_kafka_cgrp_assignment_set_lost`) — through the revoke callbacks
    /// of the lost assignment, which clear it (`rd_kafka_assignment_clear`).
    fn assignment_lost(&self) -> bool;

    /// The committed offsets of the assignment (`Offset::Invalid`: none). A future here.
    fn committed<T: Into<Timeout>>(
        &self,
        timeout: T,
    ) -> impl Future<Output = KafkaResult<TopicPartitionList>> + Send + 'static;

    /// The committed offsets of the list's partitions. A future here.
    fn committed_offsets<T: Into<Timeout>>(
        &self,
        tpl: TopicPartitionList,
        timeout: T,
    ) -> impl Future<Output = KafkaResult<TopicPartitionList>> + Send + 'static;

    /// For each element (offset: a timestamp in ms), the earliest offset whose timestamp is at
    /// or after it (`Offset::End` when none). A future here.
    fn offsets_for_times<T: Into<Timeout>>(
        &self,
        timestamps: TopicPartitionList,
        timeout: T,
    ) -> impl Future<Output = KafkaResult<TopicPartitionList>> + Send + 'static;

    /// [`Consumer::offsets_for_times`] of `timestamp` for every assigned partition.
    fn offsets_for_timestamp<T: Into<Timeout>>(
        &self,
        timestamp: i64,
        timeout: T,
    ) -> impl Future<Output = KafkaResult<TopicPartitionList>> + Send + 'static;

    /// The application's position in each assigned partition: the last returned offset + 1
    /// (`Offset::Invalid` before any).
    ///
    /// # Errors
    /// None here.
    fn position(&self) -> KafkaResult<TopicPartitionList>;

    /// The partition's low and high watermarks, from its leader. A future here.
    fn fetch_watermarks<T: Into<Timeout>>(
        &self,
        topic: &str,
        partition: i32,
        timeout: T,
    ) -> impl Future<Output = KafkaResult<(i64, i64)>> + Send + 'static;

    /// Stops fetching the list's partitions (what was fetched is dropped; `resume` continues
    /// from the position).
    ///
    /// # Errors
    /// None here.
    fn pause(&self, partitions: &TopicPartitionList) -> KafkaResult<()>;

    /// Fetches the list's partitions again.
    ///
    /// # Errors
    /// None here.
    fn resume(&self, partitions: &TopicPartitionList) -> KafkaResult<()>;

    /// The rebalance protocol of the group's assignor (`None` before joining or without a group).
    fn rebalance_protocol(&self) -> RebalanceProtocol;
}
