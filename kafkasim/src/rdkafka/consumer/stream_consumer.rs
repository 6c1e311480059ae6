//! The stream consumer (rdkafka's `consumer::stream_consumer`): [`StreamConsumer::recv`] and
//! [`StreamConsumer::stream`]. Each `recv()` first applies what the group decided (rebalances,
//! with the context's callbacks) and serves commit callbacks, then returns the next fetched
//! message or error — librdkafka's consumer poll.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::rdkafka::client::DefaultClientContext;
use crate::rdkafka::config::{ClientConfig, FromClientConfigAndContext};
use crate::rdkafka::consumer::api::{CommitMode, Consumer};
use crate::rdkafka::consumer::context::BaseConsumer;
use crate::rdkafka::consumer::context::{ConsumerContext, DefaultConsumerContext};
use crate::rdkafka::consumer::group::assignor::RebalanceProtocol;
use crate::rdkafka::consumer::group::{GroupCommand, GroupHandle};
use crate::rdkafka::error::{KafkaError, KafkaResult};
use crate::rdkafka::message::BorrowedMessage;
use crate::rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use crate::rdkafka::util::Timeout;

/// A consumer whose messages are futures (rdkafka's `StreamConsumer`). Create it with
/// [`ClientConfig::create`] (or `create_with_context`) on a task of the node it runs on (inside
/// a simulation) or on a tokio runtime (outside).
///
/// Dropping it closes it as rdkafka's drop does (`rd_kafka_consumer_close`): the rebalance
/// events already decided are applied, a group assignment is revoked through the context's
/// `pre_rebalance(Revoke)` / `post_rebalance(Revoke)` (run by the drop, on this task; commits
/// made in them go first), the stored offsets are committed (auto-commit), and the group is
/// left (LeaveGroup unless static). rdkafka's drop blocks until the group was left; here the
/// drop cannot wait, the commits and LeaveGroup are sent by the consumer's task after it —
/// [`StreamConsumer::close`] waits for them.
pub struct StreamConsumer<C: ConsumerContext = DefaultConsumerContext> {
    base: BaseConsumer<C>,
}

impl<C: ConsumerContext> std::fmt::Debug for StreamConsumer<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamConsumer").field("base", &self.base).finish()
    }
}

impl<C: ConsumerContext> FromClientConfigAndContext<C> for StreamConsumer<C> {
    /// # Errors
    /// [`KafkaError::ClientConfig`] for a bad property; [`KafkaError::ClientCreation`] for no
    /// `bootstrap.servers`, outside a tokio runtime, or inside a simulation run but not on a
    /// node's task.
    fn from_config_and_context(config: &ClientConfig, context: C) -> KafkaResult<StreamConsumer<C>> {
        Ok(StreamConsumer { base: BaseConsumer::create(config, context)? })
    }
}

/// `ClientConfig::create()` gives a consumer with [`DefaultConsumerContext`], as rdkafka's.
impl FromClientConfigAndContext<DefaultClientContext> for StreamConsumer<DefaultConsumerContext> {
    fn from_config_and_context(config: &ClientConfig, _: DefaultClientContext) -> KafkaResult<Self> {
        Ok(StreamConsumer { base: BaseConsumer::create(config, DefaultConsumerContext)? })
    }
}

impl<C: ConsumerContext> StreamConsumer<C> {
    /// The next message (or a consumption error), waiting for one. Rebalances the group decided
    /// are applied first, running the context's callbacks on this task.
    pub async fn recv(&self) -> Result<BorrowedMessage<'_>, KafkaError> {
        let inner = &self.base.inner;
        if let Some(g) = &inner.group {
            g.send(GroupCommand::Polled);
        }
        let mut waiting: Option<InPoll<'_>> = None;
        loop {
            let notified = inner.signals.data.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(r) = inner.poll_once(&self.base) {
                drop(waiting);
                return r.map(BorrowedMessage::new);
            }
            if waiting.is_none()
                && let Some(g) = &inner.group
            {
                g.send(GroupCommand::InPoll(true));
                waiting = Some(InPoll(g));
            }
            notified.await;
        }
    }

    /// The messages as a stream (each item what [`StreamConsumer::recv`] returns); it never
    /// ends.
    pub fn stream(&self) -> MessageStream<'_, C> {
        MessageStream { consumer: self, next: None }
    }

    /// Closes the consumer as dropping it does, and resolves once the queued commits were
    /// answered and the group left (or `socket.timeout.ms` passed). Not in rdkafka, whose drop
    /// blocks until then: a service shutting down inside a grace period awaits this where
    /// rdkafka's would drop the consumer.
    pub fn close(self) -> impl Future<Output = ()> + Send + 'static {
        let done = self.base.inner.close(&self.base);
        drop(self);
        async move {
            if let Some(done) = done {
                let _ = done.await;
            }
        }
    }

    /// The handle rebalance callbacks get.
    pub fn base(&self) -> &BaseConsumer<C> {
        &self.base
    }

    /// The group member id, `None` before joining.
    pub fn member_id(&self) -> Option<String> {
        self.base.member_id()
    }

    /// The group generation (-1 before the first join or without a group).
    pub fn generation(&self) -> i32 {
        self.base.generation()
    }
}

impl<C: ConsumerContext> Drop for StreamConsumer<C> {
    fn drop(&mut self) {
        drop(self.base.inner.close(&self.base));
    }
}

/// While alive, `recv()` is waiting: the group does not count it against
/// `max.poll.interval.ms` (as librdkafka does not count a blocked poll); dropped when `recv()`
/// returns or its future is dropped.
struct InPoll<'a>(&'a GroupHandle);

impl Drop for InPoll<'_> {
    fn drop(&mut self) {
        self.0.send(GroupCommand::InPoll(false));
    }
}

type Next<'a> = Pin<Box<dyn Future<Output = KafkaResult<BorrowedMessage<'a>>> + Send + 'a>>;

/// The stream of a [`StreamConsumer`]'s messages (rdkafka's `MessageStream`).
pub struct MessageStream<'a, C: ConsumerContext> {
    consumer: &'a StreamConsumer<C>,
    next: Option<Next<'a>>,
}

impl<'a, C: ConsumerContext> futures_core::Stream for MessageStream<'a, C> {
    type Item = KafkaResult<BorrowedMessage<'a>>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let consumer = self.consumer;
        let next = self.next.get_or_insert_with(|| Box::pin(consumer.recv()));
        match next.as_mut().poll(cx) {
            Poll::Ready(item) => {
                self.next = None;
                Poll::Ready(Some(item))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<C: ConsumerContext> Consumer<C> for StreamConsumer<C> {
    fn context(&self) -> &Arc<C> {
        self.base.context()
    }
    fn subscribe(&self, topics: &[&str]) -> KafkaResult<()> {
        self.base.subscribe(topics)
    }
    fn unsubscribe(&self) {
        self.base.unsubscribe();
    }
    fn assign(&self, assignment: &TopicPartitionList) -> KafkaResult<()> {
        self.base.assign(assignment)
    }
    fn unassign(&self) -> KafkaResult<()> {
        self.base.unassign()
    }
    fn incremental_assign(&self, assignment: &TopicPartitionList) -> KafkaResult<()> {
        self.base.incremental_assign(assignment)
    }
    fn incremental_unassign(&self, assignment: &TopicPartitionList) -> KafkaResult<()> {
        self.base.incremental_unassign(assignment)
    }
    fn seek<T: Into<Timeout>>(&self, topic: &str, partition: i32, offset: Offset, timeout: T) -> KafkaResult<()> {
        self.base.seek(topic, partition, offset, timeout)
    }
    fn seek_partitions<T: Into<Timeout>>(
        &self,
        topic_partition_list: TopicPartitionList,
        timeout: T,
    ) -> KafkaResult<TopicPartitionList> {
        self.base.seek_partitions(topic_partition_list, timeout)
    }
    fn commit(
        &self,
        topic_partition_list: &TopicPartitionList,
        mode: CommitMode,
    ) -> impl Future<Output = KafkaResult<()>> + Send + 'static {
        self.base.commit(topic_partition_list, mode)
    }
    fn commit_consumer_state(&self, mode: CommitMode) -> impl Future<Output = KafkaResult<()>> + Send + 'static {
        self.base.commit_consumer_state(mode)
    }
    fn commit_message(
        &self,
        message: &BorrowedMessage<'_>,
        mode: CommitMode,
    ) -> impl Future<Output = KafkaResult<()>> + Send + 'static {
        self.base.commit_message(message, mode)
    }
    fn store_offset(&self, topic: &str, partition: i32, offset: i64) -> KafkaResult<()> {
        self.base.store_offset(topic, partition, offset)
    }
    fn store_offset_from_message(&self, message: &BorrowedMessage<'_>) -> KafkaResult<()> {
        self.base.store_offset_from_message(message)
    }
    fn store_offsets(&self, tpl: &TopicPartitionList) -> KafkaResult<()> {
        self.base.store_offsets(tpl)
    }
    fn subscription(&self) -> KafkaResult<TopicPartitionList> {
        self.base.subscription()
    }
    fn assignment(&self) -> KafkaResult<TopicPartitionList> {
        self.base.assignment()
    }
    fn assignment_lost(&self) -> bool {
        self.base.assignment_lost()
    }
    fn committed<T: Into<Timeout>>(
        &self,
        timeout: T,
    ) -> impl Future<Output = KafkaResult<TopicPartitionList>> + Send + 'static {
        self.base.committed(timeout)
    }
    fn committed_offsets<T: Into<Timeout>>(
        &self,
        tpl: TopicPartitionList,
        timeout: T,
    ) -> impl Future<Output = KafkaResult<TopicPartitionList>> + Send + 'static {
        self.base.committed_offsets(tpl, timeout)
    }
    fn offsets_for_times<T: Into<Timeout>>(
        &self,
        timestamps: TopicPartitionList,
        timeout: T,
    ) -> impl Future<Output = KafkaResult<TopicPartitionList>> + Send + 'static {
        self.base.offsets_for_times(timestamps, timeout)
    }
    fn offsets_for_timestamp<T: Into<Timeout>>(
        &self,
        timestamp: i64,
        timeout: T,
    ) -> impl Future<Output = KafkaResult<TopicPartitionList>> + Send + 'static {
        self.base.offsets_for_timestamp(timestamp, timeout)
    }
    fn position(&self) -> KafkaResult<TopicPartitionList> {
        self.base.position()
    }
    fn fetch_watermarks<T: Into<Timeout>>(
        &self,
        topic: &str,
        partition: i32,
        timeout: T,
    ) -> impl Future<Output = KafkaResult<(i64, i64)>> + Send + 'static {
        self.base.fetch_watermarks(topic, partition, timeout)
    }
    fn pause(&self, partitions: &TopicPartitionList) -> KafkaResult<()> {
        self.base.pause(partitions)
    }
    fn resume(&self, partitions: &TopicPartitionList) -> KafkaResult<()> {
        self.base.resume(partitions)
    }
    fn rebalance_protocol(&self) -> RebalanceProtocol {
        self.base.rebalance_protocol()
    }
}
