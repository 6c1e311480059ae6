//! `kafkasim::rdkafka`'s producer inside a simulation: a `Cluster` served in the run, the
//! producer created on a task of a sim node (so `create()` finds the node's host), every
//! delivery recorded in the history, and each seed replayed to the same history.

#[path = "rdkafka_shaped_group/kit.rs"]
mod kit;

use kit::in_node;

use std::collections::BTreeMap;
use std::time::Duration;

use kafkasim::kafka_protocol::ResponseError;
use kafkasim::kafka_protocol::messages::ApiKey;
use kafkasim::rdkafka::config::ClientConfig;
use kafkasim::rdkafka::error::{KafkaError, RDKafkaErrorCode};
use kafkasim::rdkafka::producer::partitioner::crc32;
use kafkasim::rdkafka::producer::{Delivery, FutureProducer, FutureRecord};
use kafkasim::{Cluster, Fault, FaultAction};
use sim::{Ctx, Failure, Simulation};

fn fail(e: impl std::fmt::Display) -> Failure {
    Failure::correctness("rdkafka-shaped", e.to_string())
}

fn check(ok: bool, what: impl Into<String>) -> Result<(), Failure> {
    if ok { Ok(()) } else { Err(Failure::correctness("rdkafka-shaped", what)) }
}

fn producer(bootstrap: &str, extra: &[(&str, &str)]) -> Result<FutureProducer, Failure> {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap).set("client.id", "app").set("linger.ms", "5");
    for (k, v) in extra {
        config.set(*k, *v);
    }
    config.create().map_err(fail)
}

fn record(ctx: &Ctx, what: &str, d: &Result<Delivery, KafkaError>) {
    let text = match d {
        Ok(d) => format!("p{} @{}", d.partition, d.offset),
        Err(e) => format!("error {e}"),
    };
    ctx.record("rdk.delivery", what, text);
}

/// Concurrent keyed sends: every record lands on its key's CRC-32 partition, each partition's
/// offsets are consecutive in send order; null keys spread over partitions from the run's seed;
/// acks=0 reports offset -1001 (RD_KAFKA_OFFSET_INVALID) and still writes.
async fn ordered_keyed_and_acks0(ctx: Ctx) -> Result<(), Failure> {
    let cluster = Cluster::builder().brokers(3).build();
    let bootstrap = cluster.serve_sim(&ctx)?;
    cluster.create_topic("orders", 4).map_err(fail)?;
    let c2 = cluster.clone();
    let ctx2 = ctx.clone();
    in_node(&ctx, move |_node| {
        let (ctx, cluster, bootstrap) = (ctx2.clone(), c2.clone(), bootstrap.clone());
        async move {
            let p = producer(&bootstrap, &[("enable.idempotence", "true")])?;
            let mut futures = Vec::new();
            for i in 0..40 {
                let key = format!("customer-{}", i % 9);
                let value = format!("order-{i}");
                let f =
                    p.send_result(FutureRecord::to("orders").key(&key).payload(&value)).map_err(|(e, _)| fail(e))?;
                futures.push((key, f));
            }
            check(p.in_flight_count() > 0, "records wait in the producer")?;
            let mut per_partition: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
            for (key, f) in futures {
                let d = f.await.map_err(fail)?.map_err(|(e, _)| e);
                record(&ctx, &key, &d);
                let d = d.map_err(fail)?;
                check(
                    d.partition == (crc32(key.as_bytes()) % 4) as i32,
                    format!("{key} on partition {}", d.partition),
                )?;
                per_partition.entry(d.partition).or_default().push(d.offset);
            }
            for (partition, offsets) in &per_partition {
                let want: Vec<i64> = (0..offsets.len() as i64).collect();
                check(*offsets == want, format!("partition {partition}: offsets {offsets:?} in send order"))?;
            }
            // Null keys: random partitions from the run's stream.
            let mut spread = std::collections::BTreeSet::new();
            for i in 0..20 {
                let d = p.send(FutureRecord::<str, _>::to("orders").payload(&format!("anon-{i}")), None).await;
                let d = d.map_err(|(e, _)| fail(e))?;
                spread.insert(d.partition);
            }
            ctx.record("rdk.spread", "orders", format!("{spread:?}"));
            check(spread.len() > 1, format!("null keys spread: {spread:?}"))?;
            // acks=0: no response, offset -1001 (librdkafka's invalid offset), written all the same.
            let fire = producer(&bootstrap, &[("acks", "0")])?;
            let before = cluster.partition("orders", 0).map_or(0, |v| v.high_watermark);
            for i in 0..3 {
                let d =
                    fire.send(FutureRecord::<str, _>::to("orders").partition(0).payload(&format!("f{i}")), None).await;
                let d = d.map_err(|(e, _)| e);
                record(&ctx, "acks0", &d);
                check(d.as_ref().is_ok_and(|d| d.offset == -1001 && d.partition == 0), format!("acks=0 report {d:?}"))?;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            let after = cluster.partition("orders", 0).map_or(0, |v| v.high_watermark);
            check(after == before + 3, format!("acks=0 wrote: {before} -> {after}"))?;
            Ok(())
        }
    })
    .await
}

/// The response to a produce is lost after the append (outcome unknown): the idempotent retry
/// is answered as a duplicate, the original offset is reported, and the log holds one copy.
async fn lost_response_is_deduplicated(ctx: Ctx) -> Result<(), Failure> {
    let cluster = Cluster::builder().brokers(2).build();
    let bootstrap = cluster.serve_sim(&ctx)?;
    cluster.create_topic("pay", 1).map_err(fail)?;
    let (c2, ctx2) = (cluster.clone(), ctx.clone());
    in_node(&ctx, move |_node| {
        let (ctx, cluster, bootstrap) = (ctx2.clone(), c2.clone(), bootstrap.clone());
        async move {
            let p = producer(&bootstrap, &[("enable.idempotence", "true"), ("retry.backoff.ms", "200")])?;
            let first =
                p.send(FutureRecord::to("pay").key("a").payload("first"), None).await.map_err(|(e, _)| fail(e))?;
            check(first.offset == 0, format!("first at {}", first.offset))?;
            let fault = cluster.install(Fault::new(ApiKey::Produce, FaultAction::ApplyThenDrop).topic("pay"));
            let f = p.send_result(FutureRecord::to("pay").key("a").payload("lost")).map_err(|(e, _)| fail(e))?;
            // Let the first attempt be appended and its response dropped, then lift the fault.
            let appended = async {
                while cluster.partition("pay", 0).map_or(0, |v| v.high_watermark) < 2 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            };
            tokio::time::timeout(Duration::from_secs(5), appended).await.map_err(fail)?;
            drop(fault);
            let d = f.await.map_err(fail)?.map_err(|(e, _)| e);
            record(&ctx, "lost", &d);
            let d = d.map_err(fail)?;
            check(d.offset == 1, format!("the original offset is reported: {}", d.offset))?;
            let view = cluster.partition("pay", 0).ok_or_else(|| fail("no partition"))?;
            check(view.high_watermark == 2, format!("one copy in the log: hw {}", view.high_watermark))?;
            Ok(())
        }
    })
    .await
}

/// The leader moves: the producer's next send is answered NOT_LEADER_OR_FOLLOWER, it refreshes
/// its metadata and delivers to the new leader; a topic that does not exist is auto-created by
/// the metadata request.
async fn leader_move_and_auto_created_topic(ctx: Ctx) -> Result<(), Failure> {
    let cluster = Cluster::builder().brokers(3).build();
    let bootstrap = cluster.serve_sim(&ctx)?;
    cluster.create_topic("moves", 1).map_err(fail)?;
    let (c2, ctx2) = (cluster.clone(), ctx.clone());
    in_node(&ctx, move |_node| {
        let (ctx, cluster, bootstrap) = (ctx2.clone(), c2.clone(), bootstrap.clone());
        async move {
            let p = producer(&bootstrap, &[])?;
            let d = p.send(FutureRecord::to("moves").key("k").payload("before"), None).await.map_err(|(e, _)| e);
            record(&ctx, "before", &d);
            let leader = cluster.partition("moves", 0).map_or(-1, |v| v.leader);
            cluster.move_leader("moves", 0, (leader + 1) % 3);
            let d = p.send(FutureRecord::to("moves").key("k").payload("after"), None).await.map_err(|(e, _)| e);
            record(&ctx, "after", &d);
            check(d.as_ref().is_ok_and(|d| d.offset == 1), format!("delivered to the new leader: {d:?}"))?;
            let d = p.send(FutureRecord::to("brand-new").key("k").payload("x"), None).await.map_err(|(e, _)| e);
            record(&ctx, "brand-new", &d);
            check(d.is_ok() && cluster.topics().contains(&"brand-new".to_string()), format!("auto-created: {d:?}"))?;
            Ok(())
        }
    })
    .await
}

/// Errors as librdkafka reports them: a silent broker → MessageTimedOut after
/// message.timeout.ms; a topic that does not exist (auto-creation off) →
/// UnknownTopicOrPartition after topic.metadata.propagation.max.ms; a partition that does not
/// exist → UnknownPartition.
async fn timeouts_and_unknown_topics(ctx: Ctx) -> Result<(), Failure> {
    let cluster = Cluster::builder().brokers(2).auto_create_topics(false).build();
    let bootstrap = cluster.serve_sim(&ctx)?;
    cluster.create_topic("slow", 1).map_err(fail)?;
    let (c2, ctx2) = (cluster.clone(), ctx.clone());
    in_node(&ctx, move |_node| {
        let (ctx, cluster, bootstrap) = (ctx2.clone(), c2.clone(), bootstrap.clone());
        async move {
            let p =
                producer(&bootstrap, &[("message.timeout.ms", "1500"), ("topic.metadata.propagation.max.ms", "500")])?;
            let _silence = cluster.install(Fault::new(ApiKey::Produce, FaultAction::Silence).topic("slow"));
            let started = tokio::time::Instant::now();
            let d = p.send(FutureRecord::to("slow").key("k").payload("v"), None).await.map_err(|(e, _)| e);
            record(&ctx, "silent", &d);
            let waited = started.elapsed();
            check(
                matches!(d, Err(KafkaError::MessageProduction(RDKafkaErrorCode::MessageTimedOut))),
                format!("silent broker: {d:?}"),
            )?;
            check(
                waited >= Duration::from_millis(1500) && waited < Duration::from_secs(3),
                format!("after {waited:?}"),
            )?;
            let d = p.send(FutureRecord::to("missing").key("k").payload("v"), None).await.map_err(|(e, _)| e);
            record(&ctx, "missing", &d);
            check(
                matches!(d, Err(KafkaError::MessageProduction(RDKafkaErrorCode::UnknownTopicOrPartition))),
                format!("missing topic: {d:?}"),
            )?;
            let d =
                p.send(FutureRecord::<str, _>::to("slow").partition(7).payload("v"), None).await.map_err(|(e, _)| e);
            record(&ctx, "partition-7", &d);
            check(
                matches!(d, Err(KafkaError::MessageProduction(RDKafkaErrorCode::UnknownPartition))),
                format!("missing partition: {d:?}"),
            )?;
            Ok(())
        }
    })
    .await
}

/// KIP-98 failure paths as librdkafka takes them: `OUT_OF_ORDER_SEQUENCE_NUMBER` on an idempotent
/// producer is fatal — that batch fails with the code, what is still queued fails `PurgeQueue`,
/// later sends fail `Fatal`, and `fatal_error()` says why.
async fn out_of_order_sequence_is_fatal(ctx: Ctx) -> Result<(), Failure> {
    let cluster = Cluster::builder().brokers(1).build();
    let bootstrap = cluster.serve_sim(&ctx)?;
    cluster.create_topic("seq", 1).map_err(fail)?;
    let (c2, ctx2) = (cluster.clone(), ctx.clone());
    in_node(&ctx, move |_node| {
        let (ctx, cluster, bootstrap) = (ctx2.clone(), c2.clone(), bootstrap.clone());
        async move {
            let p = producer(&bootstrap, &[("enable.idempotence", "true"), ("linger.ms", "0")])?;
            let d = p.send(FutureRecord::to("seq").key("a").payload("ok"), None).await.map_err(|(e, _)| e);
            record(&ctx, "before", &d);
            check(d.is_ok(), format!("delivered before the fault: {d:?}"))?;
            let _fault = cluster.install(
                Fault::new(ApiKey::Produce, FaultAction::Error(ResponseError::OutOfOrderSequenceNumber)).topic("seq"),
            );
            let first = p.send_result(FutureRecord::to("seq").key("a").payload("x")).map_err(|(e, _)| fail(e))?;
            // Sent before the first's answer can come back: in the same batch (refused with it) or
            // queued behind it (one batch in flight per partition) and purged.
            let queued = p.send_result(FutureRecord::to("seq").key("a").payload("y")).map_err(|(e, _)| fail(e))?;
            let first = first.await.map_err(fail)?.map_err(|(e, _)| e);
            record(&ctx, "refused", &first);
            check(
                matches!(first, Err(KafkaError::MessageProduction(RDKafkaErrorCode::OutOfOrderSequenceNumber))),
                format!("the refused batch: {first:?}"),
            )?;
            let queued = queued.await.map_err(fail)?.map_err(|(e, _)| e);
            record(&ctx, "queued", &queued);
            check(
                matches!(
                    queued,
                    Err(KafkaError::MessageProduction(
                        RDKafkaErrorCode::PurgeQueue | RDKafkaErrorCode::OutOfOrderSequenceNumber
                    ))
                ),
                format!("the queued message: {queued:?}"),
            )?;
            let later = p.send(FutureRecord::to("seq").key("a").payload("z"), None).await.map_err(|(e, _)| e);
            check(
                matches!(later, Err(KafkaError::MessageProduction(RDKafkaErrorCode::Fatal))),
                format!("a later send: {later:?}"),
            )?;
            let fatal = p.fatal_error();
            check(
                fatal.as_ref().is_some_and(|(c, why)| {
                    *c == RDKafkaErrorCode::OutOfOrderSequenceNumber && why.contains("desynchronization")
                }),
                format!("fatal_error: {fatal:?}"),
            )?;
            Ok(())
        }
    })
    .await
}

/// A sent batch that expires (the broker never answers) may have left a gap in its partition's
/// sequences: the producer bumps its epoch (librdkafka's `rd_kafka_idemp_drain_epoch_bump`) and
/// the next message, at sequence 0 of the new epoch, is delivered — without the bump the broker
/// would refuse it as out of order and the producer would turn fatal.
async fn expired_batch_bumps_the_epoch(ctx: Ctx) -> Result<(), Failure> {
    let cluster = Cluster::builder().brokers(1).build();
    let bootstrap = cluster.serve_sim(&ctx)?;
    cluster.create_topic("bump", 1).map_err(fail)?;
    let (c2, ctx2) = (cluster.clone(), ctx.clone());
    in_node(&ctx, move |_node| {
        let (ctx, cluster, bootstrap) = (ctx2.clone(), c2.clone(), bootstrap.clone());
        async move {
            let p = producer(&bootstrap, &[("enable.idempotence", "true"), ("message.timeout.ms", "1000")])?;
            for v in ["a", "b"] {
                let d = p.send(FutureRecord::to("bump").key("k").payload(v), None).await.map_err(|(e, _)| e);
                check(d.is_ok(), format!("{v} delivered: {d:?}"))?;
            }
            let silence = cluster.install(Fault::new(ApiKey::Produce, FaultAction::Silence).topic("bump"));
            let lost = p.send(FutureRecord::to("bump").key("k").payload("lost"), None).await.map_err(|(e, _)| e);
            record(&ctx, "expired", &lost);
            check(
                matches!(lost, Err(KafkaError::MessageProduction(RDKafkaErrorCode::MessageTimedOut))),
                format!("the silenced batch: {lost:?}"),
            )?;
            drop(silence);
            let after = p.send(FutureRecord::to("bump").key("k").payload("after"), None).await.map_err(|(e, _)| e);
            record(&ctx, "after", &after);
            check(after.as_ref().is_ok_and(|d| d.offset == 2), format!("delivered after the bump: {after:?}"))?;
            check(p.fatal_error().is_none(), format!("not fatal: {:?}", p.fatal_error()))?;
            Ok(())
        }
    })
    .await
}

/// `queue.buffering.max.messages` bounds what waits: `send_result` past it fails `QueueFull` at
/// once (rdkafka's `send_result`), and `send` waits for room, then delivers.
async fn full_queue_is_refused_or_waited_for(ctx: Ctx) -> Result<(), Failure> {
    let cluster = Cluster::builder().brokers(1).build();
    let bootstrap = cluster.serve_sim(&ctx)?;
    cluster.create_topic("full", 1).map_err(fail)?;
    let (ctx2,) = (ctx.clone(),);
    in_node(&ctx, move |_node| {
        let (ctx, bootstrap) = (ctx2.clone(), bootstrap.clone());
        async move {
            let p = producer(&bootstrap, &[("queue.buffering.max.messages", "2"), ("linger.ms", "100")])?;
            let a = p.send_result(FutureRecord::to("full").key("k").payload("a")).map_err(|(e, _)| fail(e))?;
            let b = p.send_result(FutureRecord::to("full").key("k").payload("b")).map_err(|(e, _)| fail(e))?;
            let c = p.send_result(FutureRecord::to("full").key("k").payload("c"));
            check(
                matches!(&c, Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _))),
                format!("a third message: {:?}", c.as_ref().err().map(|(e, _)| e)),
            )?;
            check(p.in_flight_count() == 2, format!("in flight: {}", p.in_flight_count()))?;
            let waited = p.send(FutureRecord::to("full").key("k").payload("c"), Duration::from_secs(5)).await;
            let waited = waited.map_err(|(e, _)| e);
            record(&ctx, "waited", &waited);
            check(waited.as_ref().is_ok_and(|d| d.offset == 2), format!("send waited for room: {waited:?}"))?;
            for (name, f) in [("a", a), ("b", b)] {
                let d = f.await.map_err(fail)?.map_err(|(e, _)| e);
                check(d.is_ok(), format!("{name}: {d:?}"))?;
            }
            Ok(())
        }
    })
    .await
}

#[test]
fn an_out_of_order_sequence_makes_the_idempotent_producer_fatal() {
    Simulation::new("rdk_fatal").seeds(0..4).repeat(2).run(out_of_order_sequence_is_fatal).assert_passed();
}

#[test]
fn an_expired_in_flight_batch_bumps_the_epoch() {
    Simulation::new("rdk_bump").seeds(0..4).repeat(2).run(expired_batch_bumps_the_epoch).assert_passed();
}

#[test]
fn a_full_queue_is_refused_by_send_result_and_waited_for_by_send() {
    Simulation::new("rdk_full").seeds(0..4).repeat(2).run(full_queue_is_refused_or_waited_for).assert_passed();
}

#[test]
fn deliveries_are_in_order_on_crc32_partitions_and_acks0_writes() {
    Simulation::new("rdk_ordered").seeds(0..4).repeat(2).run(ordered_keyed_and_acks0).assert_passed();
}

#[test]
fn a_lost_produce_response_is_retried_and_deduplicated() {
    Simulation::new("rdk_dedup").seeds(0..4).repeat(2).run(lost_response_is_deduplicated).assert_passed();
}

#[test]
fn a_moved_leader_and_a_new_topic_are_found_through_metadata() {
    Simulation::new("rdk_leader").seeds(0..4).repeat(2).run(leader_move_and_auto_created_topic).assert_passed();
}

#[test]
fn silence_times_out_and_missing_topics_fail_as_librdkafka_reports() {
    Simulation::new("rdk_errors").seeds(0..4).repeat(2).run(timeouts_and_unknown_topics).assert_passed();
}

/// In the run's body, which is no node's task, a client would dial real sockets: refused.
async fn created_off_a_node_is_refused(_ctx: Ctx) -> Result<(), Failure> {
    let created = ClientConfig::new().set("bootstrap.servers", "kafka-0:9092").create::<FutureProducer>();
    match created {
        Err(KafkaError::ClientCreation(why)) => {
            check(why.contains("node's task"), format!("the reason names the node: {why}"))
        }
        Err(e) => Err(fail(format!("another error: {e}"))),
        Ok(_) => Err(fail("a producer created on no node's task")),
    }
}

#[test]
fn a_producer_created_in_the_runs_body_is_refused() {
    Simulation::new("rdk_off_node").seeds(0..1).run(created_off_a_node_is_refused).assert_passed();
}
