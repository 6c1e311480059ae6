//! `kafkasim::rdkafka`'s consumer group through the public API, inside a simulation: the close
//! of a dropped consumer (librdkafka's `rd_kafka_consumer_close`: revoke callbacks, commits,
//! LeaveGroup), consumer nodes that stop or crash leaving no task behind, the roundrobin
//! assignor across two topics, and three eager members when one leaves.

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
use sim::net::Ending;
use sim::node::{BoxError, CrashMode, NodeCtx, ServiceSpec, System};
use sim::{Ctx, Failure, Simulation};

fn fail(e: impl std::fmt::Display) -> Failure {
    Failure::correctness("rdkafka-group", e.to_string())
}

fn check(ok: bool, what: impl Into<String>) -> Result<(), Failure> {
    if ok { Ok(()) } else { Err(Failure::correctness("rdkafka-group", what)) }
}

/// Runs `body` as the entry point of a sim node `app-0` and returns what it returned.
async fn in_node<F, Fut>(ctx: &Ctx, body: F) -> Result<(), Failure>
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

type Log = Arc<Mutex<Vec<String>>>;

/// What a context saw, in a log that outlives the consumer; commits the consumer's state from
/// pre_rebalance(Revoke), as at-least-once services do.
struct Recorder {
    name: String,
    log: Log,
}

impl ClientContext for Recorder {}

fn parts(tpl: &TopicPartitionList) -> Vec<String> {
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
                log.push(format!("{} pre revoke {:?} (held {held})", self.name, parts(t)));
                drop(base.commit_consumer_state(CommitMode::Async));
            }
            Rebalance::Error(e) => log.push(format!("{} error {e}", self.name)),
        }
    }
    fn post_rebalance(&self, base: &BaseConsumer<Self>, r: &Rebalance<'_>) {
        let held = parts(&base.assignment().unwrap_or_default());
        let what = if matches!(r, Rebalance::Revoke(_)) { "revoke" } else { "assign" };
        self.log.lock().expect("log").push(format!("{} post {what} (holds {held:?})", self.name));
    }
    fn commit_callback(&self, result: KafkaResult<()>, _offsets: &TopicPartitionList) {
        self.log.lock().expect("log").push(format!("{} commit {:?}", self.name, result.map_err(|e| e.to_string())));
    }
}

fn member(bootstrap: &str, name: &str, log: &Log, extra: &[(&str, &str)]) -> Result<StreamConsumer<Recorder>, Failure> {
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

async fn produce(bootstrap: &str, topic: &str, partition: i32, n: i32) -> Result<(), Failure> {
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
async fn until(c: &StreamConsumer<Recorder>, n: usize) -> Result<Vec<(String, i32, i64)>, Failure> {
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
async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) -> Result<(), Failure> {
    for _ in 0..300 {
        if cond() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(fail(format!("never: {what}")))
}

fn members(cluster: &Cluster) -> usize {
    cluster.group("g").map_or(0, |g| g.members.len())
}

/// Dropping a consumer closes it as rdkafka's drop does: the revoke callbacks run (in the
/// drop), the commit made in pre_rebalance(Revoke) reaches the broker, the member leaves the
/// group (LeaveGroup: the group is empty at once, not after session.timeout.ms).
async fn drop_closes(ctx: Ctx) -> Result<(), Failure> {
    let cluster = Cluster::builder().brokers(1).initial_rebalance_delay(Duration::ZERO).build();
    let bootstrap = cluster.serve_sim(&ctx)?;
    cluster.create_topic("d", 2).map_err(fail)?;
    let (c2, ctx2) = (cluster.clone(), ctx.clone());
    in_node(&ctx, move |_node| {
        let (ctx, cluster, bootstrap) = (ctx2.clone(), c2.clone(), bootstrap.clone());
        async move {
            produce(&bootstrap, "d", 0, 3).await?;
            produce(&bootstrap, "d", 1, 2).await?;
            let log: Log = Arc::default();
            let a = member(&bootstrap, "a", &log, &[])?;
            a.subscribe(&["d"]).map_err(fail)?;
            let mut read = until(&a, 2).await?;
            while read.len() < 5 {
                let m = a.recv().await.map_err(fail)?;
                read.push((m.topic().to_string(), m.partition(), m.offset()));
            }
            let before = log.lock().expect("log").len();
            drop(a);
            let at_drop: Vec<String> = log.lock().expect("log")[before..].to_vec();
            ctx.record("rdkg.drop", "callbacks", format!("{at_drop:?}"));
            check(
                at_drop == ["a pre revoke [\"d0\", \"d1\"] (held 2)", "a post revoke (holds [])"],
                format!("the drop ran the revoke callbacks: {at_drop:?}"),
            )?;
            let started = tokio::time::Instant::now();
            wait_for("the member left", || members(&cluster) == 0).await?;
            check(started.elapsed() < Duration::from_secs(6), "left by LeaveGroup, not by session expiry")?;
            let committed = (cluster.committed("g", "d", 0).map(|c| c.0), cluster.committed("g", "d", 1).map(|c| c.0));
            check(committed == (Some(3), Some(2)), format!("the revoke callback's commit: {committed:?}"))?;
            Ok(())
        }
    })
    .await
}

/// A consumer service that stops on SIGTERM (`close().await`) and one that crashes: neither
/// leaves a task running (the `leak` and `zombie` oracles), the stopped one's revoke commit is
/// on the broker and it left the group; the crashed one is expired by the session timeout.
async fn stop_and_crash(ctx: Ctx) -> Result<(), Failure> {
    let cluster = Cluster::builder().brokers(1).initial_rebalance_delay(Duration::ZERO).build();
    let bootstrap = cluster.serve_sim(&ctx)?;
    cluster.create_topic("s", 2).map_err(fail)?;
    let log: Log = Arc::default();
    let system = System::new(&ctx);
    for name in ["stopper", "crasher"] {
        let (bootstrap, log) = (bootstrap.clone(), Arc::clone(&log));
        system.add(ServiceSpec::new(name, move |node: NodeCtx| {
            let (bootstrap, log) = (bootstrap.clone(), Arc::clone(&log));
            async move {
                let c = member(&bootstrap, node.name(), &log, &[])?;
                c.subscribe(&["s"])?;
                node.set_ready();
                let stop = node.shutdown_signal();
                tokio::pin!(stop);
                loop {
                    tokio::select! {
                        () = &mut stop => break,
                        m = c.recv() => drop(m?),
                    }
                }
                c.close().await;
                Ok::<(), BoxError>(())
            }
        }));
    }
    system.start().await?;
    produce(&bootstrap, "s", 0, 4).await.ok();
    let c2 = cluster.clone();
    wait_for("two members", || members(&c2) == 2).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    system.sigterm("stopper-0")?;
    wait_for("the stopper left", || members(&c2) == 1).await?;
    system.crash("crasher-0", CrashMode::Fixed(Ending::Reset)).await?;
    tokio::time::sleep(Duration::from_secs(10)).await;
    check(members(&cluster) == 0, "the crashed member expired")?;
    system.check_zombies()?;
    let l = log.lock().expect("log").clone();
    ctx.record("rdkg.stop", "log", format!("{l:?}"));
    check(
        l.iter().any(|e| e.starts_with("stopper-0 pre revoke"))
            && l.iter().any(|e| e == "stopper-0 post revoke (holds [])"),
        format!("the stopper's close ran its revoke callbacks: {l:?}"),
    )?;
    Ok(())
}

#[test]
fn dropping_a_consumer_revokes_through_the_callbacks_commits_and_leaves() {
    Simulation::new("rdkg_drop").seeds(0..3).repeat(2).run(drop_closes).assert_passed();
}

#[test]
fn consumer_nodes_that_stop_or_crash_leave_no_task_running() {
    Simulation::new("rdkg_stop").seeds(0..3).repeat(2).run(stop_and_crash).assert_passed();
}

/// Closed (`close().await`) while its rejoin's JoinGroup is held (a Delay fault, after a
/// subscription change): the member still leaves by LeaveGroup once the JoinGroup is answered,
/// as librdkafka's close does, instead of lingering until its session expires; it joins no
/// further (no assign callback).
async fn close_during_join(ctx: Ctx) -> Result<(), Failure> {
    use kafkasim::kafka_protocol::messages::ApiKey;
    use kafkasim::{Fault, FaultAction};
    let cluster = Cluster::builder().brokers(1).initial_rebalance_delay(Duration::ZERO).build();
    let bootstrap = cluster.serve_sim(&ctx)?;
    cluster.create_topic("j", 1).map_err(fail)?;
    cluster.create_topic("k", 1).map_err(fail)?;
    let (c2, ctx2) = (cluster.clone(), ctx.clone());
    in_node(&ctx, move |_node| {
        let (ctx, cluster, bootstrap) = (ctx2.clone(), c2.clone(), bootstrap.clone());
        async move {
            let log: Log = Arc::default();
            let a = member(&bootstrap, "a", &log, &[])?;
            a.subscribe(&["j"]).map_err(fail)?;
            until(&a, 1).await?;
            let member_id = a.member_id().ok_or_else(|| fail("a member id"))?;
            let delay = Fault::new(ApiKey::JoinGroup, FaultAction::Delay(Duration::from_secs(2))).group("g");
            let fault = cluster.install(delay);
            a.subscribe(&["j", "k"]).map_err(fail)?;
            let _ = tokio::time::timeout(Duration::from_millis(500), a.recv()).await;
            let before = log.lock().expect("log").len();
            a.close().await;
            drop(fault);
            let events = cluster.group_events("g");
            ctx.record("rdkg.join", "events", format!("{events:?}"));
            let left = events.iter().any(|e| e.detail == format!("{member_id} left"));
            let expired = events.iter().any(|e| e.detail.contains("expired"));
            check(left && !expired && members(&cluster) == 0, format!("left by LeaveGroup: {events:?}"))?;
            let after: Vec<String> = log.lock().expect("log")[before..].to_vec();
            check(!after.iter().any(|l| l.contains("assign")), format!("no assignment after the close: {after:?}"))?;
            Ok(())
        }
    })
    .await
}

#[test]
fn a_consumer_closed_while_joining_still_leaves() {
    Simulation::new("rdkg_join").seeds(0..3).repeat(2).run(close_during_join).assert_passed();
}
