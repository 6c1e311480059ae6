//! Rebalances: starting one, completing the JoinGroup round, and the timers that drive them
//! (rebalance, initial delay, pending member ids, sessions).

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::time::Duration;

use kafka_protocol::ResponseError as E;
use kafka_protocol::messages::*;
use tokio::time::Instant;

use super::coordinator::{Coordinator, Env, with};
use super::state::{Group, GroupState, Member, leader_members, remove_member, s};
use crate::introspect::Generation;

/// Journals the generation `group` just entered: its protocol, leader and members (no
/// assignments until the leader syncs).
pub(super) fn journal_generation(env: &dyn Env, group_id: &str, group: &Group) {
    env.journal_generation(
        group_id,
        Generation {
            at: env.elapsed(),
            generation: group.generation,
            protocol: group.protocol.clone(),
            leader: group.leader.clone(),
            members: group.members.values().map(Member::view).collect(),
            assignments: BTreeMap::new(),
        },
    );
}

/// A membership change: start a rebalance, or see whether the running one can complete.
pub(super) fn trigger(env: &dyn Env, group_id: &str, group: &mut Group, why: &str) {
    match group.state {
        GroupState::PreparingRebalance => maybe_complete_join(env, group_id, group),
        GroupState::Dead => {}
        _ => prepare_rebalance(env, group_id, group, why),
    }
}

pub(super) fn prepare_rebalance(env: &dyn Env, group_id: &str, group: &mut Group, why: &str) {
    let now = Instant::now();
    if group.state == GroupState::CompletingRebalance {
        for m in group.members.values_mut() {
            if let Some((_, tx)) = m.sync_waiter.take() {
                let _ = tx.send(SyncGroupResponse::default().with_error_code(E::RebalanceInProgress.code()));
                // Kafka's propagateAssignment: a member answered in SyncGroup starts a new session
                // (its expiry was ignored while it waited), so it outlives a leader that expired.
                m.deadline = now + m.session_timeout;
            }
        }
    }
    let was_empty = group.state == GroupState::Empty;
    group.state = GroupState::PreparingRebalance;
    group.token += 1;
    let timeout = group.members.values().map(|m| m.rebalance_timeout).max().unwrap_or(Duration::ZERO);
    let delay = env.config().initial_rebalance_delay;
    group.join_not_before = (was_empty && !delay.is_zero()).then(|| now + delay.min(timeout));
    env.record("kafka.group.state", group_id, &format!("generation {}: PreparingRebalance ({why})", group.generation));
    let token = group.token;
    spawn_group_timer(env, group_id, now + timeout, move |env, id, g| {
        if g.token == token && g.state == GroupState::PreparingRebalance {
            complete_join(env, id, g);
        }
    });
    if let Some(at) = group.join_not_before {
        spawn_group_timer(env, group_id, at, move |env, id, g| {
            if g.token == token {
                maybe_complete_join(env, id, g);
            }
        });
    }
    maybe_complete_join(env, group_id, group);
}

pub(super) fn maybe_complete_join(env: &dyn Env, group_id: &str, group: &mut Group) {
    if group.state != GroupState::PreparingRebalance {
        return;
    }
    let all_joined = group.members.values().all(|m| m.join_waiter.is_some()) && group.pending.is_empty();
    let delayed = group.join_not_before.is_some_and(|t| Instant::now() < t);
    if all_joined && !delayed {
        complete_join(env, group_id, group);
    }
}

pub(super) fn complete_join(env: &dyn Env, group_id: &str, group: &mut Group) {
    let gone: Vec<String> = group.members.values().filter(|m| m.join_waiter.is_none()).map(|m| m.id.clone()).collect();
    for id in &gone {
        remove_member(group, id);
        env.record("kafka.group.member", group_id, &format!("{id} removed: did not rejoin in time"));
    }
    group.generation = group.generation.checked_add(1).expect("group: generations increase without overflow");
    group.token += 1;
    group.join_not_before = None;
    if group.members.is_empty() {
        group.state = GroupState::Empty;
        group.protocol = None;
        group.leader = None;
        env.record("kafka.group.state", group_id, &format!("generation {}: Empty", group.generation));
        journal_generation(env, group_id, group);
        return;
    }
    let protocol = vote_protocol(group);
    group.protocol = Some(protocol.clone());
    if !group.leader.as_ref().is_some_and(|l| group.members.contains_key(l)) {
        group.leader = group.members.keys().next().cloned();
    }
    assert!(
        group.leader.as_ref().is_some_and(|l| group.members.contains_key(l)),
        "group {group_id}: a completed round's leader is one of its members"
    );
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
    env.record(
        "kafka.group.state",
        group_id,
        &format!(
            "generation {}: CompletingRebalance protocol {protocol} leader {leader} members {ids:?}",
            group.generation
        ),
    );
    journal_generation(env, group_id, group);
    let token = group.token;
    let timeout = group.members.values().map(|m| m.rebalance_timeout).max().unwrap_or(Duration::ZERO);
    spawn_group_timer(env, group_id, now + timeout, move |env, id, g| {
        if g.token != token || g.state != GroupState::CompletingRebalance {
            return;
        }
        let late: Vec<String> = g.members.values().filter(|m| !m.synced).map(|m| m.id.clone()).collect();
        for m in &late {
            remove_member(g, m);
            env.record("kafka.group.member", id, &format!("{m} removed: no SyncGroup within the rebalance timeout"));
        }
        prepare_rebalance(env, id, g, "members did not sync");
    });
}

/// The protocol: among those every member supports, the one most members prefer; ties go to the
/// earliest in the leader-candidate's order.
fn vote_protocol(group: &Group) -> String {
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
    best.map(|(c, _)| c.clone()).unwrap_or_default()
}

/// After a member left or expired.
pub(super) fn after_removal(env: &dyn Env, group_id: &str, group: &mut Group, why: &str) {
    match group.state {
        GroupState::Stable | GroupState::CompletingRebalance => prepare_rebalance(env, group_id, group, why),
        GroupState::PreparingRebalance => {
            if group.members.is_empty() && group.pending.is_empty() {
                complete_join(env, group_id, group);
            } else {
                maybe_complete_join(env, group_id, group);
            }
        }
        GroupState::Empty | GroupState::Dead => {}
    }
}

/// Runs `f` on the group at `at` (tokio time), if the group still exists.
pub(super) fn spawn_group_timer(
    env: &dyn Env,
    group_id: &str,
    at: Instant,
    f: impl FnOnce(&dyn Env, &str, &mut Group) + Send + 'static,
) {
    let handle = env.handle();
    let group_id = group_id.to_string();
    tokio::spawn(async move {
        tokio::time::sleep_until(at).await;
        with(&*handle, |c, env| {
            if let Some(g) = c.groups.get_mut(&group_id) {
                f(env, &group_id, g);
            }
        });
    });
}

pub(super) fn spawn_pending_timer(env: &dyn Env, group_id: &str, member_id: &str, session: Duration) {
    let member_id = member_id.to_string();
    spawn_group_timer(env, group_id, Instant::now() + session, move |env, id, g| {
        if g.pending.remove(&member_id) {
            env.record("kafka.group.member", id, &format!("{member_id} removed: never joined with its member id"));
            maybe_complete_join(env, id, g);
        }
    });
}

/// The member's session: it expires when its deadline passes with no join or sync waiting.
pub(super) fn spawn_session_timer(env: &dyn Env, group_id: &str, member_id: &str) {
    let handle = env.handle();
    let group_id = group_id.to_string();
    let member_id = member_id.to_string();
    tokio::spawn(async move {
        loop {
            let deadline = with(&*handle, |c, _| {
                c.groups.get(&group_id).and_then(|g| g.members.get(&member_id)).map(|m| m.deadline)
            });
            let Some(deadline) = deadline else { return };
            tokio::time::sleep_until(deadline).await;
            if with(&*handle, |c, env| session_check(c, env, &group_id, &member_id)).is_break() {
                return;
            }
        }
    });
}

/// A member's session timer fired: it expires (removed, `Break`) unless a join or sync is
/// waiting or its deadline moved (`Continue`); `Break` too when the member or group is gone.
fn session_check(c: &mut Coordinator, env: &dyn Env, group_id: &str, member_id: &str) -> ControlFlow<()> {
    let Some(group) = c.groups.get_mut(group_id) else { return ControlFlow::Break(()) };
    let now = Instant::now();
    let Some(m) = group.members.get_mut(member_id) else { return ControlFlow::Break(()) };
    if m.join_waiter.is_some() || m.sync_waiter.is_some() {
        m.deadline = now + m.session_timeout;
        return ControlFlow::Continue(());
    }
    if m.deadline > now {
        return ControlFlow::Continue(());
    }
    remove_member(group, member_id);
    env.record("kafka.group.member", group_id, &format!("{member_id} expired: session timeout"));
    after_removal(env, group_id, group, "member session expired");
    ControlFlow::Break(())
}
