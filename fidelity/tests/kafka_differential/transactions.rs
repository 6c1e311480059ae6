//! Transactions (KIP-98) request by request: commit and abort markers, the last stable offset and
//! `read_committed` fetches, fencing by a second InitProducerId, TxnOffsetCommit, and the
//! coordinator's timeout. Kafka finishes an EndTxn's markers after answering it, so each
//! scenario waits (unrecorded) for the transaction to settle before it reads; the retriable
//! answers Kafka gives meanwhile (`CONCURRENT_TRANSACTIONS`, a coordinator still loading) are
//! retried the way clients retry them.

use std::time::Duration;

use fidelity::runner::Ctx;
use kafkasim::client::transactional_record_batch;
use kafkasim::kafka_protocol::messages::*;
use kafkasim::kafka_protocol::records::RecordBatchDecoder;

use crate::support::*;

const INIT_V: i16 = INIT_PRODUCER_ID_V;
const TXN_V: i16 = 3;
/// Answers a client retries: COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
/// NOT_COORDINATOR, CONCURRENT_TRANSACTIONS.
const RETRIABLE: [i16; 4] = [14, 15, 16, 51];

type P = (i64, i16);

/// Sends `q` until its answer (`code_of`) is not [`RETRIABLE`]; that code.
async fn retrying<Q>(c: &mut Conn, q: Q, code_of: impl Fn(Q::Response) -> i16) -> R<i16>
where
    Q: kafkasim::kafka_protocol::protocol::Request + Clone,
{
    let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
    loop {
        let code = code_of(send(c, q.clone(), TXN_V).await?);
        if !RETRIABLE.contains(&code) || tokio::time::Instant::now() > deadline {
            return Ok(code);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn init_once(c: &mut Conn, id: &str, timeout_ms: i32) -> R<(i16, P)> {
    let q = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(s(id))))
        .with_transaction_timeout_ms(timeout_ms)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let r = send(c, q, INIT_V).await?;
    Ok((r.error_code, (r.producer_id.0, r.producer_epoch)))
}

/// InitProducerId, retried while the coordinator loads: the code and `(id, epoch)`.
async fn init(c: &mut Conn, id: &str, timeout_ms: i32) -> R<(String, P)> {
    let (found, _) = find_coordinator(c, id, 1, READY_TIMEOUT).await?;
    if found != "NONE" {
        return Err(format!("no transaction coordinator for {id}: {found}"));
    }
    let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
    loop {
        let (e, p) = init_once(c, id, timeout_ms).await?;
        if !RETRIABLE.contains(&e) || tokio::time::Instant::now() > deadline {
            return Ok((code(e), p));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn add_partition(c: &mut Conn, id: &str, p: P, topic: &str) -> R<String> {
    let q = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(s(id)))
        .with_v3_and_below_producer_id(ProducerId(p.0))
        .with_v3_and_below_producer_epoch(p.1)
        .with_v3_and_below_topics(vec![
            add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                .with_name(TopicName(s(topic)))
                .with_partitions(vec![0]),
        ]);
    let code_of =
        |r: AddPartitionsToTxnResponse| r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code;
    Ok(code(retrying(c, q, code_of).await?))
}

async fn add_offsets(c: &mut Conn, id: &str, p: P, group: &str) -> R<String> {
    let q = AddOffsetsToTxnRequest::default()
        .with_transactional_id(TransactionalId(s(id)))
        .with_producer_id(ProducerId(p.0))
        .with_producer_epoch(p.1)
        .with_group_id(GroupId(s(group)));
    Ok(code(retrying(c, q, |r| r.error_code).await?))
}

async fn txn_commit_offset(c: &mut Conn, id: &str, p: P, group: &str, topic: &str, offset: i64) -> R<String> {
    let q = TxnOffsetCommitRequest::default()
        .with_transactional_id(TransactionalId(s(id)))
        .with_group_id(GroupId(s(group)))
        .with_producer_id(ProducerId(p.0))
        .with_producer_epoch(p.1)
        .with_generation_id(-1)
        .with_topics(vec![
            txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                .with_name(TopicName(s(topic)))
                .with_partitions(vec![
                    txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(offset)
                        .with_committed_leader_epoch(-1),
                ]),
        ]);
    Ok(code(retrying(c, q, |r| r.topics[0].partitions[0].error_code).await?))
}

async fn send_txn(c: &mut Conn, id: &str, p: P, seq: i32, topic: &str, values: &[&str]) -> R<String> {
    let records: Vec<_> = values.iter().map(|v| (None, Some(v.as_bytes()), ts_base() + 1_000)).collect();
    let batch = transactional_record_batch(&records, (p.0, p.1, seq)).map_err(|e| e.to_string())?;
    let q = produce_request(topic, 0, batch, -1).with_transactional_id(Some(TransactionalId(s(id))));
    let r = send(c, q, PRODUCE_V).await?;
    Ok(code(r.responses[0].partition_responses[0].error_code))
}

async fn end(c: &mut Conn, id: &str, p: P, commit: bool) -> R<String> {
    let q = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(s(id)))
        .with_producer_id(ProducerId(p.0))
        .with_producer_epoch(p.1)
        .with_committed(commit);
    Ok(code(retrying(c, q, |r| r.error_code).await?))
}

/// A fetch from `offset`: `hw=… lso=… aborted=[first offsets] values=[offset:value]` (control
/// records left out).
async fn read(c: &mut Conn, topic: &str, offset: i64, committed: bool) -> R<(i64, i64, String)> {
    let q = kafkasim::requests::fetch(topic, 0, offset, Duration::ZERO).with_isolation_level(i8::from(committed));
    let r = send(c, q, FETCH_V).await?;
    let p = &r.responses[0].partitions[0];
    let aborted: Vec<i64> = p.aborted_transactions.iter().flatten().map(|a| a.first_offset).collect();
    let mut bytes = p.records.clone().unwrap_or_default();
    let sets = RecordBatchDecoder::decode_all(&mut bytes).map_err(|e| e.to_string())?;
    let values: Vec<String> = sets
        .into_iter()
        .flat_map(|s| s.records)
        .filter(|r| r.offset >= offset && !r.control)
        .map(|r| {
            format!("{}:{}", r.offset, r.value.map(|v| String::from_utf8_lossy(&v).into_owned()).unwrap_or_default())
        })
        .collect();
    let shown = format!(
        "{} hw={} lso={} aborted={aborted:?} values={values:?}",
        code(p.error_code),
        p.high_watermark,
        p.last_stable_offset
    );
    Ok((p.high_watermark, p.last_stable_offset, shown))
}

/// Waits (unrecorded) until the partition's last stable offset reaches its high watermark, as
/// Kafka's markers land after EndTxn answers; then reads as [`read`] does.
async fn read_settled(c: &mut Conn, topic: &str, offset: i64, committed: bool) -> R<String> {
    let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
    loop {
        let (hw, lso, shown) = read(c, topic, offset, committed).await?;
        if hw == lso || tokio::time::Instant::now() > deadline {
            return Ok(shown);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Abort then commit: markers, the last stable offset, `read_committed` against
/// `read_uncommitted`, the aborted-transaction list, and EndTxn in every state.
pub async fn transactions_commit_abort_and_read_committed(ctx: &Ctx) -> R {
    let mut c = connect(ctx, "txn").await?;
    let topic = ctx.name("t");
    let id = ctx.name("tx");
    create_ready_topic(&mut c, &topic, 1).await?;
    let (result, p) = init(&mut c, &id, 60_000).await?;
    ctx.note("InitProducerId", format!("{result} epoch={}", p.1));
    ctx.note("a batch to a partition not in the transaction", send_txn(&mut c, &id, p, 0, &topic, &["x"]).await?);
    ctx.note("EndTxn with no transaction", end(&mut c, &id, p, true).await?);
    ctx.note("AddPartitionsToTxn", add_partition(&mut c, &id, p, &topic).await?);
    ctx.note("two transactional records", send_txn(&mut c, &id, p, 0, &topic, &["a1", "a2"]).await?);
    ctx.note("read_committed while open", read(&mut c, &topic, 0, true).await?.2);
    ctx.note("read_uncommitted while open", read(&mut c, &topic, 0, false).await?.2);
    ctx.note("ListOffsets latest, read_uncommitted", format!("{:?}", list_offsets(&mut c, &topic, 0, -1).await?));
    ctx.note("abort", end(&mut c, &id, p, false).await?);
    ctx.note("read_committed after the abort", read_settled(&mut c, &topic, 0, true).await?);
    ctx.note("abort again", end(&mut c, &id, p, false).await?);
    ctx.note("commit after the abort", end(&mut c, &id, p, true).await?);
    ctx.note("AddPartitionsToTxn again", add_partition(&mut c, &id, p, &topic).await?);
    ctx.note("one more record", send_txn(&mut c, &id, p, 2, &topic, &["b1"]).await?);
    ctx.note("commit", end(&mut c, &id, p, true).await?);
    ctx.note("read_committed after the commit", read_settled(&mut c, &topic, 3, true).await?);
    ctx.note("commit again", end(&mut c, &id, p, true).await?);
    Ok(())
}

/// A second InitProducerId fences the first producer; a third, while a transaction is open,
/// aborts it first (`CONCURRENT_TRANSACTIONS`, then the next epoch).
pub async fn transactions_fence_the_previous_producer(ctx: &Ctx) -> R {
    let mut c = connect(ctx, "txn").await?;
    let topic = ctx.name("t");
    let id = ctx.name("tx");
    create_ready_topic(&mut c, &topic, 1).await?;
    let (_, old) = init(&mut c, &id, 60_000).await?;
    let (result, new) = init(&mut c, &id, 60_000).await?;
    ctx.note("InitProducerId again", format!("{result} same id={} epoch={}", new.0 == old.0, new.1));
    ctx.note("the fenced producer adds a partition", add_partition(&mut c, &id, old, &topic).await?);
    ctx.note("the fenced producer ends", end(&mut c, &id, old, true).await?);
    ctx.note("the new producer adds it", add_partition(&mut c, &id, new, &topic).await?);
    ctx.note("the fenced epoch's batch", send_txn(&mut c, &id, old, 0, &topic, &["stale"]).await?);
    ctx.note("the new producer's batch", send_txn(&mut c, &id, new, 0, &topic, &["fresh"]).await?);
    let (e, _) = init_once(&mut c, &id, 60_000).await?;
    ctx.note("InitProducerId during the open transaction", code(e));
    let (result, third) = init(&mut c, &id, 60_000).await?;
    ctx.note("InitProducerId retried", format!("{result} same id={} epoch={}", third.0 == old.0, third.1));
    ctx.note("read_committed after the fence", read_settled(&mut c, &topic, 0, true).await?);
    ctx.note("the fenced epoch ends", end(&mut c, &id, new, false).await?);
    ctx.note(
        "an unknown transactional id adds a partition",
        add_partition(&mut c, &ctx.name("nope"), new, &topic).await?,
    );
    let (result, _) = init(&mut c, &ctx.name("bad-timeout"), 900_001).await?;
    ctx.note("a timeout above transaction.max.timeout.ms", result);
    Ok(())
}

/// TxnOffsetCommit needs AddOffsetsToTxn; its offsets become the group's only on commit.
pub async fn txn_offset_commit_applies_on_commit(ctx: &Ctx) -> R {
    let mut c = connect(ctx, "txn").await?;
    let topic = ctx.name("t");
    let id = ctx.name("tx");
    let group = ctx.name("g");
    create_ready_topic(&mut c, &topic, 1).await?;
    coordinator_ready(&mut c, &group).await?;
    let (_, p) = init(&mut c, &id, 60_000).await?;
    ctx.note("TxnOffsetCommit before AddOffsetsToTxn", txn_commit_offset(&mut c, &id, p, &group, &topic, 7).await?);
    ctx.note("AddOffsetsToTxn", add_offsets(&mut c, &id, p, &group).await?);
    ctx.note("TxnOffsetCommit", txn_commit_offset(&mut c, &id, p, &group, &topic, 7).await?);
    ctx.note("OffsetFetch before the commit", offset_fetch(&mut c, &group, &topic, 0).await?);
    ctx.note("abort", end(&mut c, &id, p, false).await?);
    ctx.note("AddOffsetsToTxn again", add_offsets(&mut c, &id, p, &group).await?);
    ctx.note("TxnOffsetCommit again", txn_commit_offset(&mut c, &id, p, &group, &topic, 9).await?);
    ctx.note("commit", end(&mut c, &id, p, true).await?);
    let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
    let mut fetched = offset_fetch(&mut c, &group, &topic, 0).await?;
    while !fetched.contains("offset=9") && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        fetched = offset_fetch(&mut c, &group, &topic, 0).await?;
    }
    ctx.note("OffsetFetch after the commit", fetched);
    ctx.note("the user topic's high watermark", format!("{:?}", list_offsets(&mut c, &topic, 0, -1).await?));
    Ok(())
}

/// A transaction left open past its timeout is aborted by the coordinator, which fences the
/// producer.
pub async fn an_open_transaction_times_out(ctx: &Ctx) -> R {
    let mut c = connect(ctx, "txn").await?;
    let topic = ctx.name("t");
    let id = ctx.name("tx");
    create_ready_topic(&mut c, &topic, 1).await?;
    let (_, p) = init(&mut c, &id, 1_000).await?;
    ctx.note("AddPartitionsToTxn", add_partition(&mut c, &id, p, &topic).await?);
    ctx.note("a record", send_txn(&mut c, &id, p, 0, &topic, &["late"]).await?);
    ctx.note("read_committed after the timeout", read_settled(&mut c, &topic, 0, true).await?);
    ctx.note("the timed-out producer ends", end(&mut c, &id, p, true).await?);
    let (result, next) = init(&mut c, &id, 1_000).await?;
    ctx.note("InitProducerId after the timeout", format!("{result} epoch={}", next.1));
    Ok(())
}
