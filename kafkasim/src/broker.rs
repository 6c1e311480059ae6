//! The cluster: brokers, topics, the request handlers, and the connection loop both transports
//! share.
//!
//! A [`Cluster`] is N brokers (ids `0..N`) sharing one state: a partition's log lives once, and
//! "replication" is instant, so every broker sees the same data; what differs per broker is who
//! leads a partition (produce and fetch to another broker are `NOT_LEADER_OR_FOLLOWER`) and who
//! coordinates a group (group requests to another broker are `NOT_COORDINATOR`). Leaders are
//! spread over the brokers at topic creation; a group's coordinator is a stable hash of its id
//! over the brokers (Kafka hashes it to a `__consumer_offsets` partition).
//!
//! [`Cluster::serve_connection`] is the whole broker for one connection, generic over any
//! `AsyncRead + AsyncWrite`: requests are handled one at a time and answered in order, as a
//! Kafka broker mutes a connection while a request is in flight. [`Cluster::serve_sim`] runs it
//! on the simulated network; [`Cluster::start_local`] on real loopback sockets.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::ResponseError as E;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::codec::{self, Decoded, DecodedRequest, RequestBody, ResponseBody};
use crate::faults::{Fault, FaultAction, FaultGuard, FaultSet, Part};
use crate::groups::{self, Group};
use crate::introspect::{BatchView, CommitRecord, Generation, GroupEvent, GroupView, Journal, PartitionView};
use crate::log::{PartitionLog, validate_batch};
use crate::producer_ids::{ProducerIds, SequenceCheck};

/// Topics one cluster holds.
pub const TOPICS_MAX: usize = 100_000;
/// Partitions one topic may have.
pub const PARTITIONS_MAX: i32 = 10_000;
/// The longest a Fetch may wait for data (its `max_wait_ms` is capped here).
pub const FETCH_WAIT_MAX: Duration = Duration::from_secs(300);
/// The port each broker listens on in a simulation.
pub const SIM_PORT: u16 = 9092;

/// A builder for a [`Cluster`]. Defaults are Apache Kafka's broker defaults unless noted.
#[derive(Debug, Clone)]
pub struct ClusterBuilder {
    config: Config,
}

#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub brokers: i32,
    pub host_prefix: String,
    pub cluster_id: String,
    pub auto_create_topics: bool,
    pub default_partitions: i32,
    pub initial_rebalance_delay: Duration,
    pub session_timeout_min: Duration,
    pub session_timeout_max: Duration,
    pub partition_bytes_max: usize,
    pub message_bytes_max: usize,
}

impl Default for ClusterBuilder {
    fn default() -> Self {
        ClusterBuilder {
            config: Config {
                brokers: 1,
                host_prefix: "kafka".to_string(),
                cluster_id: "kafkasim".to_string(),
                auto_create_topics: true,
                default_partitions: 1,
                initial_rebalance_delay: Duration::from_secs(3),
                session_timeout_min: Duration::from_secs(6),
                session_timeout_max: Duration::from_secs(1800),
                partition_bytes_max: 1 << 30,
                message_bytes_max: 1_048_588,
            },
        }
    }
}

impl ClusterBuilder {
    /// The most brokers a cluster may have.
    pub const BROKERS_MAX: i32 = 64;

    /// `n` brokers, ids `0..n` (default 1; clamped to `1..=BROKERS_MAX`).
    pub fn brokers(mut self, n: i32) -> Self {
        self.config.brokers = n.clamp(1, Self::BROKERS_MAX);
        self
    }

    /// The number of brokers drawn from the run's swarm: dimension `kafka.brokers`, 1–3.
    pub fn brokers_from_swarm(self, ctx: &sim::Ctx) -> Self {
        let n = ctx.swarm().int("kafka.brokers", 1..=3);
        self.brokers(i32::try_from(n).unwrap_or(1))
    }

    /// Host names in a simulation: `<prefix>-<id>` (default `kafka`).
    pub fn host_prefix(mut self, prefix: &str) -> Self {
        self.config.host_prefix = prefix.to_string();
        self
    }

    /// Whether Metadata creates unknown topics it is asked about (`auto.create.topics.enable`,
    /// default true) with [`ClusterBuilder::default_partitions`] partitions.
    pub fn auto_create_topics(mut self, on: bool) -> Self {
        self.config.auto_create_topics = on;
        self
    }

    /// Partitions of an auto-created topic or a CreateTopics with -1 (`num.partitions`,
    /// default 1).
    pub fn default_partitions(mut self, n: i32) -> Self {
        self.config.default_partitions = n.clamp(1, PARTITIONS_MAX);
        self
    }

    /// How long the first rebalance of an empty group waits for more members
    /// (`group.initial.rebalance.delay.ms`, default 3 s; tests usually want 0).
    pub fn initial_rebalance_delay(mut self, delay: Duration) -> Self {
        self.config.initial_rebalance_delay = delay;
        self
    }

    /// The session timeouts a JoinGroup may ask for (`group.min.session.timeout.ms` 6 s,
    /// `group.max.session.timeout.ms` 30 min); others get `INVALID_SESSION_TIMEOUT`.
    pub fn session_timeouts(mut self, min: Duration, max: Duration) -> Self {
        self.config.session_timeout_min = min;
        self.config.session_timeout_max = max;
        self
    }

    /// Bytes a partition keeps before its oldest batches are dropped (`retention.bytes`;
    /// default 1 GiB here, unlimited in Kafka).
    pub fn partition_bytes_max(mut self, bytes: usize) -> Self {
        self.config.partition_bytes_max = bytes.max(1);
        self
    }

    /// The largest batch accepted (`message.max.bytes`, default 1,048,588).
    pub fn message_bytes_max(mut self, bytes: usize) -> Self {
        self.config.message_bytes_max = bytes;
        self
    }

    /// Builds the cluster. Its clock starts now (tokio's clock: fake inside a simulation).
    pub fn build(self) -> Cluster {
        let config = self.config;
        let brokers = (0..config.brokers)
            .map(|id| {
                (id, BrokerInfo { host: format!("{}-{id}", config.host_prefix), port: i32::from(SIM_PORT), up: true })
            })
            .collect();
        let up = (0..config.brokers).map(|_| watch::channel(true).0).collect();
        Cluster {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    brokers,
                    topics: BTreeMap::new(),
                    groups: BTreeMap::new(),
                    producers: ProducerIds::default(),
                    faults: FaultSet::default(),
                    coordinators: BTreeMap::new(),
                    next_member: 0,
                    next_topic: 0,
                }),
                journal: Mutex::new(Journal::default()),
                log_changed: watch::channel(0).0,
                up,
                ctx: Mutex::new(None),
                start: Instant::now(),
                next_conn: AtomicU64::new(0),
                config,
            }),
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct BrokerInfo {
    pub host: String,
    pub port: i32,
    pub up: bool,
}

pub(crate) struct Topic {
    id: uuid::Uuid,
    partitions: Vec<Partition>,
}

pub(crate) struct Partition {
    leader: i32,
    leader_epoch: i32,
    log: PartitionLog,
}

/// The mutable state, behind one lock that is never held across an `.await`.
pub(crate) struct State {
    pub(crate) brokers: BTreeMap<i32, BrokerInfo>,
    topics: BTreeMap<String, Topic>,
    pub(crate) groups: BTreeMap<String, Group>,
    producers: ProducerIds,
    pub(crate) faults: FaultSet,
    coordinators: BTreeMap<String, i32>,
    pub(crate) next_member: u64,
    next_topic: u64,
}

impl State {
    /// Whether the cluster has partition `partition` of a topic named `name`.
    pub(crate) fn has_partition(&self, name: &str, partition: i32) -> bool {
        self.topics.get(name).is_some_and(|t| usize::try_from(partition).is_ok_and(|i| i < t.partitions.len()))
    }
}

pub(crate) struct Inner {
    config: Config,
    state: Mutex<State>,
    journal: Mutex<Journal>,
    log_changed: watch::Sender<u64>,
    up: Vec<watch::Sender<bool>>,
    ctx: Mutex<Option<sim::Ctx>>,
    start: Instant,
    next_conn: AtomicU64,
}

/// A fake Kafka cluster. Cheap to clone; every clone is the same cluster.
///
/// ```no_run
/// use kafkasim::Cluster;
/// use sim::Simulation;
///
/// Simulation::new("kafka").run(|ctx| async move {
///     let cluster = Cluster::builder().brokers_from_swarm(&ctx).build();
///     let bootstrap = cluster.serve_sim(&ctx)?; // "kafka-0:9092,…"
///     // … dial it from a client host, produce, consume …
///     # let _ = bootstrap;
///     Ok(())
/// });
/// ```
#[derive(Clone)]
pub struct Cluster {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster").field("brokers", &self.inner.config.brokers).finish_non_exhaustive()
    }
}

/// Something the harness does to the cluster at a fake time ([`Cluster::at`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Control {
    /// The broker stops: its listener closes, its connections close, its partitions and groups
    /// move to the next live broker.
    BrokerDown(i32),
    /// The broker comes back (it leads nothing until something moves to it).
    BrokerUp(i32),
    /// A partition's leadership moves to a broker (its leader epoch is bumped).
    MoveLeader {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The new leader.
        to: i32,
    },
    /// A group's coordinator moves to a broker (its state moves with it, as Kafka reloads it
    /// from `__consumer_offsets`).
    MoveCoordinator {
        /// The group.
        group: String,
        /// The new coordinator.
        to: i32,
    },
}

/// What a request turned into.
enum Outcome {
    Reply(ResponseBody),
    NoReply,
    /// Close the connection without an answer, saying why.
    Close(String),
}

fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

/// A stable hash (FNV-1a), so placement never changes with a Rust release.
fn stable_hash(x: &str) -> u64 {
    x.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

fn valid_topic_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 249
        && name != "."
        && name != ".."
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

impl Cluster {
    /// A builder with Kafka's defaults.
    pub fn builder() -> ClusterBuilder {
        ClusterBuilder::default()
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn config(&self) -> &Config {
        &self.inner.config
    }

    pub(crate) fn journal(&self, f: impl FnOnce(&mut Journal)) {
        f(&mut self.inner.journal.lock().unwrap_or_else(|p| p.into_inner()));
    }

    /// Time since the cluster was built (tokio's clock).
    pub fn elapsed(&self) -> Duration {
        Instant::now().saturating_duration_since(self.inner.start)
    }

    /// Records into the run's history when the cluster serves a simulation; the group
    /// coordinator's events (`kafka.group.*`) are also kept for [`Cluster::group_events`].
    pub(crate) fn record(&self, kind: &str, identity: &str, detail: impl AsRef<str>) {
        if kind.starts_with("kafka.group.") {
            let event = GroupEvent {
                at: self.elapsed(),
                kind: kind.to_string(),
                group: identity.to_string(),
                detail: detail.as_ref().to_string(),
            };
            self.journal(|j| j.group_event(event));
        }
        let ctx = self.inner.ctx.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(ctx) = ctx {
            ctx.record(kind, identity, detail);
        } else {
            tracing::debug!(kind, identity, detail = detail.as_ref());
        }
    }

    pub(crate) fn inner_up(&self, id: i32) -> watch::Receiver<bool> {
        match self.inner.up.get(id as usize) {
            Some(tx) => tx.subscribe(),
            None => watch::channel(false).1,
        }
    }

    /// The broker ids.
    pub fn broker_ids(&self) -> Vec<i32> {
        (0..self.inner.config.brokers).collect()
    }

    /// `host:port` of each broker, comma-separated (what clients take as bootstrap servers).
    pub fn bootstrap_servers(&self) -> String {
        let st = self.lock();
        st.brokers.values().map(|b| format!("{}:{}", b.host, b.port)).collect::<Vec<_>>().join(",")
    }

    pub(crate) fn set_advertised(&self, id: i32, host: &str, port: u16) {
        if let Some(b) = self.lock().brokers.get_mut(&id) {
            b.host = host.to_string();
            b.port = i32::from(port);
        }
    }

    fn live(st: &State) -> Vec<i32> {
        st.brokers.iter().filter(|(_, b)| b.up).map(|(id, _)| *id).collect()
    }

    /// The broker coordinating `group`: a moved coordinator if it is up, else the stable hash of
    /// the id over the brokers, skipping down ones; -1 when none is up.
    pub(crate) fn coordinator_of(&self, st: &State, group: &str) -> i32 {
        if let Some(to) = st.coordinators.get(group)
            && st.brokers.get(to).is_some_and(|b| b.up)
        {
            return *to;
        }
        let n = self.inner.config.brokers;
        let start = (stable_hash(group) % n as u64) as i32;
        (0..n).map(|i| (start + i) % n).find(|id| st.brokers.get(id).is_some_and(|b| b.up)).unwrap_or(-1)
    }

    // ---- topics -------------------------------------------------------------------------------

    /// Creates a topic with `partitions` partitions, leaders spread over the live brokers.
    ///
    /// # Errors
    /// `TOPIC_ALREADY_EXISTS`, `INVALID_TOPIC_EXCEPTION` (a name Kafka refuses, or one that
    /// differs from an existing topic's only by '.' against '_', which Kafka refuses because
    /// both would have the same metric names),
    /// `INVALID_PARTITIONS` (outside `1..=PARTITIONS_MAX`), `POLICY_VIOLATION` beyond
    /// [`TOPICS_MAX`].
    pub fn create_topic(&self, name: &str, partitions: i32) -> Result<(), E> {
        let mut st = self.lock();
        self.create_topic_locked(&mut st, name, partitions, false)
    }

    fn create_topic_locked(&self, st: &mut State, name: &str, partitions: i32, validate_only: bool) -> Result<(), E> {
        if !valid_topic_name(name) {
            return Err(E::InvalidTopicException);
        }
        if st.topics.contains_key(name) {
            return Err(E::TopicAlreadyExists);
        }
        // Kafka's `Topic.unifyCollisionChars`, checked by its controller after existence.
        let collision_key = |n: &str| n.replace('.', "_");
        let has_collision_chars = |n: &str| n.contains(['.', '_']);
        if has_collision_chars(name) {
            let key = collision_key(name);
            if st.topics.keys().any(|t| has_collision_chars(t) && collision_key(t) == key) {
                return Err(E::InvalidTopicException);
            }
        }
        if !(1..=PARTITIONS_MAX).contains(&partitions) {
            return Err(E::InvalidPartitions);
        }
        if st.topics.len() >= TOPICS_MAX {
            return Err(E::PolicyViolation);
        }
        if validate_only {
            return Ok(());
        }
        let live = Self::live(st);
        st.next_topic += 1;
        let offset = (stable_hash(name) % live.len().max(1) as u64) as usize;
        let partitions = (0..partitions as usize)
            .map(|p| Partition {
                leader: if live.is_empty() { -1 } else { live[(p + offset) % live.len()] },
                leader_epoch: 0,
                log: PartitionLog::default(),
            })
            .collect::<Vec<_>>();
        let count = partitions.len();
        let mut id = [0u8; 16];
        id[..8].copy_from_slice(&stable_hash(name).to_be_bytes());
        id[8..].copy_from_slice(&st.next_topic.to_be_bytes());
        st.topics.insert(name.to_string(), Topic { id: uuid::Uuid::from_bytes(id), partitions });
        self.record("kafka.topic.create", name, format!("{count} partitions"));
        Ok(())
    }

    /// The topics, by name.
    pub fn topics(&self) -> Vec<String> {
        self.lock().topics.keys().cloned().collect()
    }

    // ---- faults and controls ------------------------------------------------------------------

    /// Installs a fault now; it stays until the guard drops.
    pub fn install(&self, fault: Fault) -> FaultGuard {
        let id = self.install_fault(fault);
        FaultGuard { cluster: Arc::downgrade(&self.inner), id: Some(id) }
    }

    fn install_fault(&self, fault: Fault) -> u64 {
        let text = fault.to_string();
        let id = self.lock().faults.install(fault);
        self.record("kafka.fault.install", &format!("fault#{id}"), text);
        id
    }

    pub(crate) fn remove_fault(&self, id: u64) {
        let removed = self.lock().faults.remove(id);
        if let Some(f) = removed {
            self.record("kafka.fault.remove", &format!("fault#{id}"), f.to_string());
        }
    }

    /// Installs `fault` at fake time `from` and removes it at `until` (`None`: never), as
    /// harness events of the run (recorded in its history).
    pub fn fault_between(&self, ctx: &sim::Ctx, from: Duration, until: Option<Duration>, fault: Fault) {
        let slot = Arc::new(Mutex::new(None::<u64>));
        let (cluster, slot2, text) = (self.clone(), Arc::clone(&slot), fault.to_string());
        ctx.driver().at(
            from,
            sim::Event::new("kafka.fault.at", text.clone()).action(move || {
                let id = cluster.install_fault(fault);
                *slot2.lock().unwrap_or_else(|p| p.into_inner()) = Some(id);
            }),
        );
        if let Some(until) = until {
            let cluster = self.clone();
            ctx.driver().at(
                until.max(from),
                sim::Event::new("kafka.fault.until", text).action(move || {
                    if let Some(id) = slot.lock().unwrap_or_else(|p| p.into_inner()).take() {
                        cluster.remove_fault(id);
                    }
                }),
            );
        }
    }

    /// Applies `control` at fake time `at`, as a harness event of the run.
    pub fn at(&self, ctx: &sim::Ctx, at: Duration, control: Control) {
        let cluster = self.clone();
        ctx.driver()
            .at(at, sim::Event::new("kafka.control", format!("{control:?}")).action(move || cluster.apply(control)));
    }

    /// Applies a control now.
    pub fn apply(&self, control: Control) {
        match control {
            Control::BrokerDown(id) => self.broker_down(id),
            Control::BrokerUp(id) => self.broker_up(id),
            Control::MoveLeader { topic, partition, to } => self.move_leader(&topic, partition, to),
            Control::MoveCoordinator { group, to } => self.move_coordinator(&group, to),
        }
    }

    /// Takes broker `id` down: its listener and connections close; the partitions it led move
    /// to the next live broker (or have no leader, `LEADER_NOT_AVAILABLE`, when none is up).
    pub fn broker_down(&self, id: i32) {
        let mut moved = Vec::new();
        {
            let mut st = self.lock();
            let Some(b) = st.brokers.get_mut(&id) else { return };
            if !b.up {
                return;
            }
            b.up = false;
            let live = Self::live(&st);
            for (name, topic) in st.topics.iter_mut() {
                for (p, part) in topic.partitions.iter_mut().enumerate() {
                    if part.leader == id {
                        part.leader = live.iter().copied().find(|b| *b > id).or(live.first().copied()).unwrap_or(-1);
                        part.leader_epoch += 1;
                        moved.push(format!("{name}-{p}->{}", part.leader));
                    }
                }
            }
        }
        if let Some(tx) = self.inner.up.get(id as usize) {
            tx.send_replace(false);
        }
        self.inner.log_changed.send_modify(|v| *v += 1);
        self.record("kafka.broker.down", &format!("broker-{id}"), format!("leaders moved: {moved:?}"));
    }

    /// Brings broker `id` back up.
    pub fn broker_up(&self, id: i32) {
        {
            let mut st = self.lock();
            let Some(b) = st.brokers.get_mut(&id) else { return };
            if b.up {
                return;
            }
            b.up = true;
            // Partitions left without a leader get this one.
            for topic in st.topics.values_mut() {
                for part in topic.partitions.iter_mut().filter(|p| p.leader < 0) {
                    part.leader = id;
                    part.leader_epoch += 1;
                }
            }
        }
        if let Some(tx) = self.inner.up.get(id as usize) {
            tx.send_replace(true);
        }
        self.record("kafka.broker.up", &format!("broker-{id}"), "");
    }

    /// Whether broker `id` is up.
    pub fn is_up(&self, id: i32) -> bool {
        self.lock().brokers.get(&id).is_some_and(|b| b.up)
    }

    /// Moves a partition's leadership to broker `to`, bumping its leader epoch.
    pub fn move_leader(&self, topic: &str, partition: i32, to: i32) {
        let epoch = {
            let mut st = self.lock();
            let Some(p) = st.topics.get_mut(topic).and_then(|t| t.partitions.get_mut(partition as usize)) else {
                return;
            };
            p.leader = to;
            p.leader_epoch += 1;
            p.leader_epoch
        };
        self.inner.log_changed.send_modify(|v| *v += 1);
        self.record("kafka.leader.move", &format!("{topic}-{partition}"), format!("to broker {to}, epoch {epoch}"));
    }

    /// Moves a group's coordinator to broker `to`.
    pub fn move_coordinator(&self, group: &str, to: i32) {
        self.lock().coordinators.insert(group.to_string(), to);
        self.record("kafka.coordinator.move", group, format!("to broker {to}"));
    }

    // ---- introspection ------------------------------------------------------------------------

    /// The generations of `group`, oldest first.
    pub fn generations(&self, group: &str) -> Vec<Generation> {
        self.inner
            .journal
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .generations
            .get(group)
            .map(|g| g.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Every offset commit attempt, oldest first.
    pub fn commits(&self) -> Vec<CommitRecord> {
        self.inner.journal.lock().unwrap_or_else(|p| p.into_inner()).commits.iter().cloned().collect()
    }

    /// The events of `group`'s coordinator, oldest first: state changes, and members leaving
    /// (LeaveGroup), expiring or being removed ([`GroupEvent`]). The same events a simulation's
    /// history holds, kept on loopback too.
    pub fn group_events(&self, group: &str) -> Vec<GroupEvent> {
        let journal = self.inner.journal.lock().unwrap_or_else(|p| p.into_inner());
        journal.group_events.iter().filter(|e| e.group == group).cloned().collect()
    }

    /// `group`'s current state.
    pub fn group(&self, group: &str) -> Option<GroupView> {
        let st = self.lock();
        st.groups.get(group).map(|g| g.view(self.coordinator_of(&st, group)))
    }

    /// The offset and metadata `group` committed for a partition.
    pub fn committed(&self, group: &str, topic: &str, partition: i32) -> Option<(i64, String)> {
        let st = self.lock();
        let c = st.groups.get(group)?.offsets.get(&(topic.to_string(), partition))?;
        Some((c.offset, c.metadata.clone()))
    }

    /// A partition's leader, offsets and batches.
    pub fn partition(&self, topic: &str, partition: i32) -> Option<PartitionView> {
        let st = self.lock();
        let p = st.topics.get(topic)?.partitions.get(usize::try_from(partition).ok()?)?;
        Some(PartitionView {
            topic: topic.to_string(),
            partition,
            leader: p.leader,
            leader_epoch: p.leader_epoch,
            log_start: p.log.log_start(),
            high_watermark: p.log.high_watermark(),
            batches: p
                .log
                .batches()
                .map(|b| BatchView {
                    base_offset: b.base_offset,
                    last_offset: b.last_offset,
                    producer_id: b.producer_id,
                    base_sequence: b.base_sequence,
                    bytes: b.bytes.len(),
                })
                .collect(),
        })
    }

    // ---- serving ------------------------------------------------------------------------------

    /// Serves the cluster on the run's simulated network: broker `i` listens on host
    /// `<prefix>-<i>` port [`SIM_PORT`], and the cluster records into the run's history.
    /// Returns the bootstrap servers (`kafka-0:9092,…`).
    ///
    /// # Errors
    /// The listen error of a broker's host (`EADDRINUSE` if something listens there already).
    pub fn serve_sim(&self, ctx: &sim::Ctx) -> std::io::Result<String> {
        *self.inner.ctx.lock().unwrap_or_else(|p| p.into_inner()) = Some(ctx.clone());
        for id in self.broker_ids() {
            let host_name = format!("{}-{id}", self.inner.config.host_prefix);
            self.set_advertised(id, &host_name, SIM_PORT);
            let host = ctx.net().host(&host_name);
            let first = host.listen(&SIM_PORT.to_string())?;
            let cluster = self.clone();
            tokio::spawn(async move {
                let mut listener = Some(first);
                let mut up = cluster.inner_up(id);
                loop {
                    let Some(l) = listener.take() else {
                        if up.wait_for(|u| *u).await.is_err() {
                            return;
                        }
                        match host.listen(&SIM_PORT.to_string()) {
                            Ok(l) => listener = Some(l),
                            Err(e) => {
                                cluster.record("kafka.broker.listen", &format!("broker-{id}"), e.to_string());
                                return;
                            }
                        }
                        continue;
                    };
                    loop {
                        tokio::select! {
                            biased;
                            _ = up.wait_for(|u| !*u) => break,
                            accepted = l.accept() => match accepted {
                                Ok((stream, _)) => {
                                    let c = cluster.clone();
                                    tokio::spawn(async move { c.serve_connection(id, stream).await });
                                }
                                Err(_) => break,
                            },
                        }
                    }
                    drop(l);
                    if up.wait_for(|u| !*u).await.is_err() {
                        return;
                    }
                }
            });
        }
        Ok(self.bootstrap_servers())
    }

    /// Serves one connection as broker `broker` until the peer closes it, the broker goes down,
    /// a fault drops it, or a request cannot be decoded (that connection closes; others go on).
    /// Transport-agnostic: the simulated network, real sockets and in-memory pipes all work.
    pub async fn serve_connection<S>(&self, broker: i32, stream: S)
    where
        S: AsyncRead + AsyncWrite + Send + 'static,
    {
        let conn = self.inner.next_conn.fetch_add(1, Ordering::Relaxed);
        let Some(up) = self.inner.up.get(broker as usize) else { return };
        let mut up = up.subscribe();
        if !*up.borrow() {
            return;
        }
        let (mut rd, mut wr) = tokio::io::split(stream);
        let why = tokio::select! {
            biased;
            _ = up.wait_for(|u| !*u) => "broker down".to_string(),
            why = self.connection_loop(broker, conn, &mut rd, &mut wr) => why,
        };
        if why != "closed by the client" {
            self.record("kafka.conn.close", &format!("broker-{broker}/conn#{conn}"), why);
        }
    }

    /// Serves `input` as one connection's incoming bytes, then EOF, and returns what the broker
    /// wrote back before closing the connection: for fuzzing and tests of malformed input.
    /// Runs on the caller's tokio runtime (use a paused clock: a delayed or silent answer then
    /// costs no wall time; a request that would be answered after `timeout` of tokio time is cut
    /// off there).
    pub async fn feed_bytes(&self, broker: i32, input: &[u8], timeout: Duration) -> Vec<u8> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut client, server) = tokio::io::duplex(64 * 1024);
        let input = input.to_vec();
        let serve = self.serve_connection(broker, server);
        let talk = async move {
            let (mut rd, mut wr) = tokio::io::split(&mut client);
            let write = async {
                let _ = wr.write_all(&input).await;
                let _ = wr.shutdown().await;
            };
            let mut out = Vec::new();
            let read = rd.read_to_end(&mut out);
            let _ = tokio::join!(write, read);
            out
        };
        let mut out = Vec::new();
        let _ = tokio::time::timeout(timeout, async {
            let ((), bytes) = tokio::join!(serve, talk);
            out = bytes;
        })
        .await;
        out
    }

    async fn connection_loop<R, W>(&self, broker: i32, conn: u64, rd: &mut R, wr: &mut W) -> String
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        loop {
            let frame = match codec::read_frame(rd, codec::REQUEST_BYTES_MAX).await {
                Ok(Some(frame)) => frame,
                Ok(None) => return "closed by the client".to_string(),
                Err(e) => return format!("bad frame: {e}"),
            };
            let request = match codec::decode_request(frame) {
                Ok(Decoded::Request(r)) => *r,
                Ok(Decoded::ApiVersionsTooNew { correlation_id }) => {
                    let body = ResponseBody::ApiVersions(codec::api_versions_response(E::UnsupportedVersion.code()));
                    match codec::encode_response(correlation_id, 0, &body) {
                        Ok(bytes) if codec::write_frame(wr, &bytes).await.is_ok() => continue,
                        _ => return "write failed".to_string(),
                    }
                }
                Err(e) => return format!("undecodable request: {e}"),
            };
            let (api, version, correlation) =
                (request.api_key, request.header.request_api_version, request.header.correlation_id);
            let action = {
                let st = self.lock();
                st.faults
                    .first(api, broker, parts(&request))
                    .filter(|f| !matches!(f.action, FaultAction::Error(_)))
                    .map(|f| (f.action.clone(), f.to_string()))
            };
            let identity = format!("broker-{broker}/conn#{conn}");
            let mut drop_after = false;
            if let Some((action, text)) = action {
                self.record("kafka.fault.hit", &identity, &text);
                match action {
                    FaultAction::Delay(d) => tokio::time::sleep(d).await,
                    FaultAction::DropConnection => return format!("fault: {text}"),
                    FaultAction::Silence => std::future::pending::<()>().await,
                    FaultAction::ApplyThenDrop => drop_after = true,
                    FaultAction::Error(_) => {}
                }
            }
            let outcome = self.handle(broker, request).await;
            if drop_after {
                return "fault: applied, response dropped".to_string();
            }
            match outcome {
                Outcome::NoReply => {}
                Outcome::Close(why) => return why,
                Outcome::Reply(body) => match codec::encode_response(correlation, version, &body) {
                    Ok(bytes) => {
                        if let Err(e) = codec::write_frame(wr, &bytes).await {
                            return format!("write failed: {e}");
                        }
                    }
                    Err(e) => return format!("cannot encode {api:?} v{version} response: {e}"),
                },
            }
        }
    }

    /// Handles one decoded request.
    async fn handle(&self, broker: i32, request: DecodedRequest) -> Outcome {
        let version = request.header.request_api_version;
        let client_id = request.header.client_id.as_deref().unwrap_or_default().to_string();
        let reply = match request.body {
            RequestBody::ApiVersions(r) if version >= 3 && !codec::client_software_valid(&r) => {
                // Apache Kafka's ApiVersionsRequest.isValid: v3+ names the client's software.
                ResponseBody::ApiVersions(ApiVersionsResponse::default().with_error_code(E::InvalidRequest.code()))
            }
            RequestBody::ApiVersions(_) => ResponseBody::ApiVersions(codec::api_versions_response(0)),
            RequestBody::Metadata(r) => ResponseBody::Metadata(self.metadata(broker, version, &r)),
            RequestBody::CreateTopics(r) => ResponseBody::CreateTopics(self.create_topics(broker, version, &r)),
            RequestBody::DeleteTopics(r) => ResponseBody::DeleteTopics(self.delete_topics(broker, version, &r)),
            RequestBody::Produce(r) => return self.produce(broker, version, &r),
            RequestBody::Fetch(r) => ResponseBody::Fetch(self.fetch(broker, version, &r).await),
            RequestBody::ListOffsets(r) => ResponseBody::ListOffsets(self.list_offsets(broker, version, &r)),
            RequestBody::InitProducerId(r) => ResponseBody::InitProducerId(self.init_producer_id(broker, &r)),
            RequestBody::FindCoordinator(r) => {
                ResponseBody::FindCoordinator(self.find_coordinator(broker, version, &r))
            }
            RequestBody::JoinGroup(r) => {
                ResponseBody::JoinGroup(groups::join(self, broker, &client_id, version, r).await)
            }
            RequestBody::SyncGroup(r) => ResponseBody::SyncGroup(groups::sync(self, broker, version, r).await),
            RequestBody::Heartbeat(r) => ResponseBody::Heartbeat(groups::heartbeat(self, broker, &r)),
            RequestBody::LeaveGroup(r) => ResponseBody::LeaveGroup(groups::leave(self, broker, version, &r)),
            RequestBody::OffsetCommit(r) => ResponseBody::OffsetCommit(groups::commit(self, broker, version, &r)),
            RequestBody::OffsetFetch(r) => ResponseBody::OffsetFetch(groups::fetch_offsets(self, broker, version, &r)),
            RequestBody::DescribeGroups(r) => ResponseBody::DescribeGroups(groups::describe(self, broker, &r)),
            RequestBody::ListGroups(r) => ResponseBody::ListGroups(groups::list(self, broker, version, &r)),
        };
        Outcome::Reply(reply)
    }

    fn metadata(&self, broker: i32, version: i16, req: &MetadataRequest) -> MetadataResponse {
        let mut st = self.lock();
        let names: Option<Vec<String>> = match &req.topics {
            None => None,
            Some(t) if t.is_empty() && version == 0 => None,
            Some(t) => Some(t.iter().filter_map(|t| t.name.as_ref().map(|n| n.0.to_string())).collect()),
        };
        let auto = self.inner.config.auto_create_topics && (version < 4 || req.allow_auto_topic_creation);
        let names = match names {
            None => st.topics.keys().cloned().collect(),
            Some(names) => {
                if auto {
                    for n in &names {
                        if !st.topics.contains_key(n) && valid_topic_name(n) {
                            let partitions = self.inner.config.default_partitions;
                            let _ = self.create_topic_locked(&mut st, n, partitions, false);
                        }
                    }
                }
                names
            }
        };
        let topics = names
            .iter()
            .map(|name| {
                let t = metadata_response::MetadataResponseTopic::default().with_name(Some(TopicName(s(name))));
                if let Some(code) =
                    st.faults.error_for(ApiKey::Metadata, broker, Part { topic: Some(name), ..Part::default() })
                {
                    return t.with_error_code(code);
                }
                let Some(topic) = st.topics.get(name) else {
                    let code =
                        if valid_topic_name(name) { E::UnknownTopicOrPartition } else { E::InvalidTopicException };
                    return t.with_error_code(code.code());
                };
                let partitions = topic
                    .partitions
                    .iter()
                    .enumerate()
                    .map(|(i, p)| {
                        let replicas = if p.leader >= 0 { vec![BrokerId(p.leader)] } else { Vec::new() };
                        metadata_response::MetadataResponsePartition::default()
                            .with_error_code(if p.leader < 0 { E::LeaderNotAvailable.code() } else { 0 })
                            .with_partition_index(i as i32)
                            .with_leader_id(BrokerId(p.leader))
                            .with_leader_epoch(p.leader_epoch)
                            .with_replica_nodes(replicas.clone())
                            .with_isr_nodes(replicas)
                    })
                    .collect();
                t.with_topic_id(topic.id).with_partitions(partitions)
            })
            .collect();
        let brokers = st
            .brokers
            .iter()
            .filter(|(_, b)| b.up)
            .map(|(id, b)| {
                metadata_response::MetadataResponseBroker::default()
                    .with_node_id(BrokerId(*id))
                    .with_host(s(&b.host))
                    .with_port(b.port)
            })
            .collect();
        MetadataResponse::default()
            .with_brokers(brokers)
            .with_cluster_id(Some(s(&self.inner.config.cluster_id)))
            .with_controller_id(BrokerId(Self::live(&st).first().copied().unwrap_or(-1)))
            .with_topics(topics)
    }

    fn create_topics(&self, broker: i32, version: i16, req: &CreateTopicsRequest) -> CreateTopicsResponse {
        let mut st = self.lock();
        let live = Self::live(&st).len() as i16;
        // A name sent twice is answered once, with INVALID_REQUEST, after the other results, and
        // nothing is created for it (Kafka's ControllerApis.createTopics).
        let mut seen = BTreeMap::<&str, usize>::new();
        for t in &req.topics {
            *seen.entry(t.name.0.as_str()).or_default() += 1;
        }
        let mut duplicates: Vec<&TopicName> = Vec::new();
        for t in req.topics.iter().filter(|t| seen[t.name.0.as_str()] > 1) {
            if !duplicates.contains(&&t.name) {
                duplicates.push(&t.name);
            }
        }
        let duplicated = duplicates.iter().map(|name| {
            let r = create_topics_response::CreatableTopicResult::default()
                .with_name((*name).clone())
                .with_error_code(E::InvalidRequest.code());
            if version >= 5 { r.with_num_partitions(-1).with_replication_factor(-1) } else { r }
        });
        let topics = req
            .topics
            .iter()
            .filter(|t| seen[t.name.0.as_str()] == 1)
            .map(|t| {
                let name = t.name.0.to_string();
                let partitions =
                    if t.num_partitions == -1 { self.inner.config.default_partitions } else { t.num_partitions };
                let replication = if t.replication_factor == -1 { 1 } else { t.replication_factor };
                let result = if let Some(code) =
                    st.faults.error_for(ApiKey::CreateTopics, broker, Part { topic: Some(&name), ..Part::default() })
                {
                    Err(E::try_from_code(code).unwrap_or(E::UnknownServerError))
                } else if replication < 1 || replication > live {
                    Err(E::InvalidReplicationFactor)
                } else {
                    self.create_topic_locked(&mut st, &name, partitions, req.validate_only)
                };
                let mut r = create_topics_response::CreatableTopicResult::default()
                    .with_name(t.name.clone())
                    .with_error_code(result.err().map_or(0, |e| e.code()));
                if version >= 5 {
                    r = r
                        .with_num_partitions(if result.is_ok() { partitions } else { -1 })
                        .with_replication_factor(if result.is_ok() { replication } else { -1 });
                }
                if version >= 7
                    && let Some(topic) = st.topics.get(&name)
                {
                    r = r.with_topic_id(topic.id);
                }
                r
            })
            .chain(duplicated)
            .collect();
        CreateTopicsResponse::default().with_topics(topics)
    }

    fn delete_topics(&self, broker: i32, version: i16, req: &DeleteTopicsRequest) -> DeleteTopicsResponse {
        let mut st = self.lock();
        let names: Vec<(Option<String>, uuid::Uuid)> = if version >= 6 {
            req.topics.iter().map(|t| (t.name.as_ref().map(|n| n.0.to_string()), t.topic_id)).collect()
        } else {
            req.topic_names.iter().map(|n| (Some(n.0.to_string()), uuid::Uuid::nil())).collect()
        };
        let responses = names
            .into_iter()
            .map(|(name, id)| {
                let name = name.or_else(|| st.topics.iter().find(|(_, t)| t.id == id).map(|(n, _)| n.clone()));
                let mut r = delete_topics_response::DeletableTopicResult::default()
                    .with_name(name.as_deref().map(|n| TopicName(s(n))));
                if version >= 6 {
                    r = r.with_topic_id(id);
                }
                let Some(name) = name else {
                    return r.with_error_code(E::UnknownTopicId.code());
                };
                if let Some(code) =
                    st.faults.error_for(ApiKey::DeleteTopics, broker, Part { topic: Some(&name), ..Part::default() })
                {
                    return r.with_error_code(code);
                }
                if st.topics.remove(&name).is_none() {
                    return r.with_error_code(E::UnknownTopicOrPartition.code());
                }
                st.producers.forget_topic(&name);
                for g in st.groups.values_mut() {
                    g.offsets.retain(|(t, _), _| *t != name);
                }
                self.record("kafka.topic.delete", &name, "");
                r
            })
            .collect();
        DeleteTopicsResponse::default().with_responses(responses)
    }

    /// Produce. With acks=0 nothing is answered, and a request with any partition error closes
    /// the connection instead, so the producer notices and refreshes its metadata (Apache Kafka's
    /// `KafkaApis.handleProduceRequest`; measured against Kafka 4.2 by fidelity's differential
    /// suite); the partitions without an error are appended either way.
    fn produce(&self, broker: i32, version: i16, req: &ProduceRequest) -> Outcome {
        let acks_ok = matches!(req.acks, -1..=1);
        let mut appended = Vec::new();
        let responses = {
            let mut st = self.lock();
            let st = &mut *st;
            req.topic_data
                .iter()
                .map(|t| {
                    let name = t.name.0.to_string();
                    let partitions = t
                        .partition_data
                        .iter()
                        .map(|p| {
                            let result = if !acks_ok {
                                Err(E::InvalidRequiredAcks.code())
                            } else if req.transactional_id.is_some() {
                                Err(E::TransactionalIdAuthorizationFailed.code())
                            } else {
                                self.append(st, broker, &name, p).inspect(|(base, last)| {
                                    if *last >= *base {
                                        appended.push(format!("{name}-{} {base}..={last}", p.index));
                                    }
                                })
                            };
                            let log_start = st
                                .topics
                                .get(&name)
                                .and_then(|t| t.partitions.get(p.index as usize))
                                .map_or(-1, |p| p.log.log_start());
                            let mut r = produce_response::PartitionProduceResponse::default()
                                .with_index(p.index)
                                .with_log_append_time_ms(-1);
                            r = match result {
                                Ok((base, _)) => r.with_base_offset(base),
                                Err(code) => r.with_error_code(code).with_base_offset(-1),
                            };
                            if version >= 5 {
                                r = r.with_log_start_offset(log_start);
                            }
                            r
                        })
                        .collect();
                    produce_response::TopicProduceResponse::default()
                        .with_name(t.name.clone())
                        .with_partition_responses(partitions)
                })
                .collect()
        };
        if !appended.is_empty() {
            self.inner.log_changed.send_modify(|v| *v += 1);
            self.record("kafka.produce", &format!("broker-{broker}"), appended.join(", "));
        }
        if req.acks != 0 {
            return Outcome::Reply(ResponseBody::Produce(ProduceResponse::default().with_responses(responses)));
        }
        let failed: Vec<String> = responses
            .iter()
            .flat_map(|t| {
                t.partition_responses
                    .iter()
                    .filter(|p| p.error_code != 0)
                    .map(move |p| format!("{}-{}: error {}", t.name.0.as_str(), p.index, p.error_code))
            })
            .collect();
        if failed.is_empty() {
            Outcome::NoReply
        } else {
            Outcome::Close(format!("acks=0 produce failed: {}", failed.join(", ")))
        }
    }

    /// Appends one partition's batch; `(base, last)` offsets (a duplicate gives its original
    /// base and `last < base`), or the error code.
    fn append(
        &self,
        st: &mut State,
        broker: i32,
        topic: &str,
        p: &produce_request::PartitionProduceData,
    ) -> Result<(i64, i64), i16> {
        let part = Part { topic: Some(topic), partition: Some(p.index), group: None };
        let Some(t) = st.topics.get_mut(topic) else {
            return Err(E::UnknownTopicOrPartition.code());
        };
        let Some(partition) = usize::try_from(p.index).ok().and_then(|i| t.partitions.get_mut(i)) else {
            return Err(E::UnknownTopicOrPartition.code());
        };
        if partition.leader != broker {
            return Err(E::NotLeaderOrFollower.code());
        }
        if let Some(code) = st.faults.error_for(ApiKey::Produce, broker, part) {
            return Err(code);
        }
        let records = p.records.clone().unwrap_or_default();
        let batch = validate_batch(&records, self.inner.config.message_bytes_max).map_err(|e| e.code())?;
        let producer = (batch.info.producer_id, batch.info.producer_epoch);
        let seq = (batch.info.base_sequence, batch.last_sequence());
        match st.producers.check(producer, topic, p.index, seq.0, seq.1) {
            SequenceCheck::Refuse(code) => Err(code),
            SequenceCheck::Duplicate(base) => Ok((base, base - 1)),
            SequenceCheck::Append => {
                let t = st.topics.get_mut(topic).expect("checked above");
                let partition = &mut t.partitions[p.index as usize];
                let base = partition.log.append(&batch, partition.leader_epoch, self.inner.config.partition_bytes_max);
                st.producers.appended(producer, topic, p.index, seq, base);
                Ok((base, base + i64::from(batch.info.record_count) - 1))
            }
        }
    }

    async fn fetch(&self, broker: i32, version: i16, req: &FetchRequest) -> FetchResponse {
        if version >= 7 && (req.session_id != 0 || req.session_epoch > 0) {
            // No fetch session was ever handed out (responses carry session id 0).
            return FetchResponse::default().with_error_code(E::FetchSessionIdNotFound.code());
        }
        let wait = Duration::from_millis(u64::try_from(req.max_wait_ms).unwrap_or(0)).min(FETCH_WAIT_MAX);
        let deadline = Instant::now() + wait;
        let min_bytes = usize::try_from(req.min_bytes).unwrap_or(0);
        loop {
            let mut changed = self.inner.log_changed.subscribe();
            let (resp, bytes, errors) = self.fetch_once(broker, version, req);
            if errors || bytes >= min_bytes.max(1) || Instant::now() >= deadline {
                return resp;
            }
            tokio::select! {
                biased;
                r = changed.changed() => if r.is_err() { return resp },
                () = tokio::time::sleep_until(deadline) => return self.fetch_once(broker, version, req).0,
            }
        }
    }

    fn fetch_once(&self, broker: i32, version: i16, req: &FetchRequest) -> (FetchResponse, usize, bool) {
        let st = self.lock();
        let mut budget = if version >= 3 { usize::try_from(req.max_bytes).unwrap_or(0) } else { usize::MAX };
        let mut total = 0usize;
        let mut errors = false;
        let responses = req
            .topics
            .iter()
            .map(|t| {
                let name = t.topic.0.to_string();
                let partitions = t
                    .partitions
                    .iter()
                    .map(|fp| {
                        let mut r = fetch_response::PartitionData::default()
                            .with_partition_index(fp.partition)
                            .with_records(Some(Bytes::new()))
                            .with_aborted_transactions(Some(Vec::new()));
                        let part = Part { topic: Some(&name), partition: Some(fp.partition), group: None };
                        let found = st
                            .topics
                            .get(&name)
                            .and_then(|t| usize::try_from(fp.partition).ok().and_then(|i| t.partitions.get(i)));
                        let code = match found {
                            None => Some(E::UnknownTopicOrPartition.code()),
                            Some(p) if p.leader != broker => Some(E::NotLeaderOrFollower.code()),
                            Some(_) => st.faults.error_for(ApiKey::Fetch, broker, part),
                        };
                        let Some(p) = found.filter(|_| code.is_none()) else {
                            errors = true;
                            return r
                                .with_error_code(code.unwrap_or(0))
                                .with_high_watermark(-1)
                                .with_last_stable_offset(-1);
                        };
                        let hw = p.log.high_watermark();
                        if fp.fetch_offset < p.log.log_start() || fp.fetch_offset > hw {
                            // As Kafka answers any partition error: no watermarks (measured against
                            // Apache Kafka 4.2 by fidelity's differential suite).
                            errors = true;
                            return r
                                .with_error_code(E::OffsetOutOfRange.code())
                                .with_high_watermark(-1)
                                .with_last_stable_offset(-1)
                                .with_log_start_offset(-1);
                        }
                        r = r.with_high_watermark(hw).with_last_stable_offset(hw);
                        if version >= 5 {
                            r = r.with_log_start_offset(p.log.log_start());
                        }
                        let partition_max = usize::try_from(fp.partition_max_bytes).unwrap_or(0);
                        // KIP-74, as Kafka's ReplicaManager.readFromLog: each partition within
                        // what is left of max_bytes; the response's first batch goes out whatever
                        // its size, no other batch beyond the limits.
                        let first = total == 0;
                        let batches = p.log.read(fp.fetch_offset, partition_max.min(budget), first);
                        let size: usize = batches.iter().map(Bytes::len).sum();
                        total += size;
                        budget = budget.saturating_sub(size);
                        r.with_records(Some(batches.concat().into()))
                    })
                    .collect();
                fetch_response::FetchableTopicResponse::default()
                    .with_topic(t.topic.clone())
                    .with_partitions(partitions)
            })
            .collect();
        (FetchResponse::default().with_responses(responses), total, errors)
    }

    /// ListOffsets. As Kafka's `KafkaApis.handleListOffsetRequest`: a partition asked more than
    /// once is answered once, with `INVALID_REQUEST`; the max-timestamp query (-3) needs v7.
    fn list_offsets(&self, broker: i32, version: i16, req: &ListOffsetsRequest) -> ListOffsetsResponse {
        let st = self.lock();
        let mut asked = BTreeMap::<(&str, i32), usize>::new();
        for t in &req.topics {
            for lp in &t.partitions {
                *asked.entry((t.name.0.as_str(), lp.partition_index)).or_default() += 1;
            }
        }
        let mut answered = std::collections::BTreeSet::new();
        let topics = req
            .topics
            .iter()
            .map(|t| {
                let name = t.name.0.to_string();
                let partitions = t
                    .partitions
                    .iter()
                    .filter(|lp| answered.insert((t.name.0.as_str(), lp.partition_index)))
                    .map(|lp| {
                        let r = list_offsets_response::ListOffsetsPartitionResponse::default()
                            .with_partition_index(lp.partition_index);
                        if asked[&(t.name.0.as_str(), lp.partition_index)] > 1 {
                            return r.with_error_code(E::InvalidRequest.code()).with_offset(-1).with_timestamp(-1);
                        }
                        let part = Part { topic: Some(&name), partition: Some(lp.partition_index), group: None };
                        let found = st
                            .topics
                            .get(&name)
                            .and_then(|t| usize::try_from(lp.partition_index).ok().and_then(|i| t.partitions.get(i)));
                        let Some(p) = found else {
                            return r
                                .with_error_code(E::UnknownTopicOrPartition.code())
                                .with_offset(-1)
                                .with_timestamp(-1);
                        };
                        if p.leader != broker {
                            return r.with_error_code(E::NotLeaderOrFollower.code()).with_offset(-1).with_timestamp(-1);
                        }
                        if let Some(code) = st.faults.error_for(ApiKey::ListOffsets, broker, part) {
                            return r.with_error_code(code).with_offset(-1).with_timestamp(-1);
                        }
                        let (offset, timestamp) = match lp.timestamp {
                            -2 => (p.log.log_start(), -1),
                            -1 => (p.log.high_watermark(), -1),
                            -3 if version >= 7 => p.log.max_timestamp().unwrap_or((-1, -1)),
                            ts if ts >= 0 => p.log.offset_for_timestamp(ts).unwrap_or((-1, -1)),
                            _ => {
                                return r
                                    .with_error_code(E::UnsupportedVersion.code())
                                    .with_offset(-1)
                                    .with_timestamp(-1);
                            }
                        };
                        let mut r = r.with_offset(offset).with_timestamp(timestamp);
                        if version >= 4 {
                            r = r.with_leader_epoch(p.leader_epoch);
                        }
                        r
                    })
                    .collect();
                list_offsets_response::ListOffsetsTopicResponse::default()
                    .with_name(t.name.clone())
                    .with_partitions(partitions)
            })
            .collect();
        ListOffsetsResponse::default().with_topics(topics)
    }

    fn init_producer_id(&self, broker: i32, req: &InitProducerIdRequest) -> InitProducerIdResponse {
        let mut st = self.lock();
        let r = InitProducerIdResponse::default().with_producer_id(ProducerId(-1)).with_producer_epoch(-1);
        if let Some(code) = st.faults.error_for(ApiKey::InitProducerId, broker, Part::default()) {
            return r.with_error_code(code);
        }
        if req.transactional_id.as_ref().is_some_and(|t| t.is_empty()) {
            // Kafka's transaction coordinator refuses an empty transactional id.
            return r.with_error_code(E::InvalidRequest.code());
        }
        if req.transactional_id.is_some() {
            // Transactions are not modelled yet.
            return r.with_error_code(E::TransactionalIdAuthorizationFailed.code());
        }
        let existing = (req.producer_id.0 >= 0).then_some((req.producer_id.0, req.producer_epoch));
        match st.producers.init(existing) {
            Ok((id, epoch)) => {
                drop(st);
                self.record("kafka.producer.init", &format!("producer-{id}"), format!("epoch {epoch}"));
                InitProducerIdResponse::default().with_producer_id(ProducerId(id)).with_producer_epoch(epoch)
            }
            Err(code) => r.with_error_code(code),
        }
    }

    fn find_coordinator(&self, broker: i32, version: i16, req: &FindCoordinatorRequest) -> FindCoordinatorResponse {
        let st = self.lock();
        let keys: Vec<String> = if version >= 4 {
            req.coordinator_keys.iter().map(|k| k.to_string()).collect()
        } else {
            vec![req.key.to_string()]
        };
        let answer = |key: &str| -> Result<(i32, String, i32), E> {
            match req.key_type {
                0 => {}
                // Transaction (1) and share (2) coordinators are not modelled yet.
                1 | 2 => return Err(E::CoordinatorNotAvailable),
                // Kafka's CoordinatorType.forId refuses any other key type.
                _ => return Err(E::InvalidRequest),
            }
            if let Some(code) =
                st.faults.error_for(ApiKey::FindCoordinator, broker, Part { group: Some(key), ..Part::default() })
            {
                return Err(E::try_from_code(code).unwrap_or(E::UnknownServerError));
            }
            let id = self.coordinator_of(&st, key);
            let b = st.brokers.get(&id).ok_or(E::CoordinatorNotAvailable)?;
            Ok((id, b.host.clone(), b.port))
        };
        if version >= 4 {
            let coordinators = keys
                .iter()
                .map(|k| {
                    let c = find_coordinator_response::Coordinator::default().with_key(s(k));
                    match answer(k) {
                        Ok((id, host, port)) => c.with_node_id(BrokerId(id)).with_host(s(&host)).with_port(port),
                        Err(e) => c.with_error_code(e.code()).with_node_id(BrokerId(-1)),
                    }
                })
                .collect();
            return FindCoordinatorResponse::default().with_coordinators(coordinators);
        }
        match answer(&keys[0]) {
            Ok((id, host, port)) => {
                FindCoordinatorResponse::default().with_node_id(BrokerId(id)).with_host(s(&host)).with_port(port)
            }
            Err(e) => FindCoordinatorResponse::default().with_error_code(e.code()).with_node_id(BrokerId(-1)),
        }
    }
}

/// The parts of a request faults select on: its topic partitions and its group.
fn parts(request: &DecodedRequest) -> Vec<Part<'_>> {
    fn topic_parts(t: &str, ps: Vec<i32>) -> Vec<Part<'_>> {
        ps.into_iter().map(|p| Part { topic: Some(t), partition: Some(p), group: None }).collect()
    }
    fn group(g: &str) -> Vec<Part<'_>> {
        vec![Part { group: Some(g), ..Part::default() }]
    }
    let mut out: Vec<Part<'_>> = match &request.body {
        RequestBody::Produce(r) => r
            .topic_data
            .iter()
            .flat_map(|t| topic_parts(t.name.0.as_str(), t.partition_data.iter().map(|p| p.index).collect()))
            .collect(),
        RequestBody::Fetch(r) => r
            .topics
            .iter()
            .flat_map(|t| topic_parts(t.topic.0.as_str(), t.partitions.iter().map(|p| p.partition).collect()))
            .collect(),
        RequestBody::ListOffsets(r) => r
            .topics
            .iter()
            .flat_map(|t| topic_parts(t.name.0.as_str(), t.partitions.iter().map(|p| p.partition_index).collect()))
            .collect(),
        RequestBody::Metadata(r) => r
            .topics
            .iter()
            .flatten()
            .filter_map(|t| t.name.as_ref())
            .map(|n| Part { topic: Some(n.0.as_str()), ..Part::default() })
            .collect(),
        RequestBody::OffsetCommit(r) => r
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| Part {
                    topic: Some(t.name.0.as_str()),
                    partition: Some(p.partition_index),
                    group: Some(r.group_id.0.as_str()),
                })
            })
            .collect(),
        RequestBody::OffsetFetch(r) => group(r.group_id.0.as_str()),
        RequestBody::JoinGroup(r) => group(r.group_id.0.as_str()),
        RequestBody::SyncGroup(r) => group(r.group_id.0.as_str()),
        RequestBody::Heartbeat(r) => group(r.group_id.0.as_str()),
        RequestBody::LeaveGroup(r) => group(r.group_id.0.as_str()),
        RequestBody::DescribeGroups(r) => {
            r.groups.iter().map(|g| Part { group: Some(g.0.as_str()), ..Part::default() }).collect()
        }
        RequestBody::FindCoordinator(r) => group(r.key.as_str()),
        _ => Vec::new(),
    };
    out.push(Part::default());
    out
}
