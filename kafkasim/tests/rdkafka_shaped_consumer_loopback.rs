//! `kafkasim::rdkafka`'s consumer outside a simulation: on a plain tokio runtime it dials real
//! sockets, here kafkasim's loopback broker. It reads records the real `rdkafka` crate
//! (librdkafka) wrote — keys, values, headers, create times — as a group member, commits, and
//! librdkafka reads the same committed offsets back.

use std::time::Duration;

use kafkasim::Broker;
use kafkasim::rdkafka::config::ClientConfig;
use kafkasim::rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use kafkasim::rdkafka::message::Headers;
use kafkasim::rdkafka::{Message, Offset};

const TOPIC: &str = "loopc";
const PARTITIONS: i32 = 2;
const RECORDS: i32 = 20;

#[test]
fn the_shaped_consumer_reads_librdkafkas_records_and_commits_what_librdkafka_reads_back() {
    let broker = Broker::start_local().expect("loopback broker");
    broker.cluster().create_topic(TOPIC, PARTITIONS).expect("topic");
    let bootstrap = broker.bootstrap_servers().to_string();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");

    // Write with librdkafka.
    runtime.block_on(async {
        use rdkafka::message::{Header, OwnedHeaders};
        use rdkafka::producer::{FutureProducer, FutureRecord};
        let producer: FutureProducer = rdkafka::config::ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("linger.ms", "0")
            .create()
            .expect("librdkafka producer");
        for i in 0..RECORDS {
            let (key, value) = (format!("k{i}"), format!("v{i}"));
            let headers = OwnedHeaders::new().insert(Header { key: "n", value: Some(&i.to_string()) });
            let record = FutureRecord::to(TOPIC)
                .partition(i % PARTITIONS)
                .key(&key)
                .payload(&value)
                .headers(headers)
                .timestamp(5_000 + i64::from(i));
            producer.send(record, Duration::from_secs(5)).await.expect("delivered");
        }
    });

    // Read with kafkasim::rdkafka as a group member; commit half of each partition.
    let committed = runtime.block_on(async {
        let consumer: StreamConsumer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("group.id", "shaped")
            .set("auto.offset.reset", "earliest")
            .set("enable.auto.commit", "false")
            .create()
            .expect("consumer");
        consumer.subscribe(&[TOPIC]).expect("subscribe");
        let mut read = Vec::new();
        while read.len() < RECORDS as usize {
            let m = tokio::time::timeout(Duration::from_secs(30), consumer.recv())
                .await
                .expect("a record within 30 s")
                .expect("no error");
            let i: i64 = m.payload_view::<str>().and_then(Result::ok).and_then(|v| v[1..].parse().ok()).expect("v<i>");
            assert_eq!(m.key(), Some(format!("k{i}").as_bytes()));
            assert_eq!(m.timestamp().to_millis(), Some(5_000 + i), "the create time sent");
            let h = m.headers().expect("headers").get(0);
            assert_eq!((h.key, h.value), ("n", Some(i.to_string().as_bytes())));
            assert_eq!(i64::from(m.partition()), i % i64::from(PARTITIONS));
            if m.offset() == 4 {
                consumer.commit_message(&m, CommitMode::Sync).await.expect("committed");
            }
            read.push((m.partition(), m.offset()));
        }
        for p in 0..PARTITIONS {
            let offsets: Vec<i64> = read.iter().filter(|r| r.0 == p).map(|r| r.1).collect();
            assert_eq!(offsets, (0..i64::from(RECORDS / PARTITIONS)).collect::<Vec<_>>(), "partition {p} in order");
        }
        let c = consumer.committed(Duration::from_secs(10)).await.expect("committed offsets");
        (0..PARTITIONS).map(|p| c.find_partition(TOPIC, p).map(|e| e.offset())).collect::<Vec<_>>()
    });
    assert_eq!(committed, vec![Some(Offset::Offset(5)); PARTITIONS as usize]);

    // librdkafka sees the same committed offsets.
    use rdkafka::consumer::{BaseConsumer, Consumer as _};
    let reader: BaseConsumer = rdkafka::config::ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", "shaped")
        .create()
        .expect("librdkafka consumer");
    let mut tpl = rdkafka::TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition(TOPIC, p);
    }
    let theirs = reader.committed_offsets(tpl, Duration::from_secs(10)).expect("librdkafka's committed");
    for p in 0..PARTITIONS {
        assert_eq!(theirs.find_partition(TOPIC, p).map(|e| e.offset()), Some(rdkafka::Offset::Offset(5)), "p{p}");
    }
}
