//! `kafkasim::rdkafka`'s consumer group through the public API, inside a simulation: the close
//! of a dropped consumer (librdkafka's `rd_kafka_consumer_close`: revoke callbacks, commits,
//! LeaveGroup), consumer nodes that stop or crash leaving no task behind, the roundrobin
//! assignor across two topics, and three eager members when one leaves.

#[path = "rdkafka_shaped_group/kit.rs"]
mod kit;

use std::sync::Arc;
use std::time::Duration;

use kafkasim::Cluster;
use kafkasim::rdkafka::Message;
use kafkasim::rdkafka::consumer::Consumer;
use sim::net::Ending;
use sim::node::{BoxError, CrashMode, NodeCtx, ServiceSpec, System};
use sim::{Ctx, Failure, Simulation};

use kit::{Log, check, fail, in_node, member, members, produce, until, wait_for};

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
/// leaves a task running (the `leak` and `zombie` oracles), the stopped one ran its revoke
/// callbacks and left the group; the crashed one runs no callback (a killed process runs no
/// close) and is expired by the session timeout.
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
    // Let the crasher settle in the next generation, then mark where the crash is.
    tokio::time::sleep(Duration::from_secs(3)).await;
    log.lock().expect("log").push("CRASH".into());
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
    let crash = l.iter().position(|e| e == "CRASH").ok_or_else(|| fail("the crash marker"))?;
    check(l[crash + 1..].is_empty(), format!("a crashed consumer runs no callback: {:?}", &l[crash..]))?;
    Ok(())
}

/// roundrobin across two topics (x: 3 partitions, y: 1): the four partitions, sorted, are dealt
/// to the two members in member-id order (librdkafka's `rd_kafka_roundrobin_assignor`): two
/// each — range would give three and one.
async fn roundrobin_two_topics(ctx: Ctx) -> Result<(), Failure> {
    let cluster = Cluster::builder().brokers(1).initial_rebalance_delay(Duration::ZERO).build();
    let bootstrap = cluster.serve_sim(&ctx)?;
    cluster.create_topic("x", 3).map_err(fail)?;
    cluster.create_topic("y", 1).map_err(fail)?;
    let ctx2 = ctx.clone();
    in_node(&ctx, move |_node| {
        let (ctx, bootstrap) = (ctx2.clone(), bootstrap.clone());
        async move {
            let log: Log = Arc::default();
            let rr = [("partition.assignment.strategy", "roundrobin")];
            let a = member(&bootstrap, "a", &log, &rr)?;
            a.subscribe(&["x", "y"]).map_err(fail)?;
            until(&a, 4).await?;
            let b = member(&bootstrap, "b", &log, &rr)?;
            b.subscribe(&["x", "y"]).map_err(fail)?;
            let (ra, rb) = tokio::join!(until(&a, 2), until(&b, 2));
            ra?;
            rb?;
            let held = |c: &kafkasim::rdkafka::consumer::StreamConsumer<kit::Recorder>| {
                kit::parts(&c.assignment().unwrap_or_default())
            };
            let (ha, hb) = (held(&a), held(&b));
            ctx.record("rdkg.rr", "held", format!("{ha:?} {hb:?}"));
            let first = if a.member_id() < b.member_id() { (&ha, &hb) } else { (&hb, &ha) };
            check(
                *first.0 == ["x0", "x2"] && *first.1 == ["x1", "y0"],
                format!("dealt in member-id order: {first:?}"),
            )?;
            Ok(())
        }
    })
    .await
}

/// Three eager (range) members share three partitions, one each, in one generation; when one
/// closes, the other two are revoked everything (pre/post_rebalance(Revoke) of what each held)
/// and get the three partitions between them in the next generation, which all rebalance
/// callbacks agree on; the leaver's partition resumes at its committed offset.
async fn three_then_a_leave(ctx: Ctx) -> Result<(), Failure> {
    let cluster = Cluster::builder().brokers(1).initial_rebalance_delay(Duration::ZERO).build();
    let bootstrap = cluster.serve_sim(&ctx)?;
    cluster.create_topic("t", 3).map_err(fail)?;
    let (c2, ctx2) = (cluster.clone(), ctx.clone());
    in_node(&ctx, move |_node| {
        let (ctx, cluster, bootstrap) = (ctx2.clone(), c2.clone(), bootstrap.clone());
        async move {
            for p in 0..3 {
                produce(&bootstrap, "t", p, 2).await?;
            }
            let log: Log = Arc::default();
            let a = member(&bootstrap, "a", &log, &[])?;
            let b = member(&bootstrap, "b", &log, &[])?;
            let c = member(&bootstrap, "c", &log, &[])?;
            for m in [&a, &b, &c] {
                m.subscribe(&["t"]).map_err(fail)?;
            }
            let (ra, rb, rc) = tokio::join!(until(&a, 1), until(&b, 1), until(&c, 1));
            let read_c = rc?;
            ra?;
            rb?;
            check(a.generation() == b.generation() && b.generation() == c.generation(), "one generation for all")?;
            let generation = a.generation();
            let mut read_c = read_c.len();
            while read_c < 2 {
                drop(c.recv().await.map_err(fail)?);
                read_c += 1;
            }
            let c_part = kit::parts(&c.assignment().map_err(fail)?);
            let before = log.lock().expect("log").len();
            c.close().await;
            let c_id = format!("t{}", &c_part[0][1..]);
            let partition: i32 = c_part[0][1..].parse().map_err(fail)?;
            check(
                cluster.committed("g", "t", partition).map(|c| c.0) == Some(2),
                format!("c committed {c_id} on close"),
            )?;
            let held = |m: &kafkasim::rdkafka::consumer::StreamConsumer<kit::Recorder>| {
                m.assignment().map(|t| t.count()).unwrap_or(0)
            };
            for _ in 0..300 {
                if held(&a) + held(&b) == 3 && a.generation() > generation && a.generation() == b.generation() {
                    break;
                }
                let _ = tokio::join!(
                    tokio::time::timeout(Duration::from_millis(50), a.recv()),
                    tokio::time::timeout(Duration::from_millis(50), b.recv())
                );
            }
            let after: Vec<String> = log.lock().expect("log")[before..].to_vec();
            ctx.record("rdkg.three", "after", format!("{after:?}"));
            check(held(&a) + held(&b) == 3, format!("a and b hold the three: {after:?}"))?;
            check(a.generation() > generation && a.generation() == b.generation(), "a newer generation for both")?;
            for name in ["a", "b"] {
                let revoke = after.iter().position(|l| l.starts_with(&format!("{name} pre revoke")));
                let revoked = after.iter().position(|l| *l == format!("{name} post revoke (holds [])"));
                let assign = after.iter().position(|l| l.starts_with(&format!("{name} pre assign")));
                check(
                    revoke.is_some() && revoke < revoked && revoked < assign,
                    format!("{name}: eager revoke of everything, then the new assignment: {after:?}"),
                )?;
            }
            Ok(())
        }
    })
    .await
}

/// enable.auto.commit with auto.commit.interval.ms=0: librdkafka starts no commit timer, the
/// stored offsets are committed only when the partitions are revoked — here by the close.
async fn auto_commit_without_interval(ctx: Ctx) -> Result<(), Failure> {
    let cluster = Cluster::builder().brokers(1).initial_rebalance_delay(Duration::ZERO).build();
    let bootstrap = cluster.serve_sim(&ctx)?;
    cluster.create_topic("z", 1).map_err(fail)?;
    let (c2, ctx2) = (cluster.clone(), ctx.clone());
    in_node(&ctx, move |_node| {
        let (_ctx, cluster, bootstrap) = (ctx2.clone(), c2.clone(), bootstrap.clone());
        async move {
            produce(&bootstrap, "z", 0, 3).await?;
            let log: Log = Arc::default();
            let extra = [("enable.auto.commit", "true"), ("auto.commit.interval.ms", "0")];
            let a = member(&bootstrap, "a", &log, &extra)?;
            a.subscribe(&["z"]).map_err(fail)?;
            let mut read = until(&a, 1).await?.len();
            while read < 3 {
                drop(a.recv().await.map_err(fail)?);
                read += 1;
            }
            let _ = tokio::time::timeout(Duration::from_secs(10), a.recv()).await;
            check(cluster.committed("g", "z", 0).is_none(), "no commit timer with an interval of 0")?;
            a.close().await;
            let committed = cluster.committed("g", "z", 0).map(|c| c.0);
            check(committed == Some(3), format!("committed by the close's revoke: {committed:?}"))?;
            Ok(())
        }
    })
    .await
}

/// A LeaveGroup answered NOT_COORDINATOR (the coordinator moved while the close waited): the
/// coordinator is looked up again and the LeaveGroup sent again, as librdkafka retries it — the
/// member leaves instead of waiting out its session.
async fn leave_retried(ctx: Ctx) -> Result<(), Failure> {
    use kafkasim::kafka_protocol::ResponseError;
    use kafkasim::kafka_protocol::messages::ApiKey;
    use kafkasim::{Fault, FaultAction};
    let cluster = Cluster::builder().brokers(1).initial_rebalance_delay(Duration::ZERO).build();
    let bootstrap = cluster.serve_sim(&ctx)?;
    cluster.create_topic("l", 1).map_err(fail)?;
    let (c2, ctx2) = (cluster.clone(), ctx.clone());
    in_node(&ctx, move |_node| {
        let (_ctx, cluster, bootstrap) = (ctx2.clone(), c2.clone(), bootstrap.clone());
        async move {
            let log: Log = Arc::default();
            let a = member(&bootstrap, "a", &log, &[])?;
            a.subscribe(&["l"]).map_err(fail)?;
            until(&a, 1).await?;
            let member_id = a.member_id().ok_or_else(|| fail("a member id"))?;
            let refuse = Fault::new(ApiKey::LeaveGroup, FaultAction::Error(ResponseError::NotCoordinator));
            let fault = cluster.install(refuse.group("g"));
            let closing = tokio::spawn(a.close());
            tokio::time::sleep(Duration::from_millis(50)).await;
            drop(fault);
            tokio::time::timeout(Duration::from_secs(5), closing).await.map_err(fail)?.map_err(fail)?;
            let left = cluster.group_events("g").iter().any(|e| e.detail == format!("{member_id} left"));
            check(left && members(&cluster) == 0, format!("left on the retry: {:?}", cluster.group_events("g")))?;
            Ok(())
        }
    })
    .await
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

#[test]
fn roundrobin_deals_partitions_of_two_topics_in_member_order() {
    Simulation::new("rdkg_rr").seeds(0..3).repeat(2).run(roundrobin_two_topics).assert_passed();
}

#[test]
fn three_eager_members_then_one_leaves() {
    Simulation::new("rdkg_three").seeds(0..3).repeat(2).run(three_then_a_leave).assert_passed();
}

#[test]
fn auto_commit_interval_zero_commits_only_on_revoke() {
    Simulation::new("rdkg_zero").seeds(0..3).repeat(2).run(auto_commit_without_interval).assert_passed();
}

#[test]
fn a_leave_group_refused_not_coordinator_is_sent_again() {
    Simulation::new("rdkg_leave").seeds(0..3).repeat(2).run(leave_retried).assert_passed();
}
