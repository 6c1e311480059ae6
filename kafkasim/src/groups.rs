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
//!   removed; members waiting in JoinGroup or SyncGroup are kept alive;
//! - static members (`group.instance.id`) rejoining with an empty member id replace their old
//!   member id (the old one is fenced: `FENCED_INSTANCE_ID`), without a rebalance when the group
//!   is stable and its protocols are unchanged — the leader too (KIP-814: it gets the members
//!   with `skip_assignment`);
//! - OffsetCommit: unknown partitions are `UNKNOWN_TOPIC_OR_PARTITION` before any group check
//!   (Kafka's request handler filters them out; with none left the group is not consulted); an admin commit (generation -1, no member) only to an empty or unknown group;
//!   otherwise `FENCED_INSTANCE_ID`, `UNKNOWN_MEMBER_ID`, `ILLEGAL_GENERATION` in that order,
//!   then `REBALANCE_IN_PROGRESS` while `CompletingRebalance`; metadata above
//!   [`OFFSET_METADATA_BYTES_MAX`] is `OFFSET_METADATA_TOO_LARGE`;
//! - any group request to a broker that does not coordinate the group is `NOT_COORDINATOR`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use bytes::Bytes;
use indexmap::IndexMap;
use kafka_protocol::ResponseError as E;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::broker::{Cluster, State};
use crate::faults::Part;
use crate::introspect::{CommitRecord, Generation, GroupView, MemberView};

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
    id: String,
    instance: Option<String>,
    client_id: String,
    session_timeout: Duration,
    rebalance_timeout: Duration,
    protocols: Vec<(String, Bytes)>,
    assignment: Bytes,
    join_waiter: Option<(i16, oneshot::Sender<JoinGroupResponse>)>,
    sync_waiter: Option<(i16, oneshot::Sender<SyncGroupResponse>)>,
    synced: bool,
    deadline: Instant,
}

impl Member {
    fn view(&self) -> MemberView {
        MemberView {
            member_id: self.id.clone(),
            group_instance_id: self.instance.clone(),
            client_id: self.client_id.clone(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Committed {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
}

pub(crate) struct Group {
    state: GroupState,
    generation: i32,
    protocol_type: Option<String>,
    protocol: Option<String>,
    leader: Option<String>,
    members: IndexMap<String, Member>,
    pending: BTreeSet<String>,
    instances: BTreeMap<String, String>,
    pub(crate) offsets: BTreeMap<(String, i32), Committed>,
    token: u64,
    join_not_before: Option<Instant>,
}

impl Group {
    fn new() -> Group {
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

fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

fn join_error(version: i16, code: i16, member_id: &str) -> JoinGroupResponse {
    JoinGroupResponse::default()
        .with_error_code(code)
        .with_generation_id(-1)
        .with_member_id(s(member_id))
        .with_protocol_name(if version >= 7 { None } else { Some(StrBytes::new()) })
}

enum Reply<T> {
    Now(T),
    Wait(oneshot::Receiver<T>),
}

async fn settle<T>(reply: Reply<T>, gone: impl FnOnce() -> T) -> T {
    match reply {
        Reply::Now(t) => t,
        Reply::Wait(rx) => rx.await.unwrap_or_else(|_| gone()),
    }
}

/// JoinGroup.
pub(crate) async fn join(
    cluster: &Cluster,
    broker: i32,
    client_id: &str,
    version: i16,
    req: JoinGroupRequest,
) -> JoinGroupResponse {
    let member_id = req.member_id.to_string();
    let reply = {
        let mut st = cluster.lock();
        join_locked(cluster, &mut st, broker, client_id, version, req)
    };
    settle(reply, || join_error(version, E::UnknownMemberId.code(), &member_id)).await
}

fn join_locked(
    cluster: &Cluster,
    st: &mut State,
    broker: i32,
    client_id: &str,
    version: i16,
    req: JoinGroupRequest,
) -> Reply<JoinGroupResponse> {
    let group_id = req.group_id.0.to_string();
    let member_id = req.member_id.to_string();
    let err = |code: E| Reply::Now(join_error(version, code.code(), &member_id));
    if group_id.is_empty() {
        return err(E::InvalidGroupId);
    }
    if cluster.coordinator_of(st, &group_id) != broker {
        return err(E::NotCoordinator);
    }
    if let Some(code) =
        st.faults.error_for(ApiKey::JoinGroup, broker, Part { group: Some(&group_id), ..Part::default() })
    {
        return Reply::Now(join_error(version, code, &member_id));
    }
    let config = cluster.config();
    let session = Duration::from_millis(u64::try_from(req.session_timeout_ms).unwrap_or(0));
    if session < config.session_timeout_min || session > config.session_timeout_max {
        return err(E::InvalidSessionTimeout);
    }
    // v0 has no rebalance timeout: it is the session timeout.
    let rebalance = if version >= 1 {
        Duration::from_millis(u64::try_from(req.rebalance_timeout_ms).unwrap_or(0))
    } else {
        session
    };
    if req.protocol_type.is_empty() || req.protocols.is_empty() || req.protocols.len() > PROTOCOLS_MAX {
        return err(E::InconsistentGroupProtocol);
    }
    let protocols: Vec<(String, Bytes)> =
        req.protocols.iter().map(|p| (p.name.to_string(), p.metadata.clone())).collect();
    let instance = req.group_instance_id.as_ref().map(|i| i.to_string()).filter(|i| !i.is_empty());
    if !st.groups.contains_key(&group_id) && !member_id.is_empty() {
        return err(E::UnknownMemberId);
    }
    let counter = {
        st.next_member += 1;
        st.next_member
    };
    let group = st.groups.entry(group_id.clone()).or_insert_with(Group::new);
    if group.state == GroupState::Dead {
        return err(E::CoordinatorNotAvailable);
    }
    // Protocol compatibility with the members already there.
    if !group.members.is_empty() {
        let same_type = group.protocol_type.as_deref() == Some(req.protocol_type.as_str());
        let common = protocols
            .iter()
            .any(|(name, _)| group.members.values().all(|m| m.protocols.iter().any(|(n, _)| n == name)));
        let only_member = group.members.len() == 1 && group.members.contains_key(&member_id);
        if !only_member && (!same_type || !common) {
            return err(E::InconsistentGroupProtocol);
        }
    }
    let now = Instant::now();
    let (tx, rx) = oneshot::channel();
    let new_member = |id: String| Member {
        id,
        instance: instance.clone(),
        client_id: client_id.to_string(),
        session_timeout: session,
        rebalance_timeout: rebalance,
        protocols: protocols.clone(),
        assignment: Bytes::new(),
        join_waiter: None,
        sync_waiter: None,
        synced: false,
        deadline: now + session,
    };
    // A member new to the group (joining below v4, or with the id MEMBER_ID_REQUIRED handed out):
    // it waits for the rebalance its arrival starts.
    let admit = |group: &mut Group, id: String, tx, rx| {
        if group.members.len() >= MEMBERS_MAX {
            return err(E::GroupMaxSizeReached);
        }
        let mut m = new_member(id.clone());
        m.join_waiter = Some((version, tx));
        group.members.insert(id.clone(), m);
        set_protocol_type(group, &req.protocol_type);
        spawn_session_timer(cluster, &group_id, &id);
        trigger(cluster, &group_id, group, "member joined");
        Reply::Wait(rx)
    };
    if member_id.is_empty() {
        let prefix = instance.clone().unwrap_or_else(|| client_id.to_string());
        let new_id = format!("{prefix}-{counter:012}");
        if let Some(instance) = &instance {
            if let Some(old_id) = group.instances.get(instance).cloned() {
                // A static member restarting: it takes over its old member id's place.
                let Some(mut old) = group.members.shift_remove(&old_id) else {
                    return err(E::UnknownMemberId);
                };
                fence(&mut old);
                let unchanged = old.protocols == protocols;
                let was_leader = group.leader.as_deref() == Some(old_id.as_str());
                let mut m = new_member(new_id.clone());
                m.assignment = old.assignment.clone();
                m.synced = old.synced;
                group.members.insert(new_id.clone(), m);
                group.instances.insert(instance.clone(), new_id.clone());
                if was_leader {
                    group.leader = Some(new_id.clone());
                }
                cluster.record("kafka.group.static", &group_id, format!("{instance}: {old_id} replaced by {new_id}"));
                spawn_session_timer(cluster, &group_id, &new_id);
                if group.state == GroupState::Stable && unchanged {
                    // KIP-814: no rebalance, even for the leader; the leader gets the members
                    // and is told to skip computing an assignment (v9+).
                    let answer = current_join(group, &new_id, version);
                    return Reply::Now(if was_leader && version >= 9 {
                        answer.with_skip_assignment(true)
                    } else {
                        answer
                    });
                }
                group.members[&new_id].join_waiter.replace((version, tx));
                trigger(cluster, &group_id, group, "static member rejoined");
                return Reply::Wait(rx);
            }
            if group.members.len() >= MEMBERS_MAX {
                return err(E::GroupMaxSizeReached);
            }
            let mut m = new_member(new_id.clone());
            m.join_waiter = Some((version, tx));
            group.members.insert(new_id.clone(), m);
            group.instances.insert(instance.clone(), new_id.clone());
            set_protocol_type(group, &req.protocol_type);
            spawn_session_timer(cluster, &group_id, &new_id);
            trigger(cluster, &group_id, group, "static member joined");
            return Reply::Wait(rx);
        }
        if version >= 4 {
            // KIP-394: hand out the id first; the member joins with it.
            group.pending.insert(new_id.clone());
            spawn_pending_timer(cluster, &group_id, &new_id, session);
            return Reply::Now(join_error(version, E::MemberIdRequired.code(), &new_id));
        }
        return admit(group, new_id, tx, rx);
    }
    if let Some(instance) = &instance {
        match group.instances.get(instance) {
            Some(known) if *known != member_id => return err(E::FencedInstanceId),
            None if group.members.contains_key(&member_id) => return err(E::FencedInstanceId),
            _ => {}
        }
    }
    if group.pending.remove(&member_id) {
        return admit(group, member_id.clone(), tx, rx);
    }
    let Some(member) = group.members.get_mut(&member_id) else {
        return err(E::UnknownMemberId);
    };
    let changed = member.protocols != protocols;
    member.protocols = protocols;
    member.session_timeout = session;
    member.rebalance_timeout = rebalance;
    member.deadline = now + session;
    let is_leader = group.leader.as_deref() == Some(member_id.as_str());
    match group.state {
        GroupState::PreparingRebalance => {
            group.members[&member_id].join_waiter = Some((version, tx));
            maybe_complete_join(cluster, &group_id, group);
            Reply::Wait(rx)
        }
        GroupState::CompletingRebalance if !changed => Reply::Now(current_join(group, &member_id, version)),
        GroupState::Stable if !changed && !is_leader => Reply::Now(current_join(group, &member_id, version)),
        GroupState::CompletingRebalance | GroupState::Stable => {
            group.members[&member_id].join_waiter = Some((version, tx));
            prepare_rebalance(cluster, &group_id, group, "member rejoined");
            Reply::Wait(rx)
        }
        GroupState::Empty | GroupState::Dead => err(E::UnknownMemberId),
    }
}

fn set_protocol_type(group: &mut Group, protocol_type: &str) {
    if group.protocol_type.is_none() || group.members.len() <= 1 {
        group.protocol_type = Some(protocol_type.to_string());
    }
}

/// Answers a replaced static member's waiting requests with `FENCED_INSTANCE_ID`.
fn fence(old: &mut Member) {
    if let Some((v, tx)) = old.join_waiter.take() {
        let _ = tx.send(join_error(v, E::FencedInstanceId.code(), &old.id));
    }
    if let Some((_, tx)) = old.sync_waiter.take() {
        let _ = tx.send(SyncGroupResponse::default().with_error_code(E::FencedInstanceId.code()));
    }
}

/// The JoinGroup answer for the current generation (a member rejoining without change).
fn current_join(group: &Group, member_id: &str, version: i16) -> JoinGroupResponse {
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

fn leader_members(group: &Group, protocol: &str) -> Vec<join_group_response::JoinGroupResponseMember> {
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

/// Journals the generation `group` just entered: its protocol, leader and members (no
/// assignments until the leader syncs).
fn journal_generation(cluster: &Cluster, group_id: &str, group: &Group) {
    cluster.journal(|j| {
        j.generation(
            group_id,
            Generation {
                at: cluster.elapsed(),
                generation: group.generation,
                protocol: group.protocol.clone(),
                leader: group.leader.clone(),
                members: group.members.values().map(Member::view).collect(),
                assignments: BTreeMap::new(),
            },
        )
    });
}

/// A membership change: start a rebalance, or see whether the running one can complete.
fn trigger(cluster: &Cluster, group_id: &str, group: &mut Group, why: &str) {
    match group.state {
        GroupState::PreparingRebalance => maybe_complete_join(cluster, group_id, group),
        GroupState::Dead => {}
        _ => prepare_rebalance(cluster, group_id, group, why),
    }
}

fn prepare_rebalance(cluster: &Cluster, group_id: &str, group: &mut Group, why: &str) {
    if group.state == GroupState::CompletingRebalance {
        for m in group.members.values_mut() {
            if let Some((_, tx)) = m.sync_waiter.take() {
                let _ = tx.send(SyncGroupResponse::default().with_error_code(E::RebalanceInProgress.code()));
            }
        }
    }
    let was_empty = group.state == GroupState::Empty;
    group.state = GroupState::PreparingRebalance;
    group.token += 1;
    let now = Instant::now();
    let timeout = group.members.values().map(|m| m.rebalance_timeout).max().unwrap_or(Duration::ZERO);
    let delay = cluster.config().initial_rebalance_delay;
    group.join_not_before = (was_empty && !delay.is_zero()).then(|| now + delay.min(timeout));
    cluster.record(
        "kafka.group.state",
        group_id,
        format!("generation {}: PreparingRebalance ({why})", group.generation),
    );
    let token = group.token;
    spawn_group_timer(cluster, group_id, now + timeout, move |cluster, id, g| {
        if g.token == token && g.state == GroupState::PreparingRebalance {
            complete_join(cluster, id, g);
        }
    });
    if let Some(at) = group.join_not_before {
        spawn_group_timer(cluster, group_id, at, move |cluster, id, g| {
            if g.token == token {
                maybe_complete_join(cluster, id, g);
            }
        });
    }
    maybe_complete_join(cluster, group_id, group);
}

fn maybe_complete_join(cluster: &Cluster, group_id: &str, group: &mut Group) {
    if group.state != GroupState::PreparingRebalance {
        return;
    }
    let all_joined = group.members.values().all(|m| m.join_waiter.is_some()) && group.pending.is_empty();
    let delayed = group.join_not_before.is_some_and(|t| Instant::now() < t);
    if all_joined && !delayed {
        complete_join(cluster, group_id, group);
    }
}

fn complete_join(cluster: &Cluster, group_id: &str, group: &mut Group) {
    let gone: Vec<String> = group.members.values().filter(|m| m.join_waiter.is_none()).map(|m| m.id.clone()).collect();
    for id in &gone {
        remove_member(group, id);
        cluster.record("kafka.group.member", group_id, format!("{id} removed: did not rejoin in time"));
    }
    group.generation += 1;
    group.token += 1;
    group.join_not_before = None;
    if group.members.is_empty() {
        group.state = GroupState::Empty;
        group.protocol = None;
        group.leader = None;
        cluster.record("kafka.group.state", group_id, format!("generation {}: Empty", group.generation));
        journal_generation(cluster, group_id, group);
        return;
    }
    // The protocol: among those every member supports, the one most members prefer; ties go to
    // the earliest in the leader-candidate's order.
    let first = group.members.values().next().expect("not empty");
    let candidates: Vec<&String> = first
        .protocols
        .iter()
        .map(|(n, _)| n)
        .filter(|n| group.members.values().all(|m| m.protocols.iter().any(|(p, _)| p == *n)))
        .collect();
    let mut best: Option<(&String, usize)> = None;
    for c in &candidates {
        let votes = group
            .members
            .values()
            .filter(|m| m.protocols.iter().map(|(n, _)| n).find(|n| candidates.contains(n)) == Some(*c))
            .count();
        if best.is_none_or(|(_, v)| votes > v) {
            best = Some((c, votes));
        }
    }
    let protocol = best.map(|(c, _)| c.clone()).unwrap_or_default();
    group.protocol = Some(protocol.clone());
    if !group.leader.as_ref().is_some_and(|l| group.members.contains_key(l)) {
        group.leader = group.members.keys().next().cloned();
    }
    group.state = GroupState::CompletingRebalance;
    let now = Instant::now();
    let leader = group.leader.clone().unwrap_or_default();
    let members = leader_members(group, &protocol);
    for m in group.members.values_mut() {
        m.synced = false;
        m.deadline = now + m.session_timeout;
        if let Some((version, tx)) = m.join_waiter.take() {
            let mine = if m.id == leader { members.clone() } else { Vec::new() };
            let resp = JoinGroupResponse::default()
                .with_generation_id(group.generation)
                .with_protocol_type(if version >= 7 { group.protocol_type.as_deref().map(s) } else { None })
                .with_protocol_name(Some(s(&protocol)))
                .with_leader(s(&leader))
                .with_member_id(s(&m.id))
                .with_members(mine);
            let _ = tx.send(resp);
        }
    }
    let ids: Vec<String> = group.members.keys().cloned().collect();
    cluster.record(
        "kafka.group.state",
        group_id,
        format!(
            "generation {}: CompletingRebalance protocol {protocol} leader {leader} members {ids:?}",
            group.generation
        ),
    );
    journal_generation(cluster, group_id, group);
    let token = group.token;
    let timeout = group.members.values().map(|m| m.rebalance_timeout).max().unwrap_or(Duration::ZERO);
    spawn_group_timer(cluster, group_id, now + timeout, move |cluster, id, g| {
        if g.token != token || g.state != GroupState::CompletingRebalance {
            return;
        }
        let late: Vec<String> = g.members.values().filter(|m| !m.synced).map(|m| m.id.clone()).collect();
        for m in &late {
            remove_member(g, m);
            cluster.record("kafka.group.member", id, format!("{m} removed: no SyncGroup within the rebalance timeout"));
        }
        prepare_rebalance(cluster, id, g, "members did not sync");
    });
}

fn remove_member(group: &mut Group, id: &str) {
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

/// After a member left or expired.
fn after_removal(cluster: &Cluster, group_id: &str, group: &mut Group, why: &str) {
    match group.state {
        GroupState::Stable | GroupState::CompletingRebalance => prepare_rebalance(cluster, group_id, group, why),
        GroupState::PreparingRebalance => {
            if group.members.is_empty() && group.pending.is_empty() {
                complete_join(cluster, group_id, group);
            } else {
                maybe_complete_join(cluster, group_id, group);
            }
        }
        GroupState::Empty | GroupState::Dead => {}
    }
}

/// Runs `f` on the group at `at` (tokio time), if the group still exists.
fn spawn_group_timer(
    cluster: &Cluster,
    group_id: &str,
    at: Instant,
    f: impl FnOnce(&Cluster, &str, &mut Group) + Send + 'static,
) {
    let cluster = cluster.clone();
    let group_id = group_id.to_string();
    tokio::spawn(async move {
        tokio::time::sleep_until(at).await;
        let mut st = cluster.lock();
        if let Some(g) = st.groups.get_mut(&group_id) {
            f(&cluster, &group_id, g);
        }
    });
}

fn spawn_pending_timer(cluster: &Cluster, group_id: &str, member_id: &str, session: Duration) {
    let member_id = member_id.to_string();
    spawn_group_timer(cluster, group_id, Instant::now() + session, move |cluster, id, g| {
        if g.pending.remove(&member_id) {
            cluster.record("kafka.group.member", id, format!("{member_id} removed: never joined with its member id"));
            maybe_complete_join(cluster, id, g);
        }
    });
}

/// The member's session: it expires when its deadline passes with no join or sync waiting.
fn spawn_session_timer(cluster: &Cluster, group_id: &str, member_id: &str) {
    let cluster = cluster.clone();
    let group_id = group_id.to_string();
    let member_id = member_id.to_string();
    tokio::spawn(async move {
        loop {
            let deadline = {
                let st = cluster.lock();
                match st.groups.get(&group_id).and_then(|g| g.members.get(&member_id)) {
                    Some(m) => m.deadline,
                    None => return,
                }
            };
            tokio::time::sleep_until(deadline).await;
            let mut st = cluster.lock();
            let Some(group) = st.groups.get_mut(&group_id) else { return };
            let now = Instant::now();
            let Some(m) = group.members.get_mut(&member_id) else { return };
            if m.join_waiter.is_some() || m.sync_waiter.is_some() {
                m.deadline = now + m.session_timeout;
                continue;
            }
            if m.deadline > now {
                continue;
            }
            remove_member(group, &member_id);
            cluster.record("kafka.group.member", &group_id, format!("{member_id} expired: session timeout"));
            after_removal(&cluster, &group_id, group, "member session expired");
            return;
        }
    });
}

/// Checks a member's identity: `FENCED_INSTANCE_ID`, then `UNKNOWN_MEMBER_ID`.
fn check_member(group: &Group, member_id: &str, instance: Option<&str>) -> Result<(), E> {
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

/// SyncGroup.
pub(crate) async fn sync(cluster: &Cluster, broker: i32, version: i16, req: SyncGroupRequest) -> SyncGroupResponse {
    let reply = {
        let mut st = cluster.lock();
        sync_locked(cluster, &mut st, broker, version, req)
    };
    settle(reply, || SyncGroupResponse::default().with_error_code(E::UnknownMemberId.code())).await
}

fn sync_locked(
    cluster: &Cluster,
    st: &mut State,
    broker: i32,
    version: i16,
    req: SyncGroupRequest,
) -> Reply<SyncGroupResponse> {
    let err = |e: E| Reply::Now(SyncGroupResponse::default().with_error_code(e.code()));
    let group_id = req.group_id.0.to_string();
    let member_id = req.member_id.to_string();
    if cluster.coordinator_of(st, &group_id) != broker {
        return err(E::NotCoordinator);
    }
    if let Some(code) =
        st.faults.error_for(ApiKey::SyncGroup, broker, Part { group: Some(&group_id), ..Part::default() })
    {
        return Reply::Now(SyncGroupResponse::default().with_error_code(code));
    }
    let Some(group) = st.groups.get_mut(&group_id) else {
        return err(E::UnknownMemberId);
    };
    if let Err(e) = check_member(group, &member_id, req.group_instance_id.as_deref()) {
        return err(e);
    }
    if req.generation_id != group.generation {
        return err(E::IllegalGeneration);
    }
    let type_mismatch = req.protocol_type.as_ref().is_some_and(|t| group.protocol_type.as_deref() != Some(t.as_str()));
    let name_mismatch = req.protocol_name.as_ref().is_some_and(|n| group.protocol.as_deref() != Some(n.as_str()));
    if type_mismatch || name_mismatch {
        return err(E::InconsistentGroupProtocol);
    }
    let answer = |group: &Group, assignment: Bytes| {
        let mut r = SyncGroupResponse::default().with_assignment(assignment);
        if version >= 5 {
            r = r
                .with_protocol_type(group.protocol_type.as_deref().map(s))
                .with_protocol_name(group.protocol.as_deref().map(s));
        }
        r
    };
    let now = Instant::now();
    match group.state {
        GroupState::Empty | GroupState::Dead => err(E::UnknownMemberId),
        GroupState::PreparingRebalance => err(E::RebalanceInProgress),
        GroupState::Stable => {
            let m = &mut group.members[&member_id];
            m.deadline = now + m.session_timeout;
            let assignment = m.assignment.clone();
            Reply::Now(answer(group, assignment))
        }
        GroupState::CompletingRebalance => {
            let (tx, rx) = oneshot::channel();
            {
                let m = &mut group.members[&member_id];
                m.synced = true;
                m.deadline = now + m.session_timeout;
                m.sync_waiter = Some((version, tx));
            }
            if group.leader.as_deref() == Some(member_id.as_str()) {
                let mut given: BTreeMap<String, Bytes> =
                    req.assignments.iter().map(|a| (a.member_id.to_string(), a.assignment.clone())).collect();
                let mut stored = BTreeMap::new();
                for m in group.members.values_mut() {
                    m.assignment = given.remove(&m.id).unwrap_or_default();
                    stored.insert(m.id.clone(), m.assignment.clone());
                }
                group.state = GroupState::Stable;
                group.token += 1;
                let responses: Vec<_> = group
                    .members
                    .values_mut()
                    .filter_map(|m| m.sync_waiter.take().map(|(_, tx)| (tx, m.assignment.clone())))
                    .collect();
                for (tx, assignment) in responses {
                    let _ = tx.send(answer(group, assignment));
                }
                cluster.record(
                    "kafka.group.state",
                    &group_id,
                    format!("generation {}: Stable ({} assignments)", group.generation, stored.len()),
                );
                let generation = group.generation;
                cluster.journal(|j| j.assignments(&group_id, generation, stored));
            }
            Reply::Wait(rx)
        }
    }
}

/// Heartbeat.
pub(crate) fn heartbeat(cluster: &Cluster, broker: i32, req: &HeartbeatRequest) -> HeartbeatResponse {
    let code = {
        let mut st = cluster.lock();
        heartbeat_locked(cluster, &mut st, broker, req).err().map_or(0, |e| e.code())
    };
    HeartbeatResponse::default().with_error_code(code)
}

fn heartbeat_locked(cluster: &Cluster, st: &mut State, broker: i32, req: &HeartbeatRequest) -> Result<(), E> {
    let group_id = req.group_id.0.to_string();
    if cluster.coordinator_of(st, &group_id) != broker {
        return Err(E::NotCoordinator);
    }
    if let Some(code) =
        st.faults.error_for(ApiKey::Heartbeat, broker, Part { group: Some(&group_id), ..Part::default() })
    {
        return Err(E::try_from_code(code).unwrap_or(E::UnknownServerError));
    }
    let group = st.groups.get_mut(&group_id).ok_or(E::UnknownMemberId)?;
    let member_id = req.member_id.as_str();
    check_member(group, member_id, req.group_instance_id.as_deref())?;
    if req.generation_id != group.generation {
        return Err(E::IllegalGeneration);
    }
    let m = &mut group.members[member_id];
    m.deadline = Instant::now() + m.session_timeout;
    match group.state {
        GroupState::Stable | GroupState::CompletingRebalance => Ok(()),
        GroupState::PreparingRebalance => Err(E::RebalanceInProgress),
        GroupState::Empty | GroupState::Dead => Err(E::UnknownMemberId),
    }
}

/// LeaveGroup (v0–2: one member id; v3+: a batch of members, KIP-345).
pub(crate) fn leave(cluster: &Cluster, broker: i32, version: i16, req: &LeaveGroupRequest) -> LeaveGroupResponse {
    let mut st = cluster.lock();
    let group_id = req.group_id.0.to_string();
    let top = |e: E| LeaveGroupResponse::default().with_error_code(e.code());
    if cluster.coordinator_of(&st, &group_id) != broker {
        return top(E::NotCoordinator);
    }
    if let Some(code) =
        st.faults.error_for(ApiKey::LeaveGroup, broker, Part { group: Some(&group_id), ..Part::default() })
    {
        return LeaveGroupResponse::default().with_error_code(code);
    }
    let leaving: Vec<(String, Option<String>)> = if version >= 3 {
        req.members
            .iter()
            .map(|m| (m.member_id.to_string(), m.group_instance_id.as_ref().map(|i| i.to_string())))
            .collect()
    } else {
        vec![(req.member_id.to_string(), None)]
    };
    let member_response = |member_id: &str, instance: &Option<String>, code: i16| {
        leave_group_response::MemberResponse::default()
            .with_member_id(s(member_id))
            .with_group_instance_id(instance.as_deref().map(s))
            .with_error_code(code)
    };
    let answer = |results: Vec<leave_group_response::MemberResponse>| {
        if version >= 3 {
            LeaveGroupResponse::default().with_members(results)
        } else {
            let code = results.first().map_or(0, |r| r.error_code);
            LeaveGroupResponse::default().with_error_code(code)
        }
    };
    let Some(group) = st.groups.get_mut(&group_id) else {
        // As Kafka 4.2 answers: every member of a group it does not know is unknown.
        let unknown = E::UnknownMemberId.code();
        return answer(leaving.iter().map(|(m, i)| member_response(m, i, unknown)).collect());
    };
    let mut results = Vec::new();
    let mut removed = 0;
    for (member_id, instance) in &leaving {
        // A static member may leave by instance id alone (member id "").
        let target = match instance.as_deref().and_then(|i| group.instances.get(i)) {
            Some(known) if member_id.is_empty() || known == member_id => Ok(known.clone()),
            Some(_) => Err(E::FencedInstanceId),
            None if instance.is_some() => Err(E::UnknownMemberId),
            None if group.members.contains_key(member_id) => Ok(member_id.clone()),
            None => Err(E::UnknownMemberId),
        };
        let code = match target {
            Ok(id) => {
                remove_member(group, &id);
                cluster.record("kafka.group.member", &group_id, format!("{id} left"));
                removed += 1;
                0
            }
            Err(e) => e.code(),
        };
        results.push(member_response(member_id, instance, code));
    }
    if removed > 0 {
        after_removal(cluster, &group_id, group, "member left");
    }
    answer(results)
}

/// OffsetCommit.
pub(crate) fn commit(cluster: &Cluster, broker: i32, version: i16, req: &OffsetCommitRequest) -> OffsetCommitResponse {
    let mut st = cluster.lock();
    let group_id = req.group_id.0.to_string();
    let member_id = req.member_id.to_string();
    let instance = req.group_instance_id.as_ref().map(|i| i.to_string());
    let generation = if version >= 1 { req.generation_id_or_member_epoch } else { -1 };
    // Apache Kafka's KafkaApis answers partitions it does not know with UNKNOWN_TOPIC_OR_PARTITION
    // before the group coordinator sees the request, and skips the coordinator when none is
    // known (measured against Kafka 4.2 by fidelity's differential suite).
    let any_known =
        req.topics.iter().any(|t| t.partitions.iter().any(|p| st.has_partition(t.name.0.as_str(), p.partition_index)));
    let top = if any_known {
        commit_check(cluster, &mut st, broker, &group_id, &member_id, instance.as_deref(), generation).err()
    } else {
        None
    };
    let at = cluster.elapsed();
    let mut topics = Vec::new();
    let mut records = Vec::new();
    for t in &req.topics {
        let topic = t.name.0.to_string();
        let mut partitions = Vec::new();
        for p in &t.partitions {
            let part = Part { topic: Some(&topic), partition: Some(p.partition_index), group: Some(&group_id) };
            let metadata = p.committed_metadata.as_ref().map(|m| m.to_string());
            let code = if !st.has_partition(&topic, p.partition_index) {
                E::UnknownTopicOrPartition.code()
            } else if let Some(e) = top {
                e.code()
            } else if let Some(code) = st.faults.error_for(ApiKey::OffsetCommit, broker, part) {
                code
            } else if metadata.as_ref().is_some_and(|m| m.len() > OFFSET_METADATA_BYTES_MAX) {
                E::OffsetMetadataTooLarge.code()
            } else {
                let group = st.groups.entry(group_id.clone()).or_insert_with(Group::new);
                group.offsets.insert(
                    (topic.clone(), p.partition_index),
                    Committed {
                        offset: p.committed_offset,
                        leader_epoch: p.committed_leader_epoch,
                        metadata: metadata.clone().unwrap_or_default(),
                    },
                );
                0
            };
            records.push(CommitRecord {
                at,
                group: group_id.clone(),
                member_id: member_id.clone(),
                group_instance_id: instance.clone(),
                generation,
                topic: topic.clone(),
                partition: p.partition_index,
                offset: p.committed_offset,
                metadata,
                error: code,
            });
            partitions.push(
                offset_commit_response::OffsetCommitResponsePartition::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(code),
            );
        }
        topics.push(
            offset_commit_response::OffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(partitions),
        );
    }
    // A commit from a live member counts as a heartbeat.
    if any_known
        && top.is_none()
        && let Some(m) = st.groups.get_mut(&group_id).and_then(|g| g.members.get_mut(&member_id))
    {
        m.deadline = Instant::now() + m.session_timeout;
    }
    for r in &records {
        cluster.record(
            "kafka.commit",
            &r.group,
            format!(
                "{} gen {} {}-{} offset {} metadata {:?}: {}",
                r.member_id, r.generation, r.topic, r.partition, r.offset, r.metadata, r.error
            ),
        );
    }
    cluster.journal(|j| records.into_iter().for_each(|r| j.commit(r)));
    OffsetCommitResponse::default().with_topics(topics)
}

fn commit_check(
    cluster: &Cluster,
    st: &mut State,
    broker: i32,
    group_id: &str,
    member_id: &str,
    instance: Option<&str>,
    generation: i32,
) -> Result<(), E> {
    if group_id.is_empty() {
        return Err(E::InvalidGroupId);
    }
    if cluster.coordinator_of(st, group_id) != broker {
        return Err(E::NotCoordinator);
    }
    if let Some(code) =
        st.faults.error_for(ApiKey::OffsetCommit, broker, Part { group: Some(group_id), ..Part::default() })
    {
        return Err(E::try_from_code(code).unwrap_or(E::UnknownServerError));
    }
    let Some(group) = st.groups.get(group_id) else {
        return if generation < 0 { Ok(()) } else { Err(E::IllegalGeneration) };
    };
    if group.state == GroupState::Dead {
        return Err(E::CoordinatorNotAvailable);
    }
    if generation < 0 && group.state == GroupState::Empty {
        return Ok(());
    }
    if generation >= 0 || !member_id.is_empty() || instance.is_some() {
        check_member(group, member_id, instance)?;
        if generation != group.generation {
            return Err(E::IllegalGeneration);
        }
    } else {
        return Err(E::UnknownMemberId);
    }
    if group.state == GroupState::CompletingRebalance {
        return Err(E::RebalanceInProgress);
    }
    Ok(())
}

/// OffsetFetch (v1–7: one group).
pub(crate) fn fetch_offsets(
    cluster: &Cluster,
    broker: i32,
    version: i16,
    req: &OffsetFetchRequest,
) -> OffsetFetchResponse {
    let st = cluster.lock();
    let group_id = req.group_id.0.to_string();
    let mut top = 0;
    if cluster.coordinator_of(&st, &group_id) != broker {
        top = E::NotCoordinator.code();
    } else if let Some(code) =
        st.faults.error_for(ApiKey::OffsetFetch, broker, Part { group: Some(&group_id), ..Part::default() })
    {
        top = code;
    }
    let group = st.groups.get(&group_id);
    let wanted: Vec<(String, Vec<i32>)> = match &req.topics {
        Some(topics) => topics.iter().map(|t| (t.name.0.to_string(), t.partition_indexes.clone())).collect(),
        None => {
            let mut all: BTreeMap<String, Vec<i32>> = BTreeMap::new();
            if let Some(g) = group {
                for (t, p) in g.offsets.keys() {
                    all.entry(t.clone()).or_default().push(*p);
                }
            }
            all.into_iter().collect()
        }
    };
    let topics = wanted
        .into_iter()
        .map(|(topic, partitions)| {
            let partitions = partitions
                .into_iter()
                .map(|p| {
                    let committed =
                        if top == 0 { group.and_then(|g| g.offsets.get(&(topic.clone(), p))) } else { None };
                    // v1 has no top-level error: each partition carries it.
                    let code = if version < 2 { top } else { 0 };
                    offset_fetch_response::OffsetFetchResponsePartition::default()
                        .with_partition_index(p)
                        .with_committed_offset(committed.map_or(-1, |c| c.offset))
                        .with_committed_leader_epoch(committed.map_or(-1, |c| c.leader_epoch))
                        .with_metadata(Some(s(committed.map_or("", |c| c.metadata.as_str()))))
                        .with_error_code(code)
                })
                .collect();
            offset_fetch_response::OffsetFetchResponseTopic::default()
                .with_name(TopicName(s(&topic)))
                .with_partitions(partitions)
        })
        .collect();
    let mut resp = OffsetFetchResponse::default().with_topics(topics);
    if version >= 2 {
        resp = resp.with_error_code(top);
    }
    resp
}

/// DescribeGroups.
pub(crate) fn describe(cluster: &Cluster, broker: i32, req: &DescribeGroupsRequest) -> DescribeGroupsResponse {
    let st = cluster.lock();
    let groups = req
        .groups
        .iter()
        .map(|id| {
            let group_id = id.0.to_string();
            let described = describe_groups_response::DescribedGroup::default().with_group_id(id.clone());
            if cluster.coordinator_of(&st, &group_id) != broker {
                return described.with_error_code(E::NotCoordinator.code());
            }
            let Some(g) = st.groups.get(&group_id) else {
                return described.with_group_state(s("Dead"));
            };
            let stable = g.state == GroupState::Stable;
            let members = g
                .members
                .values()
                .map(|m| {
                    let metadata = if stable {
                        m.protocols.iter().find(|(n, _)| Some(n) == g.protocol.as_ref()).map(|(_, b)| b.clone())
                    } else {
                        None
                    };
                    describe_groups_response::DescribedGroupMember::default()
                        .with_member_id(s(&m.id))
                        .with_group_instance_id(m.instance.as_deref().map(s))
                        .with_client_id(s(&m.client_id))
                        .with_client_host(s("/127.0.0.1"))
                        .with_member_metadata(metadata.unwrap_or_default())
                        .with_member_assignment(if stable { m.assignment.clone() } else { Bytes::new() })
                })
                .collect();
            described
                .with_group_state(s(g.state.name()))
                .with_protocol_type(s(g.protocol_type.as_deref().unwrap_or_default()))
                .with_protocol_data(s(if stable { g.protocol.as_deref().unwrap_or_default() } else { "" }))
                .with_members(members)
        })
        .collect();
    DescribeGroupsResponse::default().with_groups(groups)
}

/// ListGroups: the groups this broker coordinates (v4: filtered by state).
pub(crate) fn list(cluster: &Cluster, broker: i32, version: i16, req: &ListGroupsRequest) -> ListGroupsResponse {
    let st = cluster.lock();
    let filter: Vec<String> = req.states_filter.iter().map(|s| s.to_lowercase()).collect();
    let groups = st
        .groups
        .iter()
        .filter(|(id, g)| g.state != GroupState::Dead && cluster.coordinator_of(&st, id) == broker)
        .filter(|(_, g)| filter.is_empty() || filter.contains(&g.state.name().to_lowercase()))
        .map(|(id, g)| {
            let mut listed = list_groups_response::ListedGroup::default()
                .with_group_id(GroupId(s(id)))
                .with_protocol_type(s(g.protocol_type.as_deref().unwrap_or_default()));
            if version >= 4 {
                listed = listed.with_group_state(s(g.state.name()));
            }
            listed
        })
        .collect();
    ListGroupsResponse::default().with_groups(groups)
}
