//! `kafkasim::rdkafka`'s consumer against brokers that misbehave: a scripted fake broker on
//! loopback (a tokio `TcpListener` answering what each test says) and kafkasim faults inside a
//! simulation. What librdkafka 2.12 does is the expectation: no panic, no hang, the error it
//! surfaces (`rdkafka_msgset_reader.c`, `rdkafka_assignment.c`, `rdkafka_cgrp.c`), and the
//! consumer going on with what is good.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafkasim::client::record_batch;
use kafkasim::kafka_protocol::messages::*;
use kafkasim::kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafkasim::rdkafka::Message;
use kafkasim::rdkafka::config::ClientConfig;
use kafkasim::rdkafka::consumer::{Consumer, StreamConsumer};
use kafkasim::rdkafka::error::{KafkaError, RDKafkaErrorCode as Code};
use kafkasim::rdkafka::{Offset, TopicPartitionList};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

/// A request as the fake broker sees it.
struct Req {
    key: ApiKey,
    version: i16,
    body: Bytes,
}

/// A response frame for `correlation`.
fn frame<R: Encodable>(key: ApiKey, version: i16, correlation: i32, r: &R) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    ResponseHeader::default()
        .with_correlation_id(correlation)
        .encode(&mut buf, key.response_header_version(version))
        .expect("header encodes");
    r.encode(&mut buf, version).expect("response encodes");
    let n = (buf.len() - 4) as i32;
    buf[0..4].copy_from_slice(&n.to_be_bytes());
    buf.freeze()
}

type Script = Arc<dyn Fn(&Req, i32, u16) -> Option<Bytes> + Send + Sync>;

/// A fake broker on loopback: every request is answered with what `script` returns for it (its
/// correlation id and the broker's port given), `None` closes the connection.
async fn fake_broker(script: Script) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else { return };
            let script = Arc::clone(&script);
            tokio::spawn(async move {
                loop {
                    let Ok(n) = sock.read_i32().await else { return };
                    let mut body = vec![0; n as usize];
                    if sock.read_exact(&mut body).await.is_err() {
                        return;
                    }
                    let mut body = Bytes::from(body);
                    let (key, version) = (body.get_i16(), body.get_i16());
                    let key = ApiKey::try_from(key).expect("known api");
                    let mut all = Bytes::from([&key_version(key, version)[..], &body[..]].concat());
                    let header = RequestHeader::decode(&mut all, key.request_header_version(version)).expect("header");
                    let req = Req { key, version, body: all };
                    match script(&req, header.correlation_id, port) {
                        Some(answer) => {
                            if sock.write_all(&answer).await.is_err() {
                                return;
                            }
                        }
                        None => return,
                    }
                }
            });
        }
    });
    port
}

fn key_version(key: ApiKey, version: i16) -> [u8; 4] {
    let k = (key as i16).to_be_bytes();
    let v = version.to_be_bytes();
    [k[0], k[1], v[0], v[1]]
}

/// Metadata naming this broker (id 0) the leader of `topic`'s one partition.
fn metadata(req: &Req, correlation: i32, port: u16, topic: &str) -> Bytes {
    let r = MetadataResponse::default()
        .with_brokers(vec![
            metadata_response::MetadataResponseBroker::default()
                .with_node_id(BrokerId(0))
                .with_host(s("127.0.0.1"))
                .with_port(i32::from(port)),
        ])
        .with_topics(vec![
            metadata_response::MetadataResponseTopic::default().with_name(Some(TopicName(s(topic)))).with_partitions(
                vec![metadata_response::MetadataResponsePartition::default().with_leader_id(BrokerId(0))],
            ),
        ]);
    frame(req.key, req.version, correlation, &r)
}

fn list_offsets(req: &Req, correlation: i32, topic: &str, offset: i64) -> Bytes {
    let r = ListOffsetsResponse::default().with_topics(vec![
        list_offsets_response::ListOffsetsTopicResponse::default()
            .with_name(TopicName(s(topic)))
            .with_partitions(vec![list_offsets_response::ListOffsetsPartitionResponse::default().with_offset(offset)]),
    ]);
    frame(req.key, req.version, correlation, &r)
}

fn fetch_offset(req: &Req) -> i64 {
    let mut body = req.body.clone();
    let f = FetchRequest::decode(&mut body, req.version).expect("fetch decodes");
    f.topics[0].partitions[0].fetch_offset
}

fn fetch(req: &Req, correlation: i32, topic: &str, records: Bytes) -> Bytes {
    let r = FetchResponse::default().with_responses(vec![
        fetch_response::FetchableTopicResponse::default().with_topic(TopicName(s(topic))).with_partitions(vec![
            fetch_response::PartitionData::default().with_high_watermark(10).with_records(Some(records)),
        ]),
    ]);
    frame(req.key, req.version, correlation, &r)
}

/// A batch of `n` records starting at `base` (values "v<offset>").
fn batch(base: i64, n: i64) -> Bytes {
    let values: Vec<String> = (base..base + n).map(|o| format!("v{o}")).collect();
    let records: Vec<_> = values.iter().map(|v| (None, Some(v.as_bytes()), 0)).collect();
    let mut b = BytesMut::from(&record_batch(&records, None).expect("encodes")[..]);
    b[0..8].copy_from_slice(&base.to_be_bytes());
    b.freeze()
}

/// `batch` with a byte of its records flipped: the CRC no longer matches.
fn corrupt(b: Bytes) -> Bytes {
    let mut b = BytesMut::from(&b[..]);
    let last = b.len() - 1;
    b[last] ^= 0xff;
    b.freeze()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime")
}

fn assigned_consumer(port: u16, topic: &str) -> StreamConsumer {
    let c: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", format!("127.0.0.1:{port}"))
        .set("retry.backoff.ms", "10")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning).expect("offset");
    c.assign(&tpl).expect("assign");
    c
}

/// What `recv()` gives next, within 10 s (a hang is a failure, not a wait).
async fn next(c: &StreamConsumer) -> Result<(i64, String), KafkaError> {
    let m = tokio::time::timeout(Duration::from_secs(10), c.recv()).await.expect("recv() hung")?;
    Ok((m.offset(), String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned()))
}

/// A record batch whose CRC does not match (librdkafka with `check.crcs`, which kafka-protocol
/// always does): the consumer gets `BadMessage` (`RD_KAFKA_RESP_ERR__BAD_MSG`, "MessageSet at
/// offset 0 failed CRC32C check"); the good batch after the bad one in the same response is
/// delivered (the bad one skipped, as librdkafka skips it); a bad batch that ends the response
/// is fetched again (after `retry.backoff.ms`), reported again, and read once it comes intact.
#[test]
fn a_corrupt_record_batch_is_reported_bad_message_and_the_consumer_goes_on() {
    runtime().block_on(async {
        let fetches = Arc::new(AtomicUsize::new(0));
        let f = Arc::clone(&fetches);
        let port = fake_broker(Arc::new(move |req, corr, port| {
            Some(match req.key {
                ApiKey::Metadata => metadata(req, corr, port, "t"),
                ApiKey::ListOffsets => list_offsets(req, corr, "t", 0),
                ApiKey::Fetch => match fetch_offset(req) {
                    // Batch 0..2 corrupt, batch 2..4 good, in one response.
                    0 => fetch(req, corr, "t", [corrupt(batch(0, 2)), batch(2, 2)].concat().into()),
                    // At 4, corrupt twice, then intact.
                    4 if f.fetch_add(1, Ordering::SeqCst) < 2 => fetch(req, corr, "t", corrupt(batch(4, 1))),
                    4 => fetch(req, corr, "t", batch(4, 1)),
                    _ => fetch(req, corr, "t", Bytes::new()),
                },
                _ => return None,
            })
        }))
        .await;
        let c = assigned_consumer(port, "t");
        assert_eq!(next(&c).await, Err(KafkaError::MessageConsumption(Code::BadMessage)));
        assert_eq!(next(&c).await, Ok((2, "v2".into())));
        assert_eq!(next(&c).await, Ok((3, "v3".into())));
        // At 4 the batch is the last of the response: fetched again, reported again, then read.
        assert_eq!(next(&c).await, Err(KafkaError::MessageConsumption(Code::BadMessage)));
        assert_eq!(next(&c).await, Err(KafkaError::MessageConsumption(Code::BadMessage)));
        assert_eq!(next(&c).await, Ok((4, "v4".into())));
    });
}

#[path = "rdkafka_shaped_group/kit.rs"]
mod kit;

/// An OffsetFetch answered with an error no retry helps (GROUP_AUTHORIZATION_FAILED): the
/// assigned partition cannot start, and `recv()` says why — librdkafka's
/// `rd_kafka_assignment_apply_offsets` / `_handle_OffsetFetch` `rd_kafka_consumer_err` ("Failed
/// to fetch committed offset for group .."), `MessageConsumption(code)` from rdkafka — rather than
/// retrying in silence; once the coordinator answers, the partition is read from where the
/// group says.
async fn offset_fetch_refused(ctx: sim::Ctx) -> Result<(), sim::Failure> {
    use kafkasim::kafka_protocol::ResponseError;
    use kafkasim::{Cluster, Fault, FaultAction};
    use kit::{check, fail, in_node, member, produce};
    let cluster = Cluster::builder().brokers(1).initial_rebalance_delay(Duration::ZERO).build();
    let bootstrap = cluster.serve_sim(&ctx)?;
    cluster.create_topic("o", 1).map_err(fail)?;
    let c2 = cluster.clone();
    in_node(&ctx, move |_node| {
        let (cluster, bootstrap) = (c2.clone(), bootstrap.clone());
        async move {
            produce(&bootstrap, "o", 0, 2).await?;
            let fault = Fault::new(ApiKey::OffsetFetch, FaultAction::Error(ResponseError::GroupAuthorizationFailed));
            let fault = cluster.install(fault.group("g"));
            let a = member(&bootstrap, "a", &kit::Log::default(), &[])?;
            a.subscribe(&["o"]).map_err(fail)?;
            let r = tokio::time::timeout(Duration::from_secs(20), a.recv()).await.map(|r| r.map(|m| m.offset()));
            let want = Err(KafkaError::MessageConsumption(Code::GroupAuthorizationFailed));
            check(r == Ok(want.clone()), format!("recv() reports the refused lookup: {r:?}"))?;
            drop(fault);
            let mut r = tokio::time::timeout(Duration::from_secs(20), a.recv()).await.map(|r| r.map(|m| m.offset()));
            // Errors already queued (one per retry at most) come first.
            while r == Ok(want.clone()) {
                r = tokio::time::timeout(Duration::from_secs(20), a.recv()).await.map(|r| r.map(|m| m.offset()));
            }
            check(r == Ok(Ok(0)), format!("read from the start once the lookup is answered: {r:?}"))?;
            Ok(())
        }
    })
    .await
}

#[test]
fn an_offset_fetch_refused_for_good_is_reported_and_the_partition_starts_once_answered() {
    sim::Simulation::new("rdkbrk_offsetfetch").seeds(0..3).repeat(2).run(offset_fetch_refused).assert_passed();
}

/// A valid ConsumerProtocolAssignment (version 0) of `topic`'s partition 0.
fn assignment(topic: &str) -> Bytes {
    let a = ConsumerProtocolAssignment::default().with_assigned_partitions(vec![
        consumer_protocol_assignment::TopicPartition::default()
            .with_topic(TopicName(s(topic)))
            .with_partitions(vec![0]),
    ]);
    let mut buf = BytesMut::new();
    buf.put_i16(0);
    a.encode(&mut buf, 0).expect("assignment encodes");
    buf.freeze()
}

/// A SyncGroup answer whose assignment bytes do not decode: librdkafka's
/// `rd_kafka_cgrp_handle_SyncGroup_memberstate` fails the sync ("synchronization failed:
/// rejoining", `err_parse`) and joins again; it does not take "nothing assigned" for an answer.
/// Before the fix the member sat in the group with an empty assignment, heartbeating.
#[test]
fn a_sync_group_assignment_that_does_not_decode_makes_the_member_rejoin() {
    runtime().block_on(async {
        let (joins, syncs) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (j, sy) = (Arc::clone(&joins), Arc::clone(&syncs));
        let port = fake_broker(Arc::new(move |req, corr, port| {
            let (key, v) = (req.key, req.version);
            Some(match key {
                ApiKey::Metadata => metadata(req, corr, port, "t"),
                ApiKey::FindCoordinator => {
                    let r = FindCoordinatorResponse::default()
                        .with_node_id(BrokerId(0))
                        .with_host(s("127.0.0.1"))
                        .with_port(i32::from(port));
                    frame(key, v, corr, &r)
                }
                ApiKey::JoinGroup => {
                    let generation = j.fetch_add(1, Ordering::SeqCst) as i32 + 1;
                    let r = JoinGroupResponse::default()
                        .with_generation_id(generation)
                        .with_protocol_name(Some(s("range")))
                        .with_leader(s("someone-else"))
                        .with_member_id(s("me"));
                    frame(key, v, corr, &r)
                }
                ApiKey::SyncGroup => {
                    // First a garbage assignment (one byte: not even a version), then a good one.
                    let bytes = if sy.fetch_add(1, Ordering::SeqCst) == 0 {
                        Bytes::from_static(&[0x01])
                    } else {
                        assignment("t")
                    };
                    frame(key, v, corr, &SyncGroupResponse::default().with_assignment(bytes))
                }
                ApiKey::Heartbeat => frame(key, v, corr, &HeartbeatResponse::default()),
                ApiKey::OffsetFetch => {
                    let r = OffsetFetchResponse::default().with_topics(vec![
                        offset_fetch_response::OffsetFetchResponseTopic::default()
                            .with_name(TopicName(s("t")))
                            .with_partitions(vec![
                                offset_fetch_response::OffsetFetchResponsePartition::default().with_committed_offset(1),
                            ]),
                    ]);
                    frame(key, v, corr, &r)
                }
                ApiKey::Fetch => match fetch_offset(req) {
                    1 => fetch(req, corr, "t", batch(1, 1)),
                    _ => fetch(req, corr, "t", Bytes::new()),
                },
                ApiKey::LeaveGroup => frame(key, v, corr, &LeaveGroupResponse::default()),
                _ => return None,
            })
        }))
        .await;
        let c: StreamConsumer = ClientConfig::new()
            .set("bootstrap.servers", format!("127.0.0.1:{port}"))
            .set("group.id", "g")
            .set("retry.backoff.ms", "10")
            .create()
            .expect("consumer");
        c.subscribe(&["t"]).expect("subscribe");
        assert_eq!(next(&c).await, Ok((1, "v1".into())));
        assert!(joins.load(Ordering::SeqCst) >= 2, "joined again after the bad assignment");
    });
}

/// `TopicPartitionList::from_topic_map` does not carry `HashMap`'s per-process iteration order
/// into what the consumer sends (a commit or assignment built from a map): the list comes out
/// sorted, the same in every process, so a run that builds one replays.
#[test]
fn a_list_from_a_topic_map_has_the_same_order_in_every_process() {
    let mut map = std::collections::HashMap::new();
    for p in 0..32 {
        map.insert((format!("t{}", p % 4), p), Offset::Offset(i64::from(p)));
    }
    let tpl = TopicPartitionList::from_topic_map(&map).expect("valid offsets");
    let got: Vec<(String, i32)> = tpl.elements().iter().map(|e| (e.topic().to_string(), e.partition())).collect();
    let mut sorted = got.clone();
    sorted.sort();
    assert_eq!(got, sorted);
    assert_eq!(got.len(), 32);
}
