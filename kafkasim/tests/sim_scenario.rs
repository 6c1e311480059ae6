//! The broker inside a simulation, driven by protocol-level requests over the simulated network:
//! produce (idempotent, with a retried duplicate) → a group of three joins and syncs → each
//! member fetches and commits → one member stops heartbeating and expires → the others rebalance
//! → the expired member's commit is refused → the committed offsets are fetched back. Every
//! observation is recorded in the run's history, and the sweep replays each seed exactly, in
//! this process and in fresh processes.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use kafkasim::client::{decode_records, record_batch};
use kafkasim::kafka_protocol::ResponseError as E;
use kafkasim::kafka_protocol::messages::*;
use kafkasim::kafka_protocol::protocol::StrBytes;
use kafkasim::{Client, Cluster};
use sim::net::TcpStream;
use sim::{Ctx, Failure, Simulation};

const TOPIC: &str = "orders";
const GROUP: &str = "billing";
const PARTITIONS: i32 = 3;
const RECORDS_PER_BATCH: usize = 5;
const SESSION_MS: i32 = 6_000;

fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

fn fail(e: impl std::fmt::Display) -> Failure {
    Failure::correctness("kafka", e.to_string())
}

fn check(ok: bool, what: impl Into<String>) -> Result<(), Failure> {
    if ok { Ok(()) } else { Err(Failure::correctness("kafka", what)) }
}

async fn dial(ctx: &Ctx, from: &str, broker: i32) -> Result<Client<TcpStream>, Failure> {
    let stream = ctx.net().host(from).dial(&format!("kafka-{broker}:9092")).await?;
    Ok(Client::new(stream, from))
}

fn join_request(member_id: &str) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_session_timeout_ms(SESSION_MS)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(s(member_id))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![
            join_group_request::JoinGroupRequestProtocol::default()
                .with_name(s("range"))
                .with_metadata(Bytes::from_static(b"orders")),
        ])
}

/// Joins (with KIP-394's member id round when `member_id` is empty); returns the response.
async fn join(client: &mut Client<TcpStream>, member_id: &str) -> Result<JoinGroupResponse, Failure> {
    let mut resp = client.send(join_request(member_id), 7).await.map_err(fail)?;
    if resp.error_code == E::MemberIdRequired.code() {
        let id = resp.member_id.to_string();
        resp = client.send(join_request(&id), 7).await.map_err(fail)?;
    }
    check(resp.error_code == 0, format!("join answered {}", resp.error_code))?;
    Ok(resp)
}

/// The leader's assignment: partitions round-robin over the members in id order.
fn assign(members: &[String]) -> Vec<(String, Bytes)> {
    let mut sorted = members.to_vec();
    sorted.sort();
    sorted
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let mine: Vec<u8> = (0..PARTITIONS as usize).filter(|p| p % sorted.len() == i).map(|p| p as u8).collect();
            (m.clone(), Bytes::from(mine))
        })
        .collect()
}

async fn sync(client: &mut Client<TcpStream>, join: &JoinGroupResponse) -> Result<Vec<i32>, Failure> {
    let me = join.member_id.to_string();
    let assignments = if join.leader == join.member_id {
        let members: Vec<String> = join.members.iter().map(|m| m.member_id.to_string()).collect();
        assign(&members)
            .into_iter()
            .map(|(m, a)| {
                sync_group_request::SyncGroupRequestAssignment::default().with_member_id(s(&m)).with_assignment(a)
            })
            .collect()
    } else {
        Vec::new()
    };
    let req = SyncGroupRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_generation_id(join.generation_id)
        .with_member_id(s(&me))
        .with_assignments(assignments);
    let resp = client.send(req, 3).await.map_err(fail)?;
    check(resp.error_code == 0, format!("sync answered {}", resp.error_code))?;
    Ok(resp.assignment.iter().map(|p| i32::from(*p)).collect())
}

fn commit_request(
    generation: i32,
    member_id: &str,
    partition: i32,
    offset: i64,
    metadata: &str,
) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(s(member_id))
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default().with_name(TopicName(s(TOPIC))).with_partitions(
                vec![
                    offset_commit_request::OffsetCommitRequestPartition::default()
                        .with_partition_index(partition)
                        .with_committed_offset(offset)
                        .with_committed_metadata(Some(s(metadata))),
                ],
            ),
        ])
}

async fn scenario(ctx: Ctx) -> Result<(), Failure> {
    // Kafka's default initial rebalance delay (3 s) lets the three members, starting within
    // 50 ms, land in one first generation.
    let cluster = Cluster::builder().brokers_from_swarm(&ctx).build();
    let bootstrap = cluster.serve_sim(&ctx)?;
    ctx.record("scenario.bootstrap", "app", &bootstrap);

    // Topic and leaders.
    let mut admin = dial(&ctx, "admin", 0).await?;
    let create = CreateTopicsRequest::default().with_timeout_ms(5000).with_topics(vec![
        create_topics_request::CreatableTopic::default()
            .with_name(TopicName(s(TOPIC)))
            .with_num_partitions(PARTITIONS)
            .with_replication_factor(1),
    ]);
    let created = admin.send(create, 7).await.map_err(fail)?;
    check(created.topics[0].error_code == 0, "topic created")?;
    let md = admin
        .send(
            MetadataRequest::default().with_topics(Some(vec![
                metadata_request::MetadataRequestTopic::default().with_name(Some(TopicName(s(TOPIC)))),
            ])),
            12,
        )
        .await
        .map_err(fail)?;
    let leaders: BTreeMap<i32, i32> =
        md.topics[0].partitions.iter().map(|p| (p.partition_index, p.leader_id.0)).collect();
    ctx.record("scenario.leaders", "admin", format!("{leaders:?}"));

    // Idempotent produce: two batches per partition, and a retried duplicate of the first.
    let init = admin.send(InitProducerIdRequest::default().with_transactional_id(None), 4).await.map_err(fail)?;
    let (pid, epoch) = (init.producer_id.0, init.producer_epoch);
    for (&partition, &leader) in &leaders {
        let mut producer = dial(&ctx, "producer", leader).await?;
        let mut first_offset = None;
        for (batch, seq) in [(0, 0), (1, RECORDS_PER_BATCH as i32), (0, 0)] {
            let values: Vec<String> = (0..RECORDS_PER_BATCH).map(|i| format!("p{partition}-b{batch}-{i}")).collect();
            let records: Vec<kafkasim::client::RecordInput<'_>> =
                values.iter().map(|v| (None, Some(v.as_bytes()), 1_700_000_000_000)).collect();
            let bytes = record_batch(&records, Some((pid, epoch, seq))).map_err(fail)?;
            let req = ProduceRequest::default().with_acks(-1).with_timeout_ms(5000).with_topic_data(vec![
                produce_request::TopicProduceData::default().with_name(TopicName(s(TOPIC))).with_partition_data(vec![
                    produce_request::PartitionProduceData::default().with_index(partition).with_records(Some(bytes)),
                ]),
            ]);
            let resp = producer.send(req, 9).await.map_err(fail)?;
            let p = &resp.responses[0].partition_responses[0];
            ctx.record(
                "scenario.produce",
                &format!("{TOPIC}-{partition}"),
                format!("seq {seq}: {} @{}", p.error_code, p.base_offset),
            );
            check(p.error_code == 0, format!("produce answered {}", p.error_code))?;
            match (batch, first_offset) {
                (0, None) => first_offset = Some(p.base_offset),
                (0, Some(first)) => check(p.base_offset == first, "a duplicate gets its original offset")?,
                _ => {}
            }
        }
    }

    // Three members join at seeded times from three hosts.
    let fc = admin.send(FindCoordinatorRequest::default().with_key(s(GROUP)), 3).await.map_err(fail)?;
    let coordinator = fc.node_id.0;
    ctx.record("scenario.coordinator", GROUP, coordinator.to_string());
    let mut starts = ctx.source("scenario/joins");
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..3 {
        let ctx2 = ctx.clone();
        let delay = starts.duration(Duration::ZERO..=Duration::from_millis(50));
        tasks.spawn(async move {
            tokio::time::sleep(delay).await;
            let name = format!("consumer-{i}");
            let mut client = dial(&ctx2, &name, coordinator).await?;
            let joined = join(&mut client, "").await?;
            let assigned = sync(&mut client, &joined).await?;
            ctx2.record("scenario.assigned", &name, format!("gen {} {:?}", joined.generation_id, assigned));
            Ok::<_, Failure>((i, client, joined, assigned))
        });
    }
    let mut members = BTreeMap::new();
    while let Some(done) = tasks.join_next().await {
        let (i, client, joined, assigned) = done.map_err(fail)??;
        members.insert(i, (client, joined, assigned));
    }

    // Each member fetches its partitions from their leaders and commits what it read.
    for (i, (client, joined, assigned)) in members.iter_mut() {
        let name = format!("consumer-{i}");
        for &partition in assigned.iter() {
            let mut fetcher = dial(&ctx, &name, leaders[&partition]).await?;
            let req = FetchRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_max_wait_ms(100)
                .with_min_bytes(1)
                .with_max_bytes(1 << 20)
                .with_session_epoch(-1)
                .with_topics(vec![
                    fetch_request::FetchTopic::default().with_topic(TopicName(s(TOPIC))).with_partitions(vec![
                        fetch_request::FetchPartition::default()
                            .with_partition(partition)
                            .with_fetch_offset(0)
                            .with_partition_max_bytes(1 << 20),
                    ]),
                ]);
            let resp = fetcher.send(req, 12).await.map_err(fail)?;
            let p = &resp.responses[0].partitions[0];
            let records = decode_records(p.records.as_ref().unwrap_or(&Bytes::new())).map_err(fail)?;
            ctx.record(
                "scenario.fetched",
                &name,
                format!("{TOPIC}-{partition}: {} records, hw {}", records.len(), p.high_watermark),
            );
            check(records.len() == 2 * RECORDS_PER_BATCH, format!("{} records in {TOPIC}-{partition}", records.len()))?;
            let next = records.last().map_or(0, |r| r.0 + 1);
            let metadata = format!("{name}@{}", joined.generation_id);
            let resp = client
                .send(commit_request(joined.generation_id, &joined.member_id, partition, next, &metadata), 8)
                .await
                .map_err(fail)?;
            let code = resp.topics[0].partitions[0].error_code;
            ctx.record("scenario.commit", &name, format!("{TOPIC}-{partition} {next}: {code}"));
            check(code == 0, format!("commit answered {code}"))?;
        }
    }

    // consumer-2 stops heartbeating; the others heartbeat until the coordinator says rebalance.
    let (mut expired_client, expired_join, _) = members.remove(&2).expect("three members");
    let mut rejoin = tokio::task::JoinSet::new();
    for (i, (mut client, joined, _)) in members {
        let ctx2 = ctx.clone();
        rejoin.spawn(async move {
            let name = format!("consumer-{i}");
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let hb = HeartbeatRequest::default()
                    .with_group_id(GroupId(s(GROUP)))
                    .with_generation_id(joined.generation_id)
                    .with_member_id(joined.member_id.clone());
                let resp = client.send(hb, 3).await.map_err(fail)?;
                if resp.error_code == E::RebalanceInProgress.code() {
                    ctx2.record("scenario.heartbeat", &name, "REBALANCE_IN_PROGRESS");
                    break;
                }
                check(resp.error_code == 0, format!("heartbeat answered {}", resp.error_code))?;
            }
            let again = join(&mut client, &joined.member_id).await?;
            let assigned = sync(&mut client, &again).await?;
            ctx2.record("scenario.assigned", &name, format!("gen {} {:?}", again.generation_id, assigned));
            Ok::<_, Failure>((again.generation_id, assigned))
        });
    }
    let mut after = Vec::new();
    while let Some(done) = rejoin.join_next().await {
        after.push(done.map_err(fail)??);
    }
    check(after.iter().all(|(g, _)| *g == expired_join.generation_id + 1), format!("one new generation: {after:?}"))?;
    let mut owned: Vec<i32> = after.iter().flat_map(|(_, a)| a.clone()).collect();
    owned.sort();
    check(owned == (0..PARTITIONS).collect::<Vec<_>>(), format!("every partition reassigned: {owned:?}"))?;

    // The expired member's commit is refused.
    let late = expired_client
        .send(commit_request(expired_join.generation_id, &expired_join.member_id, 0, 99, "late"), 8)
        .await
        .map_err(fail)?;
    let code = late.topics[0].partitions[0].error_code;
    ctx.record("scenario.commit", "consumer-2", format!("late commit: {code}"));
    check(code == E::UnknownMemberId.code(), format!("the expired member's commit answered {code}"))?;

    // The committed offsets come back exactly as committed.
    let mut reader = dial(&ctx, "auditor", coordinator).await?;
    let fetched = reader
        .send(
            OffsetFetchRequest::default().with_group_id(GroupId(s(GROUP))).with_topics(Some(vec![
                offset_fetch_request::OffsetFetchRequestTopic::default()
                    .with_name(TopicName(s(TOPIC)))
                    .with_partition_indexes((0..PARTITIONS).collect()),
            ])),
            7,
        )
        .await
        .map_err(fail)?;
    for p in &fetched.topics[0].partitions {
        ctx.record(
            "scenario.committed",
            &format!("{TOPIC}-{}", p.partition_index),
            format!("{} {:?}", p.committed_offset, p.metadata.as_deref()),
        );
        check(p.committed_offset == 2 * RECORDS_PER_BATCH as i64, format!("committed {}", p.committed_offset))?;
        check(p.metadata.as_deref().is_some_and(|m| m.ends_with("@1")), "metadata round-trips")?;
    }

    // The oracle's view agrees: three members, then two; one refused commit.
    let generations = cluster.generations(GROUP);
    let sizes: Vec<usize> = generations.iter().map(|g| g.members.len()).collect();
    check(sizes == vec![3, 2], format!("generation sizes {sizes:?}"))?;
    let refused = cluster.commits().iter().filter(|c| c.error != 0).count();
    check(refused == 1, format!("{refused} refused commits"))?;
    Ok(())
}

#[test]
fn produce_group_commit_expire_rebalance_replays_exactly() {
    let report = Simulation::new("kafkasim_group_scenario").seeds(0..8).repeat(2).repeat_processes(2).run(scenario);
    report.assert_passed();
    assert!(report.outcomes.iter().all(|o| o.events > 50), "the cluster and the clients recorded into the history");
}
