//! Faults and controls at fake times inside a simulation: installed and removed as harness
//! events, recorded in the history, and replaying exactly.

use std::time::Duration;

use bytes::Bytes;
use kafkasim::client::record_batch;
use kafkasim::kafka_protocol::messages::*;
use kafkasim::kafka_protocol::protocol::StrBytes;
use kafkasim::{Client, Cluster, Control, Fault, FaultAction};
use sim::{Ctx, Failure, Simulation};

fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

fn fail(e: impl std::fmt::Display) -> Failure {
    Failure::correctness("kafka", e.to_string())
}

fn check(ok: bool, what: impl Into<String>) -> Result<(), Failure> {
    if ok { Ok(()) } else { Err(Failure::correctness("kafka", what)) }
}

fn produce(partition: i32, value: &str) -> Result<ProduceRequest, Failure> {
    let batch: Bytes = record_batch(&[(None, Some(value.as_bytes()), 0)], None).map_err(fail)?;
    Ok(ProduceRequest::default().with_acks(1).with_timeout_ms(1000).with_topic_data(vec![
        produce_request::TopicProduceData::default().with_name(TopicName(s("t"))).with_partition_data(vec![
            produce_request::PartitionProduceData::default().with_index(partition).with_records(Some(batch)),
        ]),
    ]))
}

fn commit(offset: i64) -> OffsetCommitRequest {
    OffsetCommitRequest::default().with_group_id(GroupId(s("g"))).with_generation_id_or_member_epoch(-1).with_topics(
        vec![offset_commit_request::OffsetCommitRequestTopic::default().with_name(TopicName(s("t"))).with_partitions(
            vec![offset_commit_request::OffsetCommitRequestPartition::default().with_committed_offset(offset)],
        )],
    )
}

async fn scenario(ctx: Ctx) -> Result<(), Failure> {
    let cluster = Cluster::builder().brokers(2).build();
    cluster.serve_sim(&ctx)?;
    cluster.create_topic("t", 1).map_err(fail)?;
    let leader = cluster.partition("t", 0).map(|p| p.leader).unwrap_or(-1);
    cluster
        .at(&ctx, Duration::from_secs(1), Fault::new(ApiKey::OffsetCommit, FaultAction::ApplyThenDrop).group("g"))
        .until(Duration::from_secs(2));
    cluster.at(&ctx, Duration::from_secs(3), Control::BrokerDown(leader)).forever();
    let host = ctx.net().host("app");

    let mut admin = Client::new(host.dial("kafka-0:9092").await?, "app");
    let fc = admin.send(FindCoordinatorRequest::default().with_key(s("g")), 3).await.map_err(fail)?;
    let mut coord = Client::new(host.dial(&format!("kafka-{}:9092", fc.node_id.0)).await?, "app");

    // 1.5 s: inside the fault's window, the commit takes effect and its response is lost.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let lost = coord.send(commit(5), 8).await;
    ctx.record("faults.commit", "app", format!("{:?}", lost.as_ref().map(|r| r.topics[0].partitions[0].error_code)));
    check(lost.is_err(), "the response was lost")?;
    check(cluster.committed("g", "t", 0).map(|c| c.0) == Some(5), "the commit took effect")?;

    // 2.5 s: the fault is gone.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut coord = Client::new(host.dial(&format!("kafka-{}:9092", fc.node_id.0)).await?, "app");
    let ok = coord.send(commit(6), 8).await.map_err(fail)?;
    check(ok.topics[0].partitions[0].error_code == 0, "answered once the fault was removed")?;

    // 3.5 s: the leader went down at 3 s; its partition moved.
    let mut producer = Client::new(host.dial(&format!("kafka-{leader}:9092")).await?, "app");
    let before = producer.send(produce(0, "before")?, 9).await.map_err(fail)?;
    check(before.responses[0].partition_responses[0].error_code == 0, "produced to the leader")?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = producer.send(produce(0, "after")?, 9).await;
    ctx.record("faults.produce", "app", format!("after the leader went down: ok={}", after.is_ok()));
    check(after.is_err(), "the down broker's connection closed")?;
    let new_leader = cluster.partition("t", 0).map(|p| p.leader).unwrap_or(-1);
    check(new_leader != leader && new_leader >= 0, format!("leader moved to {new_leader}"))?;
    let mut producer = Client::new(host.dial(&format!("kafka-{new_leader}:9092")).await?, "app");
    let moved = producer.send(produce(0, "moved")?, 9).await.map_err(fail)?;
    let p = &moved.responses[0].partition_responses[0];
    check((p.error_code, p.base_offset) == (0, 1), format!("appended after the acknowledged record: {p:?}"))?;
    let refused = host.dial(&format!("kafka-{leader}:9092")).await;
    check(refused.is_err(), "the down broker refuses connections")?;

    let history = ctx.history();
    let kinds: Vec<String> = history.entries().map(|e| e.kind).filter(|k| k.starts_with("kafka.")).collect();
    for expected in ["kafka.fault.install", "kafka.fault.hit", "kafka.fault.remove", "kafka.broker.down"] {
        check(kinds.iter().any(|k| k == expected), format!("{expected} recorded: {kinds:?}"))?;
    }
    Ok(())
}

#[test]
fn faults_and_controls_at_fake_times_take_effect_are_recorded_and_replay() {
    Simulation::new("kafkasim_faults").seeds(0..8).repeat(2).run(scenario).assert_passed();
}
