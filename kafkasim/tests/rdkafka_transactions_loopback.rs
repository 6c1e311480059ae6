//! rdkafka's (librdkafka's) transactional producer against the loopback broker: committed and
//! aborted transactions as `read_committed` and `read_uncommitted` consumers see them, a
//! consume-transform-produce step whose input offsets commit with its output
//! (`send_offsets_to_transaction`), and a second producer with the same `transactional.id`
//! fencing the first. Real threads and real time: the assertions are about outcomes.

use std::time::{Duration, Instant};

use kafkasim::Broker;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};

const T: Duration = Duration::from_secs(30);

type P = ThreadedProducer<DefaultProducerContext>;

fn producer(bootstrap: &str, id: &str) -> P {
    let p: P = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("transactional.id", id)
        .set("transaction.timeout.ms", "60000")
        .set("linger.ms", "5")
        .create()
        .expect("producer config");
    p.init_transactions(T).expect("init_transactions");
    p
}

fn send(p: &P, topic: &str, values: std::ops::Range<usize>) {
    for i in values {
        let (key, value) = (format!("k{i}"), format!("v{i}"));
        p.send(BaseRecord::to(topic).key(&key).payload(&value)).map_err(|(e, _)| e).expect("enqueued");
    }
}

fn consumer(bootstrap: &str, group: &str, isolation: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("isolation.level", isolation)
        .set("fetch.wait.max.ms", "50")
        .create()
        .expect("consumer config")
}

/// The values `c` reads from `topic` partition 0 until it has been quiet for a second at the
/// partition's end (the high watermark `end`).
fn read_all(c: &BaseConsumer, topic: &str, end: i64) -> Vec<String> {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning).expect("partition");
    c.assign(&tpl).expect("assign");
    let deadline = Instant::now() + T;
    let mut values = Vec::new();
    let mut quiet_since = Instant::now();
    while Instant::now() < deadline {
        match c.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                values.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
                quiet_since = Instant::now();
            }
            Some(Err(e)) => eprintln!("consumer error (retried): {e}"),
            None => {
                let position = c.position().ok();
                let at_end = position.as_ref().and_then(|p| p.find_partition(topic, 0)).map(|e| e.offset());
                if at_end == Some(Offset::Offset(end)) && quiet_since.elapsed() > Duration::from_secs(1) {
                    return values;
                }
            }
        }
    }
    panic!("read {} values from {topic} without reaching offset {end}", values.len())
}

fn range(prefix: &str, r: std::ops::Range<usize>) -> Vec<String> {
    r.map(|i| format!("{prefix}{i}")).collect()
}

#[test]
fn rdkafka_transactions_commit_abort_and_read_committed() {
    let broker = Broker::start_local().expect("loopback broker");
    broker.cluster().create_topic("out", 1).expect("topic");
    let bootstrap = broker.bootstrap_servers().to_string();
    let p = producer(&bootstrap, "txn-basic");

    p.begin_transaction().expect("begin");
    send(&p, "out", 0..10);
    p.commit_transaction(T).expect("commit");
    p.begin_transaction().expect("begin");
    send(&p, "out", 10..15);
    // librdkafka purges what it has not sent yet on abort; flush so the aborted records are in
    // the log and the abort writes a marker.
    p.flush(T).expect("flush");
    p.abort_transaction(T).expect("abort");
    p.begin_transaction().expect("begin");
    send(&p, "out", 15..20);
    p.commit_transaction(T).expect("commit");

    // 20 records and 3 markers.
    let view = broker.cluster().partition("out", 0).expect("exists");
    assert_eq!((view.high_watermark, view.last_stable_offset), (23, 23), "records and markers");
    let committed = read_all(&consumer(&bootstrap, "rc", "read_committed"), "out", 23);
    let want: Vec<String> = range("v", 0..10).into_iter().chain(range("v", 15..20)).collect();
    assert_eq!(committed, want, "read_committed skips the aborted transaction");
    let uncommitted = read_all(&consumer(&bootstrap, "ru", "read_uncommitted"), "out", 23);
    assert_eq!(uncommitted, range("v", 0..20), "read_uncommitted sees every record, no markers");
}

#[test]
fn rdkafka_consume_transform_produce_commits_input_offsets_with_the_output() {
    let broker = Broker::start_local().expect("loopback broker");
    let cluster = broker.cluster();
    cluster.create_topic("in", 1).expect("topic");
    cluster.create_topic("out", 1).expect("topic");
    let bootstrap = broker.bootstrap_servers().to_string();
    let plain: P = ClientConfig::new().set("bootstrap.servers", &bootstrap).create().expect("producer config");
    send(&plain, "in", 0..6);
    plain.flush(T).expect("flush");

    let input = consumer(&bootstrap, "etl", "read_committed");
    input.subscribe(&["in"]).expect("subscribe");
    let p = producer(&bootstrap, "txn-etl");
    // Two transactions of three inputs each; the second aborts and is redone.
    let mut done = 0;
    for attempt in 0..3 {
        let mut batch = Vec::new();
        let deadline = Instant::now() + T;
        while batch.len() < 3 && Instant::now() < deadline {
            if let Some(Ok(m)) = input.poll(Duration::from_millis(100)) {
                batch.push((m.offset(), String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned()));
            }
        }
        assert_eq!(batch.len(), 3, "attempt {attempt}: three inputs");
        p.begin_transaction().expect("begin");
        for (_, v) in &batch {
            let out = v.to_uppercase();
            p.send(BaseRecord::to("out").key("k").payload(&out)).map_err(|(e, _)| e).expect("enqueued");
        }
        let mut offsets = TopicPartitionList::new();
        offsets.add_partition_offset("in", 0, Offset::Offset(batch[2].0 + 1)).expect("offset");
        let meta = input.group_metadata().expect("group metadata");
        p.send_offsets_to_transaction(&offsets, &meta, T).expect("send offsets");
        if attempt == 1 {
            p.abort_transaction(T).expect("abort");
            // Rewind to the last committed input offset, as a consumer that lost its work would.
            let committed = cluster.committed("etl", "in", 0).map(|(o, _)| o).unwrap_or(0);
            input.seek("in", 0, Offset::Offset(committed), T).expect("seek");
        } else {
            p.commit_transaction(T).expect("commit");
            done += 3;
            assert_eq!(
                cluster.committed("etl", "in", 0).map(|(o, _)| o),
                Some(done as i64),
                "input offsets commit with the output"
            );
        }
    }
    let end = cluster.partition("out", 0).expect("exists").high_watermark;
    let out = read_all(&consumer(&bootstrap, "check", "read_committed"), "out", end);
    assert_eq!(out, range("V", 0..6), "each input's output once, in order");
}

#[test]
fn rdkafka_a_second_transactional_producer_fences_the_first() {
    let broker = Broker::start_local().expect("loopback broker");
    broker.cluster().create_topic("out", 1).expect("topic");
    let bootstrap = broker.bootstrap_servers().to_string();
    let old = producer(&bootstrap, "txn-zombie");
    old.begin_transaction().expect("begin");
    send(&old, "out", 0..3);
    old.flush(T).expect("flush");
    let new = producer(&bootstrap, "txn-zombie");
    let err = old.commit_transaction(T).expect_err("the fenced producer cannot commit");
    let fatal =
        matches!(&err, KafkaError::Transaction(e) if e.is_fatal() || e.code() == RDKafkaErrorCode::ProducerFenced);
    assert!(fatal, "fenced: {err:?}");
    new.begin_transaction().expect("begin");
    send(&new, "out", 3..5);
    new.commit_transaction(T).expect("commit");
    let end = broker.cluster().partition("out", 0).expect("exists").high_watermark;
    let out = read_all(&consumer(&bootstrap, "check", "read_committed"), "out", end);
    assert_eq!(out, range("v", 3..5), "the zombie's open transaction was aborted");
}
