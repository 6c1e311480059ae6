//! JoinGroup: admitting new members, static members replacing their old ids, and rejoins.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::ResponseError as E;
use kafka_protocol::messages::*;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::coordinator::{Coordinator, Env, Handle, with};
use super::rebalance::{maybe_complete_join, prepare_rebalance, spawn_pending_timer, spawn_session_timer, trigger};
use super::state::{
    Group, GroupState, MEMBERS_MAX, Member, PROTOCOLS_MAX, Reply, current_join, fence, join_error, set_protocol_type,
    settle,
};
use crate::faults::Part;

/// JoinGroup, answered once the round it joins completes (or at once).
pub(crate) async fn join(
    handle: &dyn Handle,
    broker: i32,
    client_id: &str,
    version: i16,
    req: JoinGroupRequest,
) -> JoinGroupResponse {
    let member_id = req.member_id.to_string();
    let reply = with(handle, |c, env| c.join(env, broker, client_id, version, req));
    settle(reply, || join_error(version, E::UnknownMemberId.code(), &member_id)).await
}

/// A JoinGroup being handled: who asks, and for what.
struct Joining<'a> {
    env: &'a dyn Env,
    group_id: String,
    member_id: String,
    client_id: &'a str,
    version: i16,
    protocol_type: String,
    instance: Option<String>,
    session: Duration,
    rebalance: Duration,
    protocols: Vec<(String, Bytes)>,
    now: Instant,
}

impl Coordinator {
    /// JoinGroup, with the cluster state locked: the answer now, or the round to wait for.
    pub(crate) fn join(
        &mut self,
        env: &dyn Env,
        broker: i32,
        client_id: &str,
        version: i16,
        req: JoinGroupRequest,
    ) -> Reply<JoinGroupResponse> {
        let group_id = req.group_id.0.to_string();
        let member_id = req.member_id.to_string();
        let err = |code: E| Reply::Now(join_error(version, code.code(), &member_id));
        let (session, rebalance) = match join_timeouts(env, broker, version, &req, &group_id) {
            Ok(timeouts) => timeouts,
            Err(code) => return Reply::Now(join_error(version, code, &member_id)),
        };
        let protocols: Vec<(String, Bytes)> =
            req.protocols.iter().map(|p| (p.name.to_string(), p.metadata.clone())).collect();
        let instance = req.group_instance_id.as_ref().map(|i| i.to_string()).filter(|i| !i.is_empty());
        if !self.groups.contains_key(&group_id) && !member_id.is_empty() {
            return err(E::UnknownMemberId);
        }
        let counter = {
            self.next_member += 1;
            self.next_member
        };
        let group = self.groups.entry(group_id.clone()).or_insert_with(Group::new);
        if group.state == GroupState::Dead {
            return err(E::CoordinatorNotAvailable);
        }
        if !compatible(group, req.protocol_type.as_str(), &protocols, &member_id) {
            return err(E::InconsistentGroupProtocol);
        }
        let j = Joining {
            env,
            group_id,
            member_id,
            client_id,
            version,
            protocol_type: req.protocol_type.to_string(),
            instance,
            session,
            rebalance,
            protocols,
            now: Instant::now(),
        };
        let (tx, rx) = oneshot::channel();
        if j.member_id.is_empty() {
            return j.join_new(group, counter, tx, rx);
        }
        j.rejoin(group, tx, rx)
    }
}

/// The checks before the group is looked at; the session and rebalance timeouts asked for, or
/// the error code.
fn join_timeouts(
    env: &dyn Env,
    broker: i32,
    version: i16,
    req: &JoinGroupRequest,
    group_id: &str,
) -> Result<(Duration, Duration), i16> {
    if group_id.is_empty() {
        return Err(E::InvalidGroupId.code());
    }
    if env.coordinator_of(group_id) != broker {
        return Err(E::NotCoordinator.code());
    }
    if let Some(code) = env.fault_error(ApiKey::JoinGroup, broker, Part { group: Some(group_id), ..Part::default() }) {
        return Err(code);
    }
    let config = env.config();
    let session = Duration::from_millis(u64::try_from(req.session_timeout_ms).unwrap_or(0));
    if session < config.session_timeout_min || session > config.session_timeout_max {
        return Err(E::InvalidSessionTimeout.code());
    }
    // v0 has no rebalance timeout: it is the session timeout.
    let rebalance = if version >= 1 {
        Duration::from_millis(u64::try_from(req.rebalance_timeout_ms).unwrap_or(0))
    } else {
        session
    };
    if req.protocol_type.is_empty() || req.protocols.is_empty() || req.protocols.len() > PROTOCOLS_MAX {
        return Err(E::InconsistentGroupProtocol.code());
    }
    Ok((session, rebalance))
}

/// Protocol compatibility with the members already there.
fn compatible(group: &Group, protocol_type: &str, protocols: &[(String, Bytes)], member_id: &str) -> bool {
    if group.members.is_empty() {
        return true;
    }
    let same_type = group.protocol_type.as_deref() == Some(protocol_type);
    let common =
        protocols.iter().any(|(name, _)| group.members.values().all(|m| m.protocols.iter().any(|(n, _)| n == name)));
    let only_member = group.members.len() == 1 && group.members.contains_key(member_id);
    only_member || (same_type && common)
}

impl Joining<'_> {
    fn err(&self, code: E) -> Reply<JoinGroupResponse> {
        Reply::Now(join_error(self.version, code.code(), &self.member_id))
    }

    fn new_member(&self, id: String) -> Member {
        Member {
            id,
            instance: self.instance.clone(),
            client_id: self.client_id.to_string(),
            session_timeout: self.session,
            rebalance_timeout: self.rebalance,
            protocols: self.protocols.clone(),
            assignment: Bytes::new(),
            join_waiter: None,
            sync_waiter: None,
            synced: false,
            deadline: self.now + self.session,
        }
    }

    /// A member new to the group (joining below v4, or with the id MEMBER_ID_REQUIRED handed
    /// out): it waits for the rebalance its arrival starts.
    fn admit(
        &self,
        group: &mut Group,
        id: String,
        tx: oneshot::Sender<JoinGroupResponse>,
        rx: oneshot::Receiver<JoinGroupResponse>,
    ) -> Reply<JoinGroupResponse> {
        if group.members.len() >= MEMBERS_MAX {
            return self.err(E::GroupMaxSizeReached);
        }
        let mut m = self.new_member(id.clone());
        m.join_waiter = Some((self.version, tx));
        group.members.insert(id.clone(), m);
        set_protocol_type(group, &self.protocol_type);
        spawn_session_timer(self.env, &self.group_id, &id);
        trigger(self.env, &self.group_id, group, "member joined");
        Reply::Wait(rx)
    }

    /// A member joining with an empty member id: it gets one.
    fn join_new(
        self,
        group: &mut Group,
        counter: u64,
        tx: oneshot::Sender<JoinGroupResponse>,
        rx: oneshot::Receiver<JoinGroupResponse>,
    ) -> Reply<JoinGroupResponse> {
        let (env, version) = (self.env, self.version);
        let prefix = self.instance.clone().unwrap_or_else(|| self.client_id.to_string());
        let new_id = format!("{prefix}-{counter:012}");
        // When the id was handed out: a member id belongs to the incarnation that asked for it
        // (Q8 attributes departures by it; a generation may list it only after that one crashed).
        env.record("kafka.group.id", &self.group_id, &format!("{new_id} handed out"));
        if let Some(instance) = &self.instance {
            if let Some(old_id) = group.instances.get(instance).cloned() {
                return self.replace_static(group, instance, &old_id, new_id, tx, rx);
            }
            if group.members.len() >= MEMBERS_MAX {
                return self.err(E::GroupMaxSizeReached);
            }
            let mut m = self.new_member(new_id.clone());
            m.join_waiter = Some((version, tx));
            group.members.insert(new_id.clone(), m);
            group.instances.insert(instance.clone(), new_id.clone());
            set_protocol_type(group, &self.protocol_type);
            spawn_session_timer(env, &self.group_id, &new_id);
            trigger(env, &self.group_id, group, "static member joined");
            return Reply::Wait(rx);
        }
        if version >= 4 {
            // KIP-394: hand out the id first; the member joins with it.
            group.pending.insert(new_id.clone());
            spawn_pending_timer(env, &self.group_id, &new_id, self.session);
            return Reply::Now(join_error(version, E::MemberIdRequired.code(), &new_id));
        }
        self.admit(group, new_id, tx, rx)
    }

    /// A static member restarting: it takes over its old member id's place.
    fn replace_static(
        &self,
        group: &mut Group,
        instance: &str,
        old_id: &str,
        new_id: String,
        tx: oneshot::Sender<JoinGroupResponse>,
        rx: oneshot::Receiver<JoinGroupResponse>,
    ) -> Reply<JoinGroupResponse> {
        let (env, version, group_id) = (self.env, self.version, &self.group_id);
        let Some(mut old) = group.members.shift_remove(old_id) else {
            return self.err(E::UnknownMemberId);
        };
        fence(&mut old);
        let unchanged = old.protocols == self.protocols;
        let was_leader = group.leader.as_deref() == Some(old_id);
        let mut m = self.new_member(new_id.clone());
        m.assignment = old.assignment.clone();
        m.synced = old.synced;
        group.members.insert(new_id.clone(), m);
        group.instances.insert(instance.to_string(), new_id.clone());
        if was_leader {
            group.leader = Some(new_id.clone());
        }
        env.record("kafka.group.static", group_id, &format!("{instance}: {old_id} replaced by {new_id}"));
        spawn_session_timer(env, group_id, &new_id);
        if group.state == GroupState::Stable && unchanged {
            // KIP-814: no rebalance, even for the leader; the leader gets the members
            // and is told to skip computing an assignment (v9+).
            let answer = current_join(group, &new_id, version);
            return Reply::Now(if was_leader && version >= 9 { answer.with_skip_assignment(true) } else { answer });
        }
        group.members[&new_id].join_waiter.replace((version, tx));
        trigger(env, group_id, group, "static member rejoined");
        Reply::Wait(rx)
    }

    /// A member joining with its member id: a new member's second step, or a rejoin.
    fn rejoin(
        self,
        group: &mut Group,
        tx: oneshot::Sender<JoinGroupResponse>,
        rx: oneshot::Receiver<JoinGroupResponse>,
    ) -> Reply<JoinGroupResponse> {
        let (env, version, member_id) = (self.env, self.version, self.member_id.as_str());
        if let Some(instance) = &self.instance {
            match group.instances.get(instance) {
                Some(known) if *known != member_id => return self.err(E::FencedInstanceId),
                None if group.members.contains_key(member_id) => return self.err(E::FencedInstanceId),
                _ => {}
            }
        }
        if group.pending.remove(member_id) {
            return self.admit(group, member_id.to_string(), tx, rx);
        }
        let Some(member) = group.members.get_mut(member_id) else {
            return self.err(E::UnknownMemberId);
        };
        let changed = member.protocols != self.protocols;
        member.protocols = self.protocols.clone();
        member.session_timeout = self.session;
        member.rebalance_timeout = self.rebalance;
        member.deadline = self.now + self.session;
        let is_leader = group.leader.as_deref() == Some(member_id);
        match group.state {
            GroupState::PreparingRebalance => {
                group.members[member_id].join_waiter = Some((version, tx));
                maybe_complete_join(env, &self.group_id, group);
                Reply::Wait(rx)
            }
            GroupState::CompletingRebalance if !changed => Reply::Now(current_join(group, member_id, version)),
            GroupState::Stable if !changed && !is_leader => Reply::Now(current_join(group, member_id, version)),
            GroupState::CompletingRebalance | GroupState::Stable => {
                group.members[member_id].join_waiter = Some((version, tx));
                prepare_rebalance(env, &self.group_id, group, "member rejoined");
                Reply::Wait(rx)
            }
            GroupState::Empty | GroupState::Dead => self.err(E::UnknownMemberId),
        }
    }
}
