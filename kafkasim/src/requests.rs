//! Requests as a client sends them, one partition each: the shapes a protocol-level client
//! ([`crate::Client`]) needs to produce, fetch, look up offsets and take part in a consumer group
//! without a Kafka client library — in a simulation (until an in-simulation client exists) and in
//! tests. Each builds a `kafka-protocol` message with the fields Kafka reads at every version;
//! add others with the message's `with_*` methods (e.g. `.with_group_instance_id(..)` for static
//! membership) and send it at the version you mean with [`crate::Client::send`].
//!
//! Field meanings are Kafka's protocol guide (<https://kafka.apache.org/protocol>).

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{
    BrokerId, FetchRequest, GroupId, HeartbeatRequest, ListOffsetsRequest, OffsetCommitRequest, OffsetFetchRequest,
    ProduceRequest, TopicName, fetch_request, list_offsets_request, offset_commit_request, offset_fetch_request,
    produce_request,
};
use kafka_protocol::protocol::StrBytes;

/// Bytes a [`fetch`] asks for, in all and per partition (1 MiB, the Java consumer's
/// `max.partition.fetch.bytes`).
pub const FETCH_BYTES_MAX: i32 = 1 << 20;
/// How long a [`produce`] lets the leader wait for replicas with `acks=all` (30 s, the clients'
/// `request.timeout.ms`).
pub const PRODUCE_TIMEOUT: Duration = Duration::from_secs(30);

/// A `kafka-protocol` string.
pub fn string(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

fn millis(d: Duration) -> i32 {
    i32::try_from(d.as_millis()).unwrap_or(i32::MAX)
}

/// Produce of one record batch (`records`: a v2 batch, e.g. from
/// [`crate::client::record_batch`]) to `topic`-`partition` with `acks` (0, 1 or -1 for all).
pub fn produce(topic: &str, partition: i32, records: Bytes, acks: i16) -> ProduceRequest {
    ProduceRequest::default().with_acks(acks).with_timeout_ms(millis(PRODUCE_TIMEOUT)).with_topic_data(vec![
        produce_request::TopicProduceData::default().with_name(TopicName(string(topic))).with_partition_data(vec![
            produce_request::PartitionProduceData::default().with_index(partition).with_records(Some(records)),
        ]),
    ])
}

/// Fetch of `topic`-`partition` from `offset` as a consumer (replica id -1, no fetch session),
/// answered once at least one byte is there or after `max_wait`, up to [`FETCH_BYTES_MAX`].
pub fn fetch(topic: &str, partition: i32, offset: i64, max_wait: Duration) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(millis(max_wait))
        .with_min_bytes(1)
        .with_max_bytes(FETCH_BYTES_MAX)
        .with_session_epoch(-1)
        .with_topics(vec![fetch_request::FetchTopic::default().with_topic(TopicName(string(topic))).with_partitions(
            vec![
                fetch_request::FetchPartition::default()
                    .with_partition(partition)
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(FETCH_BYTES_MAX),
            ],
        )])
}

/// ListOffsets of `topic`-`partition` at `timestamp`: milliseconds since the epoch, or -2
/// (earliest), -1 (latest), -3 (the record with the largest timestamp, v7+).
pub fn list_offsets(topic: &str, partition: i32, timestamp: i64) -> ListOffsetsRequest {
    ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_topics(vec![
        list_offsets_request::ListOffsetsTopic::default().with_name(TopicName(string(topic))).with_partitions(vec![
            list_offsets_request::ListOffsetsPartition::default()
                .with_partition_index(partition)
                .with_current_leader_epoch(-1)
                .with_timestamp(timestamp),
        ]),
    ])
}

/// Heartbeat of `member_id` in `group` at `generation`.
pub fn heartbeat(group: &str, generation: i32, member_id: &str) -> HeartbeatRequest {
    HeartbeatRequest::default()
        .with_group_id(GroupId(string(group)))
        .with_generation_id(generation)
        .with_member_id(string(member_id))
}

/// OffsetCommit of `offset` (the next record to consume) and `metadata` for `topic`-`partition`
/// by `member_id` of `group` at `generation` (-1 and an empty member id: a commit from outside
/// the group, as a standalone consumer makes).
pub fn offset_commit(
    group: &str,
    generation: i32,
    member_id: &str,
    topic: &str,
    partition: i32,
    offset: i64,
    metadata: Option<&str>,
) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(string(group)))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(string(member_id))
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(TopicName(string(topic)))
                .with_partitions(vec![
                    offset_commit_request::OffsetCommitRequestPartition::default()
                        .with_partition_index(partition)
                        .with_committed_offset(offset)
                        .with_committed_leader_epoch(-1)
                        .with_committed_metadata(metadata.map(string)),
                ]),
        ])
}

/// OffsetFetch of `partitions` of `topic` for `group` (v0–v7 fields).
pub fn offset_fetch(group: &str, topic: &str, partitions: &[i32]) -> OffsetFetchRequest {
    OffsetFetchRequest::default().with_group_id(GroupId(string(group))).with_topics(Some(vec![
        offset_fetch_request::OffsetFetchRequestTopic::default()
            .with_name(TopicName(string(topic)))
            .with_partition_indexes(partitions.to_vec()),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_carry_what_kafka_reads() {
        let p = produce("t", 2, Bytes::from_static(b"batch"), -1);
        assert_eq!((p.acks, p.timeout_ms), (-1, 30_000));
        assert_eq!(p.topic_data[0].partition_data[0].index, 2);
        let f = fetch("t", 1, 7, Duration::from_secs(u64::MAX / 2));
        assert_eq!((f.max_wait_ms, f.topics[0].partitions[0].fetch_offset), (i32::MAX, 7), "a huge wait saturates");
        let c = offset_commit("g", 3, "m", "t", 0, 42, Some("meta"));
        let cp = &c.topics[0].partitions[0];
        assert_eq!((c.generation_id_or_member_epoch, cp.committed_offset), (3, 42));
        assert_eq!(cp.committed_metadata.as_ref().map(|m| m.as_str()), Some("meta"));
        assert_eq!(list_offsets("t", 0, -2).topics[0].partitions[0].timestamp, -2);
        assert_eq!(offset_fetch("g", "t", &[0, 1]).topics.expect("topics")[0].partition_indexes, vec![0, 1]);
        assert_eq!(heartbeat("g", 5, "m").generation_id, 5);
    }
}
