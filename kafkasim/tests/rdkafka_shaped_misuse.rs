//! `kafkasim::rdkafka` used wrongly, inside a simulation on a kafkasim `Cluster`: calls in the
//! wrong order or state, callbacks that panic or re-enter the consumer, bad names and configs,
//! unreachable brokers, an oversized record. What rdkafka 0.39 / librdkafka 2.12 do is the
//! expectation: their error, never a panic in library code, never a hang.

#[path = "rdkafka_shaped_group/kit.rs"]
mod kit;

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use kafkasim::Cluster;
use kafkasim::rdkafka::client::ClientContext;
use kafkasim::rdkafka::config::ClientConfig;
use kafkasim::rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer};
use kafkasim::rdkafka::error::{KafkaError, RDKafkaErrorCode as Code};
use kafkasim::rdkafka::producer::{FutureProducer, FutureRecord};
use kafkasim::rdkafka::{Message, Offset, TopicPartitionList};
use sim::{Ctx, Failure, Simulation};

use kit::{Log, check, fail, in_node, member, members, produce, until, wait_for};

fn cluster(ctx: &Ctx, topics: &[(&str, i32)]) -> Result<(Cluster, String), Failure> {
    let cluster = Cluster::builder().brokers(1).initial_rebalance_delay(Duration::ZERO).build();
    let bootstrap = cluster.serve_sim(ctx)?;
    for (t, n) in topics {
        cluster.create_topic(t, *n).map_err(fail)?;
    }
    Ok((cluster, bootstrap))
}

/// recv() within `d`: `None` when nothing came.
async fn within<C: ConsumerContext>(
    c: &StreamConsumer<C>,
    d: Duration,
) -> Option<Result<(String, i32, i64), KafkaError>> {
    match tokio::time::timeout(d, c.recv()).await {
        Err(_) => None,
        Ok(r) => Some(r.map(|m| (m.topic().to_string(), m.partition(), m.offset()))),
    }
}

/// Unsubscribing revokes the assignment (from recv()) and leaves the group; recv() afterwards
/// returns nothing (librdkafka: no partitions, nothing fetched) rather than an error or a panic.
async fn recv_after_unsubscribe(ctx: Ctx) -> Result<(), Failure> {
    let (cluster, bootstrap) = cluster(&ctx, &[("u", 1)])?;
    in_node(&ctx, move |_| {
        let (cluster, bootstrap) = (cluster.clone(), bootstrap.clone());
        async move {
            produce(&bootstrap, "u", 0, 2).await?;
            let log: Log = Arc::default();
            let a = member(&bootstrap, "a", &log, &[])?;
            a.subscribe(&["u"]).map_err(fail)?;
            until(&a, 1).await?;
            a.unsubscribe();
            // What was fetched before the revoke may still come (librdkafka's queue, in order).
            let mut got = None;
            for _ in 0..20 {
                if a.assignment().map_err(fail)?.count() == 0 {
                    break;
                }
                got = within(&a, Duration::from_millis(500)).await;
            }
            let held = a.assignment().map_err(fail)?.count();
            check(held == 0, format!("unsubscribe revoked everything, holds {held}"))?;
            check(a.subscription().map_err(fail)?.count() == 0, "no subscription")?;
            check(!matches!(got, Some(Ok((_, _, o))) if o >= 2), format!("nothing new after unsubscribe: {got:?}"))?;
            wait_for("the member left", || members(&cluster) == 0).await?;
            produce(&bootstrap, "u", 0, 1).await?;
            let after = within(&a, Duration::from_secs(3)).await;
            check(after.is_none(), format!("recv() after unsubscribe waits: {after:?}"))?;
            a.close().await;
            Ok(())
        }
    })
    .await
}

/// A second subscribe replaces the first (librdkafka: the new subscription, a rebalance).
async fn subscribe_twice(ctx: Ctx) -> Result<(), Failure> {
    let (_cluster, bootstrap) = cluster(&ctx, &[("s1", 1), ("s2", 2)])?;
    in_node(&ctx, move |_| {
        let bootstrap = bootstrap.clone();
        async move {
            produce(&bootstrap, "s2", 0, 1).await?;
            let log: Log = Arc::default();
            let a = member(&bootstrap, "a", &log, &[])?;
            a.subscribe(&["s1"]).map_err(fail)?;
            until(&a, 1).await?;
            a.subscribe(&["s2"]).map_err(fail)?;
            until(&a, 2).await?;
            let topics: Vec<String> =
                a.assignment().map_err(fail)?.elements().iter().map(|e| e.topic().to_string()).collect();
            check(topics == ["s2", "s2"], format!("the second subscription replaced the first: {topics:?}"))?;
            let sub: Vec<String> =
                a.subscription().map_err(fail)?.elements().iter().map(|e| e.topic().to_string()).collect();
            check(sub == ["s2"], format!("subscription: {sub:?}"))?;
            a.close().await;
            Ok(())
        }
    })
    .await
}

/// assign() while subscribed: librdkafka takes it (the application's assignment replaces the
/// group's until the next rebalance); no panic, and the consumer still closes.
async fn assign_while_subscribed(ctx: Ctx) -> Result<(), Failure> {
    let (cluster, bootstrap) = cluster(&ctx, &[("a1", 1), ("a2", 1)])?;
    in_node(&ctx, move |_| {
        let (cluster, bootstrap) = (cluster.clone(), bootstrap.clone());
        async move {
            produce(&bootstrap, "a2", 0, 2).await?;
            let log: Log = Arc::default();
            let a = member(&bootstrap, "a", &log, &[])?;
            a.subscribe(&["a1"]).map_err(fail)?;
            until(&a, 1).await?;
            let mut t = TopicPartitionList::new();
            t.add_partition_offset("a2", 0, Offset::Beginning).map_err(fail)?;
            a.assign(&t).map_err(fail)?;
            let got = within(&a, Duration::from_secs(5)).await;
            check(matches!(got, Some(Ok((ref t, 0, 0))) if t == "a2"), format!("reads the assigned a2: {got:?}"))?;
            a.close().await;
            wait_for("the member left", || members(&cluster) == 0).await?;
            Ok(())
        }
    })
    .await
}

/// A commit list of only logical offsets (End, Beginning) has nothing to commit: librdkafka's
/// `rd_kafka_commit` fails `_NO_OFFSET`. A negative offset cannot get into a list (rdkafka's
/// `set_offset`: `SetPartitionOffset(InvalidArgument)`).
async fn commit_logical_offsets(ctx: Ctx) -> Result<(), Failure> {
    let (cluster, bootstrap) = cluster(&ctx, &[("c", 1)])?;
    in_node(&ctx, move |_| {
        let (cluster, bootstrap) = (cluster.clone(), bootstrap.clone());
        async move {
            let log: Log = Arc::default();
            let a = member(&bootstrap, "a", &log, &[])?;
            a.subscribe(&["c"]).map_err(fail)?;
            until(&a, 1).await?;
            let mut t = TopicPartitionList::new();
            let neg = t.add_partition_offset("c", 0, Offset::Offset(-5));
            check(
                matches!(neg, Err(KafkaError::SetPartitionOffset(Code::InvalidArgument))),
                format!("negative offset refused: {neg:?}"),
            )?;
            for o in [Offset::End, Offset::Beginning, Offset::Stored, Offset::Invalid] {
                let mut t = TopicPartitionList::new();
                t.add_partition_offset("c", 0, o).map_err(fail)?;
                let r = a.commit(&t, CommitMode::Sync).await;
                check(matches!(r, Err(KafkaError::ConsumerCommit(Code::NoOffset))), format!("commit of {o:?}: {r:?}"))?;
            }
            check(cluster.committed("g", "c", 0).is_none(), "nothing committed")?;
            a.close().await;
            Ok(())
        }
    })
    .await
}

/// seek on a partition never assigned: librdkafka's `rd_kafka_seek` `_UNKNOWN_PARTITION`,
/// rdkafka's `Seek("Local: Unknown partition")`; seek_partitions marks the element.
async fn seek_unassigned(ctx: Ctx) -> Result<(), Failure> {
    let (_cluster, bootstrap) = cluster(&ctx, &[("k", 1)])?;
    in_node(&ctx, move |_| {
        let bootstrap = bootstrap.clone();
        async move {
            let log: Log = Arc::default();
            let a = member(&bootstrap, "a", &log, &[])?;
            let r = a.seek("k", 0, Offset::Beginning, Duration::from_secs(1));
            check(matches!(&r, Err(KafkaError::Seek(m)) if m == "Local: Unknown partition"), format!("seek: {r:?}"))?;
            let r = a.seek("nope", 7, Offset::Offset(3), None);
            check(matches!(r, Err(KafkaError::Seek(_))), format!("seek unknown topic: {r:?}"))?;
            let mut t = TopicPartitionList::new();
            t.add_partition_offset("k", 0, Offset::Offset(1)).map_err(fail)?;
            let out = a.seek_partitions(t, None).map_err(fail)?;
            let e = out.elements()[0].error();
            check(e.is_err(), format!("seek_partitions element error: {e:?}"))?;
            Ok(())
        }
    })
    .await
}

/// What a context does from inside the close's revoke: store_offset / commit on a consumer
/// closing. librdkafka: a store on a partition no longer assigned is `_STATE`; nothing panics.
struct StoreInClose {
    log: Log,
}
impl ClientContext for StoreInClose {}
impl ConsumerContext for StoreInClose {
    fn post_rebalance(&self, base: &BaseConsumer<Self>, r: &Rebalance<'_>) {
        if let Rebalance::Revoke(_) = r {
            let s = base.store_offset("z", 0, 0);
            let c = base.commit_consumer_state(CommitMode::Async).now_or_never();
            let state = matches!(s, Err(KafkaError::StoreOffset(Code::State)));
            self.log.lock().expect("log").push(format!("store State {state} commit {c:?}"));
        }
    }
}

async fn store_after_close(ctx: Ctx) -> Result<(), Failure> {
    let (cluster, bootstrap) = cluster(&ctx, &[("z", 1)])?;
    in_node(&ctx, move |_| {
        let (cluster, bootstrap) = (cluster.clone(), bootstrap.clone());
        async move {
            produce(&bootstrap, "z", 0, 1).await?;
            let log: Log = Arc::default();
            let mut config = ClientConfig::new();
            config
                .set("bootstrap.servers", &bootstrap)
                .set("group.id", "g")
                .set("auto.offset.reset", "earliest")
                .set("enable.auto.offset.store", "false");
            let a: StreamConsumer<StoreInClose> =
                config.create_with_context(StoreInClose { log: Arc::clone(&log) }).map_err(fail)?;
            a.subscribe(&["z"]).map_err(fail)?;
            let m = within(&a, Duration::from_secs(10)).await;
            check(matches!(m, Some(Ok(_))), format!("read one: {m:?}"))?;
            a.close().await;
            let seen = log.lock().expect("log").clone();
            check(
                seen.len() == 1 && seen[0].starts_with("store State true"),
                format!("store in the close's revoke: {seen:?}"),
            )?;
            check(members(&cluster) == 0, "left")?;
            Ok(())
        }
    })
    .await
}

/// A context whose pre_rebalance panics on the first Assign. rdkafka calls it from an
/// `extern "C"` callback, where a panic aborts the process; here it propagates out of recv()
/// (to the caller, a catchable unwind). Dropping the consumer while that panic unwinds must not
/// run the callbacks again (a second panic in a drop aborts).
struct Panicky {
    panicked: Arc<Mutex<u32>>,
}
impl ClientContext for Panicky {}
impl ConsumerContext for Panicky {
    fn pre_rebalance(&self, _: &BaseConsumer<Self>, _: &Rebalance<'_>) {
        *self.panicked.lock().expect("count") += 1;
        panic!("user callback panics");
    }
}

fn panicky(bootstrap: &str, count: &Arc<Mutex<u32>>) -> Result<StreamConsumer<Panicky>, Failure> {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap).set("group.id", "g").set("enable.auto.commit", "false");
    config.create_with_context(Panicky { panicked: Arc::clone(count) }).map_err(fail)
}

async fn panicking_callback(ctx: Ctx) -> Result<(), Failure> {
    let (cluster, bootstrap) = cluster(&ctx, &[("p", 1)])?;
    in_node(&ctx, move |_| {
        let (cluster, bootstrap) = (cluster.clone(), bootstrap.clone());
        async move {
            // The panic leaves recv(); the consumer is dropped afterwards, outside the unwind.
            let count = Arc::new(Mutex::new(0));
            let a = panicky(&bootstrap, &count)?;
            a.subscribe(&["p"]).map_err(fail)?;
            let r = AssertUnwindSafe(tokio::time::timeout(Duration::from_secs(10), a.recv())).catch_unwind().await;
            check(r.is_err(), "the callback's panic reached the caller")?;
            // The consumer is still usable: its state locks are not poisoned for good.
            let held = a.assignment().map_err(fail)?.count();
            check(held == 0, format!("the assign did not apply: holds {held}"))?;
            drop(a);
            // The consumer owned by the future that panics: dropped during the unwind.
            let count2 = Arc::new(Mutex::new(0));
            let b = panicky(&bootstrap, &count2)?;
            b.subscribe(&["p"]).map_err(fail)?;
            let r = AssertUnwindSafe(async move {
                let _ = tokio::time::timeout(Duration::from_secs(10), b.recv()).await;
            })
            .catch_unwind()
            .await;
            check(r.is_err(), "the second panic reached the caller")?;
            wait_for("both left the group", || members(&cluster) == 0).await?;
            Ok(())
        }
    })
    .await
}

/// A context that calls the assignment API from inside pre_rebalance (rdkafka lets it: the
/// callback gets the consumer). No deadlock, no panic; what the calls return is logged.
struct Reentrant {
    log: Log,
}
impl ClientContext for Reentrant {}
impl ConsumerContext for Reentrant {
    fn pre_rebalance(&self, base: &BaseConsumer<Self>, r: &Rebalance<'_>) {
        let t = match r {
            Rebalance::Assign(t) | Rebalance::Revoke(t) => (*t).clone(),
            Rebalance::Error(_) => TopicPartitionList::new(),
        };
        let mut commit = t.clone();
        let _ = commit.set_all_offsets(Offset::Offset(0));
        let c = base.commit(&commit, CommitMode::Async).now_or_never();
        let a = base.assign(&t);
        let i = base.incremental_assign(&t);
        base.unsubscribe();
        let what = if matches!(r, Rebalance::Assign(_)) { "assign" } else { "revoke" };
        self.log.lock().expect("log").push(format!("{what}: commit {c:?} assign {a:?} incremental {i:?}"));
    }
}

async fn reentrant_callbacks(ctx: Ctx) -> Result<(), Failure> {
    let (cluster, bootstrap) = cluster(&ctx, &[("r", 2)])?;
    in_node(&ctx, move |_| {
        let (cluster, bootstrap) = (cluster.clone(), bootstrap.clone());
        async move {
            let log: Log = Arc::default();
            let mut config = ClientConfig::new();
            config.set("bootstrap.servers", &bootstrap).set("group.id", "g").set("auto.offset.reset", "earliest");
            let a: StreamConsumer<Reentrant> =
                config.create_with_context(Reentrant { log: Arc::clone(&log) }).map_err(fail)?;
            a.subscribe(&["r"]).map_err(fail)?;
            for _ in 0..50 {
                let _ = within(&a, Duration::from_millis(200)).await;
            }
            let seen = log.lock().expect("log").clone();
            // Eager: assign() is the callback's API (rdkafka calls it there itself); the incremental
            // one is refused (`_STATE`); the unsubscribe made in the Assign callback revokes it all.
            let assign =
                "assign: commit Some(Ok(())) assign Ok(()) incremental Err(KafkaError (Subscription error: _STATE))";
            check(seen.first().map(String::as_str) == Some(assign), format!("callback calls: {seen:?}"))?;
            check(a.assignment().map_err(fail)?.count() == 0, "the callback's unsubscribe left nothing assigned")?;
            check(a.subscription().map_err(fail)?.count() == 0, "and no subscription")?;
            let close = tokio::time::timeout(Duration::from_secs(70), a.close()).await;
            check(close.is_ok(), "the close finished")?;
            wait_for("the member left", || members(&cluster) == 0).await?;
            Ok(())
        }
    })
    .await
}

/// A Sync commit's future outlives its consumer (rdkafka's would block in the call): it resolves
/// with the broker's answer, the commit having been queued before the close's LeaveGroup.
async fn drop_with_commit_pending(ctx: Ctx) -> Result<(), Failure> {
    let (cluster, bootstrap) = cluster(&ctx, &[("d", 1)])?;
    in_node(&ctx, move |_| {
        let (cluster, bootstrap) = (cluster.clone(), bootstrap.clone());
        async move {
            produce(&bootstrap, "d", 0, 2).await?;
            let log: Log = Arc::default();
            let a = member(&bootstrap, "a", &log, &[])?;
            a.subscribe(&["d"]).map_err(fail)?;
            until(&a, 1).await?;
            let mut t = TopicPartitionList::new();
            t.add_partition_offset("d", 0, Offset::Offset(1)).map_err(fail)?;
            let pending = a.commit(&t, CommitMode::Sync);
            drop(a);
            let r = tokio::time::timeout(Duration::from_secs(70), pending).await;
            check(matches!(r, Ok(Ok(()))), format!("the commit queued before the close went out: {r:?}"))?;
            let committed = cluster.committed("g", "d", 0).map(|c| c.0);
            check(committed == Some(1), format!("committed: {committed:?}"))?;
            wait_for("the member left", || members(&cluster) == 0).await?;
            Ok(())
        }
    })
    .await
}

/// Twenty members of one group on one node, all closed at once: every close resolves and the
/// group ends empty.
async fn twenty_closed_at_once(ctx: Ctx) -> Result<(), Failure> {
    let (cluster, bootstrap) = cluster(&ctx, &[("m", 4)])?;
    in_node(&ctx, move |_| {
        let (cluster, bootstrap) = (cluster.clone(), bootstrap.clone());
        async move {
            let log: Log = Arc::default();
            let mut all = Vec::new();
            for i in 0..20 {
                let c = member(&bootstrap, &format!("c{i}"), &log, &[])?;
                c.subscribe(&["m"]).map_err(fail)?;
                all.push(c);
            }
            wait_for("twenty joined", || members(&cluster) == 20).await?;
            // Let a rebalance settle a little, with every member polling.
            for _ in 0..10 {
                let polls = all.iter().map(|c| within(c, Duration::from_millis(200)));
                futures::future::join_all(polls).await;
            }
            let closes = futures::future::join_all(all.into_iter().map(StreamConsumer::close));
            let r = tokio::time::timeout(Duration::from_secs(70), closes).await;
            check(r.is_ok(), "all twenty closes resolved")?;
            wait_for("the group is empty", || members(&cluster) == 0).await?;
            Ok(())
        }
    })
    .await
}

/// Subscribing to a topic whose name is invalid or empty: librdkafka reports it from the consumer
/// ("Subscribed topic not available: ..: Broker: Invalid topic", `recv()`:
/// `MessageConsumption(InvalidTopic)`), never panics; the consumer still closes.
async fn bad_topic_names(ctx: Ctx) -> Result<(), Failure> {
    let (cluster, bootstrap) = cluster(&ctx, &[])?;
    in_node(&ctx, move |_| {
        let (cluster, bootstrap) = (cluster.clone(), bootstrap.clone());
        async move {
            for name in ["bad topic!", "", "a/b", &"x".repeat(300)] {
                let log: Log = Arc::default();
                let a = member(&bootstrap, "a", &log, &[("topic.metadata.propagation.max.ms", "1000")])?;
                let s = a.subscribe(&[name]);
                if s.is_ok() {
                    let mut got = None;
                    for _ in 0..20 {
                        if let Some(r) = within(&a, Duration::from_secs(1)).await {
                            got = Some(r);
                            break;
                        }
                    }
                    check(
                        matches!(got, Some(Err(KafkaError::MessageConsumption(Code::InvalidTopic)))),
                        format!("{name:?}: {got:?}"),
                    )?;
                }
                let close = tokio::time::timeout(Duration::from_secs(70), a.close()).await;
                check(close.is_ok(), format!("{name:?}: the close finished"))?;
            }
            wait_for("the group is empty", || members(&cluster) == 0).await?;
            Ok(())
        }
    })
    .await
}

/// `group.id=""`: librdkafka creates no group (`rd_kafka_new` checks the length), so subscribe
/// fails `Subscription("Local: Unknown group")` and commits `ConsumerCommit(UnknownGroup)`.
async fn empty_group_id(ctx: Ctx) -> Result<(), Failure> {
    let (_cluster, bootstrap) = cluster(&ctx, &[("e", 1)])?;
    in_node(&ctx, move |_| {
        let bootstrap = bootstrap.clone();
        async move {
            let mut config = ClientConfig::new();
            config.set("bootstrap.servers", &bootstrap).set("group.id", "");
            let c: StreamConsumer = config.create().map_err(fail)?;
            let s = c.subscribe(&["e"]);
            check(
                matches!(&s, Err(KafkaError::Subscription(m)) if m == "Local: Unknown group"),
                format!("subscribe: {s:?}"),
            )?;
            let r = c.commit_consumer_state(CommitMode::Sync).await;
            check(matches!(r, Err(KafkaError::ConsumerCommit(Code::UnknownGroup))), format!("commit: {r:?}"))?;
            c.close().await;
            Ok(())
        }
    })
    .await
}

/// group.id without bootstrap.servers: librdkafka creates the client (it warns "No
/// bootstrap.servers configured"); ours refuses creation with `ClientCreation`. Either way no
/// panic.
async fn no_bootstrap(ctx: Ctx) -> Result<(), Failure> {
    in_node(&ctx, move |_| async move {
        let mut config = ClientConfig::new();
        config.set("group.id", "g");
        let c: Result<StreamConsumer, _> = config.create();
        check(matches!(c, Err(KafkaError::ClientCreation(_))), format!("create: {:?}", c.err()))?;
        Ok(())
    })
    .await
}

/// bootstrap.servers naming a host the simulation does not have: librdkafka retries the broker
/// (reconnect.backoff) and recv() waits; calls that wait for a broker time out
/// (`committed`: `OperationTimedOut`); the consumer closes.
async fn unknown_host(ctx: Ctx) -> Result<(), Failure> {
    let (_cluster, _bootstrap) = cluster(&ctx, &[("h", 1)])?;
    in_node(&ctx, move |_| async move {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", "no-such-host:9092").set("group.id", "g");
        let c: StreamConsumer = config.create().map_err(fail)?;
        c.subscribe(&["h"]).map_err(fail)?;
        let got = within(&c, Duration::from_secs(10)).await;
        check(matches!(got, None | Some(Err(_))), format!("recv: {got:?}"))?;
        let mut t = TopicPartitionList::new();
        t.add_partition("h", 0);
        let r = tokio::time::timeout(Duration::from_secs(30), c.committed_offsets(t, Duration::from_secs(2))).await;
        check(matches!(r, Ok(Err(_))), format!("committed_offsets: {r:?}"))?;
        let close = tokio::time::timeout(Duration::from_secs(120), c.close()).await;
        check(close.is_ok(), "the close finished")?;
        let p: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", "no-such-host:9092")
            .set("message.timeout.ms", "2000")
            .create()
            .map_err(fail)?;
        let r =
            tokio::time::timeout(Duration::from_secs(30), p.send(FutureRecord::to("h").payload("x").key("k"), None))
                .await;
        check(
            matches!(r, Ok(Err((KafkaError::MessageProduction(_), _)))),
            format!("send: {:?}", r.map(|x| x.map_err(|e| e.0))),
        )?;
        Ok(())
    })
    .await
}

/// A 2 MB payload with message.max.bytes at its default (1 000 000): `MessageSizeTooLarge` at
/// the send (librdkafka's `rd_kafka_producev` `MSG_SIZE_TOO_LARGE`).
async fn oversized_record(ctx: Ctx) -> Result<(), Failure> {
    let (_cluster, bootstrap) = cluster(&ctx, &[("big", 1)])?;
    in_node(&ctx, move |_| {
        let bootstrap = bootstrap.clone();
        async move {
            let p: FutureProducer = ClientConfig::new().set("bootstrap.servers", &bootstrap).create().map_err(fail)?;
            let payload = vec![7u8; 2 * 1024 * 1024];
            let r = p.send(FutureRecord::<str, [u8]>::to("big").payload(&payload[..]), Duration::from_secs(5)).await;
            check(
                matches!(r, Err((KafkaError::MessageProduction(Code::MessageSizeTooLarge), _))),
                format!("send: {:?}", r.map_err(|e| e.0)),
            )?;
            Ok(())
        }
    })
    .await
}

#[test]
fn recv_after_unsubscribe_waits_with_nothing_assigned() {
    Simulation::new("rdkm_unsub").seeds(0..2).run(recv_after_unsubscribe).assert_passed();
}
#[test]
fn a_second_subscribe_replaces_the_first() {
    Simulation::new("rdkm_sub2").seeds(0..2).run(subscribe_twice).assert_passed();
}
#[test]
fn assign_while_subscribed_reads_the_assigned_partition() {
    Simulation::new("rdkm_assign").seeds(0..2).run(assign_while_subscribed).assert_passed();
}
#[test]
fn commits_of_logical_offsets_fail_no_offset() {
    Simulation::new("rdkm_commit").seeds(0..2).run(commit_logical_offsets).assert_passed();
}
#[test]
fn seek_on_an_unassigned_partition_fails_unknown_partition() {
    Simulation::new("rdkm_seek").seeds(0..2).run(seek_unassigned).assert_passed();
}
#[test]
fn store_offset_in_the_close_fails_state() {
    Simulation::new("rdkm_store").seeds(0..2).run(store_after_close).assert_passed();
}
#[test]
fn a_panicking_callback_propagates_from_recv_and_the_drop_does_not_abort() {
    Simulation::new("rdkm_panic").seeds(0..2).allow_recovered_panics(true).run(panicking_callback).assert_passed();
}
#[test]
fn callbacks_that_reenter_the_consumer_do_not_deadlock() {
    Simulation::new("rdkm_reenter").seeds(0..2).run(reentrant_callbacks).assert_passed();
}
#[test]
fn a_sync_commit_future_outlives_its_dropped_consumer() {
    Simulation::new("rdkm_dropcommit").seeds(0..2).run(drop_with_commit_pending).assert_passed();
}
#[test]
fn twenty_members_closed_at_once_all_leave() {
    Simulation::new("rdkm_twenty").seeds(0..2).run(twenty_closed_at_once).assert_passed();
}
#[test]
fn bad_topic_names_are_errors_not_panics() {
    Simulation::new("rdkm_names").seeds(0..2).run(bad_topic_names).assert_passed();
}
#[test]
fn an_empty_group_id_is_no_group() {
    Simulation::new("rdkm_emptygroup").seeds(0..2).run(empty_group_id).assert_passed();
}
#[test]
fn group_id_without_bootstrap_servers_fails_creation() {
    Simulation::new("rdkm_nobootstrap").seeds(0..1).run(no_bootstrap).assert_passed();
}
#[test]
fn an_unknown_bootstrap_host_waits_and_times_out() {
    Simulation::new("rdkm_nohost").seeds(0..2).run(unknown_host).assert_passed();
}
#[test]
fn a_2mb_record_fails_message_size_too_large() {
    Simulation::new("rdkm_big").seeds(0..2).run(oversized_record).assert_passed();
}

/// A consumer holding an assignment dropped while the application's own panic unwinds: the
/// close runs (revoke callbacks, LeaveGroup) without a second panic (which would abort).
/// `subscribe(&[])` drops the subscription as `unsubscribe()` does.
async fn drop_in_unwind_and_empty_subscribe(ctx: Ctx) -> Result<(), Failure> {
    let (cluster, bootstrap) = cluster(&ctx, &[("w", 1)])?;
    in_node(&ctx, move |_| {
        let (cluster, bootstrap) = (cluster.clone(), bootstrap.clone());
        async move {
            let log: Log = Arc::default();
            let a = member(&bootstrap, "a", &log, &[])?;
            a.subscribe(&["w"]).map_err(fail)?;
            until(&a, 1).await?;
            let r = AssertUnwindSafe(async move {
                let _held = a;
                panic!("the application panics holding the consumer");
            })
            .catch_unwind()
            .await;
            check(r.is_err(), "the application's panic")?;
            wait_for("a left", || members(&cluster) == 0).await?;
            let seen = log.lock().expect("log").clone();
            check(seen.iter().any(|l| l.starts_with("a pre revoke")), format!("the close revoked: {seen:?}"))?;
            let b = member(&bootstrap, "b", &log, &[])?;
            b.subscribe(&["w"]).map_err(fail)?;
            until(&b, 1).await?;
            b.subscribe(&[]).map_err(fail)?;
            until(&b, 0).await?;
            wait_for("b left", || members(&cluster) == 0).await?;
            b.close().await;
            Ok(())
        }
    })
    .await
}

#[test]
fn a_consumer_dropped_in_an_unwind_closes_and_an_empty_subscribe_unsubscribes() {
    Simulation::new("rdkm_unwind")
        .seeds(0..2)
        .allow_recovered_panics(true)
        .run(drop_in_unwind_and_empty_subscribe)
        .assert_passed();
}

/// store_offset of a negative offset stores offset + 1 (librdkafka's `rd_kafka_offset_store`),
/// a logical one that a commit skips: committing the state then has nothing to send
/// (`_NO_OFFSET`), and the broker never sees a negative offset.
async fn negative_store(ctx: Ctx) -> Result<(), Failure> {
    let (cluster, bootstrap) = cluster(&ctx, &[("n", 1)])?;
    in_node(&ctx, move |_| {
        let (cluster, bootstrap) = (cluster.clone(), bootstrap.clone());
        async move {
            let log: Log = Arc::default();
            let a = member(&bootstrap, "a", &log, &[("enable.auto.offset.store", "false")])?;
            a.subscribe(&["n"]).map_err(fail)?;
            until(&a, 1).await?;
            let s = a.store_offset("n", 0, -5);
            check(s.is_ok(), format!("store: {s:?}"))?;
            let r = a.commit_consumer_state(CommitMode::Sync).await;
            check(matches!(r, Err(KafkaError::ConsumerCommit(Code::NoOffset))), format!("commit: {r:?}"))?;
            let committed = cluster.committed("g", "n", 0);
            check(committed.is_none(), format!("nothing committed: {committed:?}"))?;
            a.close().await;
            Ok(())
        }
    })
    .await
}

#[test]
fn a_negative_stored_offset_is_not_committed() {
    Simulation::new("rdkm_negstore").seeds(0..2).run(negative_store).assert_passed();
}
