//! Helpers shared by the protocol tests: in-memory connections to a cluster and short request
//! builders.

#![allow(dead_code)]

use bytes::Bytes;
use kafkasim::kafka_protocol::messages::*;
use kafkasim::kafka_protocol::protocol::StrBytes;
use kafkasim::{Client, Cluster};
use tokio::io::DuplexStream;

/// The in-memory pipe's buffer, in bytes.
pub const PIPE_BYTES: usize = 1 << 20;

pub fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

/// A client connected to broker `broker` of `cluster` through an in-memory pipe.
pub fn connect(cluster: &Cluster, broker: i32, client_id: &str) -> Client<DuplexStream> {
    let (client, server) = tokio::io::duplex(PIPE_BYTES);
    let c = cluster.clone();
    tokio::spawn(async move { c.serve_connection(broker, server).await });
    Client::new(client, client_id)
}

/// ApiVersions v3+ as a client sends it: Kafka refuses one that does not name its software.
pub fn api_versions() -> ApiVersionsRequest {
    ApiVersionsRequest::default().with_client_software_name(s("kafkasim-tests")).with_client_software_version(s("0.1"))
}

pub fn list_offsets_request(topic: &str, partition: i32, timestamp: i64) -> ListOffsetsRequest {
    ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_topics(vec![
        list_offsets_request::ListOffsetsTopic::default().with_name(TopicName(s(topic))).with_partitions(vec![
            list_offsets_request::ListOffsetsPartition::default()
                .with_partition_index(partition)
                .with_timestamp(timestamp),
        ]),
    ])
}

pub fn produce_request(topic: &str, partition: i32, records: Bytes, acks: i16) -> ProduceRequest {
    ProduceRequest::default().with_acks(acks).with_timeout_ms(5000).with_topic_data(vec![
        produce_request::TopicProduceData::default().with_name(TopicName(s(topic))).with_partition_data(vec![
            produce_request::PartitionProduceData::default().with_index(partition).with_records(Some(records)),
        ]),
    ])
}

pub fn fetch_request(topic: &str, partition: i32, offset: i64, max_wait_ms: i32) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![fetch_request::FetchTopic::default().with_topic(TopicName(s(topic))).with_partitions(vec![
            fetch_request::FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1 << 20),
        ])])
}

pub fn join_request(group: &str, member_id: &str, instance: Option<&str>, session_ms: i32) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_session_timeout_ms(session_ms)
        .with_rebalance_timeout_ms(session_ms)
        .with_member_id(s(member_id))
        .with_group_instance_id(instance.map(s))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![
            join_group_request::JoinGroupRequestProtocol::default()
                .with_name(s("range"))
                .with_metadata(Bytes::from_static(b"subscription")),
        ])
}

pub fn sync_request(group: &str, generation: i32, member_id: &str, assignments: &[(&str, &[u8])]) -> SyncGroupRequest {
    SyncGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id(generation)
        .with_member_id(s(member_id))
        .with_assignments(
            assignments
                .iter()
                .map(|(m, a)| {
                    sync_group_request::SyncGroupRequestAssignment::default()
                        .with_member_id(s(m))
                        .with_assignment(Bytes::copy_from_slice(a))
                })
                .collect(),
        )
}

pub fn heartbeat_request(group: &str, generation: i32, member_id: &str) -> HeartbeatRequest {
    HeartbeatRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id(generation)
        .with_member_id(s(member_id))
}

pub fn commit_request(
    group: &str,
    generation: i32,
    member_id: &str,
    topic: &str,
    partition: i32,
    offset: i64,
    metadata: Option<&str>,
) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(s(member_id))
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default().with_name(TopicName(s(topic))).with_partitions(
                vec![
                    offset_commit_request::OffsetCommitRequestPartition::default()
                        .with_partition_index(partition)
                        .with_committed_offset(offset)
                        .with_committed_metadata(metadata.map(s)),
                ],
            ),
        ])
}

pub fn commit_code(resp: &OffsetCommitResponse) -> i16 {
    resp.topics[0].partitions[0].error_code
}

pub fn offset_fetch_request(group: &str, topic: &str, partitions: &[i32]) -> OffsetFetchRequest {
    OffsetFetchRequest::default().with_group_id(GroupId(s(group))).with_topics(Some(vec![
        offset_fetch_request::OffsetFetchRequestTopic::default()
            .with_name(TopicName(s(topic)))
            .with_partition_indexes(partitions.to_vec()),
    ]))
}
