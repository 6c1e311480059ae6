//! The list-append history checker over real clients in real time: rdkafka's idempotent
//! producer and an assigned consumer against the loopback broker, recorded with a wall-clock
//! `Recorder`, while the broker applies partition 1's produce requests and drops their responses
//! for longer than the producer's message timeout. Those sends end unknown (librdkafka reports
//! a timeout), yet their records are in the log, once: librdkafka's retries of a batch whose
//! response was lost are deduplicated by the broker (no value at two offsets), the sends after
//! healing are acknowledged at their offsets, and every delivery sits where the final log has it.
//! Real threads and real time: statistical, so the assertions are about outcomes, not timings
//! (the fault outlasts the message timeout by seconds).

use std::time::Duration;

use kafkasim::history::{self, produce_outcome};
use kafkasim::kafka_protocol::messages::ApiKey;
use kafkasim::{Broker, Fault, FaultAction};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use sim::OpOutcome;
use sim::check::list_append::Recorder;

const TOPIC: &str = "appends";
const PARTITIONS: i32 = 2;
const RECORDS: usize = 200;
/// Records sent (and acknowledged) before the fault, one per partition.
const WARM_UP: usize = PARTITIONS as usize;
/// The producer's `message.timeout.ms`: a send not acknowledged by then fails with a timeout.
const MESSAGE_TIMEOUT: Duration = Duration::from_secs(1);
/// How long partition 1's produce responses are lost (well beyond the message timeout, and
/// librdkafka's one-second timeout scan).
const FAULT_HELD: Duration = Duration::from_secs(3);
/// How long any phase may take before the test gives up (generous: CI machines are slow).
const PHASE_TIMEOUT: Duration = Duration::from_secs(90);

/// An rdkafka delivery error as the checker's outcome: a broker's error code by Kafka's produce
/// semantics ([`produce_outcome`]); a local error (a timeout, a purge) is unknown.
fn delivery_error(e: &rdkafka::error::KafkaError) -> OpOutcome<Option<u64>> {
    // librdkafka's codes: negative for its own (local) errors, Kafka's for the broker's.
    match e.rdkafka_error_code().and_then(|c| i16::try_from(c as i32).ok()).filter(|c| *c > 0) {
        Some(code) => produce_outcome(code, -1, 0),
        None => OpOutcome::Indeterminate(e.to_string()),
    }
}

/// Sends one record to `partition`, recording it as an append.
fn send<'a>(
    producer: &'a FutureProducer,
    recorder: &Recorder,
    partition: i32,
    value: &'a String,
) -> impl std::future::Future<Output = ()> + 'a {
    let pending = recorder.append("rdkafka-producer", &history::key(TOPIC, partition), value);
    let delivery = producer
        .send(FutureRecord::<(), String>::to(TOPIC).partition(partition).payload(value), Duration::from_secs(30));
    async move {
        match delivery.await {
            Ok(delivery) => pending.ok(u64::try_from(delivery.offset).ok()),
            Err((e, _)) => pending.outcome(delivery_error(&e)),
        }
    }
}

#[test]
fn rdkafka_idempotent_producer_under_lost_responses_and_a_consumer_pass_the_list_append_checker() {
    let broker = Broker::start_local().expect("loopback broker");
    broker.cluster().create_topic(TOPIC, PARTITIONS).expect("topic");
    let bootstrap = broker.bootstrap_servers().to_string();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let recorder = Recorder::wall();
    runtime.block_on(async {
        let producer: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("linger.ms", "5")
            .set("retry.backoff.ms", "50")
            .set("message.timeout.ms", MESSAGE_TIMEOUT.as_millis().to_string())
            .create()
            .expect("producer config");
        // Warm up: connections and metadata, so the sends under the fault go out at once.
        let values: Vec<(i32, String)> =
            (0..RECORDS).map(|i| ((i % PARTITIONS as usize) as i32, format!("rd-{i}"))).collect();
        futures::future::join_all(values[..WARM_UP].iter().map(|(p, v)| send(&producer, &recorder, *p, v))).await;
        // The first half is produced while partition 1's produce responses are lost after the
        // batch was appended, until the fault is removed, long after those sends timed out.
        let fault =
            broker.cluster().install(Fault::new(ApiKey::Produce, FaultAction::ApplyThenDrop).topic(TOPIC).partition(1));
        let heal = async move {
            tokio::time::sleep(FAULT_HELD).await;
            drop(fault);
        };
        let first = values[WARM_UP..RECORDS / 2].iter().map(|(p, v)| send(&producer, &recorder, *p, v));
        tokio::join!(futures::future::join_all(first), heal);
        futures::future::join_all(values[RECORDS / 2..].iter().map(|(p, v)| send(&producer, &recorder, *p, v))).await;
        let hits = broker.cluster().partition(TOPIC, 1).map_or(0, |p| p.batches.len());
        assert!(hits > 0, "partition 1 took batches");

        let consumer: StreamConsumer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("group.id", "list-append")
            .set("enable.auto.commit", "false")
            .set("fetch.wait.max.ms", "100")
            .create()
            .expect("consumer config");
        let mut assignment = TopicPartitionList::new();
        for p in 0..PARTITIONS {
            assignment.add_partition_offset(TOPIC, p, Offset::Beginning).expect("assignment");
            recorder.subscribe("rdkafka-consumer", &history::key(TOPIC, p), Some(0));
        }
        consumer.assign(&assignment).expect("assign");
        let total: i64 =
            (0..PARTITIONS).map(|p| broker.cluster().partition(TOPIC, p).expect("exists").high_watermark).sum();
        let mut delivered = 0i64;
        tokio::time::timeout(PHASE_TIMEOUT, async {
            while delivered < total {
                match consumer.recv().await {
                    Ok(m) => {
                        let value = history::value_of(m.payload());
                        let offset = u64::try_from(m.offset()).expect("a delivered offset");
                        recorder.deliver("rdkafka-consumer", &history::key(TOPIC, m.partition()), offset, &value);
                        delivered += 1;
                    }
                    Err(e) => eprintln!("consumer error (retried): {e}"),
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("delivered {delivered} of {total} records"));
        history::record_final_logs(&recorder, broker.cluster(), TOPIC).await.expect("final read");
    });

    let report = recorder.check().unwrap_or_else(|v| panic!("violations: {v:#?}"));
    assert_eq!(report.keys, PARTITIONS as usize);
    assert_eq!(report.appends.ok + report.appends.unknown + report.appends.failed, RECORDS as u64);
    assert_eq!(report.final_records, RECORDS as u64 - report.unknown_absent, "{}", report.summary());
    assert!(report.gaps.is_empty(), "the assigned consumer got every record: {:?}", report.gaps);
    assert!(report.unknown_in_log > 0, "timed-out sends whose batches were appended: {}", report.summary());
    assert!(report.appends.ok >= RECORDS as u64 / 2, "the sends after healing: {}", report.summary());
}
