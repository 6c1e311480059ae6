//! Helpers for raw-protocol scenarios: a `kafkasim::Client` over a real TCP connection, request
//! builders at versions both kafkasim and Apache Kafka 4.x serve, and waits that hide Kafka's
//! asynchronous readiness (a new topic's leader, the offsets topic) without recording it.

use std::time::Duration;

use bytes::Bytes;
use fidelity::runner::Ctx;
use kafkasim::Client;
use kafkasim::client::{decode_records, record_batch};
use kafkasim::kafka_protocol::ResponseError;
use kafkasim::kafka_protocol::messages::*;
use kafkasim::kafka_protocol::protocol::StrBytes;
use tokio::net::TcpStream;

pub type Conn = Client<TcpStream>;
pub type R<T = ()> = Result<T, String>;

/// Versions used for raw requests: within kafkasim's served ranges and Kafka 4.x's.
pub const PRODUCE_V: i16 = 9;
pub const FETCH_V: i16 = 12;
pub const LIST_OFFSETS_V: i16 = 7;
pub const METADATA_V: i16 = 12;
pub const COMMIT_V: i16 = 8;
pub const OFFSET_FETCH_V: i16 = 7;
pub const FIND_COORDINATOR_V: i16 = 4;
pub const JOIN_V: i16 = 9;
pub const SYNC_V: i16 = 5;
pub const HEARTBEAT_V: i16 = 4;
pub const LEAVE_V: i16 = 5;
pub const DESCRIBE_V: i16 = 5;
pub const LIST_GROUPS_V: i16 = 4;
pub const CREATE_TOPICS_V: i16 = 7;
pub const DELETE_TOPICS_V: i16 = 6;
pub const INIT_PRODUCER_ID_V: i16 = 4;

/// Kafka's default `group.min.session.timeout.ms` is 6 s: the shortest session a group accepts.
pub const SESSION_MS: i32 = 6000;
/// How long a wait for the real broker's asynchronous readiness may take.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);

pub fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

/// An error code by its Kafka name: `NONE`, `OffsetOutOfRange`, …
pub fn code(c: i16) -> String {
    match ResponseError::try_from_code(c) {
        None => "NONE".into(),
        Some(e) => e.to_string(),
    }
}

/// A connection to the first bootstrap server.
pub async fn connect(ctx: &Ctx, client_id: &str) -> R<Conn> {
    let addr = ctx.address.split(',').next().unwrap_or_default().to_string();
    let stream = TcpStream::connect(&addr).await.map_err(|e| format!("connecting to {addr}: {e}"))?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    Ok(Client::new(stream, client_id))
}

/// Sends and maps transport errors to a string.
pub async fn send<Q: kafkasim::kafka_protocol::protocol::Request>(c: &mut Conn, q: Q, v: i16) -> R<Q::Response> {
    c.send(q, v).await.map_err(|e| format!("{}: {e}", std::any::type_name::<Q>().rsplit("::").next().unwrap_or("")))
}

/// What the scenarios' record timestamps count from: an hour before the suite started, in
/// milliseconds since the epoch, the same for both servers. A scenario's timestamp `1000` is
/// written as `ts_base() + 1000`, so its records are recent and a counterpart that checks
/// retention often (kafka-local.sh's broker: every second) keeps them for the default 7 days;
/// [`list_offsets`] translates both ways, so notes show the scenario's own numbers.
pub fn ts_base() -> i64 {
    static BASE: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *BASE.get_or_init(|| {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
        i64::try_from(now).unwrap_or(0) - 3_600_000
    })
}

/// Records `(key, value, timestamp)` values as one batch: `values` with timestamps from `ts`
/// (after [`ts_base`]).
pub fn batch(values: &[&str], ts: i64, producer: Option<(i64, i16, i32)>) -> R<Bytes> {
    let records: Vec<kafkasim::client::RecordInput<'_>> =
        values.iter().enumerate().map(|(i, v)| (None, Some(v.as_bytes()), ts_base() + ts + i as i64)).collect();
    record_batch(&records, producer).map_err(|e| e.to_string())
}

pub fn create_topics_request(
    topic: &str,
    partitions: i32,
    replication: i16,
    validate_only: bool,
) -> CreateTopicsRequest {
    CreateTopicsRequest::default().with_timeout_ms(30_000).with_validate_only(validate_only).with_topics(vec![
        create_topics_request::CreatableTopic::default()
            .with_name(TopicName(s(topic)))
            .with_num_partitions(partitions)
            .with_replication_factor(replication),
    ])
}

/// Creates a topic; returns the error code name.
pub async fn create_topic(c: &mut Conn, topic: &str, partitions: i32) -> R<String> {
    let r = send(c, create_topics_request(topic, partitions, 1, false), CREATE_TOPICS_V).await?;
    Ok(code(r.topics[0].error_code))
}

/// Creates a topic and waits until every partition has a leader that answers ListOffsets (Kafka
/// creates topics asynchronously; kafkasim at once). Nothing is recorded.
pub async fn create_ready_topic(c: &mut Conn, topic: &str, partitions: i32) -> R {
    let created = create_topic(c, topic, partitions).await?;
    if created != "NONE" {
        return Err(format!("creating {topic}: {created}"));
    }
    wait_topic_ready(c, topic, partitions).await
}

pub async fn wait_topic_ready(c: &mut Conn, topic: &str, partitions: i32) -> R {
    let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
    loop {
        let m = send(c, metadata_request(&[topic], false), METADATA_V).await?;
        let t = &m.topics[0];
        let led = t.error_code == 0
            && t.partitions.len() == partitions as usize
            && t.partitions.iter().all(|p| p.error_code == 0 && p.leader_id.0 >= 0);
        if led {
            let mut ready = true;
            for p in 0..partitions {
                if list_offsets(c, topic, p, -1).await?.0 != "NONE" {
                    ready = false;
                }
            }
            if ready {
                return Ok(());
            }
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!("topic {topic} not ready within {READY_TIMEOUT:?}"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub fn metadata_request(topics: &[&str], auto_create: bool) -> MetadataRequest {
    MetadataRequest::default().with_allow_auto_topic_creation(auto_create).with_topics(Some(
        topics
            .iter()
            .map(|t| metadata_request::MetadataRequestTopic::default().with_name(Some(TopicName(s(t)))))
            .collect(),
    ))
}

pub use kafkasim::requests::produce as produce_request;

/// Produces one batch; `(code, base offset)`.
pub async fn produce(c: &mut Conn, topic: &str, partition: i32, records: Bytes, acks: i16) -> R<(String, i64)> {
    let r = send(c, produce_request(topic, partition, records, acks), PRODUCE_V).await?;
    let p = &r.responses[0].partition_responses[0];
    Ok((code(p.error_code), p.base_offset))
}

/// What one fetch of one partition gave.
#[derive(Debug)]
pub struct Fetched {
    pub code: String,
    pub high_watermark: i64,
    pub log_start: i64,
    /// `(offset, value)`.
    pub records: Vec<(i64, String)>,
}

impl Fetched {
    pub fn render(&self) -> String {
        let records: Vec<String> = self.records.iter().map(|(o, v)| format!("{o}:{v}")).collect();
        format!("{} hw={} log_start={} records=[{}]", self.code, self.high_watermark, self.log_start, records.join(" "))
    }
}

pub async fn fetch(c: &mut Conn, topic: &str, partition: i32, offset: i64, max_wait_ms: u64) -> R<Fetched> {
    let q = kafkasim::requests::fetch(topic, partition, offset, Duration::from_millis(max_wait_ms));
    let r = send(c, q, FETCH_V).await?;
    let p = &r.responses[0].partitions[0];
    let records = match &p.records {
        Some(b) if !b.is_empty() => decode_records(b).map_err(|e| e.to_string())?,
        _ => Vec::new(),
    };
    Ok(Fetched {
        code: code(p.error_code),
        high_watermark: p.high_watermark,
        log_start: p.log_start_offset,
        records: records
            .into_iter()
            .map(|(o, _, v)| (o, v.map(|v| String::from_utf8_lossy(&v).to_string()).unwrap_or_default()))
            .collect(),
    })
}

/// ListOffsets of one partition at `timestamp` (-2 earliest, -1 latest, -3 max timestamp; a
/// time counts from [`ts_base`]); `(code, offset, timestamp)`, a record's timestamp from
/// [`ts_base`].
pub async fn list_offsets(c: &mut Conn, topic: &str, partition: i32, timestamp: i64) -> R<(String, i64, i64)> {
    let at = if timestamp >= 0 { ts_base() + timestamp } else { timestamp };
    let r = send(c, kafkasim::requests::list_offsets(topic, partition, at), LIST_OFFSETS_V).await?;
    let p = &r.topics[0].partitions[0];
    Ok((code(p.error_code), p.offset, if p.timestamp >= 0 { p.timestamp - ts_base() } else { p.timestamp }))
}

/// InitProducerId without a transactional id: `(code, producer id, epoch)`. Retried (bounded)
/// while a fresh Kafka broker is still getting its first block of producer ids from the
/// controller (`COORDINATOR_LOAD_IN_PROGRESS`), as clients do; nothing is recorded for the retries.
pub async fn init_producer_id(c: &mut Conn) -> R<(String, i64, i16)> {
    let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
    loop {
        let q = InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let r = send(c, q, INIT_PRODUCER_ID_V).await?;
        let retriable = [ResponseError::CoordinatorLoadInProgress, ResponseError::CoordinatorNotAvailable]
            .iter()
            .any(|e| e.code() == r.error_code);
        if !retriable || tokio::time::Instant::now() > deadline {
            return Ok((code(r.error_code), r.producer_id.0, r.producer_epoch));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// FindCoordinator (v4, batched) for `key` of `key_type` (0 group, 1 transaction), retried for
/// up to `patience` while the answer is COORDINATOR_NOT_AVAILABLE (Kafka creating its internal
/// topic); `(code, node id)`.
pub async fn find_coordinator(c: &mut Conn, key: &str, key_type: i8, patience: Duration) -> R<(String, i32)> {
    let deadline = tokio::time::Instant::now() + patience;
    loop {
        let q = FindCoordinatorRequest::default().with_key_type(key_type).with_coordinator_keys(vec![s(key)]);
        let r = send(c, q, FIND_COORDINATOR_V).await?;
        let k = &r.coordinators[0];
        if k.error_code != ResponseError::CoordinatorNotAvailable.code() || tokio::time::Instant::now() > deadline {
            return Ok((code(k.error_code), k.node_id.0));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the group's coordinator is found and has loaded its partition of the offsets
/// topic (Kafka answers NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS meanwhile, and clients
/// retry); nothing is recorded.
pub async fn coordinator_ready(c: &mut Conn, group: &str) -> R {
    let (found, _) = find_coordinator(c, group, 0, READY_TIMEOUT).await?;
    if found != "NONE" {
        return Err(format!("no coordinator for {group}: {found}"));
    }
    let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
    loop {
        let r = send(c, DescribeGroupsRequest::default().with_groups(vec![GroupId(s(group))]), DESCRIBE_V).await?;
        if r.groups[0].error_code == 0 {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!("the coordinator of {group} answers {}", code(r.groups[0].error_code)));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// ApiVersions v3 as a client sends it, naming its software.
pub fn api_versions() -> ApiVersionsRequest {
    ApiVersionsRequest::default().with_client_software_name(s("fidelity")).with_client_software_version(s("0.1.0"))
}

pub fn join_request(group: &str, member_id: &str, instance: Option<&str>, protocol_type: &str) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_session_timeout_ms(SESSION_MS)
        .with_rebalance_timeout_ms(SESSION_MS)
        .with_member_id(s(member_id))
        .with_group_instance_id(instance.map(s))
        .with_protocol_type(s(protocol_type))
        .with_protocols(vec![
            join_group_request::JoinGroupRequestProtocol::default().with_name(s("range")).with_metadata(subscription()),
        ])
}

/// A JoinGroup answer, normalized: `code gen=… leader=self|other|none member=alias members=n`.
pub fn render_join(ctx: &Ctx, r: &JoinGroupResponse) -> String {
    let leader = if r.leader.is_empty() {
        "none"
    } else if r.leader == r.member_id {
        "self"
    } else {
        "other"
    };
    format!(
        "{} gen={} protocol={} leader={leader} member={} members={}",
        code(r.error_code),
        r.generation_id,
        r.protocol_name.as_ref().map(|p| p.to_string()).unwrap_or_else(|| "null".into()),
        ctx.alias("member", r.member_id.as_str()),
        r.members.len()
    )
}

/// Joins with `member_id`; when the broker answers MEMBER_ID_REQUIRED, records it and joins again
/// with the id it gave. Returns the final answer (recorded under `label`).
pub async fn join(ctx: &Ctx, c: &mut Conn, label: &str, q: JoinGroupRequest) -> R<JoinGroupResponse> {
    let mut r = send(c, q.clone(), JOIN_V).await?;
    if r.error_code == ResponseError::MemberIdRequired.code() {
        ctx.note(format!("{label}: first join"), render_join(ctx, &r));
        r = send(c, q.with_member_id(r.member_id.clone()), JOIN_V).await?;
    }
    ctx.note(label, render_join(ctx, &r));
    Ok(r)
}

/// The topic members subscribe to in raw group scenarios (it need not exist).
pub const SUBSCRIBED: &str = "orders";

/// A `ConsumerProtocolSubscription` (v0) to [`SUBSCRIBED`]: Kafka 4's group coordinator parses
/// the metadata of `consumer` groups, and a join with bytes that do not parse never completes
/// (the coordinator's timer fails, logged as an allocation error).
pub fn subscription() -> Bytes {
    use kafkasim::kafka_protocol::protocol::Encodable;
    let mut buf = bytes::BytesMut::new();
    buf.extend_from_slice(&0i16.to_be_bytes());
    ConsumerProtocolSubscription::default()
        .with_topics(vec![s(SUBSCRIBED)])
        .encode(&mut buf, 0)
        .expect("a v0 subscription encodes");
    buf.freeze()
}

/// A `ConsumerProtocolAssignment` (v0) of `partitions` of [`SUBSCRIBED`].
pub fn assignment(partitions: &[i32]) -> Bytes {
    use kafkasim::kafka_protocol::protocol::Encodable;
    let mut buf = bytes::BytesMut::new();
    buf.extend_from_slice(&0i16.to_be_bytes());
    ConsumerProtocolAssignment::default()
        .with_assigned_partitions(vec![
            consumer_protocol_assignment::TopicPartition::default()
                .with_topic(TopicName(s(SUBSCRIBED)))
                .with_partitions(partitions.to_vec()),
        ])
        .encode(&mut buf, 0)
        .expect("a v0 assignment encodes");
    buf.freeze()
}

/// An assignment's partitions of [`SUBSCRIBED`], or how it failed to decode.
pub fn render_assignment(bytes: &[u8]) -> String {
    use kafkasim::kafka_protocol::protocol::Decodable;
    if bytes.is_empty() {
        return "empty".into();
    }
    let mut buf = Bytes::copy_from_slice(bytes);
    if buf.len() < 2 {
        return format!("{bytes:?}");
    }
    let version = i16::from_be_bytes([buf[0], buf[1]]);
    let _ = bytes::Buf::get_i16(&mut buf);
    match ConsumerProtocolAssignment::decode(&mut buf, version.clamp(0, 3)) {
        Ok(a) => a.assigned_partitions.iter().map(|t| format!("{:?}", t.partitions)).collect::<Vec<_>>().join(" "),
        Err(_) => format!("{bytes:?}"),
    }
}

pub fn sync_request(group: &str, generation: i32, member_id: &str, assignments: &[(&str, &[i32])]) -> SyncGroupRequest {
    SyncGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id(generation)
        .with_member_id(s(member_id))
        .with_protocol_type(Some(s("consumer")))
        .with_protocol_name(Some(s("range")))
        .with_assignments(
            assignments
                .iter()
                .map(|(m, a)| {
                    sync_group_request::SyncGroupRequestAssignment::default()
                        .with_member_id(s(m))
                        .with_assignment(assignment(a))
                })
                .collect(),
        )
}

/// SyncGroup; `code assignment=…`.
pub async fn sync(c: &mut Conn, q: SyncGroupRequest) -> R<String> {
    let r = send(c, q, SYNC_V).await?;
    Ok(format!("{} assignment={}", code(r.error_code), render_assignment(&r.assignment)))
}

pub async fn heartbeat(
    c: &mut Conn,
    group: &str,
    generation: i32,
    member_id: &str,
    instance: Option<&str>,
) -> R<String> {
    let q = kafkasim::requests::heartbeat(group, generation, member_id).with_group_instance_id(instance.map(s));
    Ok(code(send(c, q, HEARTBEAT_V).await?.error_code))
}

/// [`kafkasim::requests::offset_commit`], with the member's `group.instance.id` when static.
#[allow(clippy::too_many_arguments)]
pub fn commit_request(
    group: &str,
    generation: i32,
    member_id: &str,
    instance: Option<&str>,
    topic: &str,
    partition: i32,
    offset: i64,
    metadata: Option<&str>,
) -> OffsetCommitRequest {
    kafkasim::requests::offset_commit(group, generation, member_id, topic, partition, offset, metadata)
        .with_group_instance_id(instance.map(s))
}

/// OffsetCommit of one partition; the partition's code.
pub async fn commit(c: &mut Conn, q: OffsetCommitRequest) -> R<String> {
    let r = send(c, q, COMMIT_V).await?;
    Ok(code(r.topics[0].partitions[0].error_code))
}

/// OffsetFetch of one partition: `code offset=… metadata=…` (the group-level code first).
pub async fn offset_fetch(c: &mut Conn, group: &str, topic: &str, partition: i32) -> R<String> {
    let r = send(c, kafkasim::requests::offset_fetch(group, topic, &[partition]), OFFSET_FETCH_V).await?;
    let p = &r.topics[0].partitions[0];
    Ok(format!(
        "{} / {} offset={} metadata={:?}",
        code(r.error_code),
        code(p.error_code),
        p.committed_offset,
        p.metadata.as_ref().map(|m| m.to_string())
    ))
}

/// LeaveGroup v5 of one member: `top-level code / member code`.
pub async fn leave(c: &mut Conn, group: &str, member_id: &str, instance: Option<&str>) -> R<String> {
    let q = LeaveGroupRequest::default().with_group_id(GroupId(s(group))).with_members(vec![
        leave_group_request::MemberIdentity::default()
            .with_member_id(s(member_id))
            .with_group_instance_id(instance.map(s)),
    ]);
    let r = send(c, q, LEAVE_V).await?;
    let member = r.members.first().map(|m| code(m.error_code)).unwrap_or_else(|| "no member".into());
    Ok(format!("{} / {member}", code(r.error_code)))
}

/// DescribeGroups of one group: `code state protocol_type protocol members=[alias…]`.
pub async fn describe(ctx: &Ctx, c: &mut Conn, group: &str) -> R<String> {
    let r = send(c, DescribeGroupsRequest::default().with_groups(vec![GroupId(s(group))]), DESCRIBE_V).await?;
    let g = &r.groups[0];
    let mut members: Vec<String> = g.members.iter().map(|m| ctx.alias("member", m.member_id.as_str())).collect();
    members.sort();
    Ok(format!(
        "{} state={} protocol_type={:?} protocol={:?} members=[{}]",
        code(g.error_code),
        g.group_state,
        g.protocol_type.as_str(),
        g.protocol_data.as_str(),
        members.join(" ")
    ))
}

/// The group's state alone.
pub async fn group_state(c: &mut Conn, group: &str) -> R<String> {
    let r = send(c, DescribeGroupsRequest::default().with_groups(vec![GroupId(s(group))]), DESCRIBE_V).await?;
    Ok(r.groups[0].group_state.to_string())
}

/// Waits (bounded) until the group is in `state`.
pub async fn wait_state(c: &mut Conn, group: &str, state: &str) -> R {
    let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
    loop {
        let now = group_state(c, group).await?;
        if now == state {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!("group {group} stayed {now}, never {state}"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A complete join + sync of one member that leads alone: returns `(member id, generation)`.
pub async fn join_alone(ctx: &Ctx, c: &mut Conn, group: &str, instance: Option<&str>, label: &str) -> R<(String, i32)> {
    let j = join(ctx, c, &format!("{label} join"), join_request(group, "", instance, "consumer")).await?;
    if j.error_code != 0 {
        return Err(format!("{label} join: {}", code(j.error_code)));
    }
    let member = j.member_id.to_string();
    let synced = sync(c, sync_request(group, j.generation_id, &member, &[(&member, &[0, 1])])).await?;
    ctx.note(format!("{label} sync"), synced);
    Ok((member, j.generation_id))
}
