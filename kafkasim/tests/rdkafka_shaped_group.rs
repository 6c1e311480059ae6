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
