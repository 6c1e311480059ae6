//! Retention on the cluster's clock: Kafka's `LogManager` runs `cleanupLogs` first
//! `log.initial.task.delay.ms` after start, then every `log.retention.check.interval.ms`; each
//! run deletes the segments `retention.ms` and `retention.bytes` expire in every topic whose
//! `cleanup.policy` holds `delete` ([`crate::log::PartitionLog::delete_expired`]).
//!
//! kafkasim runs the same checks on the same grid of times but sets a timer only for the first
//! check that will delete something (a log over `retention.bytes` by a whole segment, or the
//! oldest segment's largest timestamp plus `retention.ms`): a check with nothing to delete has
//! no effect, and an idle cluster keeps no timer running that would hide a deadlock.

use std::time::Duration;

use tokio::time::Instant;

use super::cluster::{Cluster, State};

impl Cluster {
    /// Arms the retention check for when `topic` (one partition, or all when `None`) next has
    /// something to delete, unless an earlier check is armed already.
    pub(super) fn arm_retention(&self, st: &mut State, topic: &str, partition: Option<i32>) {
        let now_ms = Self::now_ms();
        let Some(t) = st.topics.get(topic).filter(|t| !t.internal && t.configs.cleanup("delete")) else { return };
        let (ms, bytes) = (t.configs.retention_ms(), t.configs.retention_bytes());
        let due = t
            .partitions
            .iter()
            .enumerate()
            .filter(|(i, _)| partition.is_none_or(|p| usize::try_from(p).ok() == Some(*i)))
            .filter_map(|(_, p)| p.log.retention_due_ms(ms, bytes))
            .min();
        if let Some(due_ms) = due {
            let wait = Duration::from_millis(u64::try_from(due_ms.saturating_sub(now_ms)).unwrap_or(0));
            self.arm_retention_at(st, Instant::now() + wait);
        }
    }

    /// Sets the timer for the first check of the grid at or after `due` and after now.
    fn arm_retention_at(&self, st: &mut State, due: Instant) {
        let first = self.inner.start + self.inner.config.retention_check_delay;
        let at = on_grid(first, self.inner.config.retention_check_interval, due);
        self.arm_timer(st, |st| &mut st.retention_timer, at, Cluster::check_retention);
    }

    /// Sets the one-shot timer in `slot` for `at` (unless it is set for no later), which then
    /// calls `run` under the lock; setting it again makes the earlier spawn a no-op (its serial
    /// no longer matches).
    pub(super) fn arm_timer(
        &self,
        st: &mut State,
        slot: fn(&mut State) -> &mut Option<(u64, Instant)>,
        at: Instant,
        run: fn(&Cluster, &mut State),
    ) {
        let timer = slot(st);
        if timer.is_some_and(|(_, armed)| armed <= at) {
            return;
        }
        let serial = timer.map_or(0, |(s, _)| s + 1);
        *timer = Some((serial, at));
        let cluster = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until(at).await;
            let mut st = cluster.lock();
            let timer = slot(&mut st);
            if timer.map(|(s, _)| s) == Some(serial) {
                *timer = None;
                run(&cluster, &mut st);
            }
        });
    }

    /// One retention check over every topic; arms the next one if anything is left to expire.
    fn check_retention(&self, st: &mut State) {
        let now_ms = Self::now_ms();
        let mut deleted = Vec::new();
        for (name, t) in st.topics.iter_mut().filter(|(_, t)| !t.internal && t.configs.cleanup("delete")) {
            let (ms, bytes) = (t.configs.retention_ms(), t.configs.retention_bytes());
            for (i, p) in t.partitions.iter_mut().enumerate() {
                let n = p.log.delete_expired(ms, bytes, now_ms);
                if n > 0 {
                    deleted.push((format!("{name}/{i}"), n, p.log.log_start()));
                }
            }
        }
        for (partition, n, start) in deleted {
            self.record("kafka.log.retention", &partition, format!("deleted {n} records: log start offset {start}"));
        }
        let names: Vec<String> = st.topics.keys().cloned().collect();
        for name in names {
            self.arm_retention(st, &name, None);
        }
    }
}

/// The first time of the grid `first`, `first + every`, … at or after `due` and after now.
pub(super) fn on_grid(first: Instant, every: Duration, due: Instant) -> Instant {
    let due = due.max(Instant::now() + Duration::from_nanos(1));
    if due <= first {
        return first;
    }
    let behind = due.duration_since(first).as_nanos();
    let step = every.as_nanos().max(1);
    let checks = behind.div_ceil(step);
    first + Duration::from_nanos(u64::try_from(checks * step).unwrap_or(u64::MAX))
}
