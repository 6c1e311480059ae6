//! OffsetCommit and OffsetFetch.

use std::collections::BTreeMap;

use kafka_protocol::ResponseError as E;
use kafka_protocol::messages::*;
use tokio::time::Instant;

use super::coordinator::{Coordinator, Env};
use super::state::{Committed, Group, GroupState, OFFSET_METADATA_BYTES_MAX, check_member, s};
use crate::faults::Part;
use crate::introspect::CommitRecord;

impl Coordinator {
    /// OffsetCommit.
    pub(crate) fn commit(
        &mut self,
        env: &dyn Env,
        broker: i32,
        version: i16,
        req: &OffsetCommitRequest,
    ) -> OffsetCommitResponse {
        let group_id = req.group_id.0.to_string();
        let member_id = req.member_id.to_string();
        let instance = req.group_instance_id.as_ref().map(|i| i.to_string());
        let generation = if version >= 1 { req.generation_id_or_member_epoch } else { -1 };
        // Apache Kafka's KafkaApis answers partitions it does not know with UNKNOWN_TOPIC_OR_PARTITION
        // before the group coordinator sees the request, and skips the coordinator when none is
        // known (measured against Kafka 4.2 by fidelity's differential suite).
        let any_known = req
            .topics
            .iter()
            .any(|t| t.partitions.iter().any(|p| env.has_partition(t.name.0.as_str(), p.partition_index)));
        let top = if any_known {
            self.commit_check(env, broker, &group_id, &member_id, instance.as_deref(), generation).err()
        } else {
            None
        };
        let at = env.elapsed();
        let mut topics = Vec::new();
        let mut records = Vec::new();
        for t in &req.topics {
            let topic = t.name.0.to_string();
            let mut partitions = Vec::new();
            for p in &t.partitions {
                let metadata = p.committed_metadata.as_ref().map(|m| m.to_string());
                let code = self.commit_one(env, broker, &group_id, &topic, p, top, metadata.as_deref());
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
            && let Some(m) = self.groups.get_mut(&group_id).and_then(|g| g.members.get_mut(&member_id))
        {
            m.deadline = Instant::now() + m.session_timeout;
        }
        record_commits(env, records);
        OffsetCommitResponse::default().with_topics(topics)
    }

    /// One partition of an OffsetCommit: its error code, or 0 once stored.
    #[allow(clippy::too_many_arguments)]
    fn commit_one(
        &mut self,
        env: &dyn Env,
        broker: i32,
        group_id: &str,
        topic: &str,
        p: &offset_commit_request::OffsetCommitRequestPartition,
        top: Option<E>,
        metadata: Option<&str>,
    ) -> i16 {
        let part = Part { topic: Some(topic), partition: Some(p.partition_index), group: Some(group_id) };
        if !env.has_partition(topic, p.partition_index) {
            E::UnknownTopicOrPartition.code()
        } else if let Some(e) = top {
            e.code()
        } else if let Some(code) = env.fault_error(ApiKey::OffsetCommit, broker, part) {
            code
        } else if metadata.as_ref().is_some_and(|m| m.len() > OFFSET_METADATA_BYTES_MAX) {
            E::OffsetMetadataTooLarge.code()
        } else {
            let group = self.groups.entry(group_id.to_string()).or_insert_with(Group::new);
            group.offsets.insert(
                (topic.to_string(), p.partition_index),
                Committed {
                    offset: p.committed_offset,
                    leader_epoch: p.committed_leader_epoch,
                    metadata: metadata.unwrap_or_default().to_string(),
                },
            );
            0
        }
    }

    fn commit_check(
        &self,
        env: &dyn Env,
        broker: i32,
        group_id: &str,
        member_id: &str,
        instance: Option<&str>,
        generation: i32,
    ) -> Result<(), E> {
        if group_id.is_empty() {
            return Err(E::InvalidGroupId);
        }
        if env.coordinator_of(group_id) != broker {
            return Err(E::NotCoordinator);
        }
        if let Some(code) =
            env.fault_error(ApiKey::OffsetCommit, broker, Part { group: Some(group_id), ..Part::default() })
        {
            return Err(E::try_from_code(code).unwrap_or(E::UnknownServerError));
        }
        let Some(group) = self.groups.get(group_id) else {
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
        &self,
        env: &dyn Env,
        broker: i32,
        version: i16,
        req: &OffsetFetchRequest,
    ) -> OffsetFetchResponse {
        let group_id = req.group_id.0.to_string();
        let mut top = 0;
        if env.coordinator_of(&group_id) != broker {
            top = E::NotCoordinator.code();
        } else if let Some(code) =
            env.fault_error(ApiKey::OffsetFetch, broker, Part { group: Some(&group_id), ..Part::default() })
        {
            top = code;
        }
        let group = self.groups.get(&group_id);
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
}

/// Records offset commit attempts into the history and the journal, in order.
fn record_commits(env: &dyn Env, records: Vec<CommitRecord>) {
    for r in &records {
        env.record(
            "kafka.commit",
            &r.group,
            &format!(
                "{} gen {} {}-{} offset {} metadata {:?}: {}",
                r.member_id, r.generation, r.topic, r.partition, r.offset, r.metadata, r.error
            ),
        );
    }
    env.journal_commits(records);
}
