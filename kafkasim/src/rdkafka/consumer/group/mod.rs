//! The consumer group: librdkafka 2.12's classic-protocol group membership (`rdkafka_cgrp.c`)
//! folded into one tokio task, [`spawn`]ed from the task that creates the consumer (inside a
//! simulation node it belongs to the node and dies with it). The consumer talks to it through a
//! [`GroupHandle`] ([`GroupCommand`]s in) and an event channel ([`GroupEvent`]s out, applied
//! from the consumer's `recv()`, as librdkafka serves rebalance callbacks from poll).
//!
//! What it does, and where the behaviour comes from:
//! - Coordinator ([`coordinator`]): FindCoordinator on a bootstrap or known broker; on
//!   `NOT_COORDINATOR`, `COORDINATOR_NOT_AVAILABLE`, `COORDINATOR_LOAD_IN_PROGRESS` or a lost
//!   connection it is looked up again after `retry.backoff.ms`.
//! - Membership ([`membership`]): JoinGroup (protocol type `consumer`, one protocol per
//!   `partition.assignment.strategy` in order; KIP-394's `MEMBER_ID_REQUIRED` round), the
//!   leader's Metadata and assignment ([`assignor`]), SyncGroup, heartbeats every
//!   `heartbeat.interval.ms`. Eager strategies revoke everything and wait for the consumer before
//!   rejoining; `cooperative-sticky` (KIP-429) keeps its partitions, revokes only what the new
//!   assignment drops, and rejoins once more when it revoked some. `UNKNOWN_MEMBER_ID`,
//!   `ILLEGAL_GENERATION`, a session without a successful heartbeat for `session.timeout.ms`,
//!   and `max.poll.interval.ms` without a poll (KIP-62: LeaveGroup unless static, then rejoin on
//!   the next poll) lose the assignment. `FENCED_INSTANCE_ID` (KIP-345) is fatal, as
//!   librdkafka's `rd_kafka_set_fatal_error`.
//! - Commits ([`commits`]): OffsetCommit and OffsetFetch, in command order, ahead of a pending
//!   JoinGroup (so an eager revoke callback's commits carry the old generation), behind due
//!   heartbeats; each carries the generation it was queued in.

pub(crate) mod assignor;
mod commits;
mod coordinator;
mod membership;
pub(crate) mod settings;

use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot};

use crate::rdkafka::consumer::group::assignor::RebalanceProtocol;
use crate::rdkafka::error::{KafkaError, KafkaResult};
use crate::rdkafka::net::Dialer;

pub(crate) use settings::GroupSettings;

/// A topic partition.
pub(crate) use crate::rdkafka::consumer::positions::Tp;

/// What the group task tells the consumer. The consumer applies them in order and answers each
/// Revoke/Assign/Lost with [`GroupCommand::RebalanceDone`] once the callbacks ran and the
/// assignment changed.
#[derive(Debug, Clone)]
pub(crate) enum GroupEvent {
    /// Eager: the whole new assignment (replaces it). Cooperative: the partitions added.
    Assign { partitions: Vec<Tp>, protocol: RebalanceProtocol },
    /// Eager: everything (before rejoining). Cooperative: the partitions taken away.
    Revoke { partitions: Vec<Tp>, protocol: RebalanceProtocol },
    /// The assignment was lost without a chance to commit (session expired, fenced, unknown
    /// member, max.poll.interval.ms exceeded).
    Lost { partitions: Vec<Tp> },
    /// An error the application sees from recv().
    Error(KafkaError),
}

/// Per-partition results of a commit.
pub(crate) type CommitReply = KafkaResult<Vec<(Tp, KafkaResult<()>)>>;
/// Per-partition committed offsets (`None`: none committed) and metadata.
pub(crate) type CommittedReply = KafkaResult<Vec<(Tp, Option<i64>, Option<String>)>>;

/// What the consumer tells the group task.
#[derive(Debug)]
pub(crate) enum GroupCommand {
    /// Subscribe to these topics; empty = unsubscribe (revoke all, leave).
    Subscribe(Vec<String>),
    /// The callbacks for the oldest unanswered Assign/Revoke/Lost ran.
    RebalanceDone,
    /// The app called recv(): resets max.poll.interval.ms.
    Polled,
    /// `true` while the app waits inside recv() (librdkafka does not count a blocked poll
    /// towards max.poll.interval.ms), `false` when recv() returns; each also counts as Polled.
    InPoll(bool),
    /// OffsetCommit with the current generation and member id (generation -1 / "" when not a
    /// member), sent in command order after earlier commits; offsets are the next offset to
    /// read. Replies per partition; `Err` when the request got no answer (no coordinator in
    /// `socket.timeout.ms`, no group.id).
    Commit { offsets: Vec<(Tp, i64, Option<String>)>, reply: oneshot::Sender<CommitReply> },
    /// OffsetFetch: the committed offset (None: none) and metadata per partition.
    Committed { partitions: Vec<Tp>, reply: oneshot::Sender<CommittedReply> },
    /// Leave (LeaveGroup unless static) after sending queued commits; reply when done.
    Close(oneshot::Sender<()>),
}

/// What the handle reads of the task's state.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) member_id: String,
    pub(crate) generation: i32,
    pub(crate) protocol: RebalanceProtocol,
    /// The group task lost the assignment and the consumer has not cleared it yet: librdkafka
    /// marks the assignment lost on its group thread the moment it loses it
    /// (`rd_kafka_cgrp_assignment_set_lost`) — also while a revoke already waits for the
    /// application — before the application polls the rebalance.
    pub(crate) lost: bool,
}

/// The consumer's handle on the group task.
#[derive(Debug, Clone)]
pub(crate) struct GroupHandle {
    tx: mpsc::UnboundedSender<GroupCommand>,
    shared: Arc<Mutex<Shared>>,
}

impl GroupHandle {
    /// Sends a command (ignored once the task ended; a reply channel in it then reports closed).
    pub(crate) fn send(&self, c: GroupCommand) {
        let _ = self.tx.send(c);
    }

    fn read<T>(&self, f: impl FnOnce(&Shared) -> T) -> T {
        f(&self.shared.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The member id the coordinator gave (rdkafka's `member_id()`), `None` before one.
    pub(crate) fn member_id(&self) -> Option<String> {
        self.read(|s| (!s.member_id.is_empty()).then(|| s.member_id.clone()))
    }

    /// Whether the group task lost the assignment and the consumer has not cleared it yet.
    pub(crate) fn lost(&self) -> bool {
        self.read(|s| s.lost)
    }

    /// The consumer cleared its assignment (a lost or revoked one applied:
    /// librdkafka's `rd_kafka_assignment_clear` clears the lost flag).
    pub(crate) fn clear_lost(&self) {
        self.shared.lock().unwrap_or_else(|p| p.into_inner()).lost = false;
    }

    /// The generation of the latest successful join; -1 before the first sync.
    pub(crate) fn generation(&self) -> i32 {
        self.read(|s| s.generation)
    }

    /// The rebalance protocol of the chosen assignor (`None` before joining).
    pub(crate) fn rebalance_protocol(&self) -> RebalanceProtocol {
        self.read(|s| s.protocol)
    }
}

/// Spawns the group task on the current tokio runtime.
pub(crate) fn spawn(s: GroupSettings, dialer: Dialer, events: mpsc::UnboundedSender<GroupEvent>) -> GroupHandle {
    let (tx, rx) = mpsc::unbounded_channel();
    let shared = Arc::new(Mutex::new(Shared {
        member_id: String::new(),
        generation: -1,
        protocol: RebalanceProtocol::None,
        lost: false,
    }));
    let task = membership::Group::new(s, dialer, rx, events, Arc::clone(&shared));
    crate::rdkafka::task::spawn_task(task.run());
    GroupHandle { tx, shared }
}

#[cfg(test)]
mod sim_tests;
