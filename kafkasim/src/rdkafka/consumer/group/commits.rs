//! Commits and committed offsets: OffsetCommit and OffsetFetch requests built from the group's
//! identity, and their answers per partition with librdkafka's error codes.
//!
//! librdkafka (`rd_kafka_handle_OffsetCommit`, `rd_kafka_cgrp_op_handle_OffsetCommit`):
//! per-partition errors are the caller's; `COORDINATOR_LOAD_IN_PROGRESS`,
//! `UNKNOWN_TOPIC_OR_PARTITION` and `REQUEST_TIMED_OUT` are retried, `NOT_COORDINATOR` /
//! `COORDINATOR_NOT_AVAILABLE` / a lost connection are retried once the coordinator is found
//! again; `REBALANCE_IN_PROGRESS`, `ILLEGAL_GENERATION`, `UNKNOWN_MEMBER_ID` are permanent
//! (the latter two also lose the assignment and rejoin, `ILLEGAL_GENERATION` only outside a
//! rebalance), `FENCED_INSTANCE_ID` is fatal.

use kafka_protocol::messages::{
    GroupId, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse, TopicName,
    offset_commit_request, offset_fetch_request,
};
use tokio::sync::oneshot;

use crate::rdkafka::error::{KafkaError, RDKafkaErrorCode as Code};
use crate::requests::string;

use super::{CommitReply, CommittedReply, Tp};

/// The OffsetCommit version sent: v7 carries `group.instance.id` (KIP-345), v8 is the flexible
/// one librdkafka 2.12 picks against kafkasim (it asks up to 9; kafkasim serves 2–8, Apache
/// Kafka 4.x 2–9).
pub(crate) const OFFSET_COMMIT_VERSION: i16 = 8;
/// The OffsetFetch version sent: v7 is the newest kafkasim serves (1–7; Apache Kafka 4.x 1–9)
/// and the last with one group per request; `require_stable` (v7) as librdkafka sets it for
/// `isolation.level=read_committed`, the default.
pub(crate) const OFFSET_FETCH_VERSION: i16 = 7;
/// How many times a retriable commit or fetch is sent again (librdkafka's request retries).
pub(crate) const RETRIES_MAX: u32 = 3;

/// A queued commit or committed-offsets lookup.
#[derive(Debug)]
pub(crate) enum Job {
    /// OffsetCommit of `(partition, next offset, metadata)`.
    Commit { offsets: Vec<(Tp, i64, Option<String>)>, reply: oneshot::Sender<CommitReply>, attempts: u32 },
    /// OffsetFetch of `partitions`.
    Committed { partitions: Vec<Tp>, reply: oneshot::Sender<CommittedReply>, attempts: u32 },
}

impl Job {
    /// Fails the job with `code` (the request could not be answered).
    pub(crate) fn fail(self, code: Code) {
        match self {
            Job::Commit { reply, .. } => drop(reply.send(Err(KafkaError::ConsumerCommit(code)))),
            Job::Committed { reply, .. } => drop(reply.send(Err(KafkaError::MetadataFetch(code)))),
        }
    }

    /// Counts an attempt; whether another is allowed.
    pub(crate) fn retry(&mut self) -> bool {
        let attempts = match self {
            Job::Commit { attempts, .. } | Job::Committed { attempts, .. } => attempts,
        };
        *attempts += 1;
        *attempts <= RETRIES_MAX
    }
}

/// Whether an OffsetCommit/OffsetFetch partition error is sent again after `retry.backoff.ms`.
pub(crate) fn retriable(code: i16) -> bool {
    matches!(code, 3 | 7 | 14 | 15 | 16)
}

/// OffsetCommit of `offsets` as member `member_id` (with `instance_id`) of `group` at
/// `generation`.
pub(crate) fn commit_request(
    group: &str,
    generation: i32,
    member_id: &str,
    instance_id: Option<&str>,
    offsets: &[(Tp, i64, Option<String>)],
) -> OffsetCommitRequest {
    let mut topics: Vec<offset_commit_request::OffsetCommitRequestTopic> = Vec::new();
    for ((topic, partition), offset, metadata) in offsets {
        let p = offset_commit_request::OffsetCommitRequestPartition::default()
            .with_partition_index(*partition)
            .with_committed_offset(*offset)
            .with_committed_leader_epoch(-1)
            .with_committed_metadata(Some(string(metadata.as_deref().unwrap_or(""))));
        match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
            Some(t) => t.partitions.push(p),
            None => topics.push(
                offset_commit_request::OffsetCommitRequestTopic::default()
                    .with_name(TopicName(string(topic)))
                    .with_partitions(vec![p]),
            ),
        }
    }
    OffsetCommitRequest::default()
        .with_group_id(GroupId(string(group)))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(string(member_id))
        .with_group_instance_id(instance_id.map(string))
        .with_topics(topics)
}

/// Each committed partition's error code (0: committed); one the response lacks is
/// `UNKNOWN_TOPIC_OR_PARTITION`.
pub(crate) fn commit_codes(offsets: &[(Tp, i64, Option<String>)], r: &OffsetCommitResponse) -> Vec<(Tp, i16)> {
    offsets
        .iter()
        .map(|((topic, partition), _, _)| {
            let code = r
                .topics
                .iter()
                .filter(|t| t.name.0.as_str() == topic)
                .flat_map(|t| t.partitions.iter())
                .find(|p| p.partition_index == *partition)
                .map_or(3, |p| p.error_code);
            ((topic.clone(), *partition), code)
        })
        .collect()
}

/// A partition's committed offset (`None`: none) and metadata.
pub(crate) type Committed = (Tp, Option<i64>, Option<String>);

/// OffsetFetch of `partitions` for `group`.
pub(crate) fn fetch_request(group: &str, partitions: &[Tp]) -> OffsetFetchRequest {
    let mut topics: Vec<offset_fetch_request::OffsetFetchRequestTopic> = Vec::new();
    for (topic, partition) in partitions {
        match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
            Some(t) => t.partition_indexes.push(*partition),
            None => topics.push(
                offset_fetch_request::OffsetFetchRequestTopic::default()
                    .with_name(TopicName(string(topic)))
                    .with_partition_indexes(vec![*partition]),
            ),
        }
    }
    OffsetFetchRequest::default()
        .with_group_id(GroupId(string(group)))
        .with_topics(Some(topics))
        .with_require_stable(true)
}

/// The committed offsets of `partitions` (offset -1: none), or the first error code: the
/// response's, else a partition's.
pub(crate) fn fetch_results(partitions: &[Tp], r: &OffsetFetchResponse) -> Result<Vec<Committed>, i16> {
    if r.error_code != 0 {
        return Err(r.error_code);
    }
    let mut out = Vec::with_capacity(partitions.len());
    for (topic, partition) in partitions {
        let p = r
            .topics
            .iter()
            .filter(|t| t.name.0.as_str() == topic)
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.partition_index == *partition);
        match p {
            Some(p) if p.error_code != 0 => return Err(p.error_code),
            Some(p) => out.push((
                (topic.clone(), *partition),
                (p.committed_offset >= 0).then_some(p.committed_offset),
                p.metadata.as_ref().map(|m| m.to_string()),
            )),
            None => out.push(((topic.clone(), *partition), None, None)),
        }
    }
    Ok(out)
}
