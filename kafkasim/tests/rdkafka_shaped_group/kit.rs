//! What the `rdkafka_shaped_*` simulation tests share: a node to run a body on, a recording
//! context that commits from pre_rebalance(Revoke), group members, producing, waiting.

#![allow(dead_code)]

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafkasim::Cluster;
use kafkasim::rdkafka::client::ClientContext;
use kafkasim::rdkafka::config::ClientConfig;
use kafkasim::rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer};
use kafkasim::rdkafka::error::KafkaResult;
use kafkasim::rdkafka::producer::{FutureProducer, FutureRecord};
use kafkasim::rdkafka::{Message, TopicPartitionList};
use sim::node::{BoxError, NodeCtx, ServiceSpec, System};
use sim::{Ctx, Failure};

pub fn fail(e: impl std::fmt::Display) -> Failure {
    Failure::correctness("rdkafka-group", e.to_string())
}

pub fn check(ok: bool, what: impl Into<String>) -> Result<(), Failure> {
    if ok { Ok(()) } else { Err(Failure::correctness("rdkafka-group", what)) }
}

/// Runs `body` as the entry point of a sim node `app-0` and returns what it returned.
pub async fn in_node<F, Fut>(ctx: &Ctx, body: F) -> Result<(), Failure>
where
    F: Fn(NodeCtx) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), Failure>> + Send + 'static,
{
    let (tx, rx) = tokio::sync::oneshot::channel();
    let tx = Arc::new(Mutex::new(Some(tx)));
    let body = Arc::new(body);
    let system = System::new(ctx);
    system.add(ServiceSpec::new("app", move |node: NodeCtx| {
        let (tx, body) = (Arc::clone(&tx), Arc::clone(&body));
        async move {
            node.set_ready();
            let result = body(node.clone()).await;
            if let Some(tx) = tx.lock().expect("tx").take() {
                let _ = tx.send(result);
            }
            std::future::pending::<()>().await;
            drop(node);
            Ok::<(), BoxError>(())
        }
    }));
    system.start().await?;
    rx.await.map_err(fail)?
}

pub type Log = Arc<Mutex<Vec<String>>>;

/// What a context saw, in a log that outlives the consumer; commits the consumer's state from
/// pre_rebalance(Revoke), as at-least-once services do.
pub struct Recorder {
    pub name: String,
    pub log: Log,
}

impl ClientContext for Recorder {}

pub fn parts(tpl: &TopicPartitionList) -> Vec<String> {
    let mut v: Vec<String> = tpl.elements().iter().map(|e| format!("{}{}", e.topic(), e.partition())).collect();
    v.sort();
    v
}

impl ConsumerContext for Recorder {
    fn pre_rebalance(&self, base: &BaseConsumer<Self>, r: &Rebalance<'_>) {
        let mut log = self.log.lock().expect("log");
        match r {
            Rebalance::Assign(t) => log.push(format!("{} pre assign {:?}", self.name, parts(t))),
            Rebalance::Revoke(t) => {
                let held = base.assignment().map(|a| a.count()).unwrap_or(0);
                let lost = if base.assignment_lost() { " lost" } else { "" };
                log.push(format!("{} pre revoke {:?} (held {held}){lost}", self.name, parts(t)));
                drop(base.commit_consumer_state(CommitMode::Async));
            }
            Rebalance::Error(e) => log.push(format!("{} error {e}", self.name)),
        }
    }
    fn post_rebalance(&self, base: &BaseConsumer<Self>, r: &Rebalance<'_>) {
        let held = parts(&base.assignment().unwrap_or_default());
        let what = if matches!(r, Rebalance::Revoke(_)) { "revoke" } else { "assign" };
        let lost = if base.assignment_lost() { " lost" } else { "" };
        self.log.lock().expect("log").push(format!("{} post {what} (holds {held:?}){lost}", self.name));
    }
    fn commit_callback(&self, result: KafkaResult<()>, _offsets: &TopicPartitionList) {
        self.log.lock().expect("log").push(format!("{} commit {:?}", self.name, result.map_err(|e| e.to_string())));
    }
}

pub fn member(
    bootstrap: &str,
    name: &str,
    log: &Log,
    extra: &[(&str, &str)],
) -> Result<StreamConsumer<Recorder>, Failure> {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("client.id", name)
        .set("group.id", "g")
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .set("session.timeout.ms", "6000")
        .set("heartbeat.interval.ms", "500");
    for (k, v) in extra {
        config.set(*k, *v);
    }
    config.create_with_context(Recorder { name: name.to_string(), log: Arc::clone(log) }).map_err(fail)
}

pub async fn produce(bootstrap: &str, topic: &str, partition: i32, n: i32) -> Result<(), Failure> {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap).set("linger.ms", "0");
    let p: FutureProducer = config.create().map_err(fail)?;
    for i in 0..n {
        let v = format!("v{i}");
        p.send(FutureRecord::to(topic).partition(partition).key("k").payload(&v), None)
            .await
            .map_err(|(e, _)| fail(e))?;
    }
    Ok(())
}

/// Reads (applying rebalances) until `c` holds `n` partitions; what it read.
pub async fn until(c: &StreamConsumer<Recorder>, n: usize) -> Result<Vec<(String, i32, i64)>, Failure> {
    let mut read = Vec::new();
    for _ in 0..300 {
        if c.assignment().map(|t| t.count()).unwrap_or(0) == n {
            return Ok(read);
        }
        match tokio::time::timeout(Duration::from_millis(100), c.recv()).await {
            Ok(Ok(m)) => read.push((m.topic().to_string(), m.partition(), m.offset())),
            Ok(Err(e)) => return Err(fail(e)),
            Err(_) => {}
        }
    }
    Err(fail(format!("assignment never reached {n}")))
}

/// Waits (simulated time) until `cond` holds of the cluster.
pub async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) -> Result<(), Failure> {
    for _ in 0..300 {
        if cond() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(fail(format!("never: {what}")))
}

pub fn members(cluster: &Cluster) -> usize {
    cluster.group("g").map_or(0, |g| g.members.len())
}
