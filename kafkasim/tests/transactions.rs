//! Transactions on the simulated network, request by request (KIP-98, transaction version 1):
//! commit and abort markers, the last stable offset and `read_committed` fetches with their
//! aborted-transaction lists, fencing by a second InitProducerId, the coordinator's timeout on
//! the simulation's clock, TxnOffsetCommit offsets that only a commit makes visible, a lost
//! EndTxn response and a coordinator that moves mid-transaction.

mod support;

use std::time::Duration;

use kafkasim::client::transactional_record_batch;
use kafkasim::kafka_protocol::messages::*;
use kafkasim::kafka_protocol::records::RecordBatchDecoder;
use kafkasim::requests::{fetch, produce, string};
use kafkasim::{Client, Cluster, Control, Fault, FaultAction};
use sim::net::TcpStream;
use sim::{Ctx, Failure, Simulation};
use support::{expect, fail};

const TOPIC: &str = "out";
const TXN: &str = "tx-1";
const NONE: i16 = 0;
const NOT_COORDINATOR: i16 = 16;
const INVALID_PRODUCER_EPOCH: i16 = 47;
const INVALID_TXN_STATE: i16 = 48;
const CONCURRENT_TRANSACTIONS: i16 = 51;
const PRODUCER_FENCED: i16 = 90;

type C = Client<TcpStream>;

async fn setup(ctx: &Ctx) -> Result<(Cluster, C), Failure> {
    let cluster = Cluster::builder().brokers(1).build();
    cluster.serve_sim(ctx).map_err(fail)?;
    cluster.create_topic(TOPIC, 1).map_err(|e| fail(format!("{e:?}")))?;
    let stream = ctx.net().host("app").dial("kafka-0:9092").await.map_err(fail)?;
    Ok((cluster, Client::new(stream, "app")))
}

async fn init(c: &mut C, id: &str, timeout_ms: i32) -> Result<Result<(i64, i16), i16>, Failure> {
    let q = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(string(id))))
        .with_transaction_timeout_ms(timeout_ms)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let r = c.send(q, 4).await.map_err(fail)?;
    Ok(if r.error_code == 0 { Ok((r.producer_id.0, r.producer_epoch)) } else { Err(r.error_code) })
}

async fn add_partition(c: &mut C, p: (i64, i16)) -> Result<i16, Failure> {
    let q = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(string(TXN)))
        .with_v3_and_below_producer_id(ProducerId(p.0))
        .with_v3_and_below_producer_epoch(p.1)
        .with_v3_and_below_topics(vec![
            add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                .with_name(TopicName(string(TOPIC)))
                .with_partitions(vec![0]),
        ]);
    let r = c.send(q, 3).await.map_err(fail)?;
    Ok(r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code)
}

async fn send(c: &mut C, p: (i64, i16), seq: i32, values: &[&str]) -> Result<i16, Failure> {
    let records: Vec<_> = values.iter().map(|v| (None, Some(v.as_bytes()), 1_000)).collect();
    let batch = transactional_record_batch(&records, (p.0, p.1, seq)).map_err(fail)?;
    let q = produce(TOPIC, 0, batch, -1).with_transactional_id(Some(TransactionalId(string(TXN))));
    let r = c.send(q, 9).await.map_err(fail)?;
    Ok(r.responses[0].partition_responses[0].error_code)
}

async fn end(c: &mut C, p: (i64, i16), commit: bool) -> Result<i16, Failure> {
    let q = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(string(TXN)))
        .with_producer_id(ProducerId(p.0))
        .with_producer_epoch(p.1)
        .with_committed(commit);
    Ok(c.send(q, 3).await.map_err(fail)?.error_code)
}

/// A fetch from `offset`: (high watermark, last stable offset, aborted first offsets, values).
async fn read(c: &mut C, offset: i64, committed: bool) -> Result<(i64, i64, Vec<i64>, Vec<String>), Failure> {
    let q = fetch(TOPIC, 0, offset, Duration::ZERO).with_isolation_level(i8::from(committed));
    let r = c.send(q, 12).await.map_err(fail)?;
    let p = &r.responses[0].partitions[0];
    let aborted = p.aborted_transactions.iter().flatten().map(|a| a.first_offset).collect();
    let mut bytes = p.records.clone().unwrap_or_default();
    let sets = RecordBatchDecoder::decode_all(&mut bytes).map_err(fail)?;
    let values = sets
        .into_iter()
        .flat_map(|s| s.records)
        .filter(|r| r.offset >= offset && !r.control)
        .map(|r| {
            format!("{}:{}", r.offset, r.value.map(|v| String::from_utf8_lossy(&v).into_owned()).unwrap_or_default())
        })
        .collect();
    Ok((p.high_watermark, p.last_stable_offset, aborted, values))
}

async fn commit_and_abort(ctx: Ctx) -> Result<(), Failure> {
    let (cluster, mut c) = setup(&ctx).await?;
    let p = init(&mut c, TXN, 60_000).await?.map_err(|e| fail(format!("init: {e}")))?;
    expect("the first epoch", p.1, 0)?;
    expect("a batch to a partition not in the transaction", send(&mut c, p, 0, &["x"]).await?, INVALID_TXN_STATE)?;
    expect("EndTxn with no transaction", end(&mut c, p, true).await?, INVALID_TXN_STATE)?;

    expect("add the partition", add_partition(&mut c, p).await?, NONE)?;
    expect("two transactional records", send(&mut c, p, 0, &["a1", "a2"]).await?, NONE)?;
    let (hw, lso, aborted, values) = read(&mut c, 0, true).await?;
    expect("read_committed while open: hw, lso, aborted, values", (hw, lso, aborted, values), (2, 0, vec![], vec![]))?;
    let (_, lso, _, values) = read(&mut c, 0, false).await?;
    expect("read_uncommitted while open", (lso, values), (0, vec!["0:a1".to_string(), "1:a2".to_string()]))?;
    expect("abort", end(&mut c, p, false).await?, NONE)?;
    expect("abort again (a retry)", end(&mut c, p, false).await?, NONE)?;
    expect("commit after the abort", end(&mut c, p, true).await?, INVALID_TXN_STATE)?;
    let (hw, lso, aborted, _) = read(&mut c, 0, true).await?;
    expect("after the abort: hw (with the marker), lso, aborted", (hw, lso, aborted), (3, 3, vec![0]))?;

    expect("add the partition again", add_partition(&mut c, p).await?, NONE)?;
    expect("one more record", send(&mut c, p, 2, &["b1"]).await?, NONE)?;
    expect("commit", end(&mut c, p, true).await?, NONE)?;
    let (hw, lso, aborted, values) = read(&mut c, 3, true).await?;
    expect("after the commit", (hw, lso, aborted, values), (5, 5, vec![], vec!["3:b1".to_string()]))?;
    let view = cluster.partition(TOPIC, 0).ok_or_else(|| fail("no partition"))?;
    expect("the view's last stable offset", view.last_stable_offset, 5)?;
    Ok(())
}

#[test]
fn commit_and_abort_write_markers_and_read_committed_reads_below_the_last_stable_offset() {
    let report = Simulation::new("txn_commit_abort").seeds(0..4).run(commit_and_abort);
    assert!(report.passed(), "{report}");
}

async fn fencing(ctx: Ctx) -> Result<(), Failure> {
    let (cluster, mut c) = setup(&ctx).await?;
    let old = init(&mut c, TXN, 60_000).await?.map_err(|e| fail(format!("init: {e}")))?;
    let new = init(&mut c, TXN, 60_000).await?.map_err(|e| fail(format!("init again: {e}")))?;
    expect("the second InitProducerId keeps the id and bumps the epoch", new, (old.0, 1))?;
    expect("the fenced producer adds a partition", add_partition(&mut c, old).await?, PRODUCER_FENCED)?;
    expect("the fenced producer ends", end(&mut c, old, true).await?, PRODUCER_FENCED)?;
    expect("the new producer adds it", add_partition(&mut c, new).await?, NONE)?;
    expect("the fenced epoch's batch", send(&mut c, old, 0, &["stale"]).await?, INVALID_PRODUCER_EPOCH)?;
    expect("the new producer's batch", send(&mut c, new, 0, &["fresh"]).await?, NONE)?;
    expect(
        "the LSO holds at the open transaction",
        cluster.partition(TOPIC, 0).map(|v| v.last_stable_offset),
        Some(0),
    )?;
    // A third producer while the transaction is open: the coordinator aborts it first.
    expect(
        "InitProducerId during an open transaction",
        init(&mut c, TXN, 60_000).await?,
        Err(CONCURRENT_TRANSACTIONS),
    )?;
    let third = init(&mut c, TXN, 60_000).await?.map_err(|e| fail(format!("init a third time: {e}")))?;
    expect("the retry's epoch (fence + bump)", third, (old.0, 3))?;
    let (hw, lso, aborted, _) = read(&mut c, 0, true).await?;
    expect("the open transaction was aborted", (hw, lso, aborted), (2, 2, vec![0]))?;
    Ok(())
}

#[test]
fn a_second_init_producer_id_fences_the_first_and_aborts_its_open_transaction() {
    let report = Simulation::new("txn_fencing").seeds(0..4).run(fencing);
    assert!(report.passed(), "{report}");
}

async fn timeout(ctx: Ctx) -> Result<(), Failure> {
    let (cluster, mut c) = setup(&ctx).await?;
    let p = init(&mut c, TXN, 15_000).await?.map_err(|e| fail(format!("init: {e}")))?;
    expect("add", add_partition(&mut c, p).await?, NONE)?;
    expect("send", send(&mut c, p, 0, &["late"]).await?, NONE)?;
    let lso = |cluster: &Cluster| cluster.partition(TOPIC, 0).map(|v| v.last_stable_offset);
    // Opened near t = 0 with a 15 s timeout: the coordinator's check at t = 20 s aborts it.
    tokio::time::sleep(Duration::from_secs(19)).await;
    expect("open at 19 s", lso(&cluster), Some(0))?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    expect("aborted by 21 s", lso(&cluster), Some(2))?;
    expect("the timed-out producer is fenced", end(&mut c, p, true).await?, PRODUCER_FENCED)?;
    let (_, _, aborted, _) = read(&mut c, 0, true).await?;
    expect("listed as aborted", aborted, vec![0])?;
    Ok(())
}

#[test]
fn an_open_transaction_is_aborted_when_its_timeout_passes_on_the_simulation_clock() {
    let report = Simulation::new("txn_timeout").seeds(0..4).run(timeout);
    assert!(report.passed(), "{report}");
}

async fn offsets(ctx: Ctx) -> Result<(), Failure> {
    let (cluster, mut c) = setup(&ctx).await?;
    let group = "etl";
    let find = FindCoordinatorRequest::default().with_key_type(1).with_coordinator_keys(vec![string(TXN)]);
    let r = c.send(find, 4).await.map_err(fail)?;
    expect("the transaction coordinator", r.coordinators[0].error_code, NONE)?;
    let p = init(&mut c, TXN, 60_000).await?.map_err(|e| fail(format!("init: {e}")))?;
    let commit_offsets = |p: (i64, i16), offset: i64| {
        TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(string(TXN)))
            .with_group_id(GroupId(string(group)))
            .with_producer_id(ProducerId(p.0))
            .with_producer_epoch(p.1)
            .with_generation_id(-1)
            .with_topics(vec![
                txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                    .with_name(TopicName(string(TOPIC)))
                    .with_partitions(vec![
                        txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(offset)
                            .with_committed_leader_epoch(-1),
                    ]),
            ])
    };
    let r = c.send(commit_offsets(p, 7), 3).await.map_err(fail)?;
    expect("TxnOffsetCommit before AddOffsetsToTxn", r.topics[0].partitions[0].error_code, INVALID_TXN_STATE)?;
    let add = AddOffsetsToTxnRequest::default()
        .with_transactional_id(TransactionalId(string(TXN)))
        .with_producer_id(ProducerId(p.0))
        .with_producer_epoch(p.1)
        .with_group_id(GroupId(string(group)));
    expect("AddOffsetsToTxn", c.send(add.clone(), 3).await.map_err(fail)?.error_code, NONE)?;
    let r = c.send(commit_offsets(p, 7), 3).await.map_err(fail)?;
    expect("TxnOffsetCommit", r.topics[0].partitions[0].error_code, NONE)?;
    expect("not visible before the commit", cluster.committed(group, TOPIC, 0), None)?;
    expect("abort", end(&mut c, p, false).await?, NONE)?;
    expect("an aborted transaction's offsets are dropped", cluster.committed(group, TOPIC, 0), None)?;
    expect("AddOffsetsToTxn again", c.send(add, 3).await.map_err(fail)?.error_code, NONE)?;
    let r = c.send(commit_offsets(p, 9), 3).await.map_err(fail)?;
    expect("TxnOffsetCommit again", r.topics[0].partitions[0].error_code, NONE)?;
    expect("commit", end(&mut c, p, true).await?, NONE)?;
    expect("the committed offset", cluster.committed(group, TOPIC, 0), Some((9, String::new())))?;
    expect("no marker in the user's log", cluster.partition(TOPIC, 0).map(|v| v.high_watermark), Some(0))?;
    Ok(())
}

#[test]
fn txn_offset_commit_offsets_become_the_groups_only_when_the_transaction_commits() {
    let report = Simulation::new("txn_offsets").seeds(0..4).run(offsets);
    assert!(report.passed(), "{report}");
}

async fn lost_end_txn_response(ctx: Ctx) -> Result<(), Failure> {
    let (cluster, mut c) = setup(&ctx).await?;
    let p = init(&mut c, TXN, 60_000).await?.map_err(|e| fail(format!("init: {e}")))?;
    expect("add", add_partition(&mut c, p).await?, NONE)?;
    expect("send", send(&mut c, p, 0, &["once"]).await?, NONE)?;
    // The commit takes effect, then the connection closes: the producer cannot know which.
    let guard = cluster.install(Fault::new(ApiKey::EndTxn, FaultAction::ApplyThenDrop).group(TXN));
    if end(&mut c, p, true).await.is_ok() {
        return Err(fail("EndTxn under ApplyThenDrop was answered"));
    }
    guard.release();
    expect(
        "committed although the answer was lost",
        cluster.partition(TOPIC, 0).map(|v| v.last_stable_offset),
        Some(2),
    )?;
    let stream = ctx.net().host("app").dial("kafka-0:9092").await.map_err(fail)?;
    let mut c = Client::new(stream, "app");
    expect("the retried commit", end(&mut c, p, true).await?, NONE)?;
    let (_, _, aborted, values) = read(&mut c, 0, true).await?;
    expect("the record, once, committed", (aborted, values), (vec![], vec!["0:once".to_string()]))?;
    Ok(())
}

#[test]
fn a_lost_end_txn_response_is_retried_and_the_commit_counts_once() {
    let report = Simulation::new("txn_lost_end").seeds(0..4).run(lost_end_txn_response);
    assert!(report.passed(), "{report}");
}

async fn coordinator_moves(ctx: Ctx) -> Result<(), Failure> {
    let cluster = Cluster::builder().brokers(2).build();
    cluster.serve_sim(&ctx).map_err(fail)?;
    cluster.create_topic(TOPIC, 1).map_err(|e| fail(format!("{e:?}")))?;
    let dial = async |broker: i32| -> Result<C, Failure> {
        let stream = ctx.net().host("app").dial(&format!("kafka-{broker}:9092")).await.map_err(fail)?;
        Ok(Client::new(stream, "app"))
    };
    let find = async |c: &mut C| -> Result<i32, Failure> {
        let q = FindCoordinatorRequest::default().with_key_type(1).with_coordinator_keys(vec![string(TXN)]);
        Ok(c.send(q, 4).await.map_err(fail)?.coordinators[0].node_id.0)
    };
    let mut any = dial(0).await?;
    let first = find(&mut any).await?;
    let mut c = dial(first).await?;
    let p = init(&mut c, TXN, 60_000).await?.map_err(|e| fail(format!("init: {e}")))?;
    let leader = cluster.partition(TOPIC, 0).ok_or_else(|| fail("no partition"))?.leader;
    let mut to_leader = dial(leader).await?;
    expect("add", add_partition(&mut c, p).await?, NONE)?;
    expect("send", send(&mut to_leader, p, 0, &["moved"]).await?, NONE)?;
    // Mid-transaction the coordinator moves; the transaction's state goes with it, as Kafka
    // reloads it from `__transaction_state`.
    let other = 1 - first;
    cluster.apply(Control::MoveCoordinator { group: TXN.into(), to: other });
    expect("EndTxn at the old coordinator", end(&mut c, p, true).await?, NOT_COORDINATOR)?;
    expect("FindCoordinator names the new one", find(&mut any).await?, other)?;
    let mut c = dial(other).await?;
    expect("EndTxn at the new coordinator", end(&mut c, p, true).await?, NONE)?;
    let (_, lso, _, values) = read(&mut to_leader, 0, true).await?;
    expect("committed", (lso, values), (2, vec!["0:moved".to_string()]))?;
    Ok(())
}

#[test]
fn a_coordinator_move_mid_transaction_answers_not_coordinator_and_the_new_one_commits() {
    let report = Simulation::new("txn_coordinator_moves").seeds(0..4).run(coordinator_moves);
    assert!(report.passed(), "{report}");
}
