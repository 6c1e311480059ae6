//! The consumer's fetch task, librdkafka's broker threads for a consumer folded into one tokio
//! task: it finds where each assigned partition starts (the committed offset through the group,
//! else `auto.offset.reset`; ListOffsets for beginning/end/tail), long-polls each partition's
//! leader with FetchRequests (one in flight per broker; `fetch.wait.max.ms`, `fetch.min.bytes`,
//! `fetch.max.bytes`, `max.partition.fetch.bytes`), and queues what comes back for `recv()`.
//!
//! Errors as librdkafka handles them (`rdkafka_fetcher.c`): `OFFSET_OUT_OF_RANGE` resets the
//! partition by `auto.offset.reset`; `NOT_LEADER_OR_FOLLOWER`, `UNKNOWN_TOPIC_OR_PARTITION`,
//! `LEADER_NOT_AVAILABLE`, the leader-epoch errors and a lost connection refresh the metadata
//! (the producer's cache, `producer::metadata`) and retry after `retry.backoff.ms`. Paused
//! partitions are not fetched. An assigned topic missing for `topic.metadata.propagation.max.ms`
//! and a subscribed topic the cluster answers with an error are reported once from `recv()`.
//! It also runs the auto-commit timer. Spawned with `spawn_task` (inside a simulation node it
//! belongs to the node); it ends when the consumer is dropped. What it does with the answers:
//! `done`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, Weak};

use kafka_protocol::messages::{
    BrokerId, FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse, MetadataResponse, TopicName,
    fetch_request, list_offsets_request,
};
use tokio::sync::{Notify, mpsc, oneshot};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::client::Client;
use crate::rdkafka::consumer::positions::{QUEUED_MIN_MESSAGES, Queued, Start, State, Tp};
use crate::rdkafka::consumer::settings::{ConsumerSettings, OffsetReset};
use crate::rdkafka::consumer::wire::{self, LIST_OFFSETS_VERSION};
use crate::rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode as Code};
use crate::rdkafka::net::{Dialer, Stream};
use crate::rdkafka::producer::metadata::{self, Metadata, Refresh, TopicState};
use crate::requests::string;

mod done;

/// The Fetch version sent (kafkasim serves 4–12, Apache Kafka 4.x 4–17; v12 is the last that
/// names topics).
pub const FETCH_VERSION: i16 = 11;

/// A committed-offset lookup's answer: per partition, the offset (None: none) and metadata.
pub(crate) type CommittedReply = KafkaResult<Vec<(Tp, Option<i64>, Option<String>)>>;

/// What the fetcher needs from the consumer that owns it (held weakly: the consumer going
/// away ends the fetcher, not the other way round).
pub(crate) trait Owner: Send + Sync {
    /// Commits the stored offsets not yet committed (auto-commit), reporting through the
    /// commit callback; nothing when there are none.
    fn auto_commit(&self);
    /// Asks the group for the committed offsets of `partitions`; `None` without a group.
    fn lookup_committed(&self, partitions: Vec<Tp>) -> Option<oneshot::Receiver<CommittedReply>>;
}

/// Wake-ups between the handles and the fetcher.
#[derive(Debug, Default)]
pub(crate) struct Signals {
    /// Something was queued for `recv()`.
    pub data: Notify,
    /// The assignment, a position or a pause changed, or a queue drained: look again.
    pub fetcher: Notify,
}

type Conn = Client<Stream>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Fetch,
    List,
}

enum Done {
    Metadata(Result<MetadataResponse, String>),
    Fetch { broker: i32, conn: Option<Conn>, asked: Vec<(Tp, u64, i64)>, result: Option<FetchResponse> },
    List { broker: i32, conn: Option<Conn>, asked: Vec<(Tp, u64, i64)>, result: Option<ListOffsetsResponse> },
    Committed { asked: Vec<(Tp, u64)>, result: CommittedReply },
}

struct Fetcher {
    s: Arc<ConsumerSettings>,
    dialer: Dialer,
    state: Arc<Mutex<State>>,
    signals: Arc<Signals>,
    owner: Weak<dyn Owner>,
    has_group: bool,
    alive: mpsc::UnboundedReceiver<()>,
    metadata: Metadata,
    refresh: Refresh,
    idle: BTreeMap<(i32, Kind), Conn>,
    busy: BTreeSet<(i32, Kind)>,
    tasks: JoinSet<Done>,
    auto_commit_at: Option<Instant>,
    /// Assigned partitions (and their assignment version) reported missing already.
    reported_missing: BTreeSet<(Tp, u64)>,
    /// Subscribed topics reported with this error (librdkafka's `rkcg_errored_topics`).
    errored_topics: BTreeMap<String, i16>,
}

/// Spawns the fetcher; it ends when `alive`'s sender is dropped.
pub(crate) fn spawn(
    s: Arc<ConsumerSettings>,
    dialer: Dialer,
    state: Arc<Mutex<State>>,
    signals: Arc<Signals>,
    owner: Weak<dyn Owner>,
    alive: mpsc::UnboundedReceiver<()>,
) {
    let has_group = s.group_id.is_some();
    // librdkafka starts the timer with the consumer group (rd_kafka_cgrp_new), not at an
    // assignment, and not at all for auto.commit.interval.ms=0 (commits on revoke/close only).
    let auto_commit_at = (has_group && s.auto_commit && !s.auto_commit_interval.is_zero())
        .then(|| Instant::now() + s.auto_commit_interval);
    let f = Fetcher {
        s,
        dialer,
        state,
        signals,
        owner,
        has_group,
        alive,
        metadata: Metadata::default(),
        refresh: Refresh::default(),
        idle: BTreeMap::new(),
        busy: BTreeSet::new(),
        tasks: JoinSet::new(),
        auto_commit_at,
        reported_missing: BTreeSet::new(),
        errored_topics: BTreeMap::new(),
    };
    crate::rdkafka::task::spawn_task(f.run());
}

/// librdkafka's `rd_kafka_propagate_consumer_topic_errors` ("Subscribed topic not
/// available"): each subscribed topic the metadata answers with an error is reported once
/// as `MessageConsumption(code)`, again only if its error changes, forgotten once it exists.
fn subscription_errors(
    metadata: &mut Metadata,
    metadata_due: &mut bool,
    errored_topics: &mut BTreeMap<String, i16>,
    subscription: &[String],
    now: Instant,
) -> Vec<KafkaError> {
    let mut out = Vec::new();
    for topic in subscription {
        if metadata.want(topic, now) {
            *metadata_due = true;
            continue;
        }
        match metadata.topic(topic) {
            Some(TopicState::Failed { code, .. }) => {
                if errored_topics.insert(topic.clone(), *code) != Some(*code) {
                    out.push(KafkaError::MessageConsumption(Code::from(*code)));
                }
            }
            _ => {
                errored_topics.remove(topic);
            }
        }
    }
    out
}

fn leader_error(code: i16) -> bool {
    matches!(code, 3 | 5 | 6 | 9 | 74 | 75)
}

/// Where `auto.offset.reset` sends a partition; an error for the application with `Error`.
fn reset(s: &ConsumerSettings) -> (Start, Option<KafkaError>) {
    match s.offset_reset {
        OffsetReset::Earliest => (Start::List { timestamp: -2, tail: 0 }, None),
        OffsetReset::Latest => (Start::List { timestamp: -1, tail: 0 }, None),
        OffsetReset::Error => (Start::Failed, Some(KafkaError::MessageConsumption(Code::AutoOffsetReset))),
    }
}

impl Fetcher {
    async fn run(mut self) {
        loop {
            let now = Instant::now();
            if self.auto_commit_at.is_some_and(|t| t <= now) {
                self.auto_commit_at = Some(now + self.s.auto_commit_interval);
                match self.owner.upgrade() {
                    Some(owner) => owner.auto_commit(),
                    None => return,
                }
            }
            let wake = self.plan(now);
            tokio::select! {
                biased;
                Some(done) = self.tasks.join_next(), if !self.tasks.is_empty() => match done {
                    Ok(done) => self.done(done),
                    Err(e) => panic!("a kafkasim::rdkafka consumer request task failed: {e}"),
                },
                None = self.alive.recv() => return,
                () = self.signals.fetcher.notified() => {}
                () = sleep_until(wake) => {}
            }
        }
    }

    /// The error librdkafka reports for an assigned partition the metadata says does not
    /// exist: `UnknownTopicOrPartition` once the topic was missing for
    /// `topic.metadata.propagation.max.ms` (`rd_kafka_topic_set_notexists`), `UnknownPartition`
    /// for a partition beyond the topic's count ("desired partition is not available").
    fn missing(&self, tp: &Tp, now: Instant) -> Option<KafkaError> {
        match self.metadata.topic(&tp.0)? {
            TopicState::Failed { code: 3, since } if now >= *since + self.s.metadata_propagation_max => {
                Some(KafkaError::MessageConsumption(Code::UnknownTopicOrPartition))
            }
            TopicState::Known(leaders) if usize::try_from(tp.1).map_or(true, |i| i >= leaders.len()) => {
                Some(KafkaError::MessageConsumption(Code::UnknownPartition))
            }
            _ => None,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts what is due; returns when to look again without a completion or a signal.
    fn plan(&mut self, now: Instant) -> Option<Instant> {
        let mut wake: Vec<Instant> = self.auto_commit_at.into_iter().collect();
        let mut fetches: BTreeMap<i32, Vec<(Tp, u64, i64)>> = BTreeMap::new();
        let mut lists: BTreeMap<i32, Vec<(Tp, u64, i64, i64)>> = BTreeMap::new();
        let mut lookups: Vec<(Tp, u64)> = Vec::new();
        let mut errors = Vec::new();
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        for (tp, p) in state.partitions.iter_mut() {
            if p.busy || p.start == Start::Failed {
                continue;
            }
            if let Some(t) = p.not_before.filter(|t| *t > now) {
                wake.push(t);
                continue;
            }
            let start = match p.start {
                Start::Committed if self.has_group => {
                    p.busy = true;
                    lookups.push((tp.clone(), p.version));
                    continue;
                }
                Start::Committed => {
                    let (start, error) = reset(&self.s);
                    p.start = start;
                    errors.extend(error.map(|e| (tp.clone(), p.version, e)));
                    start
                }
                s => s,
            };
            if matches!(start, Start::At(_)) && (p.paused || p.buffered >= QUEUED_MIN_MESSAGES) {
                continue;
            }
            if self.metadata.want(&tp.0, now) {
                self.refresh.due = true;
                continue;
            }
            let Some((leader, _)) = self.metadata.leader(&tp.0, tp.1) else {
                if let Some(error) = self.missing(tp, now)
                    && self.reported_missing.insert((tp.clone(), p.version))
                {
                    errors.push((tp.clone(), p.version, error));
                }
                // Asked again within retry.backoff.ms (not at once: a topic that does not exist
                // would be asked for in a loop).
                let soon = now + self.s.retry_backoff;
                if self.refresh.next_refresh.is_none_or(|t| t > soon) {
                    self.refresh.next_refresh = Some(soon);
                }
                continue;
            };
            match start {
                Start::At(offset) if !self.busy.contains(&(leader, Kind::Fetch)) => {
                    p.busy = true;
                    fetches.entry(leader).or_default().push((tp.clone(), p.version, offset));
                }
                Start::List { timestamp, tail } if !self.busy.contains(&(leader, Kind::List)) => {
                    p.busy = true;
                    lists.entry(leader).or_default().push((tp.clone(), p.version, timestamp, tail));
                }
                _ => {}
            }
        }
        let subscription = state.subscription.clone();
        let topic_errors = subscription_errors(
            &mut self.metadata,
            &mut self.refresh.due,
            &mut self.errored_topics,
            &subscription,
            now,
        );
        let queued = !errors.is_empty() || !topic_errors.is_empty();
        for (tp, version, error) in errors {
            state.queue.push_back(Queued::Error { tp: Some((tp, version)), error });
        }
        for error in topic_errors {
            state.queue.push_back(Queued::Error { tp: None, error });
        }
        drop(state);
        if queued {
            self.signals.data.notify_waiters();
        }
        for (broker, asked) in fetches {
            self.fetch(broker, asked);
        }
        for (broker, asked) in lists {
            self.list(broker, asked);
        }
        if !lookups.is_empty() {
            self.lookup(lookups, now);
        }
        self.start_metadata(now);
        if self.refresh.due || !self.lock().partitions.is_empty() {
            wake.extend(self.refresh.next_refresh);
        }
        wake.into_iter().filter(|t| *t > now).min()
    }

    fn lookup(&mut self, asked: Vec<(Tp, u64)>, now: Instant) {
        let rx =
            self.owner.upgrade().and_then(|o| o.lookup_committed(asked.iter().map(|(tp, _)| tp.clone()).collect()));
        let Some(rx) = rx else {
            let mut st = self.lock();
            for (tp, version) in &asked {
                if let Some(p) = st.partitions.get_mut(tp).filter(|p| p.version == *version) {
                    p.busy = false;
                    p.not_before = Some(now + self.s.retry_backoff);
                }
            }
            return;
        };
        self.tasks.spawn(async move {
            let result = rx.await.unwrap_or(Err(KafkaError::OffsetFetch(Code::BrokerDestroy)));
            Done::Committed { asked, result }
        });
    }

    fn start_metadata(&mut self, now: Instant) {
        let Some((request, addr)) =
            self.refresh.start(&self.metadata, &self.s.bootstrap, self.s.auto_create_topics, now)
        else {
            return;
        };
        let (dialer, id, timeout) = (self.dialer.clone(), self.s.client_id.clone(), self.s.socket_timeout);
        self.tasks.spawn(async move { Done::Metadata(metadata::fetch(dialer, addr, id, timeout, request).await) });
    }

    fn connection(&mut self, broker: i32, kind: Kind) -> (Option<Conn>, String) {
        self.busy.insert((broker, kind));
        (self.idle.remove(&(broker, kind)), self.metadata.address(broker).unwrap_or_default().to_string())
    }

    fn fetch(&mut self, broker: i32, asked: Vec<(Tp, u64, i64)>) {
        let mut topics: BTreeMap<&str, Vec<fetch_request::FetchPartition>> = BTreeMap::new();
        for ((topic, partition), _, offset) in &asked {
            topics.entry(topic.as_str()).or_default().push(
                fetch_request::FetchPartition::default()
                    .with_partition(*partition)
                    .with_current_leader_epoch(-1)
                    .with_fetch_offset(*offset)
                    .with_log_start_offset(-1)
                    .with_partition_max_bytes(self.s.partition_fetch_max_bytes),
            );
        }
        let wait = self.s.fetch_wait_max;
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(i32::try_from(wait.as_millis()).unwrap_or(i32::MAX))
            .with_min_bytes(self.s.fetch_min_bytes)
            .with_max_bytes(self.s.fetch_max_bytes)
            .with_isolation_level(i8::from(self.s.read_committed))
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(
                topics
                    .into_iter()
                    .map(|(t, parts)| {
                        fetch_request::FetchTopic::default().with_topic(TopicName(string(t))).with_partitions(parts)
                    })
                    .collect(),
            );
        let (conn, addr) = self.connection(broker, Kind::Fetch);
        let (dialer, id, timeout) = (self.dialer.clone(), self.s.client_id.clone(), self.s.socket_timeout + wait);
        self.tasks.spawn(async move {
            let (conn, result) = wire::exchange(conn, dialer, addr, id, timeout, request, FETCH_VERSION).await;
            Done::Fetch { broker, conn, asked, result }
        });
    }

    fn list(&mut self, broker: i32, asked: Vec<(Tp, u64, i64, i64)>) {
        let mut topics: BTreeMap<&str, Vec<list_offsets_request::ListOffsetsPartition>> = BTreeMap::new();
        for ((topic, partition), _, timestamp, _) in &asked {
            topics.entry(topic.as_str()).or_default().push(
                list_offsets_request::ListOffsetsPartition::default()
                    .with_partition_index(*partition)
                    .with_current_leader_epoch(-1)
                    .with_timestamp(*timestamp),
            );
        }
        let request = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_isolation_level(i8::from(self.s.read_committed))
            .with_topics(
                topics
                    .into_iter()
                    .map(|(t, parts)| {
                        list_offsets_request::ListOffsetsTopic::default()
                            .with_name(TopicName(string(t)))
                            .with_partitions(parts)
                    })
                    .collect(),
            );
        let asked = asked.into_iter().map(|(tp, v, _, tail)| (tp, v, tail)).collect();
        let (conn, addr) = self.connection(broker, Kind::List);
        let (dialer, id, timeout) = (self.dialer.clone(), self.s.client_id.clone(), self.s.socket_timeout);
        self.tasks.spawn(async move {
            let (conn, result) = wire::exchange(conn, dialer, addr, id, timeout, request, LIST_OFFSETS_VERSION).await;
            Done::List { broker, conn, asked, result }
        });
    }
}

async fn sleep_until(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}
