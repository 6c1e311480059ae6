//! Q10 in a simulation: a consume-transform-produce worker (KIP-98) copies every record of
//! `in` to `out` in a transaction that also commits its input offset (AddOffsetsToTxn,
//! TxnOffsetCommit), crashes in the middle of a record, and a new instance with the same
//! transactional id (which fences the old one and aborts its open transaction) resumes from the
//! committed offset. Correct, Q10 passes: every input record has exactly one committed output.
//! With the planted bug — the offset committed with a plain OffsetCommit after EndTxn, and the
//! crash between the two — the restarted worker writes that record's output again: Q10 fails
//! every seed, naming the input offset.

mod support;

use std::time::Duration;

use bytes::Bytes;
use kafkasim::client::{RecordHeaders, decode_records, record_batch, transactional_encode_batch};
use kafkasim::kafka_protocol::messages::*;
use kafkasim::models::{self, Q10, Spec, TopicPartition, source_header};
use kafkasim::requests::{fetch, offset_commit, offset_fetch, produce, string};
use kafkasim::{Client, Cluster};
use sim::net::TcpStream;
use sim::{Class, Ctx, Failure, Simulation};
use support::{expect, fail};

const GROUP: &str = "etl";
const TXN: &str = "etl-0";
const INPUTS: i64 = 5;
const CONCURRENT_TRANSACTIONS: i16 = 51;
/// The input offset the first instance crashes at.
const CRASH_AT: i64 = 2;

type C = Client<TcpStream>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    /// Offsets in the transaction; the crash after producing, before EndTxn.
    Correct,
    /// Offsets by OffsetCommit after EndTxn; the crash between the two.
    OffsetsAfterCommit,
}

async fn check(what: &str, code: i16) -> Result<(), Failure> {
    expect(what, code, 0)
}

/// One worker instance: returns whether it crashed (at [`CRASH_AT`], if `crash`).
async fn worker(ctx: &Ctx, variant: Variant, crash: bool) -> Result<bool, Failure> {
    let stream = ctx.net().host("worker").dial("kafka-0:9092").await.map_err(fail)?;
    let mut c: C = Client::new(stream, "worker");
    let init = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(string(TXN))))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    // CONCURRENT_TRANSACTIONS while the coordinator aborts the crashed instance's transaction:
    // retry after the clients' retry.backoff.ms (100 ms), as a producer does.
    let r = loop {
        let r = c.send(init.clone(), 4).await.map_err(fail)?;
        if r.error_code != CONCURRENT_TRANSACTIONS {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    check("init", r.error_code).await?;
    let (pid, epoch) = (r.producer_id.0, r.producer_epoch);
    let r = c.send(offset_fetch(GROUP, "in", &[0]), 7).await.map_err(fail)?;
    let start = r.topics[0].partitions[0].committed_offset.max(0);
    let r = c.send(fetch("in", 0, start, Duration::ZERO), 12).await.map_err(fail)?;
    let inputs = decode_records(&r.responses[0].partitions[0].records.clone().unwrap_or_default()).map_err(fail)?;
    let input = TopicPartition::new("in", 0);
    for (seq, (offset, _, value)) in (0..).zip(inputs.into_iter().filter(|r| r.0 >= start)) {
        let add = AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(TransactionalId(string(TXN)))
            .with_v3_and_below_producer_id(ProducerId(pid))
            .with_v3_and_below_producer_epoch(epoch)
            .with_v3_and_below_topics(vec![
                add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(string("out")))
                    .with_partitions(vec![0]),
            ]);
        let r = c.send(add, 3).await.map_err(fail)?;
        check("add partition", r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code).await?;
        let (name, source) = source_header(&input, offset);
        let mut headers = RecordHeaders::default();
        headers.insert(string(name), Some(Bytes::from(source)));
        let upper = value.map(|v| v.to_ascii_uppercase()).unwrap_or_default();
        let batch =
            transactional_encode_batch([(None, Some(&upper[..]), 1_000, headers)], (pid, epoch, seq)).map_err(fail)?;
        let q = produce("out", 0, batch, -1).with_transactional_id(Some(TransactionalId(string(TXN))));
        check("produce", c.send(q, 9).await.map_err(fail)?.responses[0].partition_responses[0].error_code).await?;
        if variant == Variant::Correct {
            if crash && offset == CRASH_AT {
                return Ok(true);
            }
            let add = AddOffsetsToTxnRequest::default()
                .with_transactional_id(TransactionalId(string(TXN)))
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_group_id(GroupId(string(GROUP)));
            check("add offsets", c.send(add, 3).await.map_err(fail)?.error_code).await?;
            let q = TxnOffsetCommitRequest::default()
                .with_transactional_id(TransactionalId(string(TXN)))
                .with_group_id(GroupId(string(GROUP)))
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_generation_id(-1)
                .with_topics(vec![
                    txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                        .with_name(TopicName(string("in")))
                        .with_partitions(vec![
                            txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                                .with_partition_index(0)
                                .with_committed_offset(offset + 1)
                                .with_committed_leader_epoch(-1),
                        ]),
                ]);
            check("txn offset commit", c.send(q, 3).await.map_err(fail)?.topics[0].partitions[0].error_code).await?;
        }
        let end = EndTxnRequest::default()
            .with_transactional_id(TransactionalId(string(TXN)))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_committed(true);
        check("end", c.send(end, 3).await.map_err(fail)?.error_code).await?;
        if variant == Variant::OffsetsAfterCommit {
            if crash && offset == CRASH_AT {
                return Ok(true);
            }
            let q = offset_commit(GROUP, -1, "", "in", 0, offset + 1, None);
            check("offset commit", c.send(q, 8).await.map_err(fail)?.topics[0].partitions[0].error_code).await?;
        }
    }
    Ok(false)
}

async fn scenario(ctx: Ctx, variant: Variant) -> Result<(), Failure> {
    let cluster = Cluster::builder().build();
    cluster.serve_sim(&ctx).map_err(fail)?;
    for t in ["in", "out"] {
        cluster.create_topic(t, 1).map_err(|e| fail(format!("{e:?}")))?;
    }
    models::install(&ctx, &cluster, &Spec::exactly_once(GROUP, "in", "out"));
    let stream = ctx.net().host("app").dial("kafka-0:9092").await.map_err(fail)?;
    let mut c: C = Client::new(stream, "app");
    let values: Vec<String> = (0..INPUTS).map(|i| format!("order-{i}")).collect();
    let records: Vec<_> = values.iter().map(|v| (None, Some(v.as_bytes()), 1_000)).collect();
    let r = c.send(produce("in", 0, record_batch(&records, None).map_err(fail)?, 1), 9).await.map_err(fail)?;
    check("inputs", r.responses[0].partition_responses[0].error_code).await?;
    expect("the first instance crashes", worker(&ctx, variant, true).await?, true)?;
    expect("the second finishes", worker(&ctx, variant, false).await?, false)?;
    expect("the group's offset", cluster.committed(GROUP, "in", 0).map(|c| c.0), Some(INPUTS))?;
    Ok(())
}

#[test]
fn a_transactional_copy_that_crashes_mid_record_writes_each_output_exactly_once() {
    Simulation::new("kafka_q10_correct").seeds(0..8).run(|ctx| scenario(ctx, Variant::Correct)).assert_passed();
}

#[test]
fn offsets_committed_after_the_transaction_duplicate_an_output_and_q10_names_it() {
    let report = Simulation::new("kafka_q10_offsets_after_commit")
        .seeds(0..8)
        .confirm(0)
        .run(|ctx| scenario(ctx, Variant::OffsetsAfterCommit));
    assert_eq!(report.failures().count(), report.outcomes.len(), "every seed is caught");
    for o in &report.outcomes {
        let f = o.failure.as_ref().expect("failed");
        assert_eq!((f.class, f.oracle.as_deref()), (Class::Correctness, Some(Q10)), "{f}");
        assert!(f.to_string().contains(&format!("offsets {CRASH_AT}")), "names the duplicated input: {f}");
    }
}
