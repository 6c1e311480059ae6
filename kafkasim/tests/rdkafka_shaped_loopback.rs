//! `kafkasim::rdkafka`'s producer outside a simulation: on a plain tokio runtime it dials real
//! sockets, here kafkasim's loopback broker; the records it writes are read back with the real
//! `rdkafka` crate (librdkafka), so they are real Kafka records (keys, values, headers,
//! timestamps, partitions by CRC-32).

use std::time::Duration;

use kafkasim::Broker;
use kafkasim::rdkafka::config::ClientConfig;
use kafkasim::rdkafka::message::{Header, OwnedHeaders};
use kafkasim::rdkafka::producer::partitioner::crc32;
use kafkasim::rdkafka::producer::{FutureProducer, FutureRecord};

const TOPIC: &str = "loop";
const PARTITIONS: i32 = 3;
const RECORDS: usize = 30;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime")
}

#[test]
fn the_shaped_producer_writes_real_kafka_records_that_librdkafka_reads_back() {
    let broker = Broker::start_local().expect("loopback broker");
    broker.cluster().create_topic(TOPIC, PARTITIONS).expect("topic");
    let bootstrap = broker.bootstrap_servers().to_string();
    let deliveries = runtime().block_on(async {
        let producer: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("enable.idempotence", "true")
            .set("linger.ms", "2")
            .create()
            .expect("producer");
        let mut out = Vec::new();
        for i in 0..RECORDS {
            let key = format!("key-{}", i % 7);
            let value = format!("value-{i}");
            let headers = OwnedHeaders::new().insert(Header { key: "n", value: Some(&i.to_string()) });
            let record = FutureRecord::to(TOPIC).key(&key).payload(&value).headers(headers).timestamp(1_000 + i as i64);
            let d = producer.send(record, Duration::from_secs(5)).await.expect("delivered");
            out.push((key, value, d));
        }
        producer.flush(Duration::from_secs(5)).await.expect("flushed");
        assert_eq!(producer.in_flight_count(), 0);
        out
    });
    for (key, _, d) in &deliveries {
        assert_eq!(d.partition, (crc32(key.as_bytes()) % PARTITIONS as u32) as i32, "CRC-32 partition for {key}");
    }
    for p in 0..PARTITIONS {
        let offsets: Vec<i64> = deliveries.iter().filter(|d| d.2.partition == p).map(|d| d.2.offset).collect();
        assert_eq!(offsets, (0..offsets.len() as i64).collect::<Vec<_>>(), "consecutive offsets in partition {p}");
    }

    // Read everything back with librdkafka.
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::{Headers, Message};
    let consumer: BaseConsumer = rdkafka::config::ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", "reader")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut tpl = rdkafka::TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition_offset(TOPIC, p, rdkafka::Offset::Beginning).expect("partition");
    }
    consumer.assign(&tpl).expect("assign");
    let mut read = Vec::new();
    let give_up = std::time::Instant::now() + Duration::from_secs(60);
    while read.len() < RECORDS && std::time::Instant::now() < give_up {
        if let Some(m) = consumer.poll(Duration::from_millis(200)) {
            let m = m.expect("a record");
            let header = m.headers().map(|h| h.get(0)).map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec)));
            read.push((
                m.partition(),
                m.offset(),
                m.key().map(<[u8]>::to_vec),
                m.payload().map(<[u8]>::to_vec),
                header,
                m.timestamp().to_millis(),
            ));
        }
    }
    assert_eq!(read.len(), RECORDS, "librdkafka read every record");
    for (key, value, d) in &deliveries {
        let i: usize = value.trim_start_matches("value-").parse().expect("numbered");
        let found = read.iter().find(|r| r.0 == d.partition && r.1 == d.offset).expect("the delivered record is there");
        assert_eq!(found.2.as_deref(), Some(key.as_bytes()));
        assert_eq!(found.3.as_deref(), Some(value.as_bytes()));
        assert_eq!(found.4, Some(("n".to_string(), Some(i.to_string().into_bytes()))));
        assert_eq!(found.5, Some(1_000 + i as i64), "the create time sent");
    }
}

#[test]
fn a_bad_configuration_fails_creation_as_rdkafka_does() {
    runtime().block_on(async {
        let err = ClientConfig::new()
            .set("bootstrap.servers", "127.0.0.1:1")
            .set("lingr.ms", "5")
            .create::<FutureProducer>()
            .expect_err("unknown key");
        assert_eq!(err.to_string(), "Client config error: No such configuration property: \"lingr.ms\" lingr.ms 5");
        let err = ClientConfig::new()
            .set("bootstrap.servers", "127.0.0.1:1")
            .set("acks", "lots")
            .create::<FutureProducer>()
            .expect_err("bad value");
        assert!(err.to_string().contains("Invalid value for configuration property \"acks\""), "{err}");
    });
}
