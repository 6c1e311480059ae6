//! The broker's side: what the cluster's introspection says about one group, as the models
//! read it.
//!
//! [`Facts::of`] takes a snapshot from a [`Cluster`]: the group's generations (members and the
//! assignments the leader sent), every commit attempt with the error code answered, every
//! partition's log start and high watermark, and how members left ([`Departure`]). Outside a
//! cluster, build `Facts` by hand (every field is public); [`Facts::default`] knows nothing, and
//! the models then judge from the consumers' events alone.
//!
//! Members are linked to consumer events by client id: a consumer's events name it by its
//! `client.id` ([`crate::models::Event::member`]), and each generation lists every member's
//! member id with the client id of its JoinGroup.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::Cluster;
use crate::introspect::{CommitRecord, Generation, GroupEvent, PartitionView};
use crate::models::event::TopicPartition;

/// How a member left its group, as the coordinator saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DepartureCause {
    /// It sent LeaveGroup.
    Left,
    /// Its session timed out (no heartbeat within `session.timeout.ms`).
    SessionExpired,
    /// The coordinator removed it during a rebalance (did not rejoin or sync within the
    /// rebalance timeout, or never joined with its member id); the reason as recorded.
    Removed(String),
    /// A static member (KIP-345) whose `group.instance.id` rejoined under a new member id.
    Replaced,
}

/// A member leaving its group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Departure {
    /// When, on the cluster's clock.
    pub at: Duration,
    /// The member id that left.
    pub member_id: String,
    /// How.
    pub cause: DepartureCause,
}

impl Departure {
    /// Reads a coordinator event (`kafka.group.member`, `kafka.group.static`); `None` for the
    /// other group events (state changes).
    pub fn from_group_event(event: &GroupEvent) -> Option<Departure> {
        let at = event.at;
        match event.kind.as_str() {
            "kafka.group.member" => {
                let (member_id, rest) = event.detail.split_once(' ')?;
                let cause = if rest == "left" {
                    DepartureCause::Left
                } else if rest.starts_with("expired") {
                    DepartureCause::SessionExpired
                } else {
                    DepartureCause::Removed(rest.strip_prefix("removed: ").unwrap_or(rest).to_string())
                };
                Some(Departure { at, member_id: member_id.to_string(), cause })
            }
            "kafka.group.static" => {
                let (_, change) = event.detail.split_once(": ")?;
                let (old, _) = change.split_once(" replaced by ")?;
                Some(Departure { at, member_id: old.to_string(), cause: DepartureCause::Replaced })
            }
            _ => None,
        }
    }
}

/// What the broker knows about one group (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct Facts {
    /// The group.
    pub group: String,
    /// Its generations, oldest first.
    pub generations: Vec<Generation>,
    /// Its commit attempts, in the order the coordinator answered them.
    pub commits: Vec<CommitRecord>,
    /// Every partition of the cluster: log start, high watermark.
    pub partitions: BTreeMap<TopicPartition, PartitionView>,
    /// Its members' departures, oldest first.
    pub departures: Vec<Departure>,
    /// When the coordinator handed out each member id (`kafka.group.id`); empty when unknown.
    pub handed_out: BTreeMap<String, Duration>,
    /// The offsets the coordinator stores for the group at the end, by partition (filled by
    /// [`Facts::of_pipeline`] for an exactly-once pipeline's input).
    pub committed: BTreeMap<TopicPartition, i64>,
    /// The records a `read_committed` consumer reads, by partition (filled by
    /// [`Facts::of_pipeline`] for an exactly-once pipeline's input and output topics).
    pub records: BTreeMap<TopicPartition, Vec<CommittedRecord>>,
}

/// A record a `read_committed` consumer reads, as Q10 sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommittedRecord {
    /// Its offset.
    pub offset: i64,
    /// The input record it names in its [`SOURCE_HEADER`] header, if any.
    pub source: Option<(TopicPartition, i64)>,
}

/// The header an exactly-once pipeline's output record names its input record in:
/// `topic/partition/offset`.
pub const SOURCE_HEADER: &str = "kafkasim.source";

/// The [`SOURCE_HEADER`] header naming input record `offset` of `tp`: `(name, value)`.
pub fn source_header(tp: &TopicPartition, offset: i64) -> (&'static str, String) {
    (SOURCE_HEADER, format!("{}/{}/{offset}", tp.topic, tp.partition))
}

fn parse_source(value: &[u8]) -> Option<(TopicPartition, i64)> {
    let text = std::str::from_utf8(value).ok()?;
    let (rest, offset) = text.rsplit_once('/')?;
    let (topic, partition) = rest.rsplit_once('/')?;
    Some((TopicPartition::new(topic, partition.parse().ok()?), offset.parse().ok()?))
}

impl Facts {
    /// A snapshot of `group` from `cluster`'s introspection.
    pub fn of(cluster: &Cluster, group: &str) -> Facts {
        let mut partitions = BTreeMap::new();
        for topic in cluster.topics() {
            for p in 0.. {
                let Some(view) = cluster.partition(&topic, p) else { break };
                partitions.insert(TopicPartition::new(&topic, p), view);
            }
        }
        Facts {
            group: group.to_string(),
            generations: cluster.generations(group),
            commits: cluster.commits().into_iter().filter(|c| c.group == group).collect(),
            partitions,
            departures: cluster.group_events(group).iter().filter_map(Departure::from_group_event).collect(),
            handed_out: cluster
                .group_events(group)
                .iter()
                .filter(|e| e.kind == "kafka.group.id")
                .filter_map(|e| Some((e.detail.split_once(' ')?.0.to_string(), e.at)))
                .collect(),
            committed: BTreeMap::new(),
            records: BTreeMap::new(),
        }
    }

    /// [`Facts::of`], and for an exactly-once group reading `pipeline`'s input and writing its
    /// output ([`Spec::exactly_once`](crate::models::Spec::exactly_once)) the input's committed
    /// offsets and the committed records of both topics.
    pub fn of_pipeline(cluster: &Cluster, group: &str, pipeline: Option<(&str, &str)>) -> Facts {
        let mut facts = Facts::of(cluster, group);
        let Some((input, output)) = pipeline else { return facts };
        for topic in [input, output] {
            for p in 0.. {
                if cluster.partition(topic, p).is_none() {
                    break;
                }
                let tp = TopicPartition::new(topic, p);
                if topic == input
                    && let Some((offset, _)) = cluster.committed(group, topic, p)
                {
                    facts.committed.insert(tp.clone(), offset);
                }
                let records = cluster
                    .committed_records(topic, p)
                    .into_iter()
                    .map(|r| CommittedRecord {
                        offset: r.offset,
                        source: r
                            .headers
                            .get(SOURCE_HEADER.as_bytes())
                            .and_then(|v| v.as_ref())
                            .and_then(|v| parse_source(v)),
                    })
                    .collect();
                facts.records.insert(tp, records);
            }
        }
        facts
    }

    /// The client id of a member id, from the generations it was in.
    pub fn client_of(&self, member_id: &str) -> Option<&str> {
        self.generations
            .iter()
            .flat_map(|g| &g.members)
            .find(|m| m.member_id == member_id)
            .map(|m| m.client_id.as_str())
    }

    /// Every member id a client id had, across the generations.
    pub fn member_ids_of(&self, client_id: &str) -> BTreeSet<&str> {
        self.generations
            .iter()
            .flat_map(|g| &g.members)
            .filter(|m| m.client_id == client_id)
            .map(|m| m.member_id.as_str())
            .collect()
    }

    /// Whether a client id was ever a static member (KIP-345: a `group.instance.id`).
    pub fn is_static(&self, client_id: &str) -> bool {
        self.generations
            .iter()
            .flat_map(|g| &g.members)
            .any(|m| m.client_id == client_id && m.group_instance_id.is_some())
    }

    /// The partitions the leader assigned to `member_id` in `generation`, decoded from the
    /// consumer protocol's assignment (`ConsumerProtocolAssignment`, versions 0–3; later
    /// versions are read as version 3, as Kafka's `ConsumerProtocol` does). `None` when the
    /// generation, its sync or the member is unknown, or the bytes are not a consumer protocol
    /// assignment (a custom protocol).
    pub fn assignment(&self, generation: i32, member_id: &str) -> Option<BTreeSet<TopicPartition>> {
        let g = self.generations.iter().rev().find(|g| g.generation == generation)?;
        decode_assignment(g.assignments.get(member_id)?)
    }

    /// The assignments of every member of `generation`, if every one decodes.
    pub fn assignments(&self, generation: i32) -> Option<BTreeMap<String, BTreeSet<TopicPartition>>> {
        let g = self.generations.iter().rev().find(|g| g.generation == generation)?;
        if g.assignments.is_empty() {
            return None;
        }
        g.assignments.iter().map(|(m, bytes)| Some((m.clone(), decode_assignment(bytes)?))).collect()
    }

    /// The last offset the coordinator stored for a partition (commits answered 0), if any.
    pub fn last_stored(&self, tp: &TopicPartition) -> Option<i64> {
        self.commits
            .iter()
            .rev()
            .find(|c| c.error == 0 && c.topic == tp.topic && c.partition == tp.partition)
            .map(|c| c.offset)
    }

    /// The partition's log start and high watermark, if known.
    pub fn log_range(&self, tp: &TopicPartition) -> Option<(i64, i64)> {
        self.partitions.get(tp).map(|p| (p.log_start, p.high_watermark))
    }
}

/// Decodes a `ConsumerProtocolAssignment` (a 2-byte version, then the topics with their
/// partitions and the user data), checking every length against the bytes left; `None` when the
/// bytes are not one (a custom protocol, a forged length, trailing bytes).
pub fn decode_assignment(bytes: &[u8]) -> Option<BTreeSet<TopicPartition>> {
    struct Reader<'a>(&'a [u8]);
    impl Reader<'_> {
        fn take(&mut self, n: usize) -> Option<&[u8]> {
            if self.0.len() < n {
                return None;
            }
            let (head, rest) = self.0.split_at(n);
            self.0 = rest;
            Some(head)
        }
        fn i16(&mut self) -> Option<i16> {
            Some(i16::from_be_bytes(self.take(2)?.try_into().ok()?))
        }
        fn i32(&mut self) -> Option<i32> {
            Some(i32::from_be_bytes(self.take(4)?.try_into().ok()?))
        }
    }
    let mut r = Reader(bytes);
    if r.i16()? < 0 {
        return None;
    }
    let mut out = BTreeSet::new();
    let topics = usize::try_from(r.i32()?).ok()?;
    for _ in 0..topics {
        let len = usize::try_from(r.i16()?).ok()?;
        let topic = std::str::from_utf8(r.take(len)?).ok()?.to_string();
        let partitions = usize::try_from(r.i32()?).ok()?;
        // Each partition is 4 bytes: a count beyond the bytes left is not an assignment.
        if partitions > r.0.len() / 4 {
            return None;
        }
        for _ in 0..partitions {
            out.insert(TopicPartition { topic: topic.clone(), partition: r.i32()? });
        }
    }
    // The user data: nullable bytes.
    let user = r.i32()?;
    if user > 0 {
        r.take(usize::try_from(user).ok()?)?;
    }
    r.0.is_empty().then_some(out)
}

/// Encodes a `ConsumerProtocolAssignment` at version 0 (what a leader sends in SyncGroup).
pub fn encode_assignment(partitions: &BTreeSet<TopicPartition>) -> bytes::Bytes {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in partitions {
        by_topic.entry(tp.topic.as_str()).or_default().push(tp.partition);
    }
    let mut out = Vec::new();
    out.extend_from_slice(&0i16.to_be_bytes());
    out.extend_from_slice(&(by_topic.len() as i32).to_be_bytes());
    for (topic, parts) in by_topic {
        out.extend_from_slice(&(topic.len() as i16).to_be_bytes());
        out.extend_from_slice(topic.as_bytes());
        out.extend_from_slice(&(parts.len() as i32).to_be_bytes());
        for p in parts {
            out.extend_from_slice(&p.to_be_bytes());
        }
    }
    out.extend_from_slice(&(-1i32).to_be_bytes());
    bytes::Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{ConsumerProtocolAssignment, TopicName, consumer_protocol_assignment};
    use kafka_protocol::protocol::{Encodable, StrBytes};

    #[test]
    fn assignments_decode_as_kafka_protocol_encodes_them_and_round_trip() {
        for version in 0..=3i16 {
            let msg = ConsumerProtocolAssignment::default().with_assigned_partitions(vec![
                consumer_protocol_assignment::TopicPartition::default()
                    .with_topic(TopicName(StrBytes::from_static_str("orders")))
                    .with_partitions(vec![0, 2]),
                consumer_protocol_assignment::TopicPartition::default()
                    .with_topic(TopicName(StrBytes::from_static_str("audit")))
                    .with_partitions(vec![1]),
            ]);
            let mut buf = bytes::BytesMut::new();
            buf.extend_from_slice(&version.to_be_bytes());
            msg.encode(&mut buf, version).expect("encodes");
            let want: BTreeSet<TopicPartition> =
                [TopicPartition::new("orders", 0), TopicPartition::new("orders", 2), TopicPartition::new("audit", 1)]
                    .into();
            assert_eq!(decode_assignment(&buf), Some(want.clone()), "version {version}");
            assert_eq!(decode_assignment(&encode_assignment(&want)), Some(want));
        }
    }

    #[test]
    fn custom_or_forged_assignment_bytes_are_not_assignments() {
        assert_eq!(decode_assignment(&[0, 1, 2]), None);
        // A forged partition count far beyond the bytes.
        let mut forged = vec![0, 0, 0, 0, 0, 1, 0, 1, b't'];
        forged.extend_from_slice(&i32::MAX.to_be_bytes());
        assert_eq!(decode_assignment(&forged), None);
    }

    #[test]
    fn departures_read_the_coordinator_events() {
        let ev = |kind: &str, detail: &str| GroupEvent {
            at: Duration::from_secs(1),
            kind: kind.into(),
            group: "g".into(),
            detail: detail.into(),
        };
        let left = Departure::from_group_event(&ev("kafka.group.member", "m-1 left")).expect("a departure");
        assert_eq!(left.cause, DepartureCause::Left);
        assert_eq!(left.member_id, "m-1");
        let expired = Departure::from_group_event(&ev("kafka.group.member", "m-2 expired: session timeout"));
        assert_eq!(expired.map(|d| d.cause), Some(DepartureCause::SessionExpired));
        let removed = Departure::from_group_event(&ev("kafka.group.member", "m-3 removed: did not rejoin in time"));
        assert_eq!(removed.map(|d| d.cause), Some(DepartureCause::Removed("did not rejoin in time".into())));
        let replaced = Departure::from_group_event(&ev("kafka.group.static", "i-1: m-4 replaced by m-5"));
        assert_eq!(replaced.map(|d| (d.member_id, d.cause)), Some(("m-4".into(), DepartureCause::Replaced)));
        assert_eq!(Departure::from_group_event(&ev("kafka.group.state", "generation 2: Empty")), None);
    }
}
