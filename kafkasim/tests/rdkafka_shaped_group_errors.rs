//! `kafkasim::rdkafka`'s consumer on the error paths librdkafka 2.12 defines, inside a
//! simulation: assignment calls refused (`rd_kafka_assignment_add`/`_subtract`, the wrong API
//! for the negotiated rebalance protocol), pause/resume of partitions not assigned, a commit answered ILLEGAL_GENERATION, a fenced static
//! member that is not the leader, and a manually assigned topic or partition that does not exist.

#[path = "rdkafka_shaped_group/kit.rs"]
mod kit;

use std::sync::Arc;
use std::time::Duration;

use kafkasim::Cluster;
use kafkasim::rdkafka::config::ClientConfig;
use kafkasim::rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use kafkasim::rdkafka::error::{KafkaError, RDKafkaErrorCode as Code};
use kafkasim::rdkafka::{Offset, TopicPartitionList};
use sim::{Ctx, Failure, Simulation};

use kit::{Log, check, fail, in_node, member, produce, until};

fn tpl(entries: &[(&str, i32)]) -> TopicPartitionList {
    let mut tpl = TopicPartitionList::new();
    for (t, p) in entries {
        tpl.add_partition_offset(t, *p, Offset::Beginning).expect("valid offset");
    }
    tpl
}

fn subscription(e: &str) -> KafkaResult {
    Err(KafkaError::Subscription(e.into()))
}

type KafkaResult = Result<(), KafkaError>;

/// Without a group: incremental_assign of an assigned partition fails `_CONFLICT`, of a list
/// with a duplicate `_INVALID_ARG`, incremental_unassign of an unassigned partition
/// `_INVALID_ARG` — each leaving the assignment as it was. In an eager group the incremental
/// calls fail `_STATE`, in a cooperative one assign/unassign fail "Local: Erroneous state".
async fn assignment_calls(ctx: Ctx) -> Result<(), Failure> {
    let cluster = Cluster::builder().brokers(1).initial_rebalance_delay(Duration::ZERO).build();
    let bootstrap = cluster.serve_sim(&ctx)?;
    cluster.create_topic("a", 3).map_err(fail)?;
    in_node(&ctx, move |_node| {
        let bootstrap = bootstrap.clone();
        async move {
            let mut config = ClientConfig::new();
            config.set("bootstrap.servers", &bootstrap);
            let c: StreamConsumer = config.create().map_err(fail)?;
            c.assign(&tpl(&[("a", 0)])).map_err(fail)?;
            check(c.incremental_assign(&tpl(&[("a", 0)])) == subscription("_CONFLICT"), "already assigned")?;
            check(c.incremental_assign(&tpl(&[("a", 1), ("a", 1)])) == subscription("_INVALID_ARG"), "duplicate")?;
            check(c.incremental_unassign(&tpl(&[("a", 2)])) == subscription("_INVALID_ARG"), "not assigned")?;
            check(c.assignment().map_err(fail)?.count() == 1, "nothing changed by the refused calls")?;
            c.incremental_assign(&tpl(&[("a", 1), ("a", 2)])).map_err(fail)?;
            c.incremental_unassign(&tpl(&[("a", 0)])).map_err(fail)?;
            check(c.assignment().map_err(fail)?.count() == 2, "a1, a2 assigned")?;
            // rd_kafka_offset_store: a known partition not assigned is State, one the consumer
            // does not know UnknownPartition (once the metadata is in).
            let _ = tokio::time::timeout(Duration::from_millis(500), c.recv()).await;
            let store = |p: i32| c.store_offset("a", p, 0);
            check(store(0) == Err(KafkaError::StoreOffset(Code::State)), format!("a0: {:?}", store(0)))?;
            check(store(9) == Err(KafkaError::StoreOffset(Code::UnknownPartition)), format!("a9: {:?}", store(9)))?;
            // rd_kafka_query_watermark_offsets: a topic or partition the cluster lacks.
            let unknown = Err(KafkaError::MetadataFetch(Code::UnknownPartition));
            let wm = c.fetch_watermarks("nope", 0, Duration::from_secs(3)).await;
            check(wm == unknown, format!("watermarks of a missing topic: {wm:?}"))?;
            let wm = c.fetch_watermarks("a", 9, Duration::from_secs(3)).await;
            check(wm == unknown, format!("watermarks of a missing partition: {wm:?}"))?;
            // rd_kafka_pause_partitions: an element the consumer has no partition for carries
            // UnknownPartition; the call succeeds.
            let list = tpl(&[("a", 1), ("a", 0)]);
            c.pause(&list).map_err(fail)?;
            let errors: Vec<_> = list.elements().iter().map(|e| (e.partition(), e.error())).collect();
            let unknown = Err(KafkaError::OffsetFetch(Code::UnknownPartition));
            check(errors == [(1, Ok(())), (0, unknown.clone())], format!("pause: {errors:?}"))?;
            let list = tpl(&[("zz", 0)]);
            c.resume(&list).map_err(fail)?;
            check(list.elements()[0].error() == unknown, "resume of an unknown partition")?;

            let log: Log = Arc::default();
            let eager = member(&bootstrap, "e", &log, &[("group.id", "eager")])?;
            eager.subscribe(&["a"]).map_err(fail)?;
            until(&eager, 3).await?;
            check(eager.incremental_assign(&tpl(&[("a", 0)])) == subscription("_STATE"), "eager: incremental")?;
            let coop = [("group.id", "coop"), ("partition.assignment.strategy", "cooperative-sticky")];
            let coop = member(&bootstrap, "c", &log, &coop)?;
            coop.subscribe(&["a"]).map_err(fail)?;
            until(&coop, 3).await?;
            let state = subscription(Code::State.description());
            check(coop.assign(&tpl(&[("a", 0)])) == state && coop.unassign() == state, "cooperative: assign")?;
            check(coop.assignment().map_err(fail)?.count() == 3, "the group's assignment stays")?;
            Ok(())
        }
    })
    .await
}

/// A commit answered ILLEGAL_GENERATION (the coordinator moved on to a newer generation):
/// the commit fails `ConsumerCommit(IllegalGeneration)`, the assignment is lost (revoked) and
/// the member rejoins under a newer generation and is assigned again.
async fn illegal_generation(ctx: Ctx) -> Result<(), Failure> {
    use kafkasim::kafka_protocol::ResponseError;
    use kafkasim::kafka_protocol::messages::ApiKey;
    use kafkasim::{Fault, FaultAction};
    let cluster = Cluster::builder().brokers(1).initial_rebalance_delay(Duration::ZERO).build();
    let bootstrap = cluster.serve_sim(&ctx)?;
    cluster.create_topic("i", 1).map_err(fail)?;
    let (c2, ctx2) = (cluster.clone(), ctx.clone());
    in_node(&ctx, move |_node| {
        let (ctx, cluster, bootstrap) = (ctx2.clone(), c2.clone(), bootstrap.clone());
        async move {
            produce(&bootstrap, "i", 0, 2).await?;
            let log: Log = Arc::default();
            let a = member(&bootstrap, "a", &log, &[])?;
            a.subscribe(&["i"]).map_err(fail)?;
            let mut read = until(&a, 1).await?.len();
            while read < 2 {
                drop(a.recv().await.map_err(fail)?);
                read += 1;
            }
            let generation = a.generation();
            let fault = Fault::new(ApiKey::OffsetCommit, FaultAction::Error(ResponseError::IllegalGeneration));
            let fault = cluster.install(fault.group("g"));
            let r = a.commit_consumer_state(CommitMode::Sync).await;
            check(
                r == Err(KafkaError::ConsumerCommit(Code::IllegalGeneration)),
                format!("the commit fails ILLEGAL_GENERATION: {r:?}"),
            )?;
            drop(fault);
            for _ in 0..100 {
                if a.generation() > generation && a.assignment().map_err(fail)?.count() == 1 {
                    break;
                }
                let _ = tokio::time::timeout(Duration::from_millis(100), a.recv()).await;
            }
            let l = log.lock().expect("log").clone();
            ctx.record("rdkge.illegal", "log", format!("{l:?}"));
            check(a.generation() > generation, format!("rejoined: generation {} > {generation}", a.generation()))?;
            check(l.iter().any(|e| e.starts_with("a pre revoke")), format!("the assignment was revoked: {l:?}"))?;
            check(cluster.committed("g", "i", 0).is_none(), "nothing was committed")?;
            Ok(())
        }
    })
    .await
}

/// A static member that is not the leader is fenced (a new instance with its
/// group.instance.id joins): its recv() returns `MessageConsumptionFatal(FencedInstanceId)`
/// (librdkafka's `rd_kafka_set_fatal_error`), its assignment is lost, and it does not rejoin;
/// the leader and the new instance share the partitions.
async fn fenced_follower(ctx: Ctx) -> Result<(), Failure> {
    let cluster = Cluster::builder().brokers(1).initial_rebalance_delay(Duration::ZERO).build();
    let bootstrap = cluster.serve_sim(&ctx)?;
    cluster.create_topic("f", 2).map_err(fail)?;
    let (c2, ctx2) = (cluster.clone(), ctx.clone());
    in_node(&ctx, move |_node| {
        let (ctx, cluster, bootstrap) = (ctx2.clone(), c2.clone(), bootstrap.clone());
        async move {
            let log: Log = Arc::default();
            let leader = member(&bootstrap, "leader", &log, &[("group.instance.id", "i-leader")])?;
            leader.subscribe(&["f"]).map_err(fail)?;
            until(&leader, 2).await?;
            let old = member(&bootstrap, "old", &log, &[("group.instance.id", "i-b")])?;
            old.subscribe(&["f"]).map_err(fail)?;
            let (rl, ro) = tokio::join!(until(&leader, 1), until(&old, 1));
            rl?;
            ro?;
            let view = cluster.group("g").ok_or_else(|| fail("the group"))?;
            check(view.leader == leader.member_id(), "the first member leads")?;
            let new = member(&bootstrap, "new", &log, &[("group.instance.id", "i-b")])?;
            new.subscribe(&["f"]).map_err(fail)?;
            let mut fatal = None;
            for _ in 0..200 {
                let (o, _, _) = tokio::join!(
                    tokio::time::timeout(Duration::from_millis(50), old.recv()),
                    tokio::time::timeout(Duration::from_millis(50), leader.recv()),
                    tokio::time::timeout(Duration::from_millis(50), new.recv()),
                );
                if let Ok(Err(e)) = o {
                    fatal = Some(e);
                    break;
                }
            }
            check(
                fatal == Some(KafkaError::MessageConsumptionFatal(Code::FencedInstanceId)),
                format!("the fenced member's recv: {fatal:?}"),
            )?;
            until(&new, 1).await?;
            until(&leader, 1).await?;
            // The lost assignment's revoke is served by the next poll, as librdkafka's.
            let next = tokio::time::timeout(Duration::from_secs(10), old.recv()).await;
            ctx.record("rdkge.fenced", "next", format!("{:?}", next.as_ref().map(|r| r.as_ref().err())));
            let view = cluster.group("g").ok_or_else(|| fail("the group"))?;
            ctx.record("rdkge.fenced", "group", format!("{view:?} {:?}", log.lock().expect("log")));
            check(old.assignment().map_err(fail)?.count() == 0, "the fenced member holds nothing")?;
            let ids: Vec<Option<String>> = view.members.iter().map(|m| Some(m.member_id.clone())).collect();
            check(
                view.members.len() == 2 && ids.contains(&new.member_id()) && ids.contains(&leader.member_id()),
                format!("the leader and the new instance, no rejoin of the fenced one: {view:?}"),
            )?;
            Ok(())
        }
    })
    .await
}

#[test]
fn a_fenced_static_follower_fails_fatally_and_does_not_rejoin() {
    Simulation::new("rdkge_fenced").seeds(0..3).repeat(2).run(fenced_follower).assert_passed();
}

/// Subscribed to a topic that exists and one that does not: recv() returns
/// `MessageConsumption(UnknownTopicOrPartition)` once (librdkafka's "Subscribed topic not
/// available", reported once per error), and the existing topic is consumed. Subscribed to a
/// missing topic only, the consumer does not join until the topic exists.
async fn missing_subscribed_topic(ctx: Ctx) -> Result<(), Failure> {
    let cluster = Cluster::builder().brokers(1).initial_rebalance_delay(Duration::ZERO).build();
    let bootstrap = cluster.serve_sim(&ctx)?;
    cluster.create_topic("here", 1).map_err(fail)?;
    let (c2, ctx2) = (cluster.clone(), ctx.clone());
    in_node(&ctx, move |_node| {
        let (ctx, cluster, bootstrap) = (ctx2.clone(), c2.clone(), bootstrap.clone());
        async move {
            produce(&bootstrap, "here", 0, 2).await?;
            let log: Log = Arc::default();
            let c = member(&bootstrap, "a", &log, &[])?;
            c.subscribe(&["here", "gone"]).map_err(fail)?;
            let mut seen = Vec::new();
            for _ in 0..50 {
                match tokio::time::timeout(Duration::from_millis(200), c.recv()).await {
                    Ok(Ok(m)) => seen.push(format!("{}", kafkasim::rdkafka::Message::offset(&m))),
                    Ok(Err(e)) => seen.push(e.to_string()),
                    Err(_) => {}
                }
            }
            ctx.record("rdkge.subscribed", "seen", format!("{seen:?}"));
            let unknown = KafkaError::MessageConsumption(Code::UnknownTopicOrPartition).to_string();
            check(seen.iter().filter(|s| **s == unknown).count() == 1, format!("reported once: {seen:?}"))?;
            check(seen.contains(&"0".to_string()) && seen.contains(&"1".to_string()), format!("here read: {seen:?}"))?;
            // Subscribed to a missing topic only: librdkafka's cgrp does not join ("no matching
            // topics") — no rebalance callback — until the metadata shows it.
            let solo_log: Log = Arc::default();
            let solo = member(
                &bootstrap,
                "b",
                &solo_log,
                &[("group.id", "solo"), ("topic.metadata.refresh.interval.ms", "1000")],
            )?;
            solo.subscribe(&["later"]).map_err(fail)?;
            let mut errors = 0;
            for _ in 0..10 {
                if let Ok(Err(_)) = tokio::time::timeout(Duration::from_millis(200), solo.recv()).await {
                    errors += 1;
                }
            }
            let l = solo_log.lock().expect("log").clone();
            check(errors == 1 && l.is_empty(), format!("one error, no join: {errors} {l:?}"))?;
            check(cluster.group("solo").is_none_or(|g| g.members.is_empty()), "not a member")?;
            cluster.create_topic("later", 1).map_err(fail)?;
            until(&solo, 1).await?;
            Ok(())
        }
    })
    .await
}

#[test]
fn a_missing_subscribed_topic_is_reported_once() {
    Simulation::new("rdkge_subscribed").seeds(0..3).repeat(2).run(missing_subscribed_topic).assert_passed();
}

/// Commits answered NOT_COORDINATOR for seven seconds (longer than the session) while the
/// application commits every message, and a second member joins meanwhile: the coordinator is
/// looked up again and the member keeps heartbeating — also while the rebalance's JoinGroup
/// waits for its queued commits (librdkafka's heartbeat timer does not wait for commits) — so
/// its session does not expire; afterwards commits succeed again and close() resolves, leaving
/// by LeaveGroup.
async fn commits_refused_not_coordinator(ctx: Ctx) -> Result<(), Failure> {
    use kafkasim::kafka_protocol::ResponseError;
    use kafkasim::kafka_protocol::messages::ApiKey;
    use kafkasim::{Fault, FaultAction};
    let cluster = Cluster::builder().brokers(1).initial_rebalance_delay(Duration::ZERO).build();
    let bootstrap = cluster.serve_sim(&ctx)?;
    cluster.create_topic("n", 1).map_err(fail)?;
    let (c2, ctx2) = (cluster.clone(), ctx.clone());
    in_node(&ctx, move |_node| {
        let (ctx, cluster, bootstrap) = (ctx2.clone(), c2.clone(), bootstrap.clone());
        async move {
            let log: Log = Arc::default();
            let extra = [("session.timeout.ms", "6000"), ("heartbeat.interval.ms", "500")];
            let a = member(&bootstrap, "a", &log, &extra)?;
            a.subscribe(&["n"]).map_err(fail)?;
            until(&a, 1).await?;
            let member_id = a.member_id().ok_or_else(|| fail("a member id"))?;
            let b2 = bootstrap.clone();
            let producing = tokio::spawn(async move {
                for _ in 0..500 {
                    let _ = produce(&b2, "n", 0, 1).await;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            });
            let started = tokio::time::Instant::now();
            let mut fault = None;
            let mut b = None;
            while started.elapsed() < Duration::from_secs(10) {
                // A second member joins while the commits are refused: the rebalance's
                // JoinGroup waits for a's queued commits, a's heartbeats must go on meanwhile.
                if b.is_none() && started.elapsed() >= Duration::from_secs(2) {
                    let joiner = member(&bootstrap, "b", &log, &extra)?;
                    joiner.subscribe(&["n"]).map_err(fail)?;
                    b = Some(joiner);
                }
                if let Some(b) = &b {
                    let _ = tokio::time::timeout(Duration::from_millis(10), b.recv()).await;
                }
                if fault.is_none() && started.elapsed() >= Duration::from_secs(1) {
                    let f = Fault::new(ApiKey::OffsetCommit, FaultAction::Error(ResponseError::NotCoordinator));
                    fault = Some(cluster.install(f.group("g")));
                }
                if started.elapsed() >= Duration::from_secs(8) {
                    drop(fault.take());
                }
                if let Ok(Ok(m)) = tokio::time::timeout(Duration::from_millis(100), a.recv()).await {
                    let tpl = {
                        let mut t = TopicPartitionList::new();
                        t.add_partition_offset("n", 0, Offset::Offset(kafkasim::rdkafka::Message::offset(&m) + 1))
                            .map_err(fail)?;
                        t
                    };
                    drop(m);
                    // As services do: an Async commit per message.
                    drop(a.commit(&tpl, CommitMode::Async));
                }
            }
            producing.abort();
            let events = cluster.group_events("g");
            ctx.record("rdkge.notcoord", "events", format!("{events:?}"));
            let refused = cluster.commits().iter().filter(|c| c.error == 16).count();
            check(refused > 0, "some commits were refused")?;
            check(!events.iter().any(|e| e.detail.contains("expired")), format!("the session held: {events:?}"))?;
            check(a.member_id().as_ref() == Some(&member_id), "the same member")?;
            let r = a.commit_consumer_state(CommitMode::Sync).await;
            check(
                matches!(r, Ok(()) | Err(KafkaError::ConsumerCommit(Code::NoOffset))),
                format!("commits again: {r:?}"),
            )?;
            if let Some(b) = b {
                b.close().await;
            }
            let closing = tokio::time::timeout(Duration::from_secs(8), a.close()).await;
            check(closing.is_ok(), "close() resolves")?;
            let left = cluster.group_events("g").iter().any(|e| e.detail == format!("{member_id} left"));
            check(left, "left by LeaveGroup")?;
            Ok(())
        }
    })
    .await
}

#[test]
fn commits_refused_not_coordinator_keep_the_member_heartbeating() {
    Simulation::new("rdkge_notcoord").seeds(0..3).repeat(2).run(commits_refused_not_coordinator).assert_passed();
}

/// Closed while its first FindCoordinator hangs in connect (the node is cut off from the
/// broker): with nothing to commit and no member id to leave with, close() resolves at once —
/// librdkafka's terminate waits for commits and LeaveGroup, not for a lookup in flight.
async fn close_while_looking_up(ctx: Ctx) -> Result<(), Failure> {
    let cluster = Cluster::builder().brokers(1).build();
    let bootstrap = cluster.serve_sim(&ctx)?;
    cluster.create_topic("c", 1).map_err(fail)?;
    let ctx2 = ctx.clone();
    in_node(&ctx, move |_node| {
        let (ctx, bootstrap) = (ctx2.clone(), bootstrap.clone());
        async move {
            let cut = ctx.net().install(sim::net::Partition::isolate("app-0"));
            let log: Log = Arc::default();
            let c = member(&bootstrap, "a", &log, &[])?;
            c.subscribe(&["c"]).map_err(fail)?;
            let _ = tokio::time::timeout(Duration::from_secs(1), c.recv()).await;
            let closed = tokio::time::timeout(Duration::from_secs(1), c.close()).await;
            drop(cut);
            check(closed.is_ok(), "close() does not wait for the coordinator lookup")?;
            Ok(())
        }
    })
    .await
}

#[test]
fn close_does_not_wait_for_a_coordinator_lookup() {
    Simulation::new("rdkge_lookup").seeds(0..3).repeat(2).run(close_while_looking_up).assert_passed();
}

/// Heartbeats answered UNKNOWN_MEMBER_ID: the assignment is lost — assignment_lost() is true
/// in pre_rebalance(Revoke) and false again in post_rebalance(Revoke), as librdkafka clears the
/// flag with the assignment between rdkafka's two callbacks.
async fn lost_flag(ctx: Ctx) -> Result<(), Failure> {
    use kafkasim::kafka_protocol::ResponseError;
    use kafkasim::kafka_protocol::messages::ApiKey;
    use kafkasim::{Fault, FaultAction};
    let cluster = Cluster::builder().brokers(1).initial_rebalance_delay(Duration::ZERO).build();
    let bootstrap = cluster.serve_sim(&ctx)?;
    cluster.create_topic("x", 1).map_err(fail)?;
    let (c2, ctx2) = (cluster.clone(), ctx.clone());
    in_node(&ctx, move |_node| {
        let (ctx, cluster, bootstrap) = (ctx2.clone(), c2.clone(), bootstrap.clone());
        async move {
            let log: Log = Arc::default();
            let a = member(&bootstrap, "a", &log, &[])?;
            a.subscribe(&["x"]).map_err(fail)?;
            until(&a, 1).await?;
            let fault = Fault::new(ApiKey::Heartbeat, FaultAction::Error(ResponseError::UnknownMemberId));
            let fault = cluster.install(fault.group("g"));
            until(&a, 0).await?;
            drop(fault);
            let l = log.lock().expect("log").clone();
            ctx.record("rdkge.lost", "log", format!("{l:?}"));
            let pre = l.iter().position(|e| e == "a pre revoke [\"x0\"] (held 1) lost");
            let post = l.iter().position(|e| e == "a post revoke (holds [])");
            check(pre.is_some() && pre < post, format!("lost in pre, not in post: {l:?}"))?;
            Ok(())
        }
    })
    .await
}

#[test]
fn assignment_lost_is_cleared_between_the_revoke_callbacks() {
    Simulation::new("rdkge_lostflag").seeds(0..3).repeat(2).run(lost_flag).assert_passed();
}

#[test]
fn assignment_calls_are_refused_as_librdkafka_refuses_them() {
    Simulation::new("rdkge_assign").seeds(0..3).repeat(2).run(assignment_calls).assert_passed();
}

#[test]
fn a_commit_answered_illegal_generation_fails_and_the_member_rejoins() {
    Simulation::new("rdkge_illegal").seeds(0..3).repeat(2).run(illegal_generation).assert_passed();
}

/// A manual assignment of a topic that does not exist: once the cluster said so for
/// `topic.metadata.propagation.max.ms` recv() returns `MessageConsumption(UnknownTopicOrPartition)`
/// (librdkafka's `rd_kafka_topic_set_notexists`), once; a partition beyond an existing topic's
/// count returns `MessageConsumption(UnknownPartition)`; the rest of the assignment is read.
async fn missing_topic(ctx: Ctx) -> Result<(), Failure> {
    let cluster = Cluster::builder().brokers(1).build();
    let bootstrap = cluster.serve_sim(&ctx)?;
    cluster.create_topic("m", 1).map_err(fail)?;
    let ctx2 = ctx.clone();
    in_node(&ctx, move |_node| {
        let (ctx, bootstrap) = (ctx2.clone(), bootstrap.clone());
        async move {
            produce(&bootstrap, "m", 0, 1).await?;
            let mut config = ClientConfig::new();
            config.set("bootstrap.servers", &bootstrap).set("topic.metadata.propagation.max.ms", "5000");
            let c: StreamConsumer = config.create().map_err(fail)?;
            c.assign(&tpl(&[("m", 0), ("m", 7), ("nope", 0)])).map_err(fail)?;
            let started = tokio::time::Instant::now();
            let mut seen = Vec::new();
            while started.elapsed() < Duration::from_secs(12) {
                match tokio::time::timeout(Duration::from_millis(200), c.recv()).await {
                    Ok(Ok(m)) => {
                        seen.push((format!("message {}", kafkasim::rdkafka::Message::offset(&m)), started.elapsed()))
                    }
                    Ok(Err(e)) => seen.push((e.to_string(), started.elapsed())),
                    Err(_) => {}
                }
            }
            ctx.record("rdkge.missing", "seen", format!("{seen:?}"));
            let what: Vec<&str> = seen.iter().map(|(w, _)| w.as_str()).collect();
            let unknown_topic = KafkaError::MessageConsumption(Code::UnknownTopicOrPartition).to_string();
            let unknown_partition = KafkaError::MessageConsumption(Code::UnknownPartition).to_string();
            check(what.iter().filter(|w| **w == unknown_topic).count() == 1, format!("one unknown topic: {what:?}"))?;
            check(
                what.iter().filter(|w| **w == unknown_partition).count() == 1,
                format!("one unknown partition: {what:?}"),
            )?;
            check(what.contains(&"message 0"), format!("m0 is read: {what:?}"))?;
            let at = seen.iter().find(|(w, _)| *w == unknown_topic).map(|(_, t)| *t).unwrap_or_default();
            check(at >= Duration::from_secs(5), format!("not before the propagation window: {at:?}"))?;
            Ok(())
        }
    })
    .await
}

#[test]
fn a_missing_assigned_topic_or_partition_is_reported_once() {
    Simulation::new("rdkge_missing").seeds(0..3).repeat(2).run(missing_topic).assert_passed();
}
