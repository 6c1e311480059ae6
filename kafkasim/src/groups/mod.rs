//! Classic consumer groups: the coordinator's state machine, session and rebalance timeouts on
//! tokio's clock, static membership, and offset commits with the real error codes.
//!
//! Semantics (Apache Kafka's classic group coordinator, `ClassicGroup` and
//! `GroupMetadataManager`; KIP-62 rebalance timeouts; KIP-345 static membership; KIP-394
//! `MEMBER_ID_REQUIRED`):
//! - states `Empty → PreparingRebalance → CompletingRebalance → Stable`, back to
//!   `PreparingRebalance` when a member joins, leaves, changes its protocols or expires;
//! - a JoinGroup round completes when every member has rejoined (and no member id handed out by
//!   `MEMBER_ID_REQUIRED` is still pending), or when the largest rebalance timeout of the members
//!   runs out, removing those that did not rejoin; the first round of an empty group waits at
//!   least the initial rebalance delay (`group.initial.rebalance.delay.ms`); the generation is
//!   bumped, a protocol every member supports is chosen by vote, the leader (the old one if it
//!   rejoined, else the first member) receives every member's metadata;
//! - SyncGroup from the leader stores the assignment and makes the group `Stable`; a member that
//!   does not send SyncGroup within the rebalance timeout is removed;
//! - a member whose session times out (no heartbeat, join or sync for `session.timeout.ms`) is
//!   removed; members waiting in JoinGroup or SyncGroup are kept alive, and a member answered
//!   in SyncGroup (its assignment, or `REBALANCE_IN_PROGRESS` when a rebalance starts) starts a
//!   new session then (`propagateAssignment`), so a follower outlives a leader that never syncs;
//! - static members (`group.instance.id`) rejoining with an empty member id replace their old
//!   member id (the old one is fenced: `FENCED_INSTANCE_ID`), without a rebalance when the group
//!   is stable and its protocols are unchanged — the leader too (KIP-814: it gets the members
//!   with `skip_assignment`);
//! - OffsetCommit: unknown partitions are `UNKNOWN_TOPIC_OR_PARTITION` before any group check
//!   (Kafka's request handler filters them out; with none left the group is not consulted); an
//!   admin commit (generation -1, no member) only to an empty or unknown group;
//!   otherwise `FENCED_INSTANCE_ID`, `UNKNOWN_MEMBER_ID`, `ILLEGAL_GENERATION` in that order,
//!   then `REBALANCE_IN_PROGRESS` while `CompletingRebalance`; metadata above
//!   [`OFFSET_METADATA_BYTES_MAX`] is `OFFSET_METADATA_TOO_LARGE`;
//! - any group request to a broker that does not coordinate the group is `NOT_COORDINATOR`.
//!
//! The coordinator is `Coordinator`; the cluster it runs in is its `Env` (placement, faults,
//! topics, the history), so it is tested alone in `groups/tests.rs`.
//!
//! | module | holds |
//! |---|---|
//! | `state` | a group and its members; answers built from one group |
//! | `coordinator` | `Coordinator`, its `Env` and `Handle` |
//! | `rebalance` | starting and completing rebalances; the group and session timers |
//! | `join`, `sync`, `leave`, `offsets`, `describe` | the request handlers |

mod coordinator;
mod describe;
mod join;
mod leave;
mod offsets;
mod rebalance;
mod state;
mod sync;
#[cfg(test)]
mod tests;

pub(crate) use coordinator::{Coordinator, Env, GroupConfig, Handle};
pub(crate) use join::join;
pub(crate) use state::Committed;
pub use state::{GroupState, MEMBERS_MAX, OFFSET_METADATA_BYTES_MAX, PROTOCOLS_MAX};
pub(crate) use sync::sync;
