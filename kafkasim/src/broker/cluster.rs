//! The cluster's shared state and the helpers every handler uses.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use kafka_protocol::protocol::StrBytes;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::faults::FaultSet;
use crate::groups::Coordinator;
use crate::introspect::{GroupEvent, Journal};
use crate::log::PartitionLog;
use crate::producer_ids::ProducerIds;
use crate::topic_config::{BrokerDefaults, TopicConfigs};
use crate::transactions::Transactions;

/// Topics one cluster holds.
pub const TOPICS_MAX: usize = 100_000;
/// Partitions one topic may have.
pub const PARTITIONS_MAX: i32 = 10_000;
/// The longest a Fetch may wait for data (its `max_wait_ms` is capped here).
pub const FETCH_WAIT_MAX: Duration = Duration::from_secs(300);
/// The port each broker listens on in a simulation.
pub const SIM_PORT: u16 = 9092;

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
    pub retention_check_delay: Duration,
    pub retention_check_interval: Duration,
    pub cleaner_backoff: Duration,
}

#[derive(Debug, Clone)]
pub(crate) struct BrokerInfo {
    pub host: String,
    pub port: i32,
    pub up: bool,
}

pub(crate) struct Topic {
    pub(super) id: uuid::Uuid,
    pub(super) partitions: Vec<Partition>,
    /// The topic's config overrides (CreateTopics, AlterConfigs, IncrementalAlterConfigs).
    pub(super) configs: TopicConfigs,
    /// An internal topic (`__consumer_offsets`): listed with `is_internal`, refused to producers.
    pub(super) internal: bool,
}

pub(crate) struct Partition {
    pub(super) leader: i32,
    pub(super) leader_epoch: i32,
    pub(super) log: PartitionLog,
}

/// The mutable state, behind one lock that is never held across an `.await`.
pub(crate) struct State {
    pub(super) brokers: BTreeMap<i32, BrokerInfo>,
    pub(super) topics: BTreeMap<String, Topic>,
    /// The group coordinator and its groups.
    pub(super) groups: Coordinator,
    pub(super) producers: ProducerIds,
    /// The transaction coordinator's transactional ids.
    pub(super) transactions: Transactions,
    pub(super) faults: FaultSet,
    /// Moved coordinators, by group.
    pub(super) coordinators: BTreeMap<String, i32>,
    pub(super) next_topic: u64,
    /// The armed retention check: its serial and when it runs.
    pub(super) retention_timer: Option<(u64, Instant)>,
    /// The armed look of the log cleaner: its serial and when it runs.
    pub(super) cleaner_timer: Option<(u64, Instant)>,
}

/// Whether `topics` has partition `partition` of a topic named `name`.
pub(super) fn has_partition(topics: &BTreeMap<String, Topic>, name: &str, partition: i32) -> bool {
    topics.get(name).is_some_and(|t| usize::try_from(partition).is_ok_and(|i| i < t.partitions.len()))
}

pub(crate) struct Inner {
    pub(super) config: Config,
    pub(super) state: Mutex<State>,
    pub(super) journal: Mutex<Journal>,
    pub(super) log_changed: watch::Sender<u64>,
    pub(super) up: Vec<watch::Sender<bool>>,
    pub(super) ctx: Mutex<Option<sim::Ctx>>,
    pub(super) start: Instant,
    pub(super) next_conn: AtomicU64,
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

pub(super) fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

/// A stable hash (FNV-1a), so placement never changes with a Rust release.
pub(super) fn stable_hash(x: &str) -> u64 {
    x.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

pub(super) fn valid_topic_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 249
        && name != "."
        && name != ".."
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

impl Cluster {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn config(&self) -> &Config {
        &self.inner.config
    }

    /// What the broker contributes to every topic's effective configs.
    pub(crate) fn broker_defaults(&self) -> BrokerDefaults {
        BrokerDefaults { message_max_bytes: self.inner.config.message_bytes_max }
    }

    pub(crate) fn journal(&self, f: impl FnOnce(&mut Journal)) {
        f(&mut self.inner.journal.lock().unwrap_or_else(|p| p.into_inner()));
    }

    /// The wall clock in milliseconds since the epoch (in a simulation, the run's seeded epoch
    /// plus its clock: `sim` interposes `SystemTime`).
    pub(crate) fn now_ms() -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
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

    pub(super) fn live(st: &State) -> Vec<i32> {
        st.brokers.iter().filter(|(_, b)| b.up).map(|(id, _)| *id).collect()
    }

    /// The broker coordinating `group` ([`coordinator_of`]).
    pub(crate) fn coordinator_of(&self, st: &State, group: &str) -> i32 {
        coordinator_of(&st.brokers, &st.coordinators, self.inner.config.brokers, group)
    }
}

/// The broker coordinating `group` among `n` brokers: a moved coordinator if it is up, else the
/// stable hash of the id over the brokers, skipping down ones; -1 when none is up.
pub(super) fn coordinator_of(
    brokers: &BTreeMap<i32, BrokerInfo>,
    coordinators: &BTreeMap<String, i32>,
    n: i32,
    group: &str,
) -> i32 {
    if let Some(to) = coordinators.get(group)
        && brokers.get(to).is_some_and(|b| b.up)
    {
        return *to;
    }
    let start = (stable_hash(group) % n as u64) as i32;
    (0..n).map(|i| (start + i) % n).find(|id| brokers.get(id).is_some_and(|b| b.up)).unwrap_or(-1)
}
