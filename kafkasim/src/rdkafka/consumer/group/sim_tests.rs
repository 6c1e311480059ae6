//! The group task inside a simulation against a kafkasim `Cluster`: members on their own sim
//! nodes (so one can be cut off), each driven by a probe that records its events, answers
//! rebalances at once (or holds them) and polls every 500 ms (or stops).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sim::net::Partition;
use sim::node::{BoxError, NodeCtx, ServiceSpec, System};
use sim::{Ctx, Failure, Simulation};
use tokio::sync::{mpsc, oneshot};

use crate::Cluster;
use crate::rdkafka::consumer::group::assignor::RebalanceProtocol;
use crate::rdkafka::error::{KafkaError, RDKafkaErrorCode as Code};
use crate::rdkafka::net::Dialer;

use super::assignor::Strategy;
use super::{GroupCommand, GroupEvent, GroupHandle, GroupSettings, Tp, spawn};

const GROUP: &str = "g";

fn fail(e: impl std::fmt::Display) -> Failure {
    Failure::correctness("rdkafka-group", e.to_string())
}

fn check(ok: bool, what: impl Into<String>) -> Result<(), Failure> {
    if ok { Ok(()) } else { Err(fail(what.into())) }
}

fn settings(bootstrap: &str, strategy: Strategy) -> GroupSettings {
    GroupSettings {
        group_id: GROUP.into(),
        instance_id: None,
        session_timeout: Duration::from_secs(6),
        heartbeat_interval: Duration::from_secs(1),
        max_poll_interval: Duration::from_secs(10),
        strategies: vec![strategy],
        client_id: "app".into(),
        bootstrap: bootstrap.split(',').map(str::to_string).collect(),
        retry_backoff: Duration::from_millis(100),
        reconnect_backoff: Duration::from_millis(100),
        socket_timeout: Duration::from_secs(10),
        metadata_refresh: Duration::from_secs(300),
    }
}

/// One member's view, shared between its node and the test.
#[derive(Clone, Default)]
struct Probe {
    events: Arc<Mutex<Vec<String>>>,
    assignment: Arc<Mutex<BTreeSet<Tp>>>,
    handle: Arc<Mutex<Option<GroupHandle>>>,
    stop_polling: Arc<AtomicBool>,
    hold_rebalance: Arc<AtomicBool>,
}

impl Probe {
    fn handle(&self) -> GroupHandle {
        self.handle.lock().expect("probe").clone().expect("the member started")
    }
    fn owned(&self) -> BTreeSet<Tp> {
        self.assignment.lock().expect("probe").clone()
    }
    fn log(&self) -> Vec<String> {
        self.events.lock().expect("probe").clone()
    }
    async fn commit(&self, offsets: Vec<(Tp, i64, Option<String>)>) -> super::CommitReply {
        let (reply, rx) = oneshot::channel();
        self.handle().send(GroupCommand::Commit { offsets, reply });
        rx.await.map_err(|_| KafkaError::Canceled)?
    }
    async fn committed(&self, partitions: Vec<Tp>) -> super::CommittedReply {
        let (reply, rx) = oneshot::channel();
        self.handle().send(GroupCommand::Committed { partitions, reply });
        rx.await.map_err(|_| KafkaError::Canceled)?
    }
}

fn render(ps: &[Tp]) -> String {
    ps.iter().map(|(t, p)| format!("{t}{p}")).collect::<Vec<_>>().join(",")
}

fn protocol(p: RebalanceProtocol) -> &'static str {
    match p {
        RebalanceProtocol::Cooperative => "coop",
        _ => "eager",
    }
}

/// Runs the member: spawns the group task, subscribes to `t`, and applies events as a
/// consumer does (Assign replaces (eager) or adds (cooperative); Revoke and Lost remove).
async fn drive(node: NodeCtx, s: GroupSettings, probe: Probe) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let h = spawn(s, Dialer::sim(node.host().clone(), crate::rdkafka::net::SETUP_TIMEOUT_DEFAULT), tx);
    *probe.handle.lock().expect("probe") = Some(h.clone());
    h.send(GroupCommand::Subscribe(vec!["t".into()]));
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        tokio::select! {
            ev = rx.recv() => {
                let Some(ev) = ev else { return };
                let text = match &ev {
                    GroupEvent::Assign { partitions, protocol: p } => format!("assign-{} [{}]", protocol(*p), render(partitions)),
                    GroupEvent::Revoke { partitions, protocol: p } => format!("revoke-{} [{}]", protocol(*p), render(partitions)),
                    GroupEvent::Lost { partitions } => format!("lost [{}]", render(partitions)),
                    GroupEvent::Error(e) => format!("error {e}"),
                };
                probe.events.lock().expect("probe").push(text);
                {
                    let mut a = probe.assignment.lock().expect("probe");
                    match &ev {
                        GroupEvent::Assign { partitions, protocol: RebalanceProtocol::Cooperative } => a.extend(partitions.iter().cloned()),
                        GroupEvent::Assign { partitions, .. } => *a = partitions.iter().cloned().collect(),
                        GroupEvent::Revoke { partitions, .. } | GroupEvent::Lost { partitions } => {
                            for p in partitions { a.remove(p); }
                        }
                        GroupEvent::Error(_) => {}
                    }
                }
                if !matches!(ev, GroupEvent::Error(_)) {
                    while probe.hold_rebalance.load(Ordering::SeqCst) {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    // As the consumer does once the assignment is cleared.
                    if matches!(ev, GroupEvent::Lost { .. } | GroupEvent::Revoke { protocol: RebalanceProtocol::Eager, .. }) {
                        h.clear_lost();
                    }
                    h.send(GroupCommand::RebalanceDone);
                }
            }
            _ = tick.tick() => if !probe.stop_polling.load(Ordering::SeqCst) { h.send(GroupCommand::Polled) },
        }
    }
}

async fn add(system: &System, name: &str, s: GroupSettings, probe: &Probe) -> Result<(), Failure> {
    let probe = probe.clone();
    system.add(ServiceSpec::new(name, move |node: NodeCtx| {
        let (s, probe) = (s.clone(), probe.clone());
        async move {
            node.set_ready();
            drive(node.clone(), s, probe).await;
            std::future::pending::<()>().await;
            Ok::<(), BoxError>(())
        }
    }));
    system.start().await
}

async fn until(what: &str, limit: Duration, mut f: impl FnMut() -> bool) -> Result<(), Failure> {
    let end = tokio::time::Instant::now() + limit;
    while !f() {
        if tokio::time::Instant::now() > end {
            return Err(fail(format!("timed out waiting for {what}")));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

fn all(n: i32) -> BTreeSet<Tp> {
    (0..n).map(|p| ("t".to_string(), p)).collect()
}

/// The probes' assignments are disjoint, cover `n` partitions and differ by at most one.
fn balanced(probes: &[&Probe], n: i32) -> bool {
    let sets: Vec<BTreeSet<Tp>> = probes.iter().map(|p| p.owned()).collect();
    let union: BTreeSet<Tp> = sets.iter().flatten().cloned().collect();
    let total: usize = sets.iter().map(BTreeSet::len).sum();
    let (min, max) = (sets.iter().map(BTreeSet::len).min(), sets.iter().map(BTreeSet::len).max());
    union == all(n) && total == n as usize && max.zip(min).is_some_and(|(a, b)| a - b <= 1)
}

async fn setup(ctx: &Ctx) -> Result<(Cluster, String, System), Failure> {
    let cluster = Cluster::builder().brokers(3).build();
    let bootstrap = cluster.serve_sim(ctx)?;
    cluster.create_topic("t", 6).map_err(fail)?;
    let system = System::new(ctx);
    Ok((cluster, bootstrap, system))
}

/// Eager range: members join one after another; each rebalance revokes everything before the
/// new assignment; commits carry the generation and read back; a member that closes leaves and
/// the others take its partitions.
async fn eager_joins_commits_and_leaves(ctx: Ctx) -> Result<(), Failure> {
    let (cluster, bootstrap, system) = setup(&ctx).await?;
    let (a, b, c) = (Probe::default(), Probe::default(), Probe::default());
    add(&system, "a", settings(&bootstrap, Strategy::Range), &a).await?;
    until("a owns all", Duration::from_secs(60), || a.owned() == all(6)).await?;
    add(&system, "b", settings(&bootstrap, Strategy::Range), &b).await?;
    until("a, b balanced", Duration::from_secs(60), || balanced(&[&a, &b], 6)).await?;
    add(&system, "c", settings(&bootstrap, Strategy::Range), &c).await?;
    until("a, b, c balanced", Duration::from_secs(60), || balanced(&[&a, &b, &c], 6)).await?;
    let log = a.log();
    ctx.record("rdk.group", "a", log.join(" | "));
    check(log.first().map(String::as_str) == Some("assign-eager [t0,t1,t2,t3,t4,t5]"), format!("{log:?}"))?;
    check(log.get(1).map(String::as_str) == Some("revoke-eager [t0,t1,t2,t3,t4,t5]"), format!("{log:?}"))?;
    // Range over sorted member ids: each assign is a run of consecutive partitions.
    check(log.iter().filter(|e| e.starts_with("assign")).count() >= 3, format!("{log:?}"))?;
    let gen_a = a.handle().generation();
    check(gen_a >= 3 && a.handle().rebalance_protocol() == RebalanceProtocol::Eager, format!("generation {gen_a}"))?;
    // Commit and read back.
    let mine: Vec<Tp> = a.owned().into_iter().collect();
    let offsets = mine.iter().map(|tp| (tp.clone(), 42, Some("m".to_string()))).collect();
    let results = a.commit(offsets).await.map_err(fail)?;
    check(results.iter().all(|(_, r)| r.is_ok()), format!("{results:?}"))?;
    let back = a.committed(mine.clone()).await.map_err(fail)?;
    check(back.iter().all(|(_, o, m)| *o == Some(42) && m.as_deref() == Some("m")), format!("{back:?}"))?;
    check(cluster.committed(GROUP, &mine[0].0, mine[0].1).map(|c| c.0) == Some(42), "the broker has it")?;
    // c closes: LeaveGroup, a and b share everything.
    let (tx, rx) = oneshot::channel();
    c.handle().send(GroupCommand::Close(tx));
    rx.await.map_err(fail)?;
    until("a, b balanced after c left", Duration::from_secs(30), || balanced(&[&a, &b], 6) && a.owned().len() == 3)
        .await?;
    Ok(())
}

/// Cooperative-sticky: the second member's partitions are first revoked from the first (never
/// everything), then assigned in a later generation; the first keeps the rest throughout.
async fn cooperative_moves_only_what_changes_owner(ctx: Ctx) -> Result<(), Failure> {
    let (_cluster, bootstrap, system) = setup(&ctx).await?;
    let (a, b) = (Probe::default(), Probe::default());
    add(&system, "a", settings(&bootstrap, Strategy::CooperativeSticky), &a).await?;
    until("a owns all", Duration::from_secs(60), || a.owned() == all(6)).await?;
    add(&system, "b", settings(&bootstrap, Strategy::CooperativeSticky), &b).await?;
    until("balanced", Duration::from_secs(60), || balanced(&[&a, &b], 6)).await?;
    let (la, lb) = (a.log(), b.log());
    ctx.record("rdk.group", "a", la.join(" | "));
    ctx.record("rdk.group", "b", lb.join(" | "));
    check(la.iter().all(|e| e != "revoke-coop [t0,t1,t2,t3,t4,t5]"), format!("a never revokes all: {la:?}"))?;
    let revoked = la.iter().position(|e| e.starts_with("revoke-coop")).ok_or_else(|| fail(format!("{la:?}")))?;
    check(
        la.get(revoked + 1).map(String::as_str) == Some("assign-coop []"),
        format!("revoke then empty assign: {la:?}"),
    )?;
    check(lb.first().map(String::as_str) == Some("assign-coop []"), format!("b first gets nothing: {lb:?}"))?;
    check(lb.iter().filter(|e| e.starts_with("assign-coop [t")).count() == 1, format!("{lb:?}"))?;
    check(a.handle().rebalance_protocol() == RebalanceProtocol::Cooperative, "cooperative")?;
    Ok(())
}

/// max.poll.interval.ms: a member that stops polling gets MaxPollExceeded and loses its
/// partitions, the other takes them; polling again rejoins.
async fn max_poll_exceeded_leaves_and_rejoins(ctx: Ctx) -> Result<(), Failure> {
    let (_cluster, bootstrap, system) = setup(&ctx).await?;
    let (a, b) = (Probe::default(), Probe::default());
    add(&system, "a", settings(&bootstrap, Strategy::Range), &a).await?;
    add(&system, "b", settings(&bootstrap, Strategy::Range), &b).await?;
    until("balanced", Duration::from_secs(60), || balanced(&[&a, &b], 6)).await?;
    a.stop_polling.store(true, Ordering::SeqCst);
    until("b owns all", Duration::from_secs(60), || b.owned() == all(6)).await?;
    let la = a.log();
    let exceeded = format!("error {}", KafkaError::MessageConsumption(Code::PollExceeded));
    let at = la.iter().position(|e| *e == exceeded).ok_or_else(|| fail(format!("{la:?}")))?;
    check(la.get(at + 1).is_some_and(|e| e.starts_with("lost [")), format!("{la:?}"))?;
    check(a.owned().is_empty() && a.handle().member_id().is_none(), "a is out")?;
    a.stop_polling.store(false, Ordering::SeqCst);
    until("balanced again", Duration::from_secs(60), || balanced(&[&a, &b], 6)).await?;
    Ok(())
}

/// A member cut off from the cluster: its session expires at the broker (the other member gets
/// everything) and locally (its partitions are lost); healed, it rejoins.
async fn session_expiry_of_a_partitioned_member(ctx: Ctx) -> Result<(), Failure> {
    let (_cluster, bootstrap, system) = setup(&ctx).await?;
    let (a, b) = (Probe::default(), Probe::default());
    add(&system, "a", settings(&bootstrap, Strategy::Range), &a).await?;
    add(&system, "b", settings(&bootstrap, Strategy::Range), &b).await?;
    until("balanced", Duration::from_secs(60), || balanced(&[&a, &b], 6)).await?;
    let cut = ctx.net().install(Partition::isolate("a-0"));
    until("b owns all", Duration::from_secs(60), || b.owned() == all(6)).await?;
    until("a lost its partitions", Duration::from_secs(60), || a.log().iter().any(|e| e.starts_with("lost ["))).await?;
    check(a.owned().is_empty(), "a owns nothing")?;
    drop(cut);
    until("balanced again", Duration::from_secs(90), || balanced(&[&a, &b], 6)).await?;
    Ok(())
}

/// A static member (KIP-345) closes without leaving, a new incarnation with the same
/// group.instance.id takes its place within the session: same partitions, no rebalance of the
/// other member.
async fn static_member_rejoins_without_a_rebalance(ctx: Ctx) -> Result<(), Failure> {
    let (_cluster, bootstrap, system) = setup(&ctx).await?;
    let (a, b, a2) = (Probe::default(), Probe::default(), Probe::default());
    let mut sa = settings(&bootstrap, Strategy::Range);
    sa.instance_id = Some("instance-a".into());
    let mut sb = settings(&bootstrap, Strategy::Range);
    sb.instance_id = Some("instance-b".into());
    add(&system, "a", sa.clone(), &a).await?;
    add(&system, "b", sb, &b).await?;
    until("balanced", Duration::from_secs(60), || balanced(&[&a, &b], 6)).await?;
    let before = a.owned();
    let b_events = b.log().len();
    let (tx, rx) = oneshot::channel();
    a.stop_polling.store(true, Ordering::SeqCst);
    a.handle().send(GroupCommand::Close(tx));
    rx.await.map_err(fail)?;
    add(&system, "a2", sa, &a2).await?;
    until("a2 has a's partitions", Duration::from_secs(60), || a2.owned() == before).await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    check(b.log().len() == b_events, format!("b saw no rebalance: {:?}", b.log()))?;
    Ok(())
}

/// A member kept out of the group (its eager revoke not answered past the rebalance timeout)
/// commits late: the broker refuses it (the #757 class), the new owner's offsets stay; the
/// coordinator then moves and commits still land.
async fn stale_commit_refused_and_coordinator_failover(ctx: Ctx) -> Result<(), Failure> {
    let (cluster, bootstrap, system) = setup(&ctx).await?;
    let (a, b) = (Probe::default(), Probe::default());
    add(&system, "a", settings(&bootstrap, Strategy::Range), &a).await?;
    until("a owns all", Duration::from_secs(60), || a.owned() == all(6)).await?;
    a.hold_rebalance.store(true, Ordering::SeqCst);
    add(&system, "b", settings(&bootstrap, Strategy::Range), &b).await?;
    until("b owns all", Duration::from_secs(60), || b.owned() == all(6)).await?;
    let tp = ("t".to_string(), 0);
    let results = b.commit(vec![(tp.clone(), 10, None)]).await.map_err(fail)?;
    check(results[0].1.is_ok(), format!("b commits: {results:?}"))?;
    let late = a.commit(vec![(tp.clone(), 3, None)]).await.map_err(fail)?;
    ctx.record("rdk.group", "late commit", format!("{late:?}"));
    check(
        matches!(late[0].1, Err(KafkaError::ConsumerCommit(Code::UnknownMemberId | Code::IllegalGeneration))),
        format!("the late commit is refused: {late:?}"),
    )?;
    check(cluster.committed(GROUP, "t", 0).map(|c| c.0) == Some(10), "the new owner's offset stays")?;
    // Fenced while its revoke still waits for the application: the assignment is lost at once
    // (librdkafka's rd_kafka_cgrp_assignment_set_lost), so the revoke callback, when it runs,
    // sees assignment_lost() and commits nothing.
    check(a.handle().lost(), "a's assignment is marked lost before its revoke is applied")?;
    a.hold_rebalance.store(false, Ordering::SeqCst);
    until("balanced", Duration::from_secs(60), || balanced(&[&a, &b], 6)).await?;
    check(!a.handle().lost(), "cleared with the revoked assignment")?;
    // Failover: the coordinator moves; the next commit finds it again.
    let now = cluster.group(GROUP).map(|g| g.coordinator).unwrap_or(0);
    cluster.move_coordinator(GROUP, (now + 1) % 3);
    let mine: Tp = b.owned().into_iter().next().ok_or_else(|| fail("b owns something"))?;
    let results = b.commit(vec![(mine.clone(), 20, None)]).await.map_err(fail)?;
    check(results[0].1.is_ok(), format!("commit after the move: {results:?}"))?;
    check(cluster.committed(GROUP, &mine.0, mine.1).map(|c| c.0) == Some(20), "stored")?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    check(balanced(&[&a, &b], 6), "still balanced after the move")?;
    Ok(())
}

#[test]
fn eager_members_join_commit_and_leave() {
    Simulation::new("rdk_group_eager").seeds(0..3).repeat(2).run(eager_joins_commits_and_leaves).assert_passed();
}

#[test]
fn cooperative_sticky_revokes_before_moving() {
    Simulation::new("rdk_group_coop")
        .seeds(0..3)
        .repeat(2)
        .run(cooperative_moves_only_what_changes_owner)
        .assert_passed();
}

#[test]
fn max_poll_interval_exceeded() {
    Simulation::new("rdk_group_maxpoll").seeds(0..3).run(max_poll_exceeded_leaves_and_rejoins).assert_passed();
}

#[test]
fn partitioned_member_session_expires() {
    Simulation::new("rdk_group_session").seeds(0..3).run(session_expiry_of_a_partitioned_member).assert_passed();
}

#[test]
fn static_member_rejoin() {
    Simulation::new("rdk_group_static").seeds(0..3).run(static_member_rejoins_without_a_rebalance).assert_passed();
}

#[test]
fn stale_commit_and_coordinator_failover() {
    Simulation::new("rdk_group_stale").seeds(0..3).run(stale_commit_refused_and_coordinator_failover).assert_passed();
}

/// A connect begun during a partition is given up after `socket.connection.setup.timeout.ms`
/// (librdkafka closes a connection not set up by then), not left waiting for the kernel's next
/// SYN retransmission (1 s, 3 s, 7 s, 15 s … after the first).
async fn connect_in_a_partition_gives_up_at_the_setup_timeout(ctx: Ctx) -> Result<(), Failure> {
    let (_cluster, bootstrap, system) = setup(&ctx).await?;
    let target = bootstrap.split(',').next().ok_or_else(|| fail("a bootstrap address"))?.to_string();
    let outcome: Arc<Mutex<Option<(Duration, std::io::ErrorKind)>>> = Arc::default();
    let out = Arc::clone(&outcome);
    system.add(ServiceSpec::new("dialer", move |node: NodeCtx| {
        let (out, target) = (Arc::clone(&out), target.clone());
        async move {
            node.set_ready();
            tokio::time::sleep(Duration::from_secs(1)).await;
            let dialer = Dialer::sim(node.host().clone(), Duration::from_millis(2500));
            let started = tokio::time::Instant::now();
            let kind = match dialer.dial(&target).await {
                Ok(_) => std::io::ErrorKind::Other,
                Err(e) => e.kind(),
            };
            *out.lock().expect("outcome") = Some((started.elapsed(), kind));
            std::future::pending::<()>().await;
            Ok::<(), BoxError>(())
        }
    }));
    system.start().await?;
    let _cut = ctx.net().install(Partition::isolate("dialer-0"));
    until("the dial ended", Duration::from_secs(60), || outcome.lock().expect("outcome").is_some()).await?;
    let (took, kind) = outcome.lock().expect("outcome").expect("checked");
    check(kind == std::io::ErrorKind::TimedOut, format!("the dial failed TimedOut, not {kind:?}"))?;
    check(took == Duration::from_millis(2500), format!("after the setup timeout exactly, not {took:?}"))?;
    Ok(())
}

#[test]
fn connect_setup_timeout() {
    Simulation::new("rdk_connect_setup_timeout")
        .seeds(0..3)
        .run(connect_in_a_partition_gives_up_at_the_setup_timeout)
        .assert_passed();
}
