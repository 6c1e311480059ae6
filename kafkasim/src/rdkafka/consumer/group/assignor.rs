//! The partition assignors a group leader runs (librdkafka's `range`, `roundrobin` and
//! `cooperative-sticky`), and the consumer protocol's member metadata
//! (`ConsumerProtocolSubscription`) and assignment (`ConsumerProtocolAssignment`) as
//! `kafka-protocol` encodes them.
//!
//! - `range` (librdkafka `rdkafka_range_assignor.c`, Kafka's `RangeAssignor`): per topic, the
//!   members subscribed to it in order (by `group.instance.id` when both are static, else by
//!   member id), `n / m` consecutive partitions each and one more to the first `n % m`.
//! - `roundrobin` (`rdkafka_roundrobin_assignor.c`): topics by name, members in that order, each
//!   partition to the next member (cycling over topics too) that subscribes to its topic.
//! - `cooperative-sticky` (KIP-429, Kafka's `CooperativeStickyAssignor`): members keep the
//!   partitions they own (`owned_partitions`) while that stays balanced, new or orphaned
//!   partitions go to the least-loaded subscriber, and partitions move from the most to the least
//!   loaded until counts differ by at most one. Then the cooperative adjustment
//!   (librdkafka's `rd_kafka_cooperative_protocol_adjust_assignment`): a partition assigned to a
//!   member other than its current owner is left out of both this generation; the owner revokes
//!   it, rejoins, and the next generation gives it to the new member.
//!
//! Member metadata is written at version 3 with generation -1 and no user data, as librdkafka
//! 2.12 writes it (`rd_kafka_consumer_protocol_member_metadata_new`); assignments at version 0.

use std::collections::{BTreeMap, BTreeSet};

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicName, consumer_protocol_assignment,
    consumer_protocol_subscription,
};
use kafka_protocol::protocol::{Decodable, Encodable};

use crate::requests::string;

use crate::rdkafka::consumer::positions::Tp;

/// The rebalance protocol in use (rdkafka's `RebalanceProtocol`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RebalanceProtocol {
    /// Not (yet) in a group.
    None,
    /// Eager: every partition is revoked before a rebalance (range, roundrobin).
    Eager,
    /// Cooperative (KIP-429, cooperative-sticky): only the partitions that move are revoked.
    Cooperative,
}

/// The member metadata version written (librdkafka 2.12 writes 3).
pub(crate) const SUBSCRIPTION_VERSION: i16 = 3;
/// The assignment version written (every version has the same fields a consumer reads).
pub(crate) const ASSIGNMENT_VERSION: i16 = 0;

/// An assignor (`partition.assignment.strategy`'s values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Strategy {
    /// `range`.
    Range,
    /// `roundrobin`.
    RoundRobin,
    /// `cooperative-sticky`.
    CooperativeSticky,
}

impl Strategy {
    /// The strategy named `name`, as the configuration spells it.
    pub(crate) fn parse(name: &str) -> Option<Strategy> {
        match name {
            "range" => Some(Strategy::Range),
            "roundrobin" => Some(Strategy::RoundRobin),
            "cooperative-sticky" => Some(Strategy::CooperativeSticky),
            _ => None,
        }
    }

    /// The JoinGroup protocol name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Strategy::Range => "range",
            Strategy::RoundRobin => "roundrobin",
            Strategy::CooperativeSticky => "cooperative-sticky",
        }
    }

    /// Whether it rebalances incrementally (KIP-429).
    pub(crate) fn cooperative(self) -> bool {
        self == Strategy::CooperativeSticky
    }
}

/// A group member as the leader sees it in the JoinGroup response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Member {
    /// Its member id.
    pub(crate) id: String,
    /// Its `group.instance.id`.
    pub(crate) instance_id: Option<String>,
    /// The topics it subscribes to.
    pub(crate) topics: Vec<String>,
    /// The partitions it owns now (cooperative members send them).
    pub(crate) owned: Vec<Tp>,
}

/// librdkafka's `rd_kafka_group_member_cmp`: static members by instance id, else member id.
fn member_order(a: &Member, b: &Member) -> std::cmp::Ordering {
    match (&a.instance_id, &b.instance_id) {
        (Some(x), Some(y)) => x.cmp(y),
        _ => a.id.cmp(&b.id),
    }
}

fn sorted(members: &[Member]) -> Vec<&Member> {
    let mut v: Vec<&Member> = members.iter().collect();
    v.sort_by(|a, b| member_order(a, b));
    v
}

/// The assignment of `partitions` (partition count by topic; topics missing from it are not
/// assigned) to `members`: every member id maps to its partitions, sorted.
pub(crate) fn assign(
    strategy: Strategy,
    members: &[Member],
    partitions: &BTreeMap<String, i32>,
) -> BTreeMap<String, Vec<Tp>> {
    let mut out: BTreeMap<String, BTreeSet<Tp>> = members.iter().map(|m| (m.id.clone(), BTreeSet::new())).collect();
    match strategy {
        Strategy::Range => range(members, partitions, &mut out),
        Strategy::RoundRobin => round_robin(members, partitions, &mut out),
        Strategy::CooperativeSticky => {
            sticky(members, partitions, &mut out);
            cooperative_adjust(members, &mut out);
        }
    }
    out.into_iter().map(|(k, v)| (k, v.into_iter().collect())).collect()
}

fn range(members: &[Member], partitions: &BTreeMap<String, i32>, out: &mut BTreeMap<String, BTreeSet<Tp>>) {
    for (topic, &count) in partitions {
        let subscribed: Vec<&Member> = sorted(members).into_iter().filter(|m| m.topics.contains(topic)).collect();
        if subscribed.is_empty() || count <= 0 {
            continue;
        }
        let m = subscribed.len() as i32;
        let (per, extra) = (count / m, count % m);
        for (i, member) in subscribed.iter().enumerate() {
            let i = i as i32;
            let start = per * i + i.min(extra);
            let len = per + i32::from(i < extra);
            let slot = out.get_mut(&member.id).expect("every member has a slot");
            slot.extend((start..start + len).map(|p| (topic.clone(), p)));
        }
    }
}

fn round_robin(members: &[Member], partitions: &BTreeMap<String, i32>, out: &mut BTreeMap<String, BTreeSet<Tp>>) {
    let order = sorted(members);
    if order.is_empty() {
        return;
    }
    let mut next = order.len() - 1;
    for (topic, &count) in partitions {
        if !order.iter().any(|m| m.topics.contains(topic)) {
            continue;
        }
        for p in 0..count {
            loop {
                next = (next + 1) % order.len();
                if order[next].topics.contains(topic) {
                    break;
                }
            }
            out.get_mut(&order[next].id).expect("every member has a slot").insert((topic.clone(), p));
        }
    }
}

fn exists(partitions: &BTreeMap<String, i32>, tp: &Tp) -> bool {
    partitions.get(&tp.0).is_some_and(|&n| tp.1 >= 0 && tp.1 < n)
}

fn sticky(members: &[Member], partitions: &BTreeMap<String, i32>, out: &mut BTreeMap<String, BTreeSet<Tp>>) {
    let order = sorted(members);
    // Keep what each member owns and may still have (claimed twice: the first in order keeps it).
    let mut taken: BTreeSet<Tp> = BTreeSet::new();
    for m in &order {
        for tp in &m.owned {
            if exists(partitions, tp) && m.topics.contains(&tp.0) && taken.insert(tp.clone()) {
                out.get_mut(&m.id).expect("slot").insert(tp.clone());
            }
        }
    }
    // Orphans to the least-loaded subscriber (ties: member order).
    for (topic, &count) in partitions {
        for p in 0..count {
            let tp = (topic.clone(), p);
            if taken.contains(&tp) {
                continue;
            }
            let target = order.iter().filter(|m| m.topics.contains(topic)).min_by_key(|m| out[&m.id].len());
            if let Some(m) = target {
                out.get_mut(&m.id).expect("slot").insert(tp.clone());
                taken.insert(tp);
            }
        }
    }
    // Balance: move one partition at a time from a member to one with at least two fewer that
    // subscribes to its topic. Each move lowers the sum of squared counts, so this ends.
    loop {
        let mut moved = false;
        let mut by_load: Vec<&Member> = order.clone();
        by_load.sort_by_key(|m| std::cmp::Reverse(out[&m.id].len()));
        'search: for from in &by_load {
            let from_len = out[&from.id].len();
            let mut takers: Vec<&Member> = order.iter().copied().filter(|m| out[&m.id].len() + 1 < from_len).collect();
            takers.sort_by_key(|m| out[&m.id].len());
            for to in takers {
                // Move the partition the taker can have that sorts last (keeps low partitions put).
                let candidate = out[&from.id].iter().rev().find(|tp| to.topics.contains(&tp.0)).cloned();
                if let Some(tp) = candidate {
                    out.get_mut(&from.id).expect("slot").remove(&tp);
                    out.get_mut(&to.id).expect("slot").insert(tp);
                    moved = true;
                    break 'search;
                }
            }
        }
        if !moved {
            break;
        }
    }
}

/// KIP-429: a partition given to a member other than the one owning it now is withheld from
/// both this generation; owned partitions the assignor did not place stay with their owner.
fn cooperative_adjust(members: &[Member], out: &mut BTreeMap<String, BTreeSet<Tp>>) {
    let mut owner: BTreeMap<&Tp, &str> = BTreeMap::new();
    for m in sorted(members) {
        for tp in &m.owned {
            owner.entry(tp).or_insert(m.id.as_str());
        }
    }
    let assigned: BTreeSet<Tp> = out.values().flatten().cloned().collect();
    for (id, tps) in out.iter_mut() {
        tps.retain(|tp| owner.get(tp).is_none_or(|o| *o == id.as_str()));
    }
    for (tp, o) in owner {
        if !assigned.contains(tp)
            && let Some(slot) = out.get_mut(o)
        {
            slot.insert(tp.clone());
        }
    }
}

fn by_topic(partitions: &[Tp]) -> BTreeMap<&str, Vec<i32>> {
    let mut m: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (t, p) in partitions {
        m.entry(t.as_str()).or_default().push(*p);
    }
    m
}

fn with_version(version: i16, encode: impl FnOnce(&mut BytesMut) -> Result<(), String>) -> Bytes {
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&version.to_be_bytes());
    encode(&mut buf).expect("consumer protocol messages encode at their own versions");
    buf.freeze()
}

/// A member's metadata for JoinGroup: its topics and the partitions it owns.
pub(crate) fn encode_subscription(topics: &[String], owned: &[Tp]) -> Bytes {
    let owned = by_topic(owned)
        .into_iter()
        .map(|(t, ps)| {
            consumer_protocol_subscription::TopicPartition::default()
                .with_topic(TopicName(string(t)))
                .with_partitions(ps)
        })
        .collect();
    let msg = ConsumerProtocolSubscription::default()
        .with_topics(topics.iter().map(|t| string(t)).collect())
        .with_owned_partitions(owned)
        .with_generation_id(-1)
        .with_rack_id(None);
    with_version(SUBSCRIPTION_VERSION, |buf| msg.encode(buf, SUBSCRIPTION_VERSION).map_err(|e| e.to_string()))
}

fn read_version(bytes: &[u8]) -> Option<(i16, Bytes)> {
    if bytes.len() < 2 {
        return None;
    }
    let mut buf = Bytes::copy_from_slice(bytes);
    let version = buf.get_i16();
    // Later versions are read as the latest known, as Kafka's ConsumerProtocol does.
    (version >= 0).then(|| (version.min(3), buf))
}

/// A member's topics and owned partitions from its JoinGroup metadata; `None` when the bytes
/// are not a consumer subscription.
pub(crate) fn decode_subscription(bytes: &[u8]) -> Option<(Vec<String>, Vec<Tp>)> {
    let (version, mut buf) = read_version(bytes)?;
    let s = ConsumerProtocolSubscription::decode(&mut buf, version).ok()?;
    let topics = s.topics.iter().map(|t| t.to_string()).collect();
    let owned =
        s.owned_partitions.iter().flat_map(|t| t.partitions.iter().map(move |p| (t.topic.0.to_string(), *p))).collect();
    Some((topics, owned))
}

/// An assignment for SyncGroup.
pub(crate) fn encode_assignment(partitions: &[Tp]) -> Bytes {
    let assigned = by_topic(partitions)
        .into_iter()
        .map(|(t, ps)| {
            consumer_protocol_assignment::TopicPartition::default().with_topic(TopicName(string(t))).with_partitions(ps)
        })
        .collect();
    let msg = ConsumerProtocolAssignment::default().with_assigned_partitions(assigned);
    with_version(ASSIGNMENT_VERSION, |buf| msg.encode(buf, ASSIGNMENT_VERSION).map_err(|e| e.to_string()))
}

/// The partitions of a SyncGroup assignment (empty bytes: none); `None` when they do not decode.
pub(crate) fn decode_assignment(bytes: &[u8]) -> Option<Vec<Tp>> {
    if bytes.is_empty() {
        return Some(Vec::new());
    }
    let (version, mut buf) = read_version(bytes)?;
    let a = ConsumerProtocolAssignment::decode(&mut buf, version).ok()?;
    let mut out: Vec<Tp> = a
        .assigned_partitions
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.topic.0.to_string(), *p)))
        .collect();
    out.sort();
    out.dedup();
    Some(out)
}

#[cfg(test)]
#[path = "assignor_tests.rs"]
mod tests;
