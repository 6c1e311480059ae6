//! A group's state: its members, generation, protocol and committed offsets, and the answers
//! built from it alone.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use bytes::Bytes;
use indexmap::IndexMap;
use kafka_protocol::ResponseError as E;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::introspect::{GroupView, MemberView};

/// Members one group may have (Kafka's `group.max.size`); more are `GROUP_MAX_SIZE_REACHED`.
pub const MEMBERS_MAX: usize = 10_000;
/// Bytes of commit metadata accepted (Kafka's `offset.metadata.max.bytes`).
pub const OFFSET_METADATA_BYTES_MAX: usize = 4096;
/// Protocols one member may list.
pub const PROTOCOLS_MAX: usize = 64;

/// A group's state, as DescribeGroups names it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum GroupState {
    /// No members.
    Empty,
    /// Waiting for members to (re)join.
    PreparingRebalance,
    /// Joined; waiting for the leader's assignment.
    CompletingRebalance,
    /// Assigned.
    Stable,
    /// Deleted.
    Dead,
}

impl GroupState {
    /// The name Kafka gives the state.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

pub(crate) struct Member {
    pub(super) id: String,
    pub(super) instance: Option<String>,
    pub(super) client_id: String,
    pub(super) session_timeout: Duration,
    pub(super) rebalance_timeout: Duration,
    pub(super) protocols: Vec<(String, Bytes)>,
    pub(super) assignment: Bytes,
    pub(super) join_waiter: Option<(i16, oneshot::Sender<JoinGroupResponse>)>,
    pub(super) sync_waiter: Option<(i16, oneshot::Sender<SyncGroupResponse>)>,
    pub(super) synced: bool,
    pub(super) deadline: Instant,
}

impl Member {
    pub(super) fn view(&self) -> MemberView {
        MemberView {
            member_id: self.id.clone(),
            group_instance_id: self.instance.clone(),
            client_id: self.client_id.clone(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Committed {
    pub(crate) offset: i64,
    pub(crate) leader_epoch: i32,
    pub(crate) metadata: String,
}

pub(crate) struct Group {
    pub(super) state: GroupState,
    pub(super) generation: i32,
    pub(super) protocol_type: Option<String>,
    pub(super) protocol: Option<String>,
    pub(super) leader: Option<String>,
    pub(super) members: IndexMap<String, Member>,
    pub(super) pending: BTreeSet<String>,
    pub(super) instances: BTreeMap<String, String>,
    pub(super) offsets: BTreeMap<(String, i32), Committed>,
    pub(super) token: u64,
    pub(super) join_not_before: Option<Instant>,
}

impl Group {
    pub(super) fn new() -> Group {
        Group {
            state: GroupState::Empty,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: IndexMap::new(),
            pending: BTreeSet::new(),
            instances: BTreeMap::new(),
            offsets: BTreeMap::new(),
            token: 0,
            join_not_before: None,
        }
    }

    pub(crate) fn view(&self, coordinator: i32) -> GroupView {
        GroupView {
            state: self.state.name().to_string(),
            generation: self.generation,
            leader: self.leader.clone(),
            members: self.members.values().map(Member::view).collect(),
            coordinator,
        }
    }
}

pub(super) fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

pub(super) fn join_error(version: i16, code: i16, member_id: &str) -> JoinGroupResponse {
    JoinGroupResponse::default()
        .with_error_code(code)
        .with_generation_id(-1)
        .with_member_id(s(member_id))
        .with_protocol_name(if version >= 7 { None } else { Some(StrBytes::new()) })
}

/// A request's answer: now, or once the round it waits for completes.
pub(crate) enum Reply<T> {
    Now(T),
    Wait(oneshot::Receiver<T>),
}

/// Waits for a [`Reply`]; `gone` answers a waiter whose round dropped it.
pub(crate) async fn settle<T>(reply: Reply<T>, gone: impl FnOnce() -> T) -> T {
    match reply {
        Reply::Now(t) => t,
        Reply::Wait(rx) => rx.await.unwrap_or_else(|_| gone()),
    }
}

pub(super) fn set_protocol_type(group: &mut Group, protocol_type: &str) {
    if group.protocol_type.is_none() || group.members.len() <= 1 {
        group.protocol_type = Some(protocol_type.to_string());
    }
}

/// Answers a replaced static member's waiting requests with `FENCED_INSTANCE_ID`.
pub(super) fn fence(old: &mut Member) {
    if let Some((v, tx)) = old.join_waiter.take() {
        let _ = tx.send(join_error(v, E::FencedInstanceId.code(), &old.id));
    }
    if let Some((_, tx)) = old.sync_waiter.take() {
        let _ = tx.send(SyncGroupResponse::default().with_error_code(E::FencedInstanceId.code()));
    }
}

/// The JoinGroup answer for the current generation (a member rejoining without change).
pub(super) fn current_join(group: &Group, member_id: &str, version: i16) -> JoinGroupResponse {
    let is_leader = group.leader.as_deref() == Some(member_id);
    let protocol = group.protocol.clone().unwrap_or_default();
    let members = if is_leader { leader_members(group, &protocol) } else { Vec::new() };
    JoinGroupResponse::default()
        .with_generation_id(group.generation)
        .with_protocol_type(if version >= 7 { group.protocol_type.as_deref().map(s) } else { None })
        .with_protocol_name(Some(s(&protocol)))
        .with_leader(s(group.leader.as_deref().unwrap_or_default()))
        .with_member_id(s(member_id))
        .with_members(members)
}

pub(super) fn leader_members(group: &Group, protocol: &str) -> Vec<join_group_response::JoinGroupResponseMember> {
    group
        .members
        .values()
        .map(|m| {
            let metadata = m.protocols.iter().find(|(n, _)| n == protocol).map(|(_, b)| b.clone()).unwrap_or_default();
            join_group_response::JoinGroupResponseMember::default()
                .with_member_id(s(&m.id))
                .with_group_instance_id(m.instance.as_deref().map(s))
                .with_metadata(metadata)
        })
        .collect()
}

pub(super) fn remove_member(group: &mut Group, id: &str) {
    if let Some(mut m) = group.members.shift_remove(id) {
        if let Some(instance) = &m.instance
            && group.instances.get(instance).map(String::as_str) == Some(id)
        {
            group.instances.remove(instance);
        }
        if let Some((v, tx)) = m.join_waiter.take() {
            let _ = tx.send(join_error(v, E::UnknownMemberId.code(), id));
        }
        if let Some((_, tx)) = m.sync_waiter.take() {
            let _ = tx.send(SyncGroupResponse::default().with_error_code(E::UnknownMemberId.code()));
        }
    }
    if group.leader.as_deref() == Some(id) {
        group.leader = None;
    }
}

/// Checks a member's identity: `FENCED_INSTANCE_ID`, then `UNKNOWN_MEMBER_ID`.
pub(super) fn check_member(group: &Group, member_id: &str, instance: Option<&str>) -> Result<(), E> {
    if let Some(instance) = instance.filter(|i| !i.is_empty())
        && let Some(known) = group.instances.get(instance)
        && known != member_id
    {
        return Err(E::FencedInstanceId);
    }
    if !group.members.contains_key(member_id) {
        return Err(E::UnknownMemberId);
    }
    Ok(())
}
