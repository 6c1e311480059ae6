//! Introspection for oracles: what the cluster did, in order, with fake times.
//!
//! - per group, one [`Generation`] per completed rebalance: its members and, once the leader's
//!   SyncGroup arrived, each member's assignment (the bytes the leader sent, undecoded);
//! - every offset commit attempt as a [`CommitRecord`]: who, under which generation, which
//!   offset and metadata, and the error code it was answered with (0 when stored);
//! - per partition, a [`PartitionView`]: leader, log start, high watermark and the batches;
//! - per group, its coordinator's events as [`GroupEvent`]s (`kafka.group.*`: state changes,
//!   members leaving, expiring or being removed) — what a simulation's history shows, kept on
//!   loopback too.
//!
//! Times are [`std::time::Duration`]s since the cluster was built, on tokio's clock: fake time in
//! a simulation, real time on loopback. Histories are bounded ([`GENERATIONS_MAX`],
//! [`COMMITS_MAX`], [`GROUP_EVENTS_MAX`]); beyond a bound the oldest entries are dropped and
//! counted.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use bytes::Bytes;

/// Generations kept per group.
pub const GENERATIONS_MAX: usize = 100_000;
/// Commit records kept.
pub const COMMITS_MAX: usize = 1_000_000;
/// Group coordinator events kept (all groups together).
pub const GROUP_EVENTS_MAX: usize = 100_000;

/// A member as a generation saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberView {
    /// The member id the coordinator gave it.
    pub member_id: String,
    /// The static member's `group.instance.id` (KIP-345), if any.
    pub group_instance_id: Option<String>,
    /// The client id of its JoinGroup.
    pub client_id: String,
}

/// One generation of a group: the outcome of a completed JoinGroup round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generation {
    /// When the JoinGroup round completed.
    pub at: Duration,
    /// The generation id.
    pub generation: i32,
    /// The protocol (assignor) chosen.
    pub protocol: Option<String>,
    /// The leader's member id.
    pub leader: Option<String>,
    /// Its members, in join order.
    pub members: Vec<MemberView>,
    /// Member id → assignment bytes, filled when the leader's SyncGroup arrives (empty if the
    /// generation never got one).
    pub assignments: BTreeMap<String, Bytes>,
}

/// One OffsetCommit attempt for one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitRecord {
    /// When it was answered.
    pub at: Duration,
    /// The group.
    pub group: String,
    /// The member id sent (empty for an admin commit).
    pub member_id: String,
    /// The static member's instance id sent.
    pub group_instance_id: Option<String>,
    /// The generation sent (-1 for an admin commit).
    pub generation: i32,
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The offset.
    pub offset: i64,
    /// The metadata sent (null is stored as `""`, as Kafka stores it).
    pub metadata: Option<String>,
    /// The error code answered (0: stored).
    pub error: i16,
}

/// An event of a group's coordinator, as the cluster records it into a simulation's history
/// (kind `kafka.group.state`, `kafka.group.member` or `kafka.group.static`, identity the group).
///
/// The member events' details name the member id first: `<id> left` (LeaveGroup),
/// `<id> expired: session timeout`, `<id> removed: <why>` (did not rejoin or sync within the
/// rebalance timeout), and for a static member (KIP-345) `<instance>: <old id> replaced by <new id>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupEvent {
    /// When it happened.
    pub at: Duration,
    /// The history kind.
    pub kind: String,
    /// The group.
    pub group: String,
    /// The history detail.
    pub detail: String,
}

/// A batch as an oracle sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchView {
    /// Its first offset.
    pub base_offset: i64,
    /// Its last offset.
    pub last_offset: i64,
    /// The producer id (-1 without idempotence).
    pub producer_id: i64,
    /// The producer epoch (-1 without idempotence): an idempotent producer's batches under a
    /// higher epoch restart their sequences, so the broker cannot deduplicate them against the
    /// lower epoch's (KIP-360; see [`crate::history::epoch_bump`]).
    pub producer_epoch: i16,
    /// The first sequence (-1 without idempotence).
    pub base_sequence: i32,
    /// Its size in bytes.
    pub bytes: usize,
}

/// One partition's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionView {
    /// The topic.
    pub topic: String,
    /// The partition index.
    pub partition: i32,
    /// The leader's broker id.
    pub leader: i32,
    /// The leader epoch (bumped at every leader move).
    pub leader_epoch: i32,
    /// The first offset in the log.
    pub log_start: i64,
    /// The high watermark.
    pub high_watermark: i64,
    /// The last stable offset: the first offset of the earliest open transaction, else the high
    /// watermark (what a `read_committed` consumer reads up to).
    pub last_stable_offset: i64,
    /// The batches in offset order.
    pub batches: Vec<BatchView>,
}

/// A group's current state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupView {
    /// `Empty`, `PreparingRebalance`, `CompletingRebalance`, `Stable` or `Dead`.
    pub state: String,
    /// The current generation.
    pub generation: i32,
    /// The current leader.
    pub leader: Option<String>,
    /// The current members.
    pub members: Vec<MemberView>,
    /// The broker coordinating it.
    pub coordinator: i32,
}

/// The bounded histories the cluster keeps.
#[derive(Debug, Default)]
pub(crate) struct Journal {
    pub generations: BTreeMap<String, VecDeque<Generation>>,
    pub commits: VecDeque<CommitRecord>,
    pub group_events: VecDeque<GroupEvent>,
    pub dropped: u64,
}

impl Journal {
    pub(crate) fn generation(&mut self, group: &str, g: Generation) {
        let list = self.generations.entry(group.to_string()).or_default();
        list.push_back(g);
        if list.len() > GENERATIONS_MAX {
            list.pop_front();
            self.dropped += 1;
        }
    }

    pub(crate) fn assignments(&mut self, group: &str, generation: i32, assignments: BTreeMap<String, Bytes>) {
        if let Some(g) =
            self.generations.get_mut(group).and_then(|list| list.iter_mut().rev().find(|g| g.generation == generation))
        {
            g.assignments = assignments;
        }
    }

    pub(crate) fn group_event(&mut self, event: GroupEvent) {
        self.group_events.push_back(event);
        if self.group_events.len() > GROUP_EVENTS_MAX {
            self.group_events.pop_front();
            self.dropped += 1;
        }
    }

    pub(crate) fn commit(&mut self, record: CommitRecord) {
        self.commits.push_back(record);
        if self.commits.len() > COMMITS_MAX {
            self.commits.pop_front();
            self.dropped += 1;
        }
    }
}
