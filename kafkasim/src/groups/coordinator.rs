//! The coordinator: every group's state, and what it needs from the cluster around it.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;

use super::state::{Committed, Group};
use crate::faults::Part;
use crate::introspect::{CommitRecord, Generation};

/// The group settings a cluster was built with.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct GroupConfig {
    /// `group.initial.rebalance.delay.ms`.
    pub initial_rebalance_delay: Duration,
    /// `group.min.session.timeout.ms`.
    pub session_timeout_min: Duration,
    /// `group.max.session.timeout.ms`.
    pub session_timeout_max: Duration,
}

/// What the coordinator needs from the cluster it runs in (a test's stand-in in the unit
/// tests). Called with the cluster's state locked: nothing here may lock it again.
pub(crate) trait Env {
    /// The broker coordinating `group`; -1 when none is up.
    fn coordinator_of(&self, group: &str) -> i32;
    /// The error code a fault injects into `part` of a request of `api` to `broker`, if any.
    fn fault_error(&self, api: ApiKey, broker: i32, part: Part<'_>) -> Option<i16>;
    /// Whether the cluster has partition `partition` of `topic`.
    fn has_partition(&self, topic: &str, partition: i32) -> bool;
    /// The group settings.
    fn config(&self) -> GroupConfig;
    /// Records into the run's history (`kafka.group.*`, `kafka.commit`).
    fn record(&self, kind: &str, group: &str, detail: &str);
    /// Time since the cluster was built (tokio's clock).
    fn elapsed(&self) -> Duration;
    /// Journals a generation `group` entered.
    fn journal_generation(&self, group: &str, generation: Generation);
    /// Journals the assignments the leader of `generation` gave.
    fn journal_assignments(&self, group: &str, generation: i32, assignments: BTreeMap<String, Bytes>);
    /// Journals offset commit attempts, in order.
    fn journal_commits(&self, commits: Vec<CommitRecord>);
    /// A handle to lock the coordinator again, for its timers.
    fn handle(&self) -> Box<dyn Handle>;
}

/// Locks the coordinator (and the cluster state with it) and runs `f` on it and its [`Env`].
pub(crate) trait Handle: Send + Sync + 'static {
    /// Runs `f` once, with the coordinator locked.
    fn with(&self, f: &mut dyn FnMut(&mut Coordinator, &dyn Env));
}

/// Runs `f` on the coordinator behind `handle` and returns what it returns.
pub(crate) fn with<R>(handle: &dyn Handle, f: impl FnOnce(&mut Coordinator, &dyn Env) -> R) -> R {
    let (mut f, mut out) = (Some(f), None);
    handle.with(&mut |c, env| out = f.take().map(|f| f(c, env)));
    out.expect("Handle::with runs its function once")
}

/// The classic group coordinator: every group's members, generation and committed offsets.
/// Request handlers are its methods (`join`, `sync`, `heartbeat`, `leave`, `commit`,
/// `fetch_offsets`, `describe`, `list`), each given the cluster as an [`Env`].
#[derive(Default)]
pub(crate) struct Coordinator {
    pub(super) groups: BTreeMap<String, Group>,
    pub(super) next_member: u64,
}

impl Coordinator {
    /// A group, if it exists.
    pub(crate) fn group(&self, group: &str) -> Option<&Group> {
        self.groups.get(group)
    }

    /// The offset `group` committed for a partition.
    pub(crate) fn committed(&self, group: &str, topic: &str, partition: i32) -> Option<&Committed> {
        self.groups.get(group)?.offsets.get(&(topic.to_string(), partition))
    }

    /// TxnOffsetCommit's member check (v3+, KIP-447): with a generation or member id, the member
    /// must be in the group at that generation; an unknown group, or neither given, passes.
    ///
    /// # Errors
    /// `UNKNOWN_MEMBER_ID`, `FENCED_INSTANCE_ID`, `ILLEGAL_GENERATION`.
    pub(crate) fn check_txn_member(
        &self,
        group: &str,
        member_id: &str,
        instance: Option<&str>,
        generation: i32,
    ) -> Result<(), kafka_protocol::ResponseError> {
        let Some(g) = self.groups.get(group) else { return Ok(()) };
        if generation < 0 && member_id.is_empty() {
            return Ok(());
        }
        super::state::check_member(g, member_id, instance)?;
        if generation >= 0 && generation != g.generation {
            return Err(kafka_protocol::ResponseError::IllegalGeneration);
        }
        Ok(())
    }

    /// Stores offsets a committed transaction carried (TxnOffsetCommit, applied by its commit
    /// marker); creates the group if it does not exist, as a plain commit does.
    pub(crate) fn commit_transactional(&mut self, group: &str, topic: &str, partition: i32, committed: Committed) {
        let g = self.groups.entry(group.to_string()).or_insert_with(Group::new);
        g.offsets.insert((topic.to_string(), partition), committed);
    }

    /// Forgets every group's offsets of a deleted topic.
    pub(crate) fn forget_topic(&mut self, topic: &str) {
        for g in self.groups.values_mut() {
            g.offsets.retain(|(t, _), _| *t != topic);
        }
    }
}
