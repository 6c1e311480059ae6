//! Raw-protocol scenarios about topics, produce, fetch and offsets.

use std::time::Duration;

use bytes::{BufMut, BytesMut};
use fidelity::runner::Ctx;
use kafkasim::kafka_protocol::messages::*;

use crate::support::*;

async fn produce_then_fetch(ctx: &Ctx, acks: i16) -> R {
    let t = ctx.name("t");
    let mut c = connect(ctx, "producer").await?;
    create_ready_topic(&mut c, &t, 1).await?;
    for values in [&["a", "b", "c"][..], &["d", "e"][..]] {
        let records = batch(values, 1000, None)?;
        if acks == 0 {
            c.send_only(produce_request(&t, 0, records, 0), PRODUCE_V).await.map_err(|e| e.to_string())?;
            ctx.note(format!("produce {values:?} acks=0"), "no response");
        } else {
            let (code, base) = produce(&mut c, &t, 0, records, acks).await?;
            ctx.note(format!("produce {values:?} acks={acks}"), format!("{code} base_offset={base}"));
        }
    }
    if acks == 0 {
        // Nothing acknowledges: wait (bounded) until the records are readable.
        let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
        while list_offsets(&mut c, &t, 0, -1).await?.1 < 5 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    ctx.note("fetch from 0", fetch(&mut c, &t, 0, 0, 0).await?.render());
    Ok(())
}

pub async fn produce_acks_0_is_unanswered_and_stored(ctx: &Ctx) -> R {
    produce_then_fetch(ctx, 0).await
}

pub async fn produce_acks_1_assigns_consecutive_offsets(ctx: &Ctx) -> R {
    produce_then_fetch(ctx, 1).await
}

pub async fn produce_acks_all_assigns_consecutive_offsets(ctx: &Ctx) -> R {
    produce_then_fetch(ctx, -1).await
}

pub async fn fetch_from_mid_batch_returns_the_whole_batch(ctx: &Ctx) -> R {
    let t = ctx.name("t");
    let mut c = connect(ctx, "c").await?;
    create_ready_topic(&mut c, &t, 1).await?;
    produce(&mut c, &t, 0, batch(&["a", "b", "c"], 1000, None)?, 1).await?;
    produce(&mut c, &t, 0, batch(&["d", "e"], 2000, None)?, 1).await?;
    for offset in [1, 2, 4] {
        ctx.note(format!("fetch from {offset}"), fetch(&mut c, &t, 0, offset, 0).await?.render());
    }
    Ok(())
}

pub async fn fetch_at_and_past_the_high_watermark(ctx: &Ctx) -> R {
    let t = ctx.name("t");
    let mut c = connect(ctx, "c").await?;
    create_ready_topic(&mut c, &t, 1).await?;
    produce(&mut c, &t, 0, batch(&["a", "b", "c"], 1000, None)?, 1).await?;
    for offset in [3, 4, 100, -1] {
        ctx.note(format!("fetch from {offset}"), fetch(&mut c, &t, 0, offset, 0).await?.render());
    }
    Ok(())
}

pub async fn unknown_topic_and_partition(ctx: &Ctx) -> R {
    let t = ctx.name("t");
    let missing = ctx.name("missing");
    let mut c = connect(ctx, "c").await?;
    create_ready_topic(&mut c, &t, 1).await?;
    ctx.note("fetch unknown topic", fetch(&mut c, &missing, 0, 0, 0).await?.code);
    ctx.note("fetch partition 5 of 1", fetch(&mut c, &t, 5, 0, 0).await?.code);
    let (produced, base) = produce(&mut c, &t, 5, batch(&["x"], 1000, None)?, 1).await?;
    ctx.note("produce to partition 5 of 1", format!("{produced} base_offset={base}"));
    ctx.note("list offsets of partition 5", format!("{:?}", list_offsets(&mut c, &t, 5, -1).await?));
    let m = send(&mut c, metadata_request(&[&missing], false), METADATA_V).await?;
    ctx.note("metadata without auto-creation", code(m.topics[0].error_code));
    Ok(())
}

pub async fn list_offsets_earliest_latest_and_by_timestamp(ctx: &Ctx) -> R {
    let t = ctx.name("t");
    let mut c = connect(ctx, "c").await?;
    create_ready_topic(&mut c, &t, 1).await?;
    ctx.note("latest of an empty partition", format!("{:?}", list_offsets(&mut c, &t, 0, -1).await?));
    ctx.note("max timestamp of an empty partition", format!("{:?}", list_offsets(&mut c, &t, 0, -3).await?));
    for (values, ts) in [(&["a"][..], 1000), (&["b"][..], 2000), (&["c"][..], 3000), (&["d", "e"][..], 4000)] {
        produce(&mut c, &t, 0, batch(values, ts, None)?, 1).await?;
    }
    for ts in [-2, -1, -3, 500, 1500, 2000, 3000, 4001, 9999] {
        let (code, offset, timestamp) = list_offsets(&mut c, &t, 0, ts).await?;
        // Earliest and latest answer with timestamp -1 on both; by-timestamp answers carry the record's.
        ctx.note(format!("list offsets at {ts}"), format!("{code} offset={offset} timestamp={timestamp}"));
    }
    Ok(())
}

async fn idempotent_topic(ctx: &Ctx) -> R<(Conn, String, i64, i16)> {
    let t = ctx.name("t");
    let mut c = connect(ctx, "idempotent").await?;
    create_ready_topic(&mut c, &t, 1).await?;
    let (code, pid, epoch) = init_producer_id(&mut c).await?;
    ctx.note("init producer id", format!("{code} producer={} epoch={epoch}", ctx.alias("producer", pid.to_string())));
    Ok((c, t, pid, epoch))
}

async fn produce_seq(ctx: &Ctx, c: &mut Conn, t: &str, label: &str, values: &[&str], producer: (i64, i16, i32)) -> R {
    let (code, base) = produce(c, t, 0, batch(values, 1000, Some(producer))?, -1).await?;
    ctx.note(label, format!("{code} base_offset={base}"));
    Ok(())
}

pub async fn idempotent_duplicate_batch_gets_the_original_offset(ctx: &Ctx) -> R {
    let (mut c, t, pid, epoch) = idempotent_topic(ctx).await?;
    produce_seq(ctx, &mut c, &t, "seq 0..2", &["a", "b", "c"], (pid, epoch, 0)).await?;
    produce_seq(ctx, &mut c, &t, "seq 3", &["d"], (pid, epoch, 3)).await?;
    produce_seq(ctx, &mut c, &t, "seq 0..2 again (a retry)", &["a", "b", "c"], (pid, epoch, 0)).await?;
    produce_seq(ctx, &mut c, &t, "seq 3 again (a retry)", &["d"], (pid, epoch, 3)).await?;
    ctx.note("fetch from 0", fetch(&mut c, &t, 0, 0, 0).await?.render());
    Ok(())
}

pub async fn idempotent_sequence_gap_is_out_of_order(ctx: &Ctx) -> R {
    let (mut c, t, pid, epoch) = idempotent_topic(ctx).await?;
    produce_seq(ctx, &mut c, &t, "seq 0..1", &["a", "b"], (pid, epoch, 0)).await?;
    produce_seq(ctx, &mut c, &t, "seq 5 (a gap)", &["x"], (pid, epoch, 5)).await?;
    produce_seq(ctx, &mut c, &t, "seq 1 (overlaps the last batch)", &["b"], (pid, epoch, 1)).await?;
    produce_seq(ctx, &mut c, &t, "seq 2", &["c"], (pid, epoch, 2)).await?;
    ctx.note("fetch from 0", fetch(&mut c, &t, 0, 0, 0).await?.render());
    Ok(())
}

pub async fn idempotent_first_sequence_need_not_be_zero(ctx: &Ctx) -> R {
    let (mut c, t, pid, epoch) = idempotent_topic(ctx).await?;
    produce_seq(ctx, &mut c, &t, "first batch at seq 7", &["a"], (pid, epoch, 7)).await?;
    produce_seq(ctx, &mut c, &t, "seq 8", &["b"], (pid, epoch, 8)).await?;
    produce_seq(ctx, &mut c, &t, "seq 0", &["c"], (pid, epoch, 0)).await?;
    Ok(())
}

pub async fn idempotent_epochs_fence_older_ones(ctx: &Ctx) -> R {
    let (mut c, t, pid, epoch) = idempotent_topic(ctx).await?;
    produce_seq(ctx, &mut c, &t, "epoch e seq 0", &["a"], (pid, epoch, 0)).await?;
    produce_seq(ctx, &mut c, &t, "epoch e+1 seq 5", &["b"], (pid, epoch + 1, 5)).await?;
    produce_seq(ctx, &mut c, &t, "epoch e+1 seq 0", &["c"], (pid, epoch + 1, 0)).await?;
    produce_seq(ctx, &mut c, &t, "epoch e seq 1 (stale epoch)", &["d"], (pid, epoch, 1)).await?;
    ctx.note("fetch from 0", fetch(&mut c, &t, 0, 0, 0).await?.render());
    Ok(())
}

pub async fn idempotent_producer_id_never_allocated(ctx: &Ctx) -> R {
    let (mut c, t, _, _) = idempotent_topic(ctx).await?;
    produce_seq(ctx, &mut c, &t, "unallocated producer id seq 0", &["a"], (987_654_321, 0, 0)).await?;
    produce_seq(ctx, &mut c, &t, "unallocated producer id seq 1", &["b"], (987_654_321, 0, 1)).await?;
    Ok(())
}

pub async fn create_topics_errors(ctx: &Ctx) -> R {
    let t = ctx.name("t");
    let mut c = connect(ctx, "admin").await?;
    let cases: [(&str, String, i32, i16, bool); 6] = [
        ("validate only", ctx.name("validated"), 2, 1, true),
        ("create with 3 partitions", t.clone(), 3, 1, false),
        ("create again", t.clone(), 3, 1, false),
        ("zero partitions", ctx.name("zero"), 0, 1, false),
        ("replication factor 3 on one broker", ctx.name("rf3"), 1, 3, false),
        ("an invalid name", format!("{}!*", ctx.name("bad")), 1, 1, false),
    ];
    for (label, name, partitions, replication, validate) in cases {
        let r = send(&mut c, create_topics_request(&name, partitions, replication, validate), CREATE_TOPICS_V).await?;
        let topic = &r.topics[0];
        ctx.note(label, format!("{} partitions={}", code(topic.error_code), topic.num_partitions));
    }
    let m = send(&mut c, metadata_request(&[&ctx.name("validated")], false), METADATA_V).await?;
    ctx.note("metadata of the validated-only topic", code(m.topics[0].error_code));
    wait_topic_ready(&mut c, &t, 3).await?;
    let m = send(&mut c, metadata_request(&[&t], false), METADATA_V).await?;
    ctx.note(
        "metadata of the created topic",
        format!("{} partitions={}", code(m.topics[0].error_code), m.topics[0].partitions.len()),
    );
    Ok(())
}

fn delete_request(topic: &str) -> DeleteTopicsRequest {
    DeleteTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![delete_topics_request::DeleteTopicState::default().with_name(Some(TopicName(s(topic))))])
}

pub async fn delete_topics_then_recreate(ctx: &Ctx) -> R {
    let t = ctx.name("t");
    let mut c = connect(ctx, "admin").await?;
    create_ready_topic(&mut c, &t, 2).await?;
    produce(&mut c, &t, 0, batch(&["a", "b"], 1000, None)?, 1).await?;
    let r = send(&mut c, delete_request(&t), DELETE_TOPICS_V).await?;
    ctx.note("delete", code(r.responses[0].error_code));
    let r = send(&mut c, delete_request(&t), DELETE_TOPICS_V).await?;
    ctx.note("delete again", code(r.responses[0].error_code));
    let r = send(&mut c, delete_request(&ctx.name("never")), DELETE_TOPICS_V).await?;
    ctx.note("delete a topic that never existed", code(r.responses[0].error_code));
    // Kafka's brokers learn of the deletion from the controller a moment later.
    let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
    let mut after = send(&mut c, metadata_request(&[&t], false), METADATA_V).await?.topics[0].error_code;
    while after == 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        after = send(&mut c, metadata_request(&[&t], false), METADATA_V).await?.topics[0].error_code;
    }
    ctx.note("metadata after delete", code(after));
    // Kafka removes the log asynchronously; the name is free once the controller has deleted it.
    let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
    let mut created = create_topic(&mut c, &t, 1).await?;
    while created == "TopicAlreadyExists" && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        created = create_topic(&mut c, &t, 1).await?;
    }
    ctx.note("recreate with 1 partition", created);
    wait_topic_ready(&mut c, &t, 1).await?;
    ctx.note("fetch the recreated topic", fetch(&mut c, &t, 0, 0, 0).await?.render());
    Ok(())
}

pub async fn metadata_auto_creates_a_topic(ctx: &Ctx) -> R {
    let t = ctx.name("auto");
    let mut c = connect(ctx, "c").await?;
    let m = send(&mut c, metadata_request(&[&t], true), METADATA_V).await?;
    ctx.note("first metadata with auto-creation", code(m.topics[0].error_code));
    let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
    loop {
        let m = send(&mut c, metadata_request(&[&t], true), METADATA_V).await?;
        let topic = &m.topics[0];
        if topic.error_code == 0 || tokio::time::Instant::now() > deadline {
            ctx.note(
                "metadata once created",
                format!("{} partitions={}", code(topic.error_code), topic.partitions.len()),
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    wait_topic_ready(&mut c, &t, 1).await?;
    let (code, base) = produce(&mut c, &t, 0, batch(&["a"], 1000, None)?, 1).await?;
    ctx.note("produce", format!("{code} base_offset={base}"));
    Ok(())
}

pub async fn metadata_describes_the_cluster(ctx: &Ctx) -> R {
    let t = ctx.name("t");
    let mut c = connect(ctx, "c").await?;
    create_ready_topic(&mut c, &t, 3).await?;
    let m = send(&mut c, metadata_request(&[&t], false), METADATA_V).await?;
    let brokers: Vec<String> = m
        .brokers
        .iter()
        .map(|b| {
            format!(
                "{} at {}:{}",
                ctx.alias("node", b.node_id.0.to_string()),
                b.host,
                ctx.alias("port", b.port.to_string())
            )
        })
        .collect();
    ctx.note("brokers", brokers.join(", "));
    ctx.note("controller", ctx.alias("node", m.controller_id.0.to_string()));
    ctx.note("cluster id present", format!("{}", m.cluster_id.as_ref().is_some_and(|c| !c.is_empty())));
    let topic = &m.topics[0];
    ctx.note(
        "topic",
        format!("{} internal={} topic id set={}", code(topic.error_code), topic.is_internal, !topic.topic_id.is_nil()),
    );
    // Kafka lists partitions in no particular order; clients index them by number.
    let mut partitions: Vec<_> = topic.partitions.iter().collect();
    partitions.sort_by_key(|p| p.partition_index);
    for p in partitions {
        ctx.note(
            format!("partition {}", p.partition_index),
            format!(
                "{} leader={} epoch={} replicas={} isr={}",
                code(p.error_code),
                ctx.alias("node", p.leader_id.0.to_string()),
                p.leader_epoch,
                p.replica_nodes.len(),
                p.isr_nodes.len()
            ),
        );
    }
    Ok(())
}

/// A frame of `request` at `version` with its header's version field overwritten by `forged`.
fn forged_version<Q: kafkasim::kafka_protocol::protocol::Request>(
    c: &mut Conn,
    q: &Q,
    version: i16,
    forged: i16,
) -> R<bytes::Bytes> {
    let (frame, _) = c.encode(q, version).map_err(|e| e.to_string())?;
    let mut b = BytesMut::from(&frame[..]);
    b[6..8].copy_from_slice(&forged.to_be_bytes());
    Ok(b.freeze())
}

/// A response frame read as an ApiVersions v0 answer — correlation id, error code, and an array
/// of (api key, min, max) — when its array length fits the frame: `(error_code, api keys)`.
/// Read by hand, not with kafka-protocol's decoder, which allocates an array's length before
/// checking it and aborts the process on another response's bytes read as a length.
fn api_versions_v0(frame: &[u8]) -> Option<(i16, usize)> {
    let error_code = i16::from_be_bytes(frame.get(4..6)?.try_into().ok()?);
    let count = i32::from_be_bytes(frame.get(6..10)?.try_into().ok()?);
    let count = usize::try_from(count).ok()?;
    (frame.len() == 10 + count.checked_mul(6)?).then_some((error_code, count))
}

/// Reads one response frame, or says how the connection ended.
async fn read_answer(c: Conn) -> String {
    let mut stream = c.into_inner();
    match tokio::time::timeout(Duration::from_secs(10), kafkasim::codec::read_frame(&mut stream, 1 << 20)).await {
        Err(_) => "no answer within 10s, connection open".into(),
        Ok(Ok(None)) => "connection closed".into(),
        Ok(Err(e)) => format!("connection failed: {e}"),
        Ok(Ok(Some(frame))) => match api_versions_v0(&frame) {
            Some((error_code, keys)) => {
                format!(
                    "answered v0: {} with {} api keys listed",
                    code(error_code),
                    if keys == 0 { "no" } else { "some" }
                )
            }
            None => "answered (not an ApiVersions v0 body)".into(),
        },
    }
}

pub async fn too_new_api_versions_is_answered_at_v0(ctx: &Ctx) -> R {
    let mut c = connect(ctx, "c").await?;
    let frame = forged_version(&mut c, &api_versions(), 3, 99)?;
    c.send_raw(&frame).await.map_err(|e| e.to_string())?;
    ctx.note("ApiVersions at v99", read_answer(c).await);
    Ok(())
}

pub async fn unsupported_version_of_another_request_closes_the_connection(ctx: &Ctx) -> R {
    let mut c = connect(ctx, "c").await?;
    let frame = forged_version(&mut c, &metadata_request(&[], false), 4, 99)?;
    c.send_raw(&frame).await.map_err(|e| e.to_string())?;
    ctx.note("Metadata at v99", read_answer(c).await);
    let mut c = connect(ctx, "c").await?;
    let frame = forged_version(&mut c, &kafkasim::requests::fetch("x", 0, 0, Duration::ZERO), 12, 2)?;
    c.send_raw(&frame).await.map_err(|e| e.to_string())?;
    ctx.note("Fetch at v2 (removed by KIP-896)", read_answer(c).await);
    let mut c = connect(ctx, "c").await?;
    let r = send(&mut c, api_versions(), 3).await?;
    ctx.note("a new connection is served", code(r.error_code));
    Ok(())
}

pub async fn api_versions_must_name_the_client_software(ctx: &Ctx) -> R {
    let mut c = connect(ctx, "c").await?;
    for (label, q) in [
        ("v3 without software name", ApiVersionsRequest::default()),
        ("v3 with a name starting with a dash", api_versions().with_client_software_name(s("-x"))),
        ("v3 with a name and version", api_versions()),
    ] {
        let r = send(&mut c, q, 3).await?;
        ctx.note(label, format!("{} api keys listed: {}", code(r.error_code), !r.api_keys.is_empty()));
    }
    let r = send(&mut c, ApiVersionsRequest::default(), 2).await?;
    ctx.note(
        "v2 (no software name field)",
        format!("{} api keys listed: {}", code(r.error_code), !r.api_keys.is_empty()),
    );
    Ok(())
}

pub async fn init_producer_id_without_and_with_an_empty_transactional_id(ctx: &Ctx) -> R {
    let mut c = connect(ctx, "c").await?;
    let (found, pid, epoch) = init_producer_id(&mut c).await?;
    ctx.note(
        "no transactional id",
        format!("{found} producer={} epoch={epoch}", ctx.alias("producer", pid.to_string())),
    );
    let q = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(s(""))))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let r = send(&mut c, q, INIT_PRODUCER_ID_V).await?;
    ctx.note(
        "empty transactional id",
        format!("{} producer={} epoch={}", code(r.error_code), r.producer_id.0, r.producer_epoch),
    );
    Ok(())
}

pub async fn unknown_api_key_closes_the_connection(ctx: &Ctx) -> R {
    let mut c = connect(ctx, "c").await?;
    let mut frame = BytesMut::new();
    // size | api key 999 | version 0 | correlation 1 | client id "c"
    frame.put_i32(11);
    frame.put_i16(999);
    frame.put_i16(0);
    frame.put_i32(1);
    frame.put_i16(1);
    frame.put_u8(b'c');
    c.send_raw(&frame).await.map_err(|e| e.to_string())?;
    ctx.note("api key 999", read_answer(c).await);
    Ok(())
}

pub async fn produce_with_invalid_acks_or_a_corrupt_batch(ctx: &Ctx) -> R {
    let t = ctx.name("t");
    let mut c = connect(ctx, "c").await?;
    create_ready_topic(&mut c, &t, 1).await?;
    let (code, base) = produce(&mut c, &t, 0, batch(&["a"], 1000, None)?, 2).await?;
    ctx.note("acks=2", format!("{code} base_offset={base}"));
    let good = batch(&["b", "c"], 1000, None)?;
    let mut corrupt = BytesMut::from(&good[..]);
    // The last byte is inside the records, which the batch's CRC-32C covers.
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    let (code, base) = produce(&mut c, &t, 0, corrupt.freeze(), 1).await?;
    ctx.note("a batch whose CRC does not match", format!("{code} base_offset={base}"));
    ctx.note("fetch from 0", fetch(&mut c, &t, 0, 0, 0).await?.render());
    Ok(())
}

pub async fn fetch_long_poll_returns_when_data_arrives(ctx: &Ctx) -> R {
    let t = ctx.name("t");
    let mut c = connect(ctx, "poller").await?;
    let mut p = connect(ctx, "producer").await?;
    create_ready_topic(&mut c, &t, 1).await?;
    let poll = fetch(&mut c, &t, 0, 0, 20_000);
    let later = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        produce(&mut p, &t, 0, batch(&["late"], 1000, None)?, 1).await
    };
    let (polled, produced) = tokio::join!(poll, later);
    let (code, base) = produced?;
    ctx.note("produce while a fetch waits", format!("{code} base_offset={base}"));
    ctx.note("the waiting fetch", polled?.render());
    Ok(())
}

pub async fn delete_records_moves_the_log_start(ctx: &Ctx) -> R {
    let t = ctx.name("t");
    let mut c = connect(ctx, "admin").await?;
    create_ready_topic(&mut c, &t, 1).await?;
    produce(&mut c, &t, 0, batch(&["a", "b", "c"], 1000, None)?, 1).await?;
    let q = DeleteRecordsRequest::default().with_timeout_ms(10_000).with_topics(vec![
        delete_records_request::DeleteRecordsTopic::default().with_name(TopicName(s(&t))).with_partitions(vec![
            delete_records_request::DeleteRecordsPartition::default().with_partition_index(0).with_offset(2),
        ]),
    ]);
    let answer = match c.send(q, 2).await {
        Ok(r) => {
            let p = &r.topics[0].partitions[0];
            format!("{} low_watermark={}", code(p.error_code), p.low_watermark)
        }
        Err(kafkasim::Error::Closed) => "connection closed".into(),
        Err(e) => format!("failed: {e}"),
    };
    ctx.note("delete records below offset 2", answer);
    let mut c = connect(ctx, "reader").await?;
    ctx.note("earliest offset", format!("{:?}", list_offsets(&mut c, &t, 0, -2).await?));
    Ok(())
}

pub async fn create_topics_with_configs(ctx: &Ctx) -> R {
    let mut c = connect(ctx, "admin").await?;
    for (label, name, value) in [
        ("a valid config", "retention.ms", "60000"),
        ("an unknown config name", "no.such.config", "1"),
        ("an invalid value", "cleanup.policy", "bogus"),
    ] {
        let topic = ctx.name(&format!("cfg-{}", name.replace('.', "-")));
        let mut q = create_topics_request(&topic, 1, 1, true);
        q.topics[0].configs =
            vec![create_topics_request::CreatableTopicConfig::default().with_name(s(name)).with_value(Some(s(value)))];
        let r = send(&mut c, q, CREATE_TOPICS_V).await?;
        ctx.note(format!("validate only, {label}"), code(r.topics[0].error_code));
    }
    Ok(())
}

/// Kafka closes an acks=0 producer's connection when its produce fails (nothing else would tell
/// it), and appends the partitions without an error.
pub async fn produce_acks_0_with_an_error_closes_the_connection(ctx: &Ctx) -> R {
    let t = ctx.name("t");
    let mut c = connect(ctx, "admin").await?;
    create_ready_topic(&mut c, &t, 1).await?;
    let good = batch(&["a"], 1000, None)?;
    for (label, request) in [
        ("acks=0 without an error", produce_request(&t, 0, good.clone(), 0)),
        ("acks=0 to partition 5 of 1", produce_request(&t, 5, good.clone(), 0)),
        ("acks=0 of bytes that are no batch", produce_request(&t, 0, bytes::Bytes::from_static(b"garbage"), 0)),
    ] {
        let mut p = connect(ctx, "producer").await?;
        p.send_only(request, PRODUCE_V).await.map_err(|e| e.to_string())?;
        // An ApiVersions request behind the produce tells whether the connection stayed open.
        // A close may come as FIN or, when the request is still unread, as RST: both are closes.
        let answer = match p.send(api_versions(), 3).await {
            Ok(r) => format!("ApiVersions answered {}", code(r.error_code)),
            Err(kafkasim::Error::Closed | kafkasim::Error::Io(_)) => "connection closed".into(),
            Err(e) => format!("failed: {e}"),
        };
        ctx.note(format!("{label}, then ApiVersions"), answer);
    }
    let mut p = connect(ctx, "producer").await?;
    let mut request = produce_request(&t, 0, batch(&["b"], 1000, None)?, 0);
    let bad = request.topic_data[0].partition_data[0].clone().with_index(5);
    request.topic_data[0].partition_data.push(bad);
    p.send_only(request, PRODUCE_V).await.map_err(|e| e.to_string())?;
    ctx.note("acks=0 to partitions 0 and 5", read_answer(p).await);
    ctx.note("fetch from 0", fetch(&mut c, &t, 0, 0, 0).await?.render());
    Ok(())
}

/// KIP-74: a fetch's `max_bytes` and each partition's `partition_max_bytes` bound the response,
/// except its first batch, which goes out whatever its size.
pub async fn fetch_byte_limits_bound_all_but_the_first_batch(ctx: &Ctx) -> R {
    let t = ctx.name("t");
    let mut c = connect(ctx, "c").await?;
    create_ready_topic(&mut c, &t, 2).await?;
    produce(&mut c, &t, 0, batch(&["a", "b"], 1000, None)?, 1).await?;
    produce(&mut c, &t, 0, batch(&["c"], 1000, None)?, 1).await?;
    produce(&mut c, &t, 1, batch(&["d"], 1000, None)?, 1).await?;
    for (label, max_bytes, partition_max_bytes) in [
        ("max_bytes 0", 0, 1 << 20),
        ("max_bytes 1", 1, 1 << 20),
        ("partition_max_bytes 0", 1 << 20, 0),
        ("partition_max_bytes 1", 1 << 20, 1),
        ("no limit reached", 1 << 20, 1 << 20),
    ] {
        let mut q = kafkasim::requests::fetch(&t, 0, 0, Duration::ZERO).with_max_bytes(max_bytes);
        q.topics[0].partitions[0].partition_max_bytes = partition_max_bytes;
        let second = q.topics[0].partitions[0].clone().with_partition(1);
        q.topics[0].partitions.push(second);
        let r = send(&mut c, q, FETCH_V).await?;
        let mut partitions = Vec::new();
        for p in &r.responses[0].partitions {
            let records = match &p.records {
                Some(b) if !b.is_empty() => kafkasim::client::decode_records(b).map_err(|e| e.to_string())?,
                _ => Vec::new(),
            };
            let offsets: Vec<String> = records.iter().map(|r| r.0.to_string()).collect();
            partitions.push(format!("p{} {} [{}]", p.partition_index, code(p.error_code), offsets.join(" ")));
        }
        ctx.note(label, format!("{} | {}", code(r.error_code), partitions.join(" | ")));
    }
    Ok(())
}

/// Topic names Kafka refuses beyond their characters: names that differ from an existing one
/// only by '.' against '_' (they would share metric names), and a name twice in one request.
pub async fn create_topics_refuses_colliding_and_duplicate_names(ctx: &Ctx) -> R {
    let mut c = connect(ctx, "admin").await?;
    let base = ctx.name("n");
    let dotted = format!("{base}.a_b");
    ctx.note("create n.a_b", create_topic(&mut c, &dotted, 1).await?);
    wait_topic_ready(&mut c, &dotted, 1).await?;
    for (label, name) in [
        ("create n.a_b again", dotted.clone()),
        ("create n_a_b", format!("{base}_a_b")),
        ("create n.a.b", format!("{base}.a.b")),
        ("create n-a-b", format!("{base}-a-b")),
    ] {
        ctx.note(label, create_topic(&mut c, &name, 1).await?);
        let r = send(&mut c, create_topics_request(&name, 1, 1, true), CREATE_TOPICS_V).await?;
        ctx.note(format!("{label}, validate only"), code(r.topics[0].error_code));
    }
    let twice = ctx.name("twice");
    let mut q = create_topics_request(&twice, 1, 1, false);
    let other = ctx.name("other");
    q.topics.push(q.topics[0].clone());
    q.topics.push(create_topics_request(&other, 1, 1, false).topics[0].clone());
    let r = send(&mut c, q, CREATE_TOPICS_V).await?;
    let results: Vec<String> =
        r.topics.iter().map(|t| format!("{}: {}", ctx.alias("topic", t.name.0.as_str()), code(t.error_code))).collect();
    ctx.note("one name twice and another once", results.join(", "));
    let m = send(&mut c, metadata_request(&[&twice], false), METADATA_V).await?;
    ctx.note("metadata of the name sent twice", code(m.topics[0].error_code));
    Ok(())
}

/// ListOffsets' max-timestamp query (-3, KIP-734) needs v7; a partition asked twice in one
/// request is refused.
pub async fn list_offsets_refuses_max_timestamp_below_v7_and_duplicate_partitions(ctx: &Ctx) -> R {
    let t = ctx.name("t");
    let mut c = connect(ctx, "c").await?;
    create_ready_topic(&mut c, &t, 2).await?;
    produce(&mut c, &t, 0, batch(&["a", "b"], 1000, None)?, 1).await?;
    let partition = |index: i32, timestamp: i64| {
        list_offsets_request::ListOffsetsPartition::default()
            .with_partition_index(index)
            .with_current_leader_epoch(-1)
            .with_timestamp(timestamp)
    };
    let request = |partitions: Vec<list_offsets_request::ListOffsetsPartition>| {
        ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_topics(vec![
            list_offsets_request::ListOffsetsTopic::default().with_name(TopicName(s(&t))).with_partitions(partitions),
        ])
    };
    // Kafka's order of partitions in the answer varies (it goes through a hash map): sorted.
    let render = |r: &ListOffsetsResponse| {
        let mut answers: Vec<String> = r
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .map(|p| {
                format!("p{} {} offset={} timestamp={}", p.partition_index, code(p.error_code), p.offset, p.timestamp)
            })
            .collect();
        answers.sort();
        answers.join(", ")
    };
    for version in [1, 4, 6, 7] {
        let r = send(&mut c, request(vec![partition(0, -3)]), version).await?;
        ctx.note(format!("max timestamp at v{version}"), render(&r));
    }
    let r = send(&mut c, request(vec![partition(0, -1), partition(1, -1), partition(0, -2)]), LIST_OFFSETS_V).await?;
    ctx.note("partition 0 twice and partition 1", render(&r));
    Ok(())
}
