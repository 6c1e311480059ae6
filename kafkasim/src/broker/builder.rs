//! The cluster's builder: its settings, and building it.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::cluster::{BrokerInfo, Cluster, Config, Inner, PARTITIONS_MAX, SIM_PORT, State};
use crate::faults::FaultSet;
use crate::groups::Coordinator;
use crate::introspect::Journal;
use crate::producer_ids::ProducerIds;

/// A builder for a [`Cluster`]. Defaults are Apache Kafka's broker defaults unless noted.
#[derive(Debug, Clone)]
pub struct ClusterBuilder {
    config: Config,
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
                retention_check_delay: Duration::from_secs(30),
                retention_check_interval: Duration::from_secs(300),
                cleaner_backoff: Duration::from_secs(15),
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

    /// Bytes a partition keeps before its oldest batches are dropped at once, whatever the
    /// topic's retention (default 1 GiB; not in Kafka: it bounds the fake's memory). The topic
    /// configs `retention.bytes` and `retention.ms` apply at the retention checks
    /// ([`ClusterBuilder::retention_check`]).
    pub fn partition_bytes_max(mut self, bytes: usize) -> Self {
        self.config.partition_bytes_max = bytes.max(1);
        self
    }

    /// When retention runs: first `delay` after the cluster is built (`log.initial.task.delay.ms`,
    /// 30 s), then every `interval` (`log.retention.check.interval.ms`, 5 min; at least 1 ms), on
    /// the cluster's clock. A check deletes the segments `retention.ms` and `retention.bytes`
    /// expire (see [`crate::log`]); the cluster only sets a timer for a check that has something
    /// to delete, so an idle cluster does not keep a simulation busy.
    pub fn retention_check(mut self, delay: Duration, interval: Duration) -> Self {
        self.config.retention_check_delay = delay;
        self.config.retention_check_interval = interval.max(Duration::from_millis(1));
        self
    }

    /// How long the log cleaner waits after finding no compacted log due before it looks again
    /// (`log.cleaner.backoff.ms`, 15 s; at least 1 ms); it first looks when the cluster is built.
    /// A look cleans every `cleanup.policy=compact` partition whose dirty ratio is above
    /// `min.cleanable.dirty.ratio` (see [`crate::log::compaction::CleanerConfig`]); the cluster only sets a
    /// timer for a look that will find one.
    pub fn log_cleaner_backoff(mut self, backoff: Duration) -> Self {
        self.config.cleaner_backoff = backoff.max(Duration::from_millis(1));
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
                    groups: Coordinator::default(),
                    producers: ProducerIds::default(),
                    transactions: Default::default(),
                    faults: FaultSet::default(),
                    coordinators: BTreeMap::new(),
                    next_topic: 0,
                    retention_timer: None,
                    cleaner_timer: None,
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

impl Cluster {
    /// A builder with Kafka's defaults.
    pub fn builder() -> ClusterBuilder {
        ClusterBuilder::default()
    }
}
