//! SyncGroup and Heartbeat.

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::ResponseError as E;
use kafka_protocol::messages::*;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::coordinator::{Coordinator, Env, Handle, with};
use super::state::{Group, GroupState, Reply, check_member, s, settle};
use crate::faults::Part;

/// SyncGroup, answered once the leader's assignment arrives (or at once).
pub(crate) async fn sync(handle: &dyn Handle, broker: i32, version: i16, req: SyncGroupRequest) -> SyncGroupResponse {
    let reply = with(handle, |c, env| c.sync(env, broker, version, req));
    settle(reply, || SyncGroupResponse::default().with_error_code(E::UnknownMemberId.code())).await
}

impl Coordinator {
    /// SyncGroup, with the cluster state locked.
    pub(crate) fn sync(
        &mut self,
        env: &dyn Env,
        broker: i32,
        version: i16,
        req: SyncGroupRequest,
    ) -> Reply<SyncGroupResponse> {
        let err = |e: E| Reply::Now(SyncGroupResponse::default().with_error_code(e.code()));
        let group_id = req.group_id.0.to_string();
        let member_id = req.member_id.to_string();
        if env.coordinator_of(&group_id) != broker {
            return err(E::NotCoordinator);
        }
        if let Some(code) =
            env.fault_error(ApiKey::SyncGroup, broker, Part { group: Some(&group_id), ..Part::default() })
        {
            return Reply::Now(SyncGroupResponse::default().with_error_code(code));
        }
        let Some(group) = self.groups.get_mut(&group_id) else {
            return err(E::UnknownMemberId);
        };
        if let Err(e) = check_member(group, &member_id, req.group_instance_id.as_deref()) {
            return err(e);
        }
        if req.generation_id != group.generation {
            return err(E::IllegalGeneration);
        }
        let type_mismatch =
            req.protocol_type.as_ref().is_some_and(|t| group.protocol_type.as_deref() != Some(t.as_str()));
        let name_mismatch = req.protocol_name.as_ref().is_some_and(|n| group.protocol.as_deref() != Some(n.as_str()));
        if type_mismatch || name_mismatch {
            return err(E::InconsistentGroupProtocol);
        }
        let now = Instant::now();
        match group.state {
            GroupState::Empty | GroupState::Dead => err(E::UnknownMemberId),
            GroupState::PreparingRebalance => err(E::RebalanceInProgress),
            GroupState::Stable => {
                let m = &mut group.members[&member_id];
                m.deadline = now + m.session_timeout;
                let assignment = m.assignment.clone();
                Reply::Now(sync_answer(group, assignment, version))
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
                    store_assignments(env, &group_id, group, &req.assignments, version);
                }
                Reply::Wait(rx)
            }
        }
    }

    /// Heartbeat.
    pub(crate) fn heartbeat(&mut self, env: &dyn Env, broker: i32, req: &HeartbeatRequest) -> HeartbeatResponse {
        let code = self.heartbeat_check(env, broker, req).err().map_or(0, |e| e.code());
        HeartbeatResponse::default().with_error_code(code)
    }

    fn heartbeat_check(&mut self, env: &dyn Env, broker: i32, req: &HeartbeatRequest) -> Result<(), E> {
        let group_id = req.group_id.0.to_string();
        if env.coordinator_of(&group_id) != broker {
            return Err(E::NotCoordinator);
        }
        if let Some(code) =
            env.fault_error(ApiKey::Heartbeat, broker, Part { group: Some(&group_id), ..Part::default() })
        {
            return Err(E::try_from_code(code).unwrap_or(E::UnknownServerError));
        }
        let group = self.groups.get_mut(&group_id).ok_or(E::UnknownMemberId)?;
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
}

/// The leader's SyncGroup: stores every member's assignment, makes the group `Stable` and answers
/// the members waiting in SyncGroup.
fn store_assignments(
    env: &dyn Env,
    group_id: &str,
    group: &mut Group,
    assignments: &[sync_group_request::SyncGroupRequestAssignment],
    version: i16,
) {
    assert_eq!(
        group.state,
        GroupState::CompletingRebalance,
        "group {group_id}: the leader's assignment completes a round"
    );
    let mut given: BTreeMap<String, Bytes> =
        assignments.iter().map(|a| (a.member_id.to_string(), a.assignment.clone())).collect();
    let mut stored = BTreeMap::new();
    for m in group.members.values_mut() {
        m.assignment = given.remove(&m.id).unwrap_or_default();
        stored.insert(m.id.clone(), m.assignment.clone());
    }
    group.state = GroupState::Stable;
    group.token += 1;
    let now = Instant::now();
    // Kafka's propagateAssignment: each member answered starts a new session.
    let responses: Vec<_> = group
        .members
        .values_mut()
        .filter_map(|m| {
            let (_, tx) = m.sync_waiter.take()?;
            m.deadline = now + m.session_timeout;
            Some((tx, m.assignment.clone()))
        })
        .collect();
    for (tx, assignment) in responses {
        let _ = tx.send(sync_answer(group, assignment, version));
    }
    env.record(
        "kafka.group.state",
        group_id,
        &format!("generation {}: Stable ({} assignments)", group.generation, stored.len()),
    );
    let generation = group.generation;
    env.journal_assignments(group_id, generation, stored);
}

/// A SyncGroup answer carrying `assignment`.
fn sync_answer(group: &Group, assignment: Bytes, version: i16) -> SyncGroupResponse {
    let mut r = SyncGroupResponse::default().with_assignment(assignment);
    if version >= 5 {
        r = r
            .with_protocol_type(group.protocol_type.as_deref().map(s))
            .with_protocol_name(group.protocol.as_deref().map(s));
    }
    r
}
