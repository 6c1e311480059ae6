//! The consumer itself (rdkafka's `BaseConsumer`, without `poll`): the shared state, the group
//! handle, creation, and the [`Consumer`] methods (rebalances and the close: `rebalance`). A
//! [`StreamConsumer`](super::StreamConsumer) is a `BaseConsumer` with `recv()`; the callbacks
//! get the `BaseConsumer` and can call any [`Consumer`] method on it.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::{mpsc, oneshot};

use crate::rdkafka::config::ClientConfig;
use crate::rdkafka::consumer::api::{CommitMode, Consumer};
use crate::rdkafka::consumer::commit::Offsets;
pub use crate::rdkafka::consumer::context::BaseConsumer;
use crate::rdkafka::consumer::context::ConsumerContext;
use crate::rdkafka::consumer::fetcher::{self, CommittedReply, Owner, Signals};
use crate::rdkafka::consumer::group::assignor::RebalanceProtocol;
use crate::rdkafka::consumer::group::{self, GroupCommand, GroupHandle, GroupSettings};
use crate::rdkafka::consumer::inner::{Inner, lock, tpl_of_tps, tps};
use crate::rdkafka::consumer::positions::{State, Tp};
use crate::rdkafka::consumer::settings::ConsumerSettings;
use crate::rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode as Code};
use crate::rdkafka::message::{BorrowedMessage, Message};
use crate::rdkafka::net::Dialer;
use crate::rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use crate::rdkafka::util::Timeout;

fn has_duplicates(tpl: &TopicPartitionList) -> bool {
    let all = tps(tpl);
    all.iter().collect::<std::collections::BTreeSet<_>>().len() != all.len()
}

impl<C: ConsumerContext> Owner for Inner<C> {
    fn auto_commit(&self) {
        let offsets = self.lock().to_commit(None);
        if !offsets.is_empty() {
            self.auto_commit_offsets(offsets);
        }
    }

    fn lookup_committed(&self, partitions: Vec<Tp>) -> Option<oneshot::Receiver<CommittedReply>> {
        let g = self.group.as_ref()?;
        let (reply, rx) = oneshot::channel();
        g.send(GroupCommand::Committed { partitions, reply });
        Some(rx)
    }
}

impl<C: ConsumerContext> BaseConsumer<C> {
    /// Creates the consumer, its fetcher and (with `group.id`) its group task.
    pub(crate) fn create(config: &ClientConfig, context: C) -> KafkaResult<BaseConsumer<C>> {
        let s = Arc::new(ConsumerSettings::from_config(config)?);
        let group_settings = GroupSettings::from_config(config)?;
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(KafkaError::ClientCreation("kafkasim::rdkafka needs a tokio runtime".into()));
        }
        let dialer = Dialer::current(crate::rdkafka::net::setup_timeout(config)).map_err(KafkaError::ClientCreation)?;
        let events = Arc::new(Mutex::new(VecDeque::new()));
        let signals = Arc::new(Signals::default());
        let group = group_settings.map(|gs| {
            let (tx, mut rx) = mpsc::unbounded_channel();
            let handle = group::spawn(gs, dialer.clone(), tx);
            let (events, signals) = (Arc::clone(&events), Arc::clone(&signals));
            crate::rdkafka::task::spawn_task(async move {
                while let Some(e) = rx.recv().await {
                    lock(&events).push_back(e);
                    signals.data.notify_waiters();
                }
            });
            handle
        });
        let (alive, alive_rx) = mpsc::unbounded_channel();
        let state = Arc::new(Mutex::new(State::default()));
        let inner = Arc::new(Inner {
            s: Arc::clone(&s),
            context: Arc::new(context),
            state: Arc::clone(&state),
            signals: Arc::clone(&signals),
            group,
            events,
            rebalancing: Mutex::new(()),
            closed: std::sync::atomic::AtomicBool::new(false),
            dialer: dialer.clone(),
            _alive: alive,
        });
        let weak: Weak<Inner<C>> = Arc::downgrade(&inner);
        fetcher::spawn(s, dialer, state, signals, weak, alive_rx);
        Ok(BaseConsumer { inner })
    }

    /// The group member id (rdkafka's `member_id` on the client), `None` before joining.
    pub fn member_id(&self) -> Option<String> {
        self.inner.group.as_ref().and_then(GroupHandle::member_id)
    }

    /// The group generation (-1 before the first join or without a group).
    pub fn generation(&self) -> i32 {
        self.inner.group.as_ref().map_or(-1, GroupHandle::generation)
    }

    /// librdkafka refuses assignment changes through the API of the other rebalance protocol
    /// once the group negotiated one (`__STATE`: "must be made using assign() when rebalance
    /// protocol type is EAGER", or incremental_(un)assign() when COOPERATIVE); rdkafka reports
    /// the code's description for assign/unassign and its name for the incremental calls.
    fn check_method(&self, incremental: bool, message: &str) -> KafkaResult<()> {
        let wrong = match self.rebalance_protocol() {
            RebalanceProtocol::Eager => incremental,
            RebalanceProtocol::Cooperative => !incremental,
            RebalanceProtocol::None => false,
        };
        if wrong { Err(KafkaError::Subscription(message.into())) } else { Ok(()) }
    }

    /// librdkafka's `rd_kafka_toppars_pause_resume`: each element the consumer has no
    /// partition for carries `UnknownPartition` (its `error()`), the call itself succeeds.
    fn pause_resume(&self, partitions: &TopicPartitionList, pause: bool) {
        let mut st = self.inner.lock();
        for (t, p) in tps(partitions) {
            let tp = (t, p);
            if st.partitions.contains_key(&tp) {
                st.set_paused(&tp, pause);
            } else {
                partitions.set_error(&tp.0, tp.1, Code::UnknownPartition);
            }
        }
    }
}

impl<C: ConsumerContext> Consumer<C> for BaseConsumer<C> {
    fn context(&self) -> &Arc<C> {
        &self.inner.context
    }

    fn subscribe(&self, topics: &[&str]) -> KafkaResult<()> {
        let Some(g) = &self.inner.group else {
            return Err(KafkaError::Subscription(Code::UnknownGroup.description().into()));
        };
        let topics: Vec<String> = topics.iter().map(|t| t.to_string()).collect();
        self.inner.lock().subscription = topics.clone();
        g.send(GroupCommand::Subscribe(topics));
        // The fetcher looks the topics up (a missing one is reported from recv()).
        self.inner.wake_fetcher();
        Ok(())
    }

    fn unsubscribe(&self) {
        self.inner.lock().subscription.clear();
        if let Some(g) = &self.inner.group {
            g.send(GroupCommand::Subscribe(Vec::new()));
        }
    }

    fn assign(&self, assignment: &TopicPartitionList) -> KafkaResult<()> {
        self.check_method(false, Code::State.description())?;
        let mut st = self.inner.lock();
        st.partitions.clear();
        st.lost = false;
        // librdkafka clears the assignment, then refuses a list with duplicates.
        if has_duplicates(assignment) {
            return Err(KafkaError::Subscription(Code::InvalidArgument.description().into()));
        }
        for e in assignment.elements() {
            st.add((e.topic().to_string(), e.partition()), e.offset());
        }
        drop(st);
        self.inner.wake_fetcher();
        Ok(())
    }

    fn unassign(&self) -> KafkaResult<()> {
        self.check_method(false, Code::State.description())?;
        self.inner.lock().partitions.clear();
        Ok(())
    }

    fn incremental_assign(&self, assignment: &TopicPartitionList) -> KafkaResult<()> {
        self.check_method(true, "_STATE")?;
        let mut st = self.inner.lock();
        // librdkafka's rd_kafka_assignment_add: all or nothing.
        if has_duplicates(assignment) {
            return Err(KafkaError::Subscription("_INVALID_ARG".into()));
        }
        if tps(assignment).iter().any(|tp| st.partitions.contains_key(tp)) {
            return Err(KafkaError::Subscription("_CONFLICT".into()));
        }
        for e in assignment.elements() {
            st.add((e.topic().to_string(), e.partition()), e.offset());
        }
        drop(st);
        self.inner.wake_fetcher();
        Ok(())
    }

    fn incremental_unassign(&self, assignment: &TopicPartitionList) -> KafkaResult<()> {
        self.check_method(true, "_STATE")?;
        let mut st = self.inner.lock();
        // librdkafka's rd_kafka_assignment_subtract: all or nothing.
        let partitions = tps(assignment);
        if partitions.iter().any(|tp| !st.partitions.contains_key(tp)) {
            return Err(KafkaError::Subscription("_INVALID_ARG".into()));
        }
        for tp in partitions {
            st.remove(&tp);
        }
        Ok(())
    }

    fn seek<T: Into<Timeout>>(&self, topic: &str, partition: i32, offset: Offset, _timeout: T) -> KafkaResult<()> {
        self.inner.lock().seek(&(topic.to_string(), partition), offset)?;
        self.inner.wake_fetcher();
        Ok(())
    }

    fn seek_partitions<T: Into<Timeout>>(
        &self,
        topic_partition_list: TopicPartitionList,
        _timeout: T,
    ) -> KafkaResult<TopicPartitionList> {
        let out = topic_partition_list;
        let mut st = self.inner.lock();
        for (t, p, raw) in out.raw() {
            if st.seek(&(t.clone(), p), Offset::from_raw(raw)).is_err() {
                out.set_error(&t, p, Code::UnknownPartition);
            }
        }
        drop(st);
        self.inner.wake_fetcher();
        Ok(out)
    }

    fn commit(
        &self,
        topic_partition_list: &TopicPartitionList,
        mode: CommitMode,
    ) -> impl Future<Output = KafkaResult<()>> + Send + 'static {
        let offsets: Offsets = topic_partition_list
            .elements()
            .iter()
            .filter_map(|e| match e.offset() {
                Offset::Offset(n) => {
                    let m = e.metadata();
                    Some(((e.topic().to_string(), e.partition()), n, (!m.is_empty()).then(|| m.to_string())))
                }
                _ => None,
            })
            .collect();
        self.inner.commit_offsets(offsets, mode)
    }

    fn commit_consumer_state(&self, mode: CommitMode) -> impl Future<Output = KafkaResult<()>> + Send + 'static {
        let offsets = self.inner.lock().to_commit(None);
        self.inner.commit_offsets(offsets, mode)
    }

    fn commit_message(
        &self,
        message: &BorrowedMessage<'_>,
        mode: CommitMode,
    ) -> impl Future<Output = KafkaResult<()>> + Send + 'static {
        let offsets = vec![((message.topic().to_string(), message.partition()), message.offset() + 1, None)];
        self.inner.commit_offsets(offsets, mode)
    }

    fn store_offset(&self, topic: &str, partition: i32, offset: i64) -> KafkaResult<()> {
        self.inner.lock().store(&(topic.to_string(), partition), offset + 1, None)
    }

    fn store_offset_from_message(&self, message: &BorrowedMessage<'_>) -> KafkaResult<()> {
        self.store_offset(message.topic(), message.partition(), message.offset())
    }

    fn store_offsets(&self, tpl: &TopicPartitionList) -> KafkaResult<()> {
        if self.inner.s.auto_offset_store {
            return Err(KafkaError::StoreOffset(Code::InvalidArgument));
        }
        // librdkafka's rd_kafka_offsets_store: each element carries its error; the call fails
        // (with the last element's error) only when none could be stored.
        let mut st = self.inner.lock();
        let (mut stored, mut last) = (0, None);
        for e in tpl.elements() {
            if let Offset::Offset(n) = e.offset() {
                let m = e.metadata();
                let m = (!m.is_empty()).then(|| m.to_string());
                match st.store(&(e.topic().to_string(), e.partition()), n, m) {
                    Ok(()) => stored += 1,
                    Err(error) => {
                        tpl.set_error(e.topic(), e.partition(), error.rdkafka_error_code().unwrap_or(Code::State));
                        last = Some(error);
                    }
                }
            }
        }
        match last {
            Some(error) if stored == 0 => Err(error),
            _ => Ok(()),
        }
    }

    fn subscription(&self) -> KafkaResult<TopicPartitionList> {
        let mut tpl = TopicPartitionList::new();
        for t in &self.inner.lock().subscription {
            tpl.add_topic_unassigned(t);
        }
        Ok(tpl)
    }

    fn assignment(&self) -> KafkaResult<TopicPartitionList> {
        Ok(self.inner.lock().assignment())
    }

    fn assignment_lost(&self) -> bool {
        // True from the moment the group task loses the assignment (librdkafka sets the flag on
        // its group thread), through the rebalance callback, until the assignment is cleared.
        self.inner.lock().lost || self.inner.group.as_ref().is_some_and(|g| g.lost())
    }

    fn committed<T: Into<Timeout>>(
        &self,
        timeout: T,
    ) -> impl Future<Output = KafkaResult<TopicPartitionList>> + Send + 'static {
        let tpl = tpl_of_tps(&self.inner.lock().partitions.keys().cloned().collect::<Vec<_>>());
        self.committed_lookup(tpl, timeout.into())
    }

    fn committed_offsets<T: Into<Timeout>>(
        &self,
        tpl: TopicPartitionList,
        timeout: T,
    ) -> impl Future<Output = KafkaResult<TopicPartitionList>> + Send + 'static {
        self.committed_lookup(tpl, timeout.into())
    }

    fn offsets_for_times<T: Into<Timeout>>(
        &self,
        timestamps: TopicPartitionList,
        timeout: T,
    ) -> impl Future<Output = KafkaResult<TopicPartitionList>> + Send + 'static {
        let queries: Vec<(Tp, i64)> = timestamps.raw().into_iter().map(|(t, p, ts)| ((t, p), ts)).collect();
        let lookup = self.offsets_lookup(queries, timeout.into());
        async move {
            let found = lookup.await?;
            let mut out = TopicPartitionList::with_capacity(found.len());
            for ((t, p), r) in found {
                let mut e = out.add_partition(&t, p);
                match r {
                    Ok(o) if o >= 0 => {
                        let _ = e.set_offset(Offset::Offset(o));
                    }
                    Ok(_) => {
                        let _ = e.set_offset(Offset::End);
                    }
                    Err(e) => out.set_error(&t, p, e.rdkafka_error_code().unwrap_or(Code::Fail)),
                }
            }
            Ok(out)
        }
    }

    fn offsets_for_timestamp<T: Into<Timeout>>(
        &self,
        timestamp: i64,
        timeout: T,
    ) -> impl Future<Output = KafkaResult<TopicPartitionList>> + Send + 'static {
        let mut tpl = self.inner.lock().assignment();
        let _ = tpl.set_all_offsets(Offset::Offset(timestamp));
        self.offsets_for_times(tpl, timeout)
    }

    fn position(&self) -> KafkaResult<TopicPartitionList> {
        Ok(self.inner.lock().positions())
    }

    fn fetch_watermarks<T: Into<Timeout>>(
        &self,
        topic: &str,
        partition: i32,
        timeout: T,
    ) -> impl Future<Output = KafkaResult<(i64, i64)>> + Send + 'static {
        let tp: Tp = (topic.to_string(), partition);
        let lookup = self.offsets_lookup(vec![(tp.clone(), -2), (tp, -1)], timeout.into());
        async move {
            let found = lookup.await?;
            let mut it = found
                .into_iter()
                .map(|(_, r)| r.map_err(|e| KafkaError::MetadataFetch(e.rdkafka_error_code().unwrap_or(Code::Fail))));
            let low = it.next().unwrap_or(Err(KafkaError::MetadataFetch(Code::Fail)))?;
            let high = it.next().unwrap_or(Err(KafkaError::MetadataFetch(Code::Fail)))?;
            Ok((low, high))
        }
    }

    fn pause(&self, partitions: &TopicPartitionList) -> KafkaResult<()> {
        self.pause_resume(partitions, true);
        Ok(())
    }

    fn resume(&self, partitions: &TopicPartitionList) -> KafkaResult<()> {
        self.pause_resume(partitions, false);
        self.inner.wake_fetcher();
        Ok(())
    }

    fn rebalance_protocol(&self) -> RebalanceProtocol {
        self.inner.group.as_ref().map_or(RebalanceProtocol::None, GroupHandle::rebalance_protocol)
    }
}
