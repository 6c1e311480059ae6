//! librdkafka #4059 (present since librdkafka 1.6.0, here 2.3.0 = rdkafka 0.37.0; fixed in
//! 2.10.0 = rdkafka 0.38.0 by librdkafka PR #4908).
//!
//! With the cooperative protocol (KIP-429, `partition.assignment.strategy=cooperative-sticky`) a
//! rebalance takes two rounds: in the first the members learn which of their partitions move and
//! revoke only those, then they join again and the second round hands the moved partitions to
//! their new owners. Partitions that stay keep being consumed throughout, and the consumer keeps
//! committing them. A commit is sent with the member's current generation; Kafka handles one
//! request per connection at a time, so a commit the member sent after its second JoinGroup is
//! handled once that JoinGroup has completed, under the next generation, and is refused
//! `ILLEGAL_GENERATION`. librdkafka up to 2.9 answered that refusal by resetting the member's
//! generation to -1 (and, being mid-rebalance, skipped the revoke it would otherwise do); the
//! member's next heartbeat then carried generation -1, was refused `ILLEGAL_GENERATION` in turn,
//! and the consumer treated its whole assignment as lost: every partition revoked with
//! `assignment_lost()`, a rejoin, and consumption of partitions that were never meant to move
//! stopped and restarted from their committed offsets. librdkafka 2.10.0 ignores an
//! `ILLEGAL_GENERATION` commit refusal while it is rebalancing, since a new generation is about
//! to arrive (CHANGELOG 2.10.0 / 2.8.3, "Consumer fixes"; `rdkafka_cgrp.c`,
//! `rd_kafka_cgrp_op_handle_OffsetCommit`; librdkafka test 0113).
//!
//! The scenario, written as a user would have written it before the bug was known: real rdkafka
//! `StreamConsumer`s in one group with `cooperative-sticky`, each committing every message it
//! processes (`commit_message`, async), consume a topic that a producer keeps writing to, on
//! kafkasim served on loopback; members join the group one after another and one may leave
//! again. Nobody crashes, no session expires, no network fault: every rebalance is a planned one,
//! which is what the cooperative protocol is for. The swarm draws the partitions, the members,
//! the heartbeat interval and the processing time; the seed draws when members come and go.
//! Oracles:
//! - `assignment-kept`: no member ever revokes with `assignment_lost()` (nothing here loses a
//!   member's assignment: no session timeout, no fencing, no coordinator failure);
//! - `single-ownership`: a partition is assigned to one member at a time (revoked by its owner
//!   before anyone else gets it);
//! - `commits-monotonic`: each partition's stored committed offsets never go backwards.
//!
//! librdkafka runs its own threads against real sockets in real time, so the scenario runs on
//! a thread of its own (the run's thread only draws the plan and judges): a seed fixes the plan,
//! not the interleaving, and a failing seed replays statistically ("replays k of n").

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafkasim::Broker;
use rdkafka::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use sim::{Ctx, Failure, Oracle, Simulation};

/// A member revoked its partitions with `assignment_lost()`.
const ASSIGNMENT_KEPT: Oracle = Oracle::new("assignment-kept");
/// A partition was assigned to a member while another still held it.
const SINGLE_OWNERSHIP: Oracle = Oracle::new("single-ownership");
/// A partition's stored committed offset went backwards.
const COMMITS_MONOTONIC: Oracle = Oracle::new("commits-monotonic");

const TOPIC: &str = "orders";
const GROUP: &str = "billing";
/// How long the first member may take to get its assignment, and the end to settle.
const SETTLE_DEADLINE: Duration = Duration::from_secs(20);

fn main() {
    let simulation = Simulation::new("librdkafka-4059").watchdog(Duration::from_secs(180));
    regression::main(simulation, scenario);
}

/// What the run's thread drew.
#[derive(Clone, Debug)]
struct Plan {
    partitions: i32,
    heartbeat_ms: u64,
    /// Time a member spends on each message before committing it.
    work: Duration,
    /// Time between two produced messages.
    produce_gap: Duration,
    /// Members joining after the first, each this long after the previous change.
    joins: Vec<Duration>,
    /// The last member to join leaves again this long after it joined.
    leave_after: Option<Duration>,
    /// How long the group runs after the last change.
    tail: Duration,
}

impl Plan {
    fn draw(ctx: &Ctx) -> Plan {
        let partitions = ctx.swarm().int("partitions", 2..=8) as i32;
        let members = ctx.swarm().int("members", 2..=3);
        let heartbeat_ms = ctx.swarm().int("heartbeat_interval_ms", 100..=1000);
        let work = ctx.swarm().duration("work", Duration::ZERO..=Duration::from_millis(3));
        let produce_gap = ctx.swarm().duration("produce_gap", Duration::from_millis(1)..=Duration::from_millis(4));
        let leaves = ctx.swarm().flag("one_leaves", 0.5);
        let mut times = ctx.source("membership");
        let ms = |s: &mut sim::Source, lo: u64, hi: u64| Duration::from_millis(s.range(lo..=hi));
        let joins = (1..members).map(|_| ms(&mut times, 200, 2000)).collect();
        let leave_after = leaves.then(|| ms(&mut times, 200, 2000));
        let tail = ms(&mut times, 1000, 2500);
        Plan { partitions, heartbeat_ms, work, produce_gap, joins, leave_after, tail }
    }
}

/// What the members' rebalance callbacks saw, shared by every member.
#[derive(Debug, Default)]
struct Journal {
    /// Each partition's current owner.
    owners: BTreeMap<i32, String>,
    /// Revocations with `assignment_lost()`: member and partitions.
    lost: Vec<String>,
    /// Assignments of a partition another member still held.
    doubled: Vec<String>,
    /// Every callback, in order.
    events: Vec<String>,
}

/// A member's context: its name and the shared journal.
struct Member {
    name: String,
    journal: Arc<Mutex<Journal>>,
}

impl ClientContext for Member {}

impl ConsumerContext for Member {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let mut j = self.journal.lock().unwrap_or_else(|p| p.into_inner());
        match rebalance {
            Rebalance::Assign(tpl) => {
                let parts: Vec<i32> = tpl.elements().iter().map(|e| e.partition()).collect();
                j.events.push(format!("{} assigned {parts:?}", self.name));
                for p in parts {
                    if let Some(owner) = j.owners.get(&p).filter(|o| **o != self.name) {
                        let text = format!("partition {p} assigned to {} while {owner} held it", self.name);
                        j.doubled.push(text);
                    }
                    j.owners.insert(p, self.name.clone());
                }
            }
            Rebalance::Revoke(tpl) => {
                let parts: Vec<i32> = tpl.elements().iter().map(|e| e.partition()).collect();
                let lost = consumer.assignment_lost();
                j.events.push(format!("{} revoked {parts:?}{}", self.name, if lost { " (lost)" } else { "" }));
                if lost {
                    let text = format!("{} lost its assignment {parts:?}", self.name);
                    j.lost.push(text);
                }
                for p in parts {
                    if j.owners.get(&p) == Some(&self.name) {
                        j.owners.remove(&p);
                    }
                }
            }
            Rebalance::Error(e) => j.events.push(format!("{} rebalance error: {e}", self.name)),
        }
    }
}

/// What the real-world side saw.
#[derive(Debug, Default)]
struct Observed {
    journal: Journal,
    /// Commits refused `ILLEGAL_GENERATION` (for the message).
    illegal_generation: usize,
    /// Stored commits that went backwards: partition, before, after.
    backwards: Vec<(i32, i64, i64)>,
    /// Generations the group went through.
    generations: usize,
}

async fn scenario(ctx: Ctx) -> Result<(), Failure> {
    let plan = Plan::draw(&ctx);
    ctx.record("plan", "harness", format!("{plan:?}"));
    // librdkafka's threads and the loopback broker run in real time, away from the run's thread
    // (whose clock and randomness are the simulation's).
    let worker = plan.clone();
    let observed = std::thread::Builder::new()
        .name("librdkafka-4059".to_string())
        .spawn(move || real_world(&worker))
        .map_err(|e| Failure::correctness("harness", format!("cannot start the scenario's thread: {e}")))?
        .join()
        .map_err(|_| Failure::correctness("harness", "the scenario's thread panicked"))?
        .map_err(|e| Failure::correctness("harness", e))?;

    let story = |o: &Observed| {
        format!(
            "{} generations, {} commits refused ILLEGAL_GENERATION; callbacks: {}",
            o.generations,
            o.illegal_generation,
            o.journal.events.join("; ")
        )
    };
    if let Some(first) = observed.journal.lost.first() {
        ctx.record("group", "members", "an assignment was lost");
        return Err(Failure::correctness(
            ASSIGNMENT_KEPT,
            format!("{first} during planned cooperative rebalances ({})", story(&observed)),
        ));
    }
    if let Some(first) = observed.journal.doubled.first() {
        ctx.record("group", "members", "a partition had two owners");
        return Err(Failure::correctness(SINGLE_OWNERSHIP, format!("{first} ({})", story(&observed))));
    }
    if let Some((p, before, after)) = observed.backwards.first() {
        ctx.record("group", "members", "a committed offset went backwards");
        return Err(Failure::correctness(
            COMMITS_MONOTONIC,
            format!("partition {p}'s committed offset went from {before} back to {after} ({})", story(&observed)),
        ));
    }
    ctx.record("group", "members", "assignments kept, one owner each, commits monotonic");
    Ok(())
}

fn consumer(
    bootstrap: &str,
    name: &str,
    plan: &Plan,
    journal: &Arc<Mutex<Journal>>,
) -> Result<StreamConsumer<Member>, String> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", GROUP)
        .set("client.id", name)
        .set("partition.assignment.strategy", "cooperative-sticky")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "6000")
        .set("heartbeat.interval.ms", plan.heartbeat_ms.to_string())
        .set("fetch.wait.max.ms", "50")
        .create_with_context(Member { name: name.to_string(), journal: Arc::clone(journal) })
        .map_err(|e| format!("consumer {name}: {e}"))
}

/// Consumes until `stop`, committing each message after processing it.
fn run_member(
    c: Arc<StreamConsumer<Member>>,
    work: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stop.wait_for(|s| *s) => return,
                m = c.recv() => {
                    if let Ok(m) = m {
                        let _ = c.commit_message(&m, CommitMode::Async);
                    }
                }
            }
            if !work.is_zero() {
                tokio::time::sleep(work).await;
            }
        }
    })
}

/// A running member: its consumer, its loop, and the switch that stops it.
struct Running {
    consumer: Arc<StreamConsumer<Member>>,
    task: tokio::task::JoinHandle<()>,
    stop: tokio::sync::watch::Sender<bool>,
}

impl Running {
    fn start(bootstrap: &str, name: &str, plan: &Plan, journal: &Arc<Mutex<Journal>>) -> Result<Running, String> {
        let consumer = Arc::new(consumer(bootstrap, name, plan, journal)?);
        consumer.subscribe(&[TOPIC]).map_err(|e| format!("subscribe {name}: {e}"))?;
        let (stop, rx) = tokio::sync::watch::channel(false);
        let task = run_member(Arc::clone(&consumer), plan.work, rx);
        Ok(Running { consumer, task, stop })
    }

    /// Stops the loop and closes the consumer (rdkafka's drop blocks until it has left the group).
    async fn close(self) {
        self.stop.send_replace(true);
        let _ = self.task.await;
        if let Ok(c) = Arc::try_unwrap(self.consumer) {
            let _ = tokio::task::spawn_blocking(move || drop(c)).await;
        }
    }
}

/// The scenario in real time: the loopback broker, a producer, the members coming and going.
fn real_world(plan: &Plan) -> Result<Observed, String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    let broker = Broker::start_local().map_err(|e| format!("loopback broker: {e}"))?;
    broker.cluster().create_topic(TOPIC, plan.partitions).map_err(|e| format!("create topic: {e:?}"))?;
    let bootstrap = broker.bootstrap_servers().to_string();
    let journal = Arc::new(Mutex::new(Journal::default()));

    let cluster = broker.cluster().clone();
    let result = runtime.block_on(async {
        let producer: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("linger.ms", "2")
            .create()
            .map_err(|e| format!("producer: {e}"))?;
        let (stop_producing, mut producing) = tokio::sync::watch::channel(false);
        let partitions = plan.partitions;
        let gap = plan.produce_gap;
        let writer = tokio::spawn(async move {
            let mut i: u64 = 0;
            loop {
                let payload = format!("order-{i}");
                let p = (i % partitions as u64) as i32;
                let _ = producer.send_result(FutureRecord::<(), String>::to(TOPIC).partition(p).payload(&payload));
                i += 1;
                tokio::select! {
                    _ = producing.wait_for(|s| *s) => return,
                    _ = tokio::time::sleep(gap) => {}
                }
            }
        });

        let mut members = vec![Running::start(&bootstrap, "member-1", plan, &journal)?];
        // The first member owns every partition before anyone else joins.
        let owned_all = async {
            loop {
                let owned = journal.lock().unwrap_or_else(|p| p.into_inner()).owners.len();
                if owned == plan.partitions as usize {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        tokio::time::timeout(SETTLE_DEADLINE, owned_all)
            .await
            .map_err(|_| "the first member never got every partition".to_string())?;
        for (k, after) in plan.joins.iter().enumerate() {
            tokio::time::sleep(*after).await;
            members.push(Running::start(&bootstrap, &format!("member-{}", k + 2), plan, &journal)?);
        }
        if let Some(after) = plan.leave_after {
            tokio::time::sleep(after).await;
            if let Some(last) = members.pop() {
                last.close().await;
            }
        }
        tokio::time::sleep(plan.tail).await;
        stop_producing.send_replace(true);
        let _ = writer.await;
        for m in members {
            m.close().await;
        }
        Ok::<_, String>(())
    });
    result?;
    drop(runtime);

    let journal = Arc::try_unwrap(journal)
        .map_err(|_| "a consumer outlived the scenario".to_string())?
        .into_inner()
        .unwrap_or_else(|p| p.into_inner());
    let commits: Vec<_> = cluster.commits().into_iter().filter(|c| c.group == GROUP && c.topic == TOPIC).collect();
    let illegal_generation = commits.iter().filter(|c| c.error == 22).count();
    let mut last: BTreeMap<i32, i64> = BTreeMap::new();
    let mut backwards = Vec::new();
    for c in commits.iter().filter(|c| c.error == 0) {
        if let Some(before) = last.get(&c.partition).filter(|b| **b > c.offset) {
            backwards.push((c.partition, *before, c.offset));
        }
        last.insert(c.partition, c.offset);
    }
    let generations = cluster.generations(GROUP).len();
    drop(broker);
    Ok(Observed { journal, illegal_generation, backwards, generations })
}
