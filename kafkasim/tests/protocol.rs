//! The broker's answers, request by request, through in-memory connections on a paused tokio
//! clock (session and rebalance timeouts cost no wall time).

mod support;

use std::time::Duration;

use bytes::Bytes;
use kafkasim::client::{decode_records, record_batch};
use kafkasim::kafka_protocol::ResponseError as E;
use kafkasim::kafka_protocol::messages::*;
use kafkasim::{Cluster, Control, Fault, FaultAction};
use support::*;

fn cluster() -> Cluster {
    Cluster::builder().initial_rebalance_delay(Duration::ZERO).build()
}

fn batch(values: &[&str], ts: i64) -> Bytes {
    let records: Vec<kafkasim::client::RecordInput<'_>> =
        values.iter().enumerate().map(|(i, v)| (None, Some(v.as_bytes()), ts + i as i64)).collect();
    record_batch(&records, None).expect("encodes")
}

#[tokio::test(start_paused = true)]
async fn api_versions_lists_served_versions_and_answers_a_too_new_request_with_unsupported_version() {
    let cluster = cluster();
    let mut c = connect(&cluster, 0, "t");
    let resp = c.send(api_versions(), 3).await.expect("v3");
    assert_eq!(resp.error_code, 0);
    let fetch = resp.api_keys.iter().find(|k| k.api_key == ApiKey::Fetch as i16).expect("fetch served");
    assert_eq!((fetch.min_version, fetch.max_version), (4, 12));

    // Version 4 is above the range: KIP-511's answer is v0 with UNSUPPORTED_VERSION.
    let (frame, correlation) = c.encode(&ApiVersionsRequest::default(), 4).expect("encodes");
    c.send_raw(&frame).await.expect("sent");
    let mut stream = c.into_inner();
    let frame = kafkasim::codec::read_frame(&mut stream, 1 << 20).await.expect("read").expect("a frame");
    let mut buf = frame;
    let header = ResponseHeader::decode(&mut buf, 0).expect("header v0");
    assert_eq!(header.correlation_id, correlation);
    let answer = ApiVersionsResponse::decode(&mut buf, 0).expect("body v0");
    assert_eq!(answer.error_code, E::UnsupportedVersion.code());
    assert!(!answer.api_keys.is_empty(), "the answer lists the versions to retry with");
}

use kafkasim::kafka_protocol::protocol::Decodable;

#[tokio::test(start_paused = true)]
async fn api_versions_v3_must_name_the_client_software_as_kafka_requires() {
    let cluster = cluster();
    let mut c = connect(&cluster, 0, "t");
    let resp = c.send(ApiVersionsRequest::default(), 3).await.expect("answered");
    assert_eq!(resp.error_code, E::InvalidRequest.code(), "empty name and version");
    assert!(resp.api_keys.is_empty());
    let bad = api_versions().with_client_software_name(s("-leading-dash"));
    assert_eq!(c.send(bad, 3).await.expect("answered").error_code, E::InvalidRequest.code());
    assert_eq!(c.send(api_versions(), 3).await.expect("answered").error_code, 0);
    // v0–v2 carry no software name.
    assert_eq!(c.send(ApiVersionsRequest::default(), 2).await.expect("answered").error_code, 0);
}

#[tokio::test(start_paused = true)]
async fn an_unserved_version_closes_that_connection_and_others_keep_working() {
    let cluster = cluster();
    let mut bad = connect(&cluster, 0, "bad");
    let mut good = connect(&cluster, 0, "good");
    // Metadata v13 is above the served range (12).
    let err = bad.send(MetadataRequest::default(), 13).await.expect_err("closed");
    assert!(matches!(err, kafkasim::Error::Closed | kafkasim::Error::Io(_)), "{err}");
    let resp = good.send(api_versions(), 3).await.expect("still served");
    assert_eq!(resp.error_code, 0);
}

#[tokio::test(start_paused = true)]
async fn produce_assigns_offsets_and_fetch_returns_whole_batches_from_mid_batch() {
    let cluster = cluster();
    cluster.create_topic("t", 1).expect("created");
    let mut c = connect(&cluster, 0, "t");
    for (i, values) in [&["a", "b", "c"][..], &["d", "e"][..]].iter().enumerate() {
        let resp = c.send(produce_request("t", 0, batch(values, 1000), -1), 9).await.expect("produce");
        let p = &resp.responses[0].partition_responses[0];
        assert_eq!(p.error_code, 0);
        assert_eq!(p.base_offset, [0, 3][i]);
    }
    // Offset 1 is inside the first batch: the whole batch comes back.
    let resp = c.send(fetch_request("t", 0, 1, 0), 12).await.expect("fetch");
    let p = &resp.responses[0].partitions[0];
    assert_eq!((p.error_code, p.high_watermark, p.log_start_offset), (0, 5, 0));
    let records = decode_records(p.records.as_ref().expect("records")).expect("decodes");
    let offsets: Vec<i64> = records.iter().map(|r| r.0).collect();
    assert_eq!(offsets, vec![0, 1, 2, 3, 4]);
    assert_eq!(records[4].2.as_deref(), Some(&b"e"[..]));
    // Past the high watermark: OFFSET_OUT_OF_RANGE.
    let resp = c.send(fetch_request("t", 0, 6, 0), 12).await.expect("fetch");
    assert_eq!(resp.responses[0].partitions[0].error_code, E::OffsetOutOfRange.code());
    // An unknown topic.
    let resp = c.send(produce_request("nope", 0, batch(&["x"], 0), 1), 9).await.expect("produce");
    assert_eq!(resp.responses[0].partition_responses[0].error_code, E::UnknownTopicOrPartition.code());
    let view = cluster.partition("t", 0).expect("exists");
    assert_eq!((view.high_watermark, view.batches.len()), (5, 2));
}

#[tokio::test(start_paused = true)]
async fn a_corrupt_batch_is_refused_and_nothing_is_appended() {
    let cluster = cluster();
    cluster.create_topic("t", 1).expect("created");
    let mut c = connect(&cluster, 0, "t");
    let mut bytes = batch(&["a"], 0).to_vec();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff; // inside the CRC's range
    let resp = c.send(produce_request("t", 0, Bytes::from(bytes), 1), 9).await.expect("answered");
    assert_eq!(resp.responses[0].partition_responses[0].error_code, E::CorruptMessage.code());
    assert_eq!(cluster.partition("t", 0).expect("exists").high_watermark, 0);
}

#[tokio::test(start_paused = true)]
async fn idempotent_retries_get_their_original_offset_and_gaps_are_out_of_order() {
    let cluster = cluster();
    cluster.create_topic("t", 1).expect("created");
    let mut c = connect(&cluster, 0, "p");
    let init = c
        .send(InitProducerIdRequest::default().with_transactional_id(None).with_transaction_timeout_ms(60_000), 4)
        .await
        .expect("init");
    assert_eq!(init.error_code, 0);
    let (pid, epoch) = (init.producer_id.0, init.producer_epoch);
    let b =
        |seq: i32, v: &str| record_batch(&[(None, Some(v.as_bytes()), 0)], Some((pid, epoch, seq))).expect("encodes");
    let first = c.send(produce_request("t", 0, b(0, "a"), -1), 9).await.expect("produce");
    assert_eq!(first.responses[0].partition_responses[0].base_offset, 0);
    c.send(produce_request("t", 0, b(1, "b"), -1), 9).await.expect("produce");
    let retry = c.send(produce_request("t", 0, b(0, "a"), -1), 9).await.expect("retry");
    let p = &retry.responses[0].partition_responses[0];
    assert_eq!((p.error_code, p.base_offset), (0, 0), "a duplicate answers its original offset");
    let gap = c.send(produce_request("t", 0, b(5, "z"), -1), 9).await.expect("gap");
    assert_eq!(gap.responses[0].partition_responses[0].error_code, E::OutOfOrderSequenceNumber.code());
    assert_eq!(cluster.partition("t", 0).expect("exists").high_watermark, 2, "nothing appended twice");
}

#[tokio::test(start_paused = true)]
async fn list_offsets_answers_earliest_latest_and_by_timestamp() {
    let cluster = cluster();
    cluster.create_topic("t", 1).expect("created");
    let mut c = connect(&cluster, 0, "t");
    c.send(produce_request("t", 0, batch(&["a", "b"], 1000), 1), 9).await.expect("produce");
    c.send(produce_request("t", 0, batch(&["c"], 2000), 1), 9).await.expect("produce");
    let ask = |ts: i64| {
        ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_topics(vec![
            list_offsets_request::ListOffsetsTopic::default().with_name(TopicName(s("t"))).with_partitions(vec![
                list_offsets_request::ListOffsetsPartition::default().with_partition_index(0).with_timestamp(ts),
            ]),
        ])
    };
    let mut got = Vec::new();
    for ts in [-2, -1, 1001, 1500, 5000, -3] {
        let resp = c.send(ask(ts), 7).await.expect("list");
        let p = &resp.topics[0].partitions[0];
        assert_eq!(p.error_code, 0);
        got.push((p.offset, p.timestamp));
    }
    assert_eq!(got, vec![(0, -1), (3, -1), (1, 1001), (2, 2000), (-1, -1), (2, 2000)]);
}

/// Apache Kafka's `KafkaApis.handleListOffsetRequest`: the max-timestamp query (-3, KIP-734)
/// needs v7 (`UNSUPPORTED_VERSION` below), and a partition asked twice in one request is answered
/// once, with `INVALID_REQUEST` (measured by fidelity's
/// `list_offsets_refuses_max_timestamp_below_v7_and_duplicate_partitions`).
#[tokio::test(start_paused = true)]
async fn list_offsets_refuses_max_timestamp_below_v7_and_a_partition_asked_twice() {
    let cluster = cluster();
    cluster.create_topic("t", 2).expect("created");
    let mut c = connect(&cluster, 0, "t");
    c.send(produce_request("t", 0, batch(&["a", "b"], 1000), 1), 9).await.expect("produce");
    for (version, expected) in [(1, E::UnsupportedVersion.code()), (6, E::UnsupportedVersion.code()), (7, 0)] {
        let resp = c.send(list_offsets_request("t", 0, -3), version).await.expect("list");
        let p = &resp.topics[0].partitions[0];
        assert_eq!(p.error_code, expected, "v{version}");
        assert_eq!(p.offset, if expected == 0 { 1 } else { -1 }, "v{version}");
    }
    let mut twice = list_offsets_request("t", 0, -1);
    let again = twice.topics[0].partitions[0].clone().with_timestamp(-2);
    let other = twice.topics[0].partitions[0].clone().with_partition_index(1);
    twice.topics[0].partitions.extend([again, other]);
    let resp = c.send(twice, 7).await.expect("list");
    let answers: Vec<(i32, i16, i64)> =
        resp.topics[0].partitions.iter().map(|p| (p.partition_index, p.error_code, p.offset)).collect();
    assert_eq!(answers, vec![(0, E::InvalidRequest.code(), -1), (1, 0, 0)]);
}

/// KIP-74 as Apache Kafka's `ReplicaManager.readFromLog` applies it: a partition gets at most
/// `min(partition_max_bytes, what is left of max_bytes)`, and only the response's first batch may
/// exceed that (measured against Kafka 4.2 by fidelity's
/// `fetch_byte_limits_bound_all_but_the_first_batch`).
#[tokio::test(start_paused = true)]
async fn fetch_byte_limits_bound_every_partition_and_only_the_first_batch_may_exceed_them() {
    let cluster = cluster();
    cluster.create_topic("t", 2).expect("created");
    let mut c = connect(&cluster, 0, "t");
    for (partition, values) in [(0, &["a", "b"][..]), (0, &["c"][..]), (1, &["d"][..])] {
        let resp = c.send(produce_request("t", partition, batch(values, 0), 1), 9).await.expect("produce");
        assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
    }
    let fetched = |resp: &FetchResponse| -> Vec<usize> {
        resp.responses[0]
            .partitions
            .iter()
            .map(|p| decode_records(p.records.as_ref().expect("records")).expect("decodes").len())
            .collect()
    };
    for (label, max_bytes, partition_max_bytes, expected) in [
        ("max_bytes 0: the first batch alone", 0, 1 << 20, vec![2, 0]),
        ("max_bytes 1: the first batch alone", 1, 1 << 20, vec![2, 0]),
        ("partition_max_bytes 1: the first batch alone", 1 << 20, 1, vec![2, 0]),
        ("no limit reached", 1 << 20, 1 << 20, vec![3, 1]),
    ] {
        let mut request = fetch_request("t", 0, 0, 0).with_max_bytes(max_bytes);
        let mut second = request.topics[0].partitions[0].clone().with_partition(1);
        second.partition_max_bytes = partition_max_bytes;
        request.topics[0].partitions[0].partition_max_bytes = partition_max_bytes;
        request.topics[0].partitions.push(second);
        let resp = c.send(request, 12).await.expect("fetch");
        assert_eq!(fetched(&resp), expected, "{label}");
    }
}

#[tokio::test(start_paused = true)]
async fn fetch_waits_for_data_up_to_its_max_wait() {
    let cluster = cluster();
    cluster.create_topic("t", 1).expect("created");
    let mut consumer = connect(&cluster, 0, "c");
    let start = tokio::time::Instant::now();
    let empty = consumer.send(fetch_request("t", 0, 0, 500), 12).await.expect("fetch");
    assert_eq!(start.elapsed(), Duration::from_millis(500), "an empty log waits the whole max wait");
    assert!(empty.responses[0].partitions[0].records.as_ref().is_some_and(|r| r.is_empty()));

    let c2 = cluster.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut producer = connect(&c2, 0, "p");
        producer.send(produce_request("t", 0, batch(&["x"], 0), 1), 9).await.expect("produce");
    });
    let start = tokio::time::Instant::now();
    let resp = consumer.send(fetch_request("t", 0, 0, 10_000), 12).await.expect("fetch");
    assert!(start.elapsed() < Duration::from_millis(200), "woken by the produce, not the timeout");
    assert_eq!(
        decode_records(resp.responses[0].partitions[0].records.as_ref().expect("records")).expect("ok").len(),
        1
    );
}

#[tokio::test(start_paused = true)]
async fn acks_zero_gets_no_response_and_the_next_request_is_answered() {
    let cluster = cluster();
    cluster.create_topic("t", 1).expect("created");
    let mut c = connect(&cluster, 0, "t");
    c.send_only(produce_request("t", 0, batch(&["a"], 0), 0), 9).await.expect("sent");
    let resp = c.send(fetch_request("t", 0, 0, 0), 12).await.expect("the next response is the fetch's");
    assert_eq!(resp.responses[0].partitions[0].high_watermark, 1);
}

/// Kafka's `KafkaApis.handleProduceRequest`: an acks=0 producer expects no answer, so a produce
/// with any partition error closes the connection (the client then refreshes its metadata);
/// partitions without an error are still appended (measured against Apache Kafka 4.2 by
/// fidelity's `produce_acks_0_with_an_error_closes_the_connection`).
#[tokio::test(start_paused = true)]
async fn an_acks_zero_produce_with_an_error_closes_its_connection_and_others_keep_working() {
    let cluster = cluster();
    cluster.create_topic("t", 1).expect("created");
    let mut other = connect(&cluster, 0, "other");
    for (label, request) in [
        ("unknown partition", produce_request("t", 5, batch(&["a"], 0), 0)),
        ("invalid record", produce_request("t", 0, Bytes::from_static(b"garbage"), 0)),
    ] {
        let mut c = connect(&cluster, 0, "t");
        c.send_only(request, 9).await.expect("sent");
        let err = c.send(fetch_request("t", 0, 0, 0), 12).await.expect_err(label);
        assert!(matches!(err, kafkasim::Error::Closed | kafkasim::Error::Io(_)), "{label}: {err}");
        let resp = other.send(fetch_request("t", 0, 0, 0), 12).await.expect("the other connection is served");
        assert_eq!(resp.responses[0].partitions[0].error_code, 0);
    }
    // One good and one bad partition: the good one is appended before the connection closes.
    let mut c = connect(&cluster, 0, "t");
    let mut request = produce_request("t", 0, batch(&["kept"], 0), 0);
    let bad = request.topic_data[0].partition_data[0].clone().with_index(7);
    request.topic_data[0].partition_data.push(bad);
    c.send_only(request, 9).await.expect("sent");
    assert!(c.send(fetch_request("t", 0, 0, 0), 12).await.is_err(), "closed");
    assert_eq!(cluster.partition("t", 0).expect("exists").high_watermark, 1);
}

/// Joins `group` as a new member through KIP-394's MEMBER_ID_REQUIRED round; returns the
/// JoinGroup response.
async fn join_new(c: &mut kafkasim::Client<tokio::io::DuplexStream>, group: &str) -> JoinGroupResponse {
    let first = c.send(join_request(group, "", None, 10_000), 5).await.expect("join");
    assert_eq!(first.error_code, E::MemberIdRequired.code());
    c.send(join_request(group, &first.member_id, None, 10_000), 5).await.expect("join")
}

#[tokio::test(start_paused = true)]
async fn a_group_forms_rebalances_on_expiry_and_checks_generations_and_members() {
    let cluster = cluster();
    cluster.create_topic("t", 2).expect("created");
    let mut a = connect(&cluster, 0, "a");
    let mut b = connect(&cluster, 0, "b");
    let ja = join_new(&mut a, "g").await;
    assert_eq!((ja.error_code, ja.generation_id), (0, 1));
    assert_eq!(ja.leader, ja.member_id, "the only member leads");
    let a_id = ja.member_id.to_string();
    let sa = a.send(sync_request("g", 1, &a_id, &[(&a_id, b"all")]), 3).await.expect("sync");
    assert_eq!((sa.error_code, &sa.assignment[..]), (0, &b"all"[..]));

    // b joins: a learns of the rebalance through its heartbeat, rejoins, both get generation 2.
    let join_b = tokio::spawn(async move {
        let r = join_new(&mut b, "g").await;
        (b, r)
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    let hb = a.send(heartbeat_request("g", 1, &a_id), 3).await.expect("heartbeat");
    assert_eq!(hb.error_code, E::RebalanceInProgress.code());
    let commit = a.send(commit_request("g", 1, &a_id, "t", 0, 7, Some("m")), 8).await.expect("commit");
    assert_eq!(commit_code(&commit), 0, "a member of the current generation may commit while preparing");
    let ja2 = a.send(join_request("g", &a_id, None, 10_000), 5).await.expect("rejoin");
    let (mut b, jb) = join_b.await.expect("task");
    assert_eq!((ja2.generation_id, jb.generation_id), (2, 2));
    assert_eq!(ja2.members.len(), 2, "the leader sees both members");
    let b_id = jb.member_id.to_string();

    // CompletingRebalance: commits get REBALANCE_IN_PROGRESS; stale generations ILLEGAL_GENERATION.
    let commit = a.send(commit_request("g", 2, &a_id, "t", 0, 8, None), 8).await.expect("commit");
    assert_eq!(commit_code(&commit), E::RebalanceInProgress.code());
    let commit = a.send(commit_request("g", 1, &a_id, "t", 0, 8, None), 8).await.expect("commit");
    assert_eq!(commit_code(&commit), E::IllegalGeneration.code());
    let commit = a.send(commit_request("g", 2, "ghost", "t", 0, 8, None), 8).await.expect("commit");
    assert_eq!(commit_code(&commit), E::UnknownMemberId.code());

    let sa = a.send(sync_request("g", 2, &a_id, &[(&a_id, b"p0"), (&b_id, b"p1")]), 3).await.expect("sync");
    assert_eq!(&sa.assignment[..], b"p0");
    let sb = b.send(sync_request("g", 2, &b_id, &[]), 3).await.expect("sync");
    assert_eq!(&sb.assignment[..], b"p1");
    let commit = b.send(commit_request("g", 2, &b_id, "t", 1, 42, Some("exact metadata ✓")), 8).await.expect("commit");
    assert_eq!(commit_code(&commit), 0);

    // a keeps heartbeating; b goes silent and expires after its 10 s session.
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let hb = a.send(heartbeat_request("g", 2, &a_id), 3).await.expect("heartbeat");
        if hb.error_code == E::RebalanceInProgress.code() {
            break;
        }
        assert_eq!(hb.error_code, 0);
    }
    let ja3 = a.send(join_request("g", &a_id, None, 10_000), 5).await.expect("rejoin");
    assert_eq!((ja3.generation_id, ja3.members.len()), (3, 1), "b was removed");
    let late = b.send(commit_request("g", 2, &b_id, "t", 1, 43, None), 8).await.expect("commit");
    assert_eq!(commit_code(&late), E::UnknownMemberId.code(), "the expired member may not commit");

    let fetched = a.send(offset_fetch_request("g", "t", &[0, 1]), 7).await.expect("offset fetch");
    let got: Vec<(i64, Option<String>)> = fetched.topics[0]
        .partitions
        .iter()
        .map(|p| (p.committed_offset, p.metadata.as_ref().map(|m| m.to_string())))
        .collect();
    assert_eq!(got, vec![(7, Some("m".into())), (42, Some("exact metadata ✓".into()))]);

    let generations = cluster.generations("g");
    assert_eq!(generations.iter().map(|g| g.members.len()).collect::<Vec<_>>(), vec![1, 2, 1]);
    assert_eq!(generations[1].assignments.get(&b_id).map(|b| &b[..]), Some(&b"p1"[..]));
    let refused: Vec<i16> = cluster.commits().iter().map(|c| c.error).collect();
    assert_eq!(
        refused,
        vec![
            0,
            E::RebalanceInProgress.code(),
            E::IllegalGeneration.code(),
            E::UnknownMemberId.code(),
            0,
            E::UnknownMemberId.code()
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_static_member_rejoining_fences_its_old_member_id() {
    let cluster = cluster();
    let mut old = connect(&cluster, 0, "old");
    let j = old.send(join_request("g", "", Some("instance-1"), 10_000), 5).await.expect("join");
    assert_eq!((j.error_code, j.generation_id), (0, 1), "static members need no MEMBER_ID_REQUIRED round");
    let old_id = j.member_id.to_string();
    old.send(sync_request("g", 1, &old_id, &[(&old_id, b"x")]), 3).await.expect("sync");
    let mut new = connect(&cluster, 0, "new");
    let j2 = new.send(join_request("g", "", Some("instance-1"), 10_000), 5).await.expect("rejoin");
    assert_ne!(j2.member_id.to_string(), old_id);
    let mut hb = heartbeat_request("g", 1, &old_id);
    hb.group_instance_id = Some(s("instance-1"));
    let resp = old.send(hb, 3).await.expect("heartbeat");
    assert_eq!(resp.error_code, E::FencedInstanceId.code());
}

#[tokio::test(start_paused = true)]
async fn group_requests_to_another_broker_are_not_coordinator() {
    let cluster = Cluster::builder().brokers(3).initial_rebalance_delay(Duration::ZERO).build();
    let mut c = connect(&cluster, 0, "c");
    let fc = c.send(FindCoordinatorRequest::default().with_key(s("g")), 3).await.expect("find");
    assert_eq!(fc.error_code, 0);
    let coordinator = fc.node_id.0;
    let other = (coordinator + 1) % 3;
    let mut wrong = connect(&cluster, other, "c");
    let j = wrong.send(join_request("g", "", None, 10_000), 5).await.expect("join");
    assert_eq!(j.error_code, E::NotCoordinator.code());
    // Moving the coordinator moves the answer.
    cluster.apply(Control::MoveCoordinator { group: "g".into(), to: other });
    let j = wrong.send(join_request("g", "", None, 10_000), 5).await.expect("join");
    assert_eq!(j.error_code, E::MemberIdRequired.code());
}

#[tokio::test(start_paused = true)]
async fn error_faults_hit_only_the_selected_partition() {
    let cluster = cluster();
    cluster.create_topic("t", 2).expect("created");
    let _fault =
        cluster.install(Fault::new(ApiKey::Produce, FaultAction::Error(E::NotEnoughReplicas)).topic("t").partition(1));
    let mut c = connect(&cluster, 0, "c");
    let ok = c.send(produce_request("t", 0, batch(&["a"], 0), 1), 9).await.expect("produce");
    let hit = c.send(produce_request("t", 1, batch(&["a"], 0), 1), 9).await.expect("produce");
    assert_eq!(ok.responses[0].partition_responses[0].error_code, 0);
    assert_eq!(hit.responses[0].partition_responses[0].error_code, E::NotEnoughReplicas.code());
    assert_eq!(cluster.partition("t", 1).expect("exists").high_watermark, 0);
}

#[tokio::test(start_paused = true)]
async fn apply_then_drop_stores_the_commit_and_loses_the_response() {
    let cluster = cluster();
    cluster.create_topic("t", 1).expect("created");
    let guard = cluster.install(Fault::new(ApiKey::OffsetCommit, FaultAction::ApplyThenDrop).group("g"));
    let mut c = connect(&cluster, 0, "c");
    let err = c.send(commit_request("g", -1, "", "t", 0, 5, None), 8).await.expect_err("response lost");
    assert!(matches!(err, kafkasim::Error::Closed | kafkasim::Error::Io(_)), "{err}");
    assert_eq!(cluster.committed("g", "t", 0), Some((5, String::new())), "the commit took effect");
    guard.release();
    let mut c = connect(&cluster, 0, "c");
    let ok = c.send(commit_request("g", -1, "", "t", 0, 6, None), 8).await.expect("answered once removed");
    assert_eq!(commit_code(&ok), 0);
}

#[tokio::test(start_paused = true)]
async fn delay_and_silence_faults_hold_the_response() {
    let cluster = cluster();
    let delay = cluster.install(Fault::new(ApiKey::ApiVersions, FaultAction::Delay(Duration::from_secs(2))));
    let mut c = connect(&cluster, 0, "c");
    let start = tokio::time::Instant::now();
    c.send(api_versions(), 3).await.expect("answered late");
    assert_eq!(start.elapsed(), Duration::from_secs(2));
    drop(delay);
    let _silence = cluster.install(Fault::new(ApiKey::ApiVersions, FaultAction::Silence));
    let silent = tokio::time::timeout(Duration::from_secs(60), c.send(api_versions(), 3)).await;
    assert!(silent.is_err(), "no answer at all");
}

#[tokio::test(start_paused = true)]
async fn a_broker_going_down_moves_its_partitions_and_closes_its_connections() {
    let cluster = Cluster::builder().brokers(2).build();
    cluster.create_topic("t", 2).expect("created");
    let leader = cluster.partition("t", 0).expect("exists").leader;
    let mut c = connect(&cluster, leader, "c");
    c.send(produce_request("t", 0, batch(&["a"], 0), 1), 9).await.expect("produce");
    cluster.broker_down(leader);
    let err = c.send(api_versions(), 3).await.expect_err("closed");
    assert!(matches!(err, kafkasim::Error::Closed | kafkasim::Error::Io(_)), "{err}");
    let view = cluster.partition("t", 0).expect("exists");
    assert_ne!(view.leader, leader);
    assert_eq!((view.leader_epoch, view.high_watermark), (1, 1), "acknowledged data survives");
    let mut other = connect(&cluster, view.leader, "c");
    let resp = other.send(produce_request("t", 0, batch(&["b"], 0), 1), 9).await.expect("produce");
    assert_eq!(resp.responses[0].partition_responses[0].base_offset, 1);
    cluster.broker_up(leader);
    let mut back = connect(&cluster, leader, "c");
    let stale = back.send(produce_request("t", 0, batch(&["c"], 0), 1), 9).await.expect("produce");
    assert_eq!(stale.responses[0].partition_responses[0].error_code, E::NotLeaderOrFollower.code());
}

#[tokio::test(start_paused = true)]
async fn retention_by_size_moves_the_log_start_offset() {
    let cluster = Cluster::builder().partition_bytes_max(200).build();
    cluster.create_topic("t", 1).expect("created");
    let mut c = connect(&cluster, 0, "c");
    for i in 0..5 {
        c.send(produce_request("t", 0, batch(&[&format!("value-{i}")], 0), 1), 9).await.expect("produce");
    }
    let view = cluster.partition("t", 0).expect("exists");
    assert!(view.log_start > 0, "{view:?}");
    let resp = c.send(fetch_request("t", 0, 0, 0), 12).await.expect("fetch");
    assert_eq!(resp.responses[0].partitions[0].error_code, E::OffsetOutOfRange.code());
    // As Kafka, an out-of-range answer carries no watermarks; ListOffsets gives the log start.
    assert_eq!(resp.responses[0].partitions[0].log_start_offset, -1);
    assert_eq!(resp.responses[0].partitions[0].high_watermark, -1);
    let earliest = c.send(list_offsets_request("t", 0, -2), 7).await.expect("list offsets");
    assert_eq!(earliest.topics[0].partitions[0].offset, view.log_start);
}

#[tokio::test(start_paused = true)]
async fn metadata_auto_creates_and_create_topics_checks_its_arguments() {
    let cluster = Cluster::builder().default_partitions(3).build();
    let mut c = connect(&cluster, 0, "c");
    let md = c
        .send(
            MetadataRequest::default()
                .with_topics(Some(vec![
                    metadata_request::MetadataRequestTopic::default().with_name(Some(TopicName(s("auto")))),
                ]))
                .with_allow_auto_topic_creation(true),
            12,
        )
        .await
        .expect("metadata");
    assert_eq!((md.topics[0].error_code, md.topics[0].partitions.len()), (0, 3));
    assert_eq!(md.brokers.len(), 1);
    let create = |name: &str, partitions: i32, rf: i16| {
        CreateTopicsRequest::default().with_timeout_ms(1000).with_topics(vec![
            create_topics_request::CreatableTopic::default()
                .with_name(TopicName(s(name)))
                .with_num_partitions(partitions)
                .with_replication_factor(rf),
        ])
    };
    let mut codes = Vec::new();
    for (name, p, rf) in [("fresh", 2, 1), ("fresh", 2, 1), ("bad/name", 1, 1), ("zero", 0, 1), ("rf", 1, 3)] {
        let resp = c.send(create(name, p, rf), 7).await.expect("create");
        codes.push(resp.topics[0].error_code);
    }
    assert_eq!(
        codes,
        vec![
            0,
            E::TopicAlreadyExists.code(),
            E::InvalidTopicException.code(),
            E::InvalidPartitions.code(),
            E::InvalidReplicationFactor.code()
        ]
    );
    let del = c
        .send(DeleteTopicsRequest::default().with_topic_names(vec![TopicName(s("fresh")), TopicName(s("gone"))]), 5)
        .await
        .expect("delete");
    let codes: Vec<i16> = del.responses.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, vec![0, E::UnknownTopicOrPartition.code()]);
    assert_eq!(cluster.topics(), vec!["auto".to_string()]);
}

#[tokio::test(start_paused = true)]
async fn describe_list_and_batch_leave_report_the_group_as_kafka_does() {
    let cluster = cluster();
    let mut a = connect(&cluster, 0, "client-a");
    let ja = join_new(&mut a, "g").await;
    let a_id = ja.member_id.to_string();
    a.send(sync_request("g", ja.generation_id, &a_id, &[(&a_id, b"assignment")]), 3).await.expect("sync");

    let described = a
        .send(DescribeGroupsRequest::default().with_groups(vec![GroupId(s("g")), GroupId(s("unknown"))]), 5)
        .await
        .expect("describe");
    let g = &described.groups[0];
    assert_eq!(
        (g.error_code, g.group_state.as_str(), g.protocol_type.as_str(), g.protocol_data.as_str()),
        (0, "Stable", "consumer", "range")
    );
    assert_eq!(g.members.len(), 1);
    assert_eq!(
        (g.members[0].client_id.as_str(), &g.members[0].member_assignment[..]),
        ("client-a", &b"assignment"[..])
    );
    assert_eq!(described.groups[1].group_state.as_str(), "Dead", "an unknown group is described as Dead");

    let listed = a.send(ListGroupsRequest::default(), 4).await.expect("list");
    let states: Vec<(String, String)> =
        listed.groups.iter().map(|g| (g.group_id.0.to_string(), g.group_state.to_string())).collect();
    assert_eq!(states, vec![("g".to_string(), "Stable".to_string())]);

    // LeaveGroup v3+: a batch; an unknown member gets UNKNOWN_MEMBER_ID, the rest leave.
    let leave = LeaveGroupRequest::default().with_group_id(GroupId(s("g"))).with_members(vec![
        leave_group_request::MemberIdentity::default().with_member_id(s(&a_id)),
        leave_group_request::MemberIdentity::default().with_member_id(s("ghost")),
    ]);
    let resp = a.send(leave, 4).await.expect("leave");
    let codes: Vec<i16> = resp.members.iter().map(|m| m.error_code).collect();
    assert_eq!((resp.error_code, codes), (0, vec![0, E::UnknownMemberId.code()]));
    let view = cluster.group("g").expect("still known");
    assert_eq!((view.state.as_str(), view.members.len()), ("Empty", 0));
    let filtered = a.send(ListGroupsRequest::default().with_states_filter(vec![s("Stable")]), 4).await.expect("list");
    assert!(filtered.groups.is_empty(), "the state filter excludes the now empty group");
}

#[tokio::test(start_paused = true)]
async fn admin_commits_only_reach_empty_groups_and_large_metadata_is_refused() {
    let cluster = cluster();
    cluster.create_topic("t", 1).expect("created");
    let mut c = connect(&cluster, 0, "admin");
    let ok = c.send(commit_request("fresh", -1, "", "t", 0, 1, None), 8).await.expect("commit");
    assert_eq!(commit_code(&ok), 0, "an admin commit to an unknown group creates it");
    let big = "x".repeat(kafkasim::groups::OFFSET_METADATA_BYTES_MAX + 1);
    let refused = c.send(commit_request("fresh", -1, "", "t", 0, 2, Some(&big)), 8).await.expect("commit");
    assert_eq!(commit_code(&refused), E::OffsetMetadataTooLarge.code());
    let gen_on_unknown = c.send(commit_request("other", 3, "m", "t", 0, 1, None), 8).await.expect("commit");
    assert_eq!(commit_code(&gen_on_unknown), E::IllegalGeneration.code());

    let mut m = connect(&cluster, 0, "member");
    join_new(&mut m, "busy").await;
    let admin = c.send(commit_request("busy", -1, "", "t", 0, 1, None), 8).await.expect("commit");
    assert_eq!(commit_code(&admin), E::UnknownMemberId.code(), "no admin commit into a live group");
    assert_eq!(cluster.committed("fresh", "t", 0), Some((1, String::new())));
}

#[tokio::test(start_paused = true)]
async fn compressed_batches_are_stored_and_fetched_as_sent() {
    use kafkasim::kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    let cluster = cluster();
    cluster.create_topic("t", 1).expect("created");
    let mut c = connect(&cluster, 0, "c");
    for compression in [Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd] {
        let records: Vec<Record> = (0..3)
            .map(|i| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: 0,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: i,
                sequence: -1 + i as i32,
                timestamp: 0,
                key: None,
                value: Some(Bytes::from(format!("{compression:?}-{i}"))),
                headers: Default::default(),
            })
            .collect();
        let mut buf = bytes::BytesMut::new();
        RecordBatchEncoder::encode(&mut buf, &records, &RecordEncodeOptions { version: 2, compression })
            .expect("encodes");
        let resp = c.send(produce_request("t", 0, buf.freeze(), 1), 9).await.expect("produce");
        assert_eq!(resp.responses[0].partition_responses[0].error_code, 0, "{compression:?}");
    }
    let resp = c.send(fetch_request("t", 0, 0, 0), 12).await.expect("fetch");
    let records = decode_records(resp.responses[0].partitions[0].records.as_ref().expect("records")).expect("decodes");
    let values: Vec<String> =
        records.iter().map(|r| String::from_utf8_lossy(r.2.as_deref().unwrap_or_default()).to_string()).collect();
    assert_eq!(values.len(), 12);
    assert_eq!(values[3], "Snappy-0");
    assert_eq!(records.iter().map(|r| r.0).collect::<Vec<_>>(), (0..12).collect::<Vec<i64>>());
}

#[tokio::test(start_paused = true)]
async fn moving_a_leader_bumps_its_epoch_and_redirects_clients() {
    let cluster = Cluster::builder().brokers(2).build();
    cluster.create_topic("t", 1).expect("created");
    let old = cluster.partition("t", 0).expect("exists").leader;
    let new = 1 - old;
    cluster.apply(Control::MoveLeader { topic: "t".into(), partition: 0, to: new });
    let mut c = connect(&cluster, old, "c");
    let stale = c.send(produce_request("t", 0, batch(&["a"], 0), 1), 9).await.expect("answered");
    assert_eq!(stale.responses[0].partition_responses[0].error_code, E::NotLeaderOrFollower.code());
    let fetch = c.send(fetch_request("t", 0, 0, 0), 12).await.expect("answered");
    assert_eq!(fetch.responses[0].partitions[0].error_code, E::NotLeaderOrFollower.code());
    let md = c
        .send(
            MetadataRequest::default().with_topics(Some(vec![
                metadata_request::MetadataRequestTopic::default().with_name(Some(TopicName(s("t")))),
            ])),
            12,
        )
        .await
        .expect("metadata");
    let p = &md.topics[0].partitions[0];
    assert_eq!((p.leader_id.0, p.leader_epoch), (new, 1));
    let mut c = connect(&cluster, new, "c");
    let ok = c.send(produce_request("t", 0, batch(&["a"], 0), 1), 9).await.expect("answered");
    assert_eq!(ok.responses[0].partition_responses[0].error_code, 0);
}

/// Apache Kafka 4.2 answers a LeaveGroup of a group it does not know as it answers unknown
/// members of a known group: v3+ with `NONE` and `UNKNOWN_MEMBER_ID` per member, v0–2 with
/// `UNKNOWN_MEMBER_ID` (measured by fidelity's `leave_of_an_unknown_group_answers_each_member`).
#[tokio::test(start_paused = true)]
async fn leave_of_an_unknown_group_answers_each_member_unknown() {
    let cluster = cluster();
    let mut c = connect(&cluster, 0, "c");
    let leave = LeaveGroupRequest::default().with_group_id(GroupId(s("never"))).with_members(vec![
        leave_group_request::MemberIdentity::default().with_member_id(s("ghost")),
        leave_group_request::MemberIdentity::default().with_member_id(s("")).with_group_instance_id(Some(s("i"))),
    ]);
    let resp = c.send(leave, 5).await.expect("leave v5");
    assert_eq!(resp.error_code, 0);
    let codes: Vec<i16> = resp.members.iter().map(|m| m.error_code).collect();
    assert_eq!(codes, vec![E::UnknownMemberId.code(); 2]);
    assert_eq!(resp.members[0].member_id.as_str(), "ghost");
    let v2 = LeaveGroupRequest::default().with_group_id(GroupId(s("never"))).with_member_id(s("ghost"));
    assert_eq!(c.send(v2, 2).await.expect("leave v2").error_code, E::UnknownMemberId.code());
    assert!(cluster.group("never").is_none(), "no group is created");
}

/// Apache Kafka refuses a topic whose name differs from an existing one only by '.' against '_'
/// (`INVALID_TOPIC_EXCEPTION`: they would share metric names), and answers a name sent twice in
/// one CreateTopics once, with `INVALID_REQUEST`, after the other results, creating nothing for
/// it (measured by fidelity's `create_topics_refuses_colliding_and_duplicate_names`).
#[tokio::test(start_paused = true)]
async fn create_topics_refuses_colliding_names_and_a_name_sent_twice() {
    let cluster = cluster();
    cluster.create_topic("orders.eu_west", 1).expect("created");
    assert_eq!(cluster.create_topic("orders.eu_west", 1), Err(E::TopicAlreadyExists));
    for colliding in ["orders_eu_west", "orders.eu.west"] {
        assert_eq!(cluster.create_topic(colliding, 1), Err(E::InvalidTopicException), "{colliding}");
    }
    cluster.create_topic("orders-eu-west", 1).expect("'-' does not collide");
    let mut c = connect(&cluster, 0, "admin");
    let topic = |name: &str| {
        create_topics_request::CreatableTopic::default()
            .with_name(TopicName(s(name)))
            .with_num_partitions(1)
            .with_replication_factor(1)
    };
    let request = CreateTopicsRequest::default().with_timeout_ms(1000).with_topics(vec![
        topic("twice"),
        topic("twice"),
        topic("once"),
    ]);
    let resp = c.send(request, 7).await.expect("answered");
    let results: Vec<(String, i16)> = resp.topics.iter().map(|t| (t.name.0.to_string(), t.error_code)).collect();
    assert_eq!(results, vec![("once".to_string(), 0), ("twice".to_string(), E::InvalidRequest.code())]);
    assert_eq!(cluster.topics(), vec!["once", "orders-eu-west", "orders.eu_west"]);
}
