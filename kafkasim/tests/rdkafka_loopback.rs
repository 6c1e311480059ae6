//! rdkafka (librdkafka) against the loopback broker: an idempotent producer and a consumer
//! group of three `StreamConsumer`s through rebalances (members joining, one leaving) and
//! commits. Real threads and real time: statistical, like any real-network test, so the
//! assertions are about outcomes (everything consumed, commits at the end of the log, the
//! generations the broker saw), never about timing.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use kafkasim::Broker;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use tokio::sync::mpsc;

const TOPIC: &str = "events";
const GROUP: &str = "rdkafka-group";
const PARTITIONS: i32 = 6;
/// How long any phase may take before the test gives up (generous: CI machines are slow).
const PHASE_TIMEOUT: Duration = Duration::from_secs(90);

fn consumer(bootstrap: &str, name: &str) -> StreamConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", GROUP)
        .set("client.id", name)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "6000")
        .set("heartbeat.interval.ms", "300")
        .set("partition.assignment.strategy", "range")
        .set("fetch.wait.max.ms", "100")
        .create()
        .expect("consumer config")
}

/// Consumes until `stop` fires, committing each message and reporting `(partition, offset)`.
fn run_consumer(
    c: Arc<StreamConsumer>,
    seen: mpsc::UnboundedSender<(i32, i64)>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stop.wait_for(|s| *s) => return,
                m = c.recv() => match m {
                    Ok(m) => {
                        let _ = seen.send((m.partition(), m.offset()));
                        let _ = c.commit_message(&m, CommitMode::Async);
                    }
                    Err(e) => eprintln!("consumer error (retried): {e}"),
                },
            }
        }
    })
}

async fn produce(producer: &FutureProducer, from: usize, to: usize) {
    let records: Vec<(String, String)> = (from..to).map(|i| (format!("key-{i}"), format!("value-{i}"))).collect();
    let sends = records
        .iter()
        .map(|(key, value)| producer.send(FutureRecord::to(TOPIC).key(key).payload(value), Duration::from_secs(10)));
    for result in futures::future::join_all(sends).await {
        result.expect("every record is acknowledged");
    }
}

async fn wait_for_all(rx: &mut mpsc::UnboundedReceiver<(i32, i64)>, seen: &mut BTreeSet<(i32, i64)>, total: usize) {
    tokio::time::timeout(PHASE_TIMEOUT, async {
        while seen.len() < total {
            let Some(x) = rx.recv().await else { return };
            seen.insert(x);
        }
    })
    .await
    .unwrap_or_else(|_| panic!("consumed {} of {total} records", seen.len()));
}

#[test]
fn rdkafka_producer_and_three_group_consumers_rebalance_and_commit() {
    let broker = Broker::start_local().expect("loopback broker");
    broker.cluster().create_topic(TOPIC, PARTITIONS).expect("topic");
    let bootstrap = broker.bootstrap_servers().to_string();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    runtime.block_on(async {
        let producer: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("linger.ms", "5")
            .create()
            .expect("producer config");
        produce(&producer, 0, 300).await;
        let hw: i64 =
            (0..PARTITIONS).map(|p| broker.cluster().partition(TOPIC, p).expect("exists").high_watermark).sum();
        assert_eq!(hw, 300, "every acknowledged record is in the log once");

        let (tx, mut rx) = mpsc::unbounded_channel();
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let mut seen = BTreeSet::new();

        // One member first, then two more join: two rebalances.
        let c1 = Arc::new(consumer(&bootstrap, "c1"));
        c1.subscribe(&[TOPIC]).expect("subscribe");
        let t1 = run_consumer(Arc::clone(&c1), tx.clone(), stop_rx.clone());
        wait_for_all(&mut rx, &mut seen, 50).await;
        let c2 = Arc::new(consumer(&bootstrap, "c2"));
        let c3 = Arc::new(consumer(&bootstrap, "c3"));
        c2.subscribe(&[TOPIC]).expect("subscribe");
        c3.subscribe(&[TOPIC]).expect("subscribe");
        let t2 = run_consumer(Arc::clone(&c2), tx.clone(), stop_rx.clone());
        let (stop3_tx, stop3_rx) = tokio::sync::watch::channel(false);
        let t3 = run_consumer(Arc::clone(&c3), tx.clone(), stop3_rx);
        wait_for_all(&mut rx, &mut seen, 300).await;

        // Wait until the three share one generation (rdkafka may still be rebalancing).
        tokio::time::timeout(PHASE_TIMEOUT, async {
            while broker.cluster().group(GROUP).is_none_or(|g| g.members.len() != 3 || g.state != "Stable") {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await
        .expect("three members in a stable generation");

        // c3 leaves (LeaveGroup on close): another rebalance; more records arrive meanwhile.
        stop3_tx.send_replace(true);
        t3.await.expect("consumer task");
        let c3 = Arc::try_unwrap(c3).unwrap_or_else(|_| panic!("c3 is no longer shared"));
        tokio::task::spawn_blocking(move || drop(c3)).await.expect("closed");
        produce(&producer, 300, 360).await;
        wait_for_all(&mut rx, &mut seen, 360).await;

        tokio::time::timeout(PHASE_TIMEOUT, async {
            loop {
                let stable_two =
                    broker.cluster().group(GROUP).is_some_and(|g| g.members.len() == 2 && g.state == "Stable");
                let committed_all = (0..PARTITIONS).all(|p| {
                    let hw = broker.cluster().partition(TOPIC, p).expect("exists").high_watermark;
                    broker.cluster().committed(GROUP, TOPIC, p).is_some_and(|(o, _)| o == hw)
                });
                if stable_two && committed_all {
                    return;
                }
                let _ = c1.commit_consumer_state(CommitMode::Async);
                let _ = c2.commit_consumer_state(CommitMode::Async);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await
        .unwrap_or_else(|_| {
            panic!("commits did not reach the end of every partition: {:?}", broker.cluster().group(GROUP))
        });
        stop_tx.send_replace(true);
        t1.await.expect("consumer task");
        t2.await.expect("consumer task");
    });

    let generations = broker.cluster().generations(GROUP);
    let sizes: Vec<usize> = generations.iter().map(|g| g.members.len()).collect();
    // 1 (c1 alone), …, 3 (all), 2 (after c3 left), and 0 once c1 and c2 closed.
    let three = sizes.iter().position(|n| *n == 3).unwrap_or_else(|| panic!("generation sizes {sizes:?}"));
    assert!(sizes[three..].contains(&2), "generation sizes {sizes:?}");
    assert_eq!(sizes.last(), Some(&0), "closing consumers leave the group: {sizes:?}");
    assert!(generations.windows(2).all(|w| w[1].generation > w[0].generation), "generations only grow");
    let allowed = [0, 22, 25, 27]; // NONE, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS
    let commits = broker.cluster().commits();
    assert!(commits.iter().all(|c| allowed.contains(&c.error)), "unexpected commit errors");
    // No commit from a generation's non-member was stored.
    for c in commits.iter().filter(|c| c.error == 0) {
        let generation = generations.iter().find(|g| g.generation == c.generation).expect("a known generation");
        assert!(generation.members.iter().any(|m| m.member_id == c.member_id), "{c:?} from a non-member");
    }
}
