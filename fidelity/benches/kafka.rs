//! kafkasim against a real Apache Kafka broker, measured in the same run with the same code
//! (`cargo bench -p fidelity --bench kafka`, add `-- --quick` for a short run):
//!
//! 1. broker start-to-ready: kafkasim's `Broker::start_local()` until an ApiVersions request over
//!    a fresh loopback connection is answered, against the local KRaft process
//!    (`fidelity/scripts/kafka-local.sh start`: format storage, start the JVM, wait until a
//!    Metadata request is answered);
//! 2. produce then fetch throughput over loopback with rdkafka: an idempotent `BaseProducer`
//!    sending 100-byte records to 3 partitions, then a `BaseConsumer` reading them all back.
//!
//! Each measurement prints both sides and the ratio. Without a real broker (no Java, no cached
//! jars: see `fidelity/scripts/kafka-local.sh available`), the real side prints
//! `real broker: skipped (…)`; `KAFKA_BOOTSTRAP` gives one for the throughput part only.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use fidelity::counterpart::Counterpart;
use kafkasim::kafka_protocol::messages::ApiVersionsRequest;
use kafkasim::kafka_protocol::protocol::StrBytes;
use kafkasim::{Broker, Client};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

mod support;

const PARTITIONS: i32 = 3;
const RECORD_BYTES: usize = 100;

/// kafkasim's start-to-ready, `n` times; the median.
fn kafkasim_start_to_ready(n: usize) -> Duration {
    let api_versions = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("bench"))
        .with_client_software_version(StrBytes::from_static_str("1"));
    let (request, _) = Client::new(tokio::io::empty(), "bench").encode(&api_versions, 3).expect("encodes");
    let mut runs = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        let broker = Broker::start_local().expect("broker");
        let mut conn = std::net::TcpStream::connect(broker.bootstrap_servers()).expect("connect");
        conn.write_all(&request).expect("write");
        let mut size = [0u8; 4];
        conn.read_exact(&mut size).expect("read");
        let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
        conn.read_exact(&mut body).expect("read");
        runs.push(t.elapsed());
    }
    support::report_ready("kafkasim (ApiVersions answered)", &mut runs)
}

/// The local KRaft broker's start-to-ready, `n` times: the median, and the last broker (kept
/// running for the throughput runs) — or why there is none.
fn real_start_to_ready(n: usize) -> Result<(Duration, Box<dyn Counterpart>), String> {
    let what = format!("Apache Kafka {} (local KRaft process)", fidelity::kafka::version());
    support::time_starts(&fidelity::kafka::local(), &what, n)
}

/// Creates the topic through rdkafka's admin client (the same code on both sides).
fn create_topic(bootstrap: &str, topic: &str) {
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", bootstrap).create().expect("admin client");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let results = runtime
        .block_on(admin.create_topics(&[NewTopic::new(topic, PARTITIONS, TopicReplication::Fixed(1))], &opts))
        .expect("create topics");
    for r in results {
        r.expect("topic created");
    }
}

/// Records per second: `(produce, fetch)`.
fn rdkafka_throughput(name: &str, bootstrap: &str, count: usize) -> (f64, f64) {
    let topic = format!("bench-{}-{}", std::process::id(), Instant::now().elapsed().as_nanos());
    create_topic(bootstrap, &topic);
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .set("queue.buffering.max.messages", "1000000")
        .create()
        .expect("producer");
    let payload = [b'x'; RECORD_BYTES];
    let t = Instant::now();
    for i in 0..count {
        let key = (i as u32).to_be_bytes();
        loop {
            match producer.send(BaseRecord::to(&topic).key(&key[..]).payload(&payload[..])) {
                Ok(()) => break,
                Err((_, _)) => {
                    producer.poll(Duration::from_millis(1));
                }
            }
        }
        if i % 1000 == 0 {
            producer.poll(Duration::ZERO);
        }
    }
    producer.flush(Duration::from_secs(120)).expect("flushed");
    let produce = t.elapsed();

    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", format!("{topic}-reader"))
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition_offset(&topic, p, Offset::Beginning).expect("partition");
    }
    consumer.assign(&tpl).expect("assign");
    let t = Instant::now();
    let mut read = 0;
    while read < count {
        match consumer.poll(Duration::from_secs(30)) {
            Some(m) => {
                m.expect("a record");
                read += 1;
            }
            None => panic!("{name}: fetch stalled at {read} of {count}"),
        }
    }
    let fetch = t.elapsed();
    let mb = (count * RECORD_BYTES) as f64 / 1e6;
    let (p, f) = (count as f64 / produce.as_secs_f64(), count as f64 / fetch.as_secs_f64());
    println!(
        "rdkafka produce {name:<42} n={count:<7} {produce:>9.1?}  {p:>9.0} records/s  {:>6.1} MB/s",
        mb / produce.as_secs_f64()
    );
    println!(
        "rdkafka fetch   {name:<42} n={count:<7} {fetch:>9.1?}  {f:>9.0} records/s  {:>6.1} MB/s",
        mb / fetch.as_secs_f64()
    );
    (p, f)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    println!("kafkasim vs Apache Kafka ({})", if quick { "quick" } else { "full" });
    let count = if quick { 20_000 } else { 200_000 };

    let sim_ready = kafkasim_start_to_ready(if quick { 20 } else { 200 });
    let real = real_start_to_ready(if quick { 1 } else { 3 });
    let (real_ready, real_broker) = match real {
        Ok((d, c)) => (Some(d), Some(c)),
        Err(why) => {
            println!("real broker: skipped ({why})");
            (None, None)
        }
    };

    let sim = Broker::start_local().expect("broker");
    let (sim_produce, sim_fetch) = rdkafka_throughput("kafkasim (loopback)", sim.bootstrap_servers(), count);
    drop(sim);
    let external = std::env::var(fidelity::kafka::BOOTSTRAP_ENV).ok().filter(|b| !b.is_empty());
    let real_address = real_broker.as_ref().map(|c| c.address().to_string()).or(external);
    let real_rates = match &real_address {
        Some(address) => Some(rdkafka_throughput("Apache Kafka (loopback)", address, count)),
        None => {
            println!("real broker: skipped (no local broker started and {} unset)", fidelity::kafka::BOOTSTRAP_ENV);
            None
        }
    };
    drop(real_broker);

    println!("ratios (kafkasim vs Apache Kafka {}):", fidelity::kafka::version());
    match real_ready {
        Some(real) => println!(
            "  start-to-ready   kafkasim {:>9.1?}  kafka {:>9.1?}  kafkasim is {:.0}x faster",
            sim_ready,
            real,
            real.as_secs_f64() / sim_ready.as_secs_f64()
        ),
        None => println!("  start-to-ready   real broker: skipped"),
    }
    match real_rates {
        Some((real_produce, real_fetch)) => {
            println!(
                "  rdkafka produce  kafkasim {sim_produce:>9.0}/s  kafka {real_produce:>9.0}/s  ratio {:.2}",
                sim_produce / real_produce
            );
            println!(
                "  rdkafka fetch    kafkasim {sim_fetch:>9.0}/s  kafka {real_fetch:>9.0}/s  ratio {:.2}",
                sim_fetch / real_fetch
            );
        }
        None => println!("  rdkafka throughput: real broker: skipped"),
    }
}
