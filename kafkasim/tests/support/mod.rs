//! Helpers shared by the protocol tests: in-memory connections to a cluster and short request
//! builders.

#![allow(dead_code)]

use bytes::Bytes;
use kafkasim::kafka_protocol::messages::*;
use kafkasim::kafka_protocol::protocol::StrBytes;
use kafkasim::{Client, Cluster};
// Not every test binary uses every builder.
#[allow(unused_imports)]
pub use kafkasim::requests::{
    heartbeat as heartbeat_request, list_offsets as list_offsets_request, offset_commit as commit_request,
    offset_fetch as offset_fetch_request, produce as produce_request,
};
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

pub fn fetch_request(topic: &str, partition: i32, offset: i64, max_wait_ms: u64) -> FetchRequest {
    kafkasim::requests::fetch(topic, partition, offset, std::time::Duration::from_millis(max_wait_ms))
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

pub fn commit_code(resp: &OffsetCommitResponse) -> i16 {
    resp.topics[0].partitions[0].error_code
}

/// A simulation's correctness failure with oracle `kafka`.
pub fn fail(e: impl std::fmt::Display) -> sim::Failure {
    sim::Failure::correctness("kafka", e.to_string())
}

/// `Ok` when `got == want`, else a [`fail`] naming `what`.
pub fn expect<T: PartialEq + std::fmt::Debug>(what: &str, got: T, want: T) -> Result<(), sim::Failure> {
    if got == want { Ok(()) } else { Err(fail(format!("{what}: got {got:?}, want {want:?}"))) }
}

/// IncrementalAlterConfigs SET of `configs` on `topic`; fails unless the answer is NONE.
pub async fn alter_topic<S>(c: &mut Client<S>, topic: &str, configs: &[(&str, &str)]) -> Result<(), sim::Failure>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let alter = IncrementalAlterConfigsRequest::default().with_resources(vec![
        incremental_alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s(topic))
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        incremental_alter_configs_request::AlterableConfig::default()
                            .with_name(s(k))
                            .with_value(Some(s(v)))
                    })
                    .collect(),
            ),
    ]);
    let r = c.send(alter, 1).await.map_err(fail)?;
    expect("alter", r.responses.iter().map(|x| x.error_code).collect::<Vec<_>>(), vec![0])
}
