//! The log cleaner on the cluster's clock: Kafka's cleaner thread looks for the dirtiest
//! compacted log when it starts and, whenever it finds none, again `log.cleaner.backoff.ms`
//! (15 s) later; it cleans one log after another while any is due
//! ([`crate::log::PartitionLog::clean`] has the rules).
//!
//! kafkasim looks on the same grid (the cluster's start, then every backoff; a cleaning takes no
//! time here, so every due log is cleaned at the same instant) but sets a timer only for the
//! first look that will find something due: after an append, the end of a transaction or a
//! config change to a compacted topic, or when `min.compaction.lag.ms` or
//! `max.compaction.lag.ms` will make a dirty log due. An idle cluster keeps no timer running.

use std::time::Duration;

use tokio::time::Instant;

use super::cluster::{Cluster, State};
use super::retention::on_grid;

impl Cluster {
    /// Arms the cleaner for when `topic` (one partition, or all when `None`) is next due, unless
    /// an earlier look is armed already.
    pub(super) fn arm_cleaner(&self, st: &mut State, topic: &str, partition: Option<i32>) {
        let now_ms = Self::now_ms();
        let Some(t) = st.topics.get(topic).filter(|t| !t.internal && t.configs.cleanup("compact")) else { return };
        let cfg = t.configs.cleaner_config();
        let due = t
            .partitions
            .iter()
            .enumerate()
            .filter(|(i, _)| partition.is_none_or(|p| usize::try_from(p).ok() == Some(*i)))
            .filter_map(|(_, p)| p.log.clean_due_ms(&cfg, now_ms))
            .min();
        let Some(due_ms) = due else { return };
        let wait = Duration::from_millis(u64::try_from(due_ms.saturating_sub(now_ms)).unwrap_or(0));
        let at = on_grid(self.inner.start, self.inner.config.cleaner_backoff, Instant::now() + wait);
        self.arm_timer(st, |st| &mut st.cleaner_timer, at, Cluster::run_cleaner);
    }

    /// Cleans every compacted partition that is due; arms the next look.
    fn run_cleaner(&self, st: &mut State) {
        let now_ms = Self::now_ms();
        let mut cleaned = Vec::new();
        for (name, t) in st.topics.iter_mut().filter(|(_, t)| !t.internal && t.configs.cleanup("compact")) {
            let cfg = t.configs.cleaner_config();
            for (i, p) in t.partitions.iter_mut().enumerate() {
                if let Some(c) = p.log.clean(&cfg, now_ms) {
                    cleaned.push((format!("{name}/{i}"), c));
                }
            }
        }
        for (partition, c) in cleaned {
            self.record(
                "kafka.log.compaction",
                &partition,
                format!(
                    "cleaned offsets {}..{}: {} records removed, {} -> {} bytes",
                    c.from, c.to, c.records_removed, c.bytes.0, c.bytes.1
                ),
            );
        }
        let names: Vec<String> = st.topics.keys().cloned().collect();
        for name in names {
            self.arm_cleaner(st, &name, None);
        }
    }
}
