//! The queue models Q1–Q9 over rdkafka (librdkafka) `BaseConsumer`s on the loopback broker. For
//! each model, a deliberately wrong consumer in one group, on which the model fires, and a
//! correct consumer in another group on the same broker, on which every model stays quiet.
//! Consumers record what they do through a [`Recorder`]: assignments and revocations from
//! rdkafka's rebalance callbacks, records begun and processed, commits with the broker's answer,
//! stops, leaves and crashes.
//!
//! Real threads and real time: statistical, like any real-network test. Every wait is for an
//! outcome (records processed, the group empty) with a generous limit, and the assertions are
//! the models' verdicts, never timings. Q9 waits out its bound, which is computed from the
//! consumers' own settings plus a named real-time slack.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafkasim::kafka_protocol::ResponseError;
use kafkasim::kafka_protocol::messages::ApiKey;
use kafkasim::models::*;
use kafkasim::{Broker, Cluster, Fault, FaultAction, LocalBroker};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

const TOPIC: &str = "events";
/// How long any phase may take before the test gives up (generous: CI machines are slow).
const PHASE: Duration = Duration::from_secs(60);
/// The consumers' timing settings: short, so that rebalances and Q9's bound stay short.
const SETTINGS: [(&str, &str); 7] = [
    ("session.timeout.ms", "3000"),
    ("heartbeat.interval.ms", "300"),
    ("max.poll.interval.ms", "5000"),
    ("reconnect.backoff.ms", "100"),
    ("reconnect.backoff.max.ms", "500"),
    ("retry.backoff.max.ms", "500"),
    ("fetch.wait.max.ms", "100"),
];

fn broker(partitions: i32) -> LocalBroker {
    broker_with(Cluster::builder(), partitions)
}

fn broker_with(builder: kafkasim::ClusterBuilder, partitions: i32) -> LocalBroker {
    let builder = builder
        .initial_rebalance_delay(Duration::ZERO)
        .session_timeouts(Duration::from_millis(500), Duration::from_secs(1800));
    let broker = Broker::start_local_with(builder).expect("loopback broker");
    broker.cluster().create_topic(TOPIC, partitions).expect("topic");
    broker
}

/// Produces `v{from}`…`v{to - 1}`, record `i` to partition `i % partitions`, in order, one
/// record per batch (each acknowledged before the next is sent).
fn produce(broker: &LocalBroker, from: usize, to: usize, partitions: i32) {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap_servers())
        .set("linger.ms", "0")
        .set("reconnect.backoff.max.ms", "500")
        .create()
        .expect("producer config");
    for i in from..to {
        let value = format!("v{i}");
        let record = BaseRecord::<(), str>::to(TOPIC).partition(i as i32 % partitions).payload(&value);
        producer.send(record).map_err(|(e, _)| e).expect("queued");
        producer.flush(Duration::from_secs(30)).expect("every record acknowledged");
    }
}

/// Records assignments and revocations from rdkafka's rebalance callbacks.
struct Probe {
    rec: MemberRecorder,
    assigned: Arc<Mutex<BTreeSet<i32>>>,
}

impl ClientContext for Probe {}

impl ConsumerContext for Probe {
    fn pre_rebalance(&self, _: &BaseConsumer<Probe>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(tpl) = rebalance {
            for e in tpl.elements() {
                self.rec.revoke(e.topic(), e.partition());
                self.assigned.lock().expect("not poisoned").remove(&e.partition());
            }
        }
    }

    fn post_rebalance(&self, _: &BaseConsumer<Probe>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(tpl) = rebalance {
            for e in tpl.elements() {
                self.rec.assign(e.topic(), e.partition());
                self.assigned.lock().expect("not poisoned").insert(e.partition());
            }
        }
    }
}

type Kc = BaseConsumer<Probe>;

/// A consumer `name` (its client id) of `group`, subscribed, recording into `rec`.
fn consumer(broker: &LocalBroker, rec: &Recorder, group: &str, name: &str) -> Kc {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", broker.bootstrap_servers())
        .set("group.id", group)
        .set("client.id", name)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("partition.assignment.strategy", "range");
    for (k, v) in SETTINGS {
        config.set(k, v);
    }
    let probe = Probe { rec: rec.member(group, name), assigned: Arc::default() };
    let c: Kc = config.create_with_context(probe).expect("consumer config");
    c.subscribe(&[TOPIC]).expect("subscribe");
    c
}

fn settings() -> ConsumerSettings {
    ConsumerSettings::from_properties(|k| SETTINGS.iter().find(|(p, _)| *p == k).map(|(_, v)| v.to_string()))
        .expect("valid settings")
        .initial_rebalance_delay(Duration::ZERO)
        .processing_max(Duration::from_millis(50))
}

/// A record as the tests handle it.
#[derive(Clone, Debug)]
struct Rec {
    p: i32,
    offset: i64,
    value: String,
}

/// The next record, within `timeout`; `Some(Err)` for an error rdkafka reports.
fn next(c: &Kc, timeout: Duration) -> Option<Result<Rec, KafkaError>> {
    match c.poll(timeout)? {
        Ok(m) => Some(Ok(Rec {
            p: m.partition(),
            offset: m.offset(),
            value: String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned(),
        })),
        Err(e) => Some(Err(e)),
    }
}

/// Commits `offset` for partition `p` synchronously and records the answer.
fn commit(c: &Kc, p: i32, offset: i64) -> Answer {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(TOPIC, p, Offset::Offset(offset)).expect("a valid offset");
    let answer = match c.commit(&tpl, CommitMode::Sync) {
        Ok(()) => Answer::Accepted,
        Err(KafkaError::ConsumerCommit(code)) if (code as i32) > 0 => Answer::Refused(code as i16),
        Err(_) => Answer::Unknown,
    };
    c.context().rec.commit(TOPIC, p, offset, answer);
    answer
}

fn rec_of(c: &Kc) -> MemberRecorder {
    c.context().rec.clone()
}

/// Closes the consumer (rdkafka's close: the last revocation, then LeaveGroup) and records the
/// leave.
fn close(c: Kc) {
    let rec = rec_of(&c);
    drop(c);
    rec.leave();
}

/// A crash, as far as the models see it: recorded, then the consumer is gone.
fn crash(c: Kc) {
    let rec = rec_of(&c);
    rec.crash();
    drop(c);
}

/// Distinct (partition, offset) the group processed so far.
fn processed(rec: &Recorder, group: &str) -> BTreeSet<(i32, i64)> {
    rec.history()
        .events()
        .iter()
        .filter(|e| e.group == group)
        .filter_map(|e| match &e.what {
            What::Process { tp, offset, .. } => Some((tp.partition, *offset)),
            _ => None,
        })
        .collect()
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + PHASE;
    while !done() {
        assert!(Instant::now() < deadline, "gave up waiting for {what} after {PHASE:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until the group has no member (every consumer closed and the coordinator saw it).
fn wait_empty(broker: &LocalBroker, group: &str) {
    wait_until(&format!("group {group} to be empty"), || {
        broker.cluster().group(group).is_none_or(|g| g.members.is_empty())
    });
}

/// Polls records until `count` distinct offsets were handed to `handle` (or it asks to stop:
/// `false`); returns the consumer, still open.
fn consume(c: Kc, count: usize, mut handle: impl FnMut(&Kc, &Rec) -> bool) -> Kc {
    let mut seen = BTreeSet::new();
    let deadline = Instant::now() + PHASE;
    while seen.len() < count {
        assert!(Instant::now() < deadline, "consumed {} of {count} records within {PHASE:?}", seen.len());
        match next(&c, Duration::from_millis(100)) {
            Some(Ok(r)) => {
                seen.insert((r.p, r.offset));
                if !handle(&c, &r) {
                    break;
                }
            }
            Some(Err(e)) => eprintln!("consumer error (retried): {e}"),
            None => {}
        }
    }
    c
}

/// Process, then commit the next offset: at-least-once done right.
fn process_then_commit(c: &Kc, r: &Rec) -> bool {
    let rec = rec_of(c);
    rec.begin(TOPIC, r.p, r.offset);
    rec.process(TOPIC, r.p, r.offset, &r.value);
    commit(c, r.p, r.offset + 1);
    true
}

/// Commit the next offset, then process: at-most-once done right.
fn commit_then_process(c: &Kc, r: &Rec) -> bool {
    let rec = rec_of(c);
    assert_eq!(commit(c, r.p, r.offset + 1), Answer::Accepted, "the loopback broker accepts a member's commit");
    rec.begin(TOPIC, r.p, r.offset);
    rec.process(TOPIC, r.p, r.offset, &r.value);
    true
}

/// Stop, drain (nothing in flight: handlers finish), close.
fn stop_and_close(c: Kc) {
    rec_of(&c).stop();
    close(c);
}

fn assert_clean(report: &Report, group: &str) {
    assert!(report.is_clean(), "the correct consumer of {group} drew violations:\n{report}");
}

fn violations_of<'a>(report: &'a Report, model: &str) -> Vec<&'a Violation> {
    let found = report.of(model);
    assert!(!found.is_empty(), "{model} did not fire:\n{report}");
    found
}

// ---- Q1 -----------------------------------------------------------------------------------

#[test]
fn q1_fires_on_a_consumer_that_commits_before_processing_and_not_on_one_that_processes_first() {
    let broker = broker(1);
    produce(&broker, 0, 10, 1);
    let rec = Recorder::new(broker.cluster());
    std::thread::scope(|s| {
        s.spawn(|| stop_and_close(consume(consumer(&broker, &rec, "q1-ok", "ok-1"), 10, process_then_commit)));
        s.spawn(|| {
            let bad = consumer(&broker, &rec, "q1-bad", "bad-1");
            stop_and_close(consume(bad, 10, |c, r| {
                commit(c, r.p, r.offset + 1);
                let rec = rec_of(c);
                rec.begin(TOPIC, r.p, r.offset);
                rec.process(TOPIC, r.p, r.offset, &r.value);
                true
            }))
        });
    });
    wait_empty(&broker, "q1-ok");
    wait_empty(&broker, "q1-bad");
    assert_clean(&rec.judge(&Spec::at_least_once("q1-ok")), "q1-ok");
    let report = rec.judge(&Spec::at_least_once("q1-bad"));
    let found = violations_of(&report, Q1);
    assert!(found.iter().all(|v| v.member.as_deref() == Some("bad-1")), "{report}");
    let covered: BTreeSet<i64> = found.iter().flat_map(|v| v.offsets.iter().copied()).collect();
    assert_eq!(covered, (0..10).collect(), "every record was committed before it was processed:\n{report}");
}

// ---- Q2 -----------------------------------------------------------------------------------

/// Member 1 consumes both partitions alone; member 2 joins; once each holds one partition,
/// member 1 commits — every partition it ever held (`stale`), or only what it holds now.
fn revoked_member_commits(broker: &LocalBroker, rec: &Recorder, group: &str, stale: bool) {
    let go = AtomicBool::new(false);
    let committed = AtomicBool::new(false);
    let done = AtomicBool::new(false);
    let held: [Arc<Mutex<BTreeSet<i32>>>; 2] = Default::default();
    std::thread::scope(|s| {
        let one = s.spawn(|| {
            let c = consumer(broker, rec, group, &format!("{group}-1"));
            let assigned = Arc::clone(&c.context().assigned);
            let mut positions = std::collections::BTreeMap::new();
            while !done.load(Ordering::SeqCst) {
                *held[0].lock().expect("not poisoned") = assigned.lock().expect("not poisoned").clone();
                if let Some(Ok(r)) = next(&c, Duration::from_millis(50)) {
                    process_then_commit(&c, &r);
                    positions.insert(r.p, r.offset + 1);
                }
                if go.swap(false, Ordering::SeqCst) {
                    let now = assigned.lock().expect("not poisoned").clone();
                    for (p, offset) in &positions {
                        if stale || now.contains(p) {
                            commit(&c, *p, *offset);
                        }
                    }
                    committed.store(true, Ordering::SeqCst);
                }
            }
            stop_and_close(c);
        });
        wait_until("member 1 to process both partitions", || processed(rec, group).len() == 10);
        let two = s.spawn(|| {
            let c = consumer(broker, rec, group, &format!("{group}-2"));
            let assigned = Arc::clone(&c.context().assigned);
            while !done.load(Ordering::SeqCst) {
                *held[1].lock().expect("not poisoned") = assigned.lock().expect("not poisoned").clone();
                if let Some(Ok(r)) = next(&c, Duration::from_millis(50)) {
                    process_then_commit(&c, &r);
                }
            }
            stop_and_close(c);
        });
        wait_until("each member to hold one partition", || {
            let stable = broker.cluster().group(group).is_some_and(|g| g.members.len() == 2 && g.state == "Stable");
            let one = held[0].lock().expect("not poisoned").len() == 1;
            let two = held[1].lock().expect("not poisoned").len() == 1;
            stable && one && two
        });
        go.store(true, Ordering::SeqCst);
        wait_until("member 1's commits", || committed.load(Ordering::SeqCst));
        done.store(true, Ordering::SeqCst);
        one.join().expect("member 1");
        two.join().expect("member 2");
    });
    wait_empty(broker, group);
}

#[test]
fn q2_fires_on_a_member_committing_a_partition_it_lost_in_a_rebalance() {
    let broker = broker(2);
    produce(&broker, 0, 10, 2);
    let rec = Recorder::new(broker.cluster());
    revoked_member_commits(&broker, &rec, "q2-ok", false);
    revoked_member_commits(&broker, &rec, "q2-bad", true);
    assert_clean(&rec.judge(&Spec::at_least_once("q2-ok")), "q2-ok");
    let report = rec.judge(&Spec::at_least_once("q2-bad"));
    let found = violations_of(&report, Q2);
    assert!(found.iter().all(|v| v.member.as_deref() == Some("q2-bad-1")), "{report}");
    // Both views: the member's own events, and the coordinator's journal with the generation's
    // assignment (the coordinator accepted the commit: it fences generations, not holders).
    assert!(found.iter().any(|v| v.message.contains("while not holding")), "{report}");
    assert!(found.iter().any(|v| v.message.contains("assigned it to q2-bad-2")), "{report}");
}

#[test]
fn q2_fires_on_a_commit_that_goes_back() {
    let broker = broker(1);
    produce(&broker, 0, 6, 1);
    let rec = Recorder::new(broker.cluster());
    let c = consume(consumer(&broker, &rec, "q2-back", "back-1"), 6, process_then_commit);
    // "Retry the batch from its start": commits the batch's first offset again.
    assert_eq!(commit(&c, 0, 2), Answer::Accepted);
    stop_and_close(c);
    wait_empty(&broker, "q2-back");
    let report = rec.judge(&Spec::at_least_once("q2-back"));
    let found = violations_of(&report, Q2);
    assert!(found.iter().any(|v| v.offsets == vec![6, 2] && v.member.as_deref() == Some("back-1")), "{report}");
    assert!(found.iter().any(|v| v.message.contains("went back")), "the coordinator's journal too:\n{report}");
}

// ---- Q3 and Q4 ----------------------------------------------------------------------------

#[test]
fn q3_fires_on_at_most_once_reprocessing_after_a_restart_and_q4_on_processing_first() {
    let broker = broker(1);
    produce(&broker, 0, 10, 1);
    let rec = Recorder::new(broker.cluster());
    std::thread::scope(|s| {
        // Correct: commit, then process; crashes after record 5, restarts, goes on from 6.
        s.spawn(|| {
            crash(consume(consumer(&broker, &rec, "q34-ok", "amo-1"), 6, commit_then_process));
            stop_and_close(consume(consumer(&broker, &rec, "q34-ok", "amo-1"), 4, commit_then_process));
        });
        // Wrong: declared at-most-once, but processes first and commits every third record;
        // crashes after processing 7 with 6 committed, and the restart redoes 6 and 7.
        s.spawn(|| {
            let batch = |c: &Kc, r: &Rec| {
                let rec = rec_of(c);
                rec.begin(TOPIC, r.p, r.offset);
                rec.process(TOPIC, r.p, r.offset, &r.value);
                if (r.offset + 1) % 3 == 0 {
                    commit(c, r.p, r.offset + 1);
                }
                true
            };
            crash(consume(consumer(&broker, &rec, "q3-bad", "dup-1"), 8, batch));
            stop_and_close(consume(consumer(&broker, &rec, "q3-bad", "dup-1"), 4, |c, r| {
                batch(c, r);
                commit(c, r.p, r.offset + 1);
                true
            }));
        });
        // Wrong: processes each record, then commits it.
        s.spawn(|| stop_and_close(consume(consumer(&broker, &rec, "q4-bad", "late-1"), 10, process_then_commit)));
    });
    for group in ["q34-ok", "q3-bad", "q4-bad"] {
        wait_empty(&broker, group);
    }
    assert_clean(&rec.judge(&Spec::at_most_once("q34-ok")), "q34-ok");
    let report = rec.judge(&Spec::at_most_once("q3-bad"));
    let dups: BTreeSet<i64> = violations_of(&report, Q3).iter().flat_map(|v| v.offsets.clone()).collect();
    assert_eq!(dups, [6, 7].into(), "{report}");
    let report = rec.judge(&Spec::at_most_once("q4-bad"));
    assert_eq!(violations_of(&report, Q4).len(), 10, "every record was processed before its commit:\n{report}");
    assert!(!report.fired(Q3), "no restart, no duplicate:\n{report}");
}

// ---- Q5 -----------------------------------------------------------------------------------

#[test]
fn q5_fires_on_a_consumer_that_silently_skips_records_and_explains_a_stated_crash() {
    let broker = broker(1);
    produce(&broker, 0, 10, 1);
    let rec = Recorder::new(broker.cluster());
    std::thread::scope(|s| {
        // Wrong: a filter bug drops every value ending in 3, committing past it.
        s.spawn(|| {
            stop_and_close(consume(consumer(&broker, &rec, "q5-bad", "skip-1"), 10, |c, r| {
                commit(c, r.p, r.offset + 1);
                if !r.value.ends_with('3') {
                    let rec = rec_of(c);
                    rec.begin(TOPIC, r.p, r.offset);
                    rec.process(TOPIC, r.p, r.offset, &r.value);
                }
                true
            }))
        });
        // Correct at-most-once that crashes between committing 5 and processing 4.
        s.spawn(|| {
            let c = consume(consumer(&broker, &rec, "q5-ok", "crashy-1"), 5, |c, r| {
                if r.offset == 4 {
                    commit(c, r.p, r.offset + 1);
                    return false;
                }
                commit_then_process(c, r)
            });
            crash(c);
            stop_and_close(consume(consumer(&broker, &rec, "q5-ok", "crashy-1"), 5, commit_then_process));
        });
    });
    wait_empty(&broker, "q5-bad");
    wait_empty(&broker, "q5-ok");
    let report = rec.judge(&Spec::at_most_once("q5-bad").allow(Cause::Crash));
    let found = violations_of(&report, Q5);
    assert_eq!(found.len(), 1, "{report}");
    assert_eq!((found[0].offsets.clone(), found[0].member.as_deref()), (vec![3], Some("skip-1")), "{report}");
    let report = rec.judge(&Spec::at_most_once("q5-ok").allow(Cause::Crash));
    assert_clean(&report, "q5-ok");
    assert_eq!(report.explained.len(), 1, "{report}");
    assert_eq!((report.explained[0].cause, report.explained[0].offsets.clone()), (Cause::Crash, vec![4]));
    // The same loss, without the crash stated as allowed, is unexplained.
    assert!(rec.judge(&Spec::at_most_once("q5-ok")).fired(Q5));
}

#[test]
fn q5_explains_records_retention_deleted_only_when_retention_is_stated() {
    // About 8 single-record batches fit; the first ones are deleted before anyone reads.
    let broker = broker_with(Cluster::builder().partition_bytes_max(600), 1);
    produce(&broker, 0, 30, 1);
    let view = broker.cluster().partition(TOPIC, 0).expect("the partition");
    assert!(view.log_start > 0, "retention deleted the oldest batches: {view:?}");
    let rec = Recorder::new(broker.cluster());
    let remaining = (view.high_watermark - view.log_start) as usize;
    stop_and_close(consume(consumer(&broker, &rec, "q5-retention", "late-1"), remaining, process_then_commit));
    wait_empty(&broker, "q5-retention");
    let report = rec.judge(&Spec::at_least_once("q5-retention").allow(Cause::Retention));
    assert_clean(&report, "q5-retention");
    assert_eq!(report.explained[0].offsets, (0..view.log_start).collect::<Vec<_>>(), "{report}");
    let report = rec.judge(&Spec::at_least_once("q5-retention"));
    assert_eq!(violations_of(&report, Q5)[0].offsets, (0..view.log_start).collect::<Vec<_>>(), "{report}");
}

// ---- Q6 -----------------------------------------------------------------------------------

/// Polls up to `n` records (or what arrives within a short wait).
fn batch(c: &Kc, n: usize) -> Vec<Rec> {
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_millis(300);
    while out.len() < n && Instant::now() < deadline {
        if let Some(Ok(r)) = next(c, Duration::from_millis(50)) {
            out.push(r);
        }
    }
    out
}

/// Runs batches through `work` until `total` records were processed, committing each batch's
/// end per partition once the batch is done.
fn pool(c: Kc, total: usize, work: impl Fn(&MemberRecorder, Vec<Rec>)) -> Kc {
    let rec = rec_of(&c);
    let mut done = 0;
    let deadline = Instant::now() + PHASE;
    while done < total {
        assert!(Instant::now() < deadline, "processed {done} of {total} within {PHASE:?}");
        let records = batch(&c, 6);
        if records.is_empty() {
            continue;
        }
        for r in &records {
            rec.begin(TOPIC, r.p, r.offset);
        }
        done += records.len();
        let mut ends = std::collections::BTreeMap::new();
        for r in &records {
            ends.insert(r.p, r.offset + 1);
        }
        work(&rec, records);
        for (p, end) in ends {
            commit(&c, p, end);
        }
    }
    c
}

#[test]
fn q6_fires_on_a_worker_pool_processing_one_partition_concurrently_and_not_on_per_partition_workers() {
    let broker = broker(2);
    produce(&broker, 0, 24, 2);
    let rec = Recorder::new(broker.cluster());
    std::thread::scope(|s| {
        // Wrong: one thread per record; later records finish first.
        s.spawn(|| {
            stop_and_close(pool(consumer(&broker, &rec, "q6-bad", "pool-1"), 24, |rec, records| {
                let n = records.len();
                std::thread::scope(|w| {
                    for (i, r) in records.into_iter().enumerate() {
                        w.spawn(move || {
                            std::thread::sleep(Duration::from_millis(15 * (n - i) as u64));
                            rec.process(TOPIC, r.p, r.offset, &r.value);
                        });
                    }
                });
            }))
        });
        // Correct: one worker per partition, each in offset order.
        s.spawn(|| {
            stop_and_close(pool(consumer(&broker, &rec, "q6-ok", "keyed-1"), 24, |rec, records| {
                std::thread::scope(|w| {
                    for p in [0, 1] {
                        let mine: Vec<&Rec> = records.iter().filter(|r| r.p == p).collect();
                        w.spawn(move || {
                            for r in mine {
                                std::thread::sleep(Duration::from_millis(5));
                                rec.process(TOPIC, r.p, r.offset, &r.value);
                            }
                        });
                    }
                });
            }))
        });
    });
    wait_empty(&broker, "q6-bad");
    wait_empty(&broker, "q6-ok");
    assert_clean(&rec.judge(&Spec::at_least_once("q6-ok")), "q6-ok");
    let report = rec.judge(&Spec::at_least_once("q6-bad"));
    let found = violations_of(&report, Q6);
    assert!(found.iter().all(|v| v.member.as_deref() == Some("pool-1")), "{report}");
    assert!(found.iter().all(|v| v.offsets.len() == 2 && v.offsets[0] > v.offsets[1]), "{report}");
}

// ---- Q7 -----------------------------------------------------------------------------------

#[test]
fn q7_fires_on_a_consumer_that_swallows_a_processing_error_and_not_on_one_that_stops() {
    let broker = broker(1);
    produce(&broker, 0, 10, 1);
    let rec = Recorder::new(broker.cluster());
    let poison = |r: &Rec| r.value == "v4";
    std::thread::scope(|s| {
        // Wrong: logs the failure, carries on and commits past it.
        s.spawn(|| {
            stop_and_close(consume(consumer(&broker, &rec, "q7-bad", "swallow-1"), 10, |c, r| {
                let rec = rec_of(c);
                rec.begin(TOPIC, r.p, r.offset);
                if poison(r) {
                    rec.error(TOPIC, r.p, r.offset, "cannot parse v4");
                } else {
                    rec.process(TOPIC, r.p, r.offset, &r.value);
                }
                commit(c, r.p, r.offset + 1);
                true
            }))
        });
        // Correct: the failure ends the consumer; a fixed one takes over from the failed record.
        s.spawn(|| {
            let c = consume(consumer(&broker, &rec, "q7-ok", "strict-1"), 10, |c, r| {
                let rec = rec_of(c);
                rec.begin(TOPIC, r.p, r.offset);
                if poison(r) {
                    rec.error(TOPIC, r.p, r.offset, "cannot parse v4");
                    return false;
                }
                rec.process(TOPIC, r.p, r.offset, &r.value);
                commit(c, r.p, r.offset + 1);
                true
            });
            stop_and_close(c);
            stop_and_close(consume(consumer(&broker, &rec, "q7-ok", "fixed-1"), 6, process_then_commit));
        });
    });
    wait_empty(&broker, "q7-bad");
    wait_empty(&broker, "q7-ok");
    assert_clean(&rec.judge(&Spec::at_least_once("q7-ok")), "q7-ok");
    let report = rec.judge(&Spec::at_least_once("q7-bad"));
    let found = violations_of(&report, Q7);
    assert_eq!(found.len(), 1, "{report}");
    assert_eq!(found[0].offsets[0], 4, "{report}");
    assert_eq!(found[0].member.as_deref(), Some("swallow-1"));
}

// ---- Q8 -----------------------------------------------------------------------------------

/// Processes records, committing every fifth; told to stop after record 6, with record 7
/// already begun. `drain`: finish 7 and commit; otherwise exit at once.
fn stopped_mid_batch(broker: &LocalBroker, rec: &Recorder, group: &str, name: &str, drain: bool) {
    let c = consume(consumer(broker, rec, group, name), 8, |c, r| {
        let rec = rec_of(c);
        rec.begin(TOPIC, r.p, r.offset);
        if r.offset == 7 {
            // SIGTERM arrives while 7 is being processed.
            rec.stop();
            if drain {
                rec.process(TOPIC, r.p, r.offset, &r.value);
                commit(c, r.p, r.offset + 1);
            }
            return false;
        }
        rec.process(TOPIC, r.p, r.offset, &r.value);
        if (r.offset + 1) % 5 == 0 {
            commit(c, r.p, r.offset + 1);
        }
        true
    });
    close(c);
}

#[test]
fn q8_fires_on_a_consumer_that_exits_without_finishing_or_committing_and_not_on_one_that_drains() {
    let broker = broker(1);
    produce(&broker, 0, 10, 1);
    let rec = Recorder::new(broker.cluster());
    std::thread::scope(|s| {
        s.spawn(|| stopped_mid_batch(&broker, &rec, "q8-ok", "drain-1", true));
        s.spawn(|| stopped_mid_batch(&broker, &rec, "q8-bad", "exit-1", false));
    });
    wait_empty(&broker, "q8-ok");
    wait_empty(&broker, "q8-bad");
    assert_clean(&rec.judge(&Spec::at_least_once("q8-ok")), "q8-ok");
    let report = rec.judge(&Spec::at_least_once("q8-bad"));
    let found = violations_of(&report, Q8);
    assert!(found.iter().all(|v| v.member.as_deref() == Some("exit-1")), "{report}");
    assert!(found.iter().any(|v| v.offsets == vec![7] && v.message.contains("in-flight")), "{report}");
    assert!(found.iter().any(|v| v.offsets == vec![6] && v.message.contains("did not commit")), "{report}");
    // rdkafka's close sends LeaveGroup: the coordinator's side of Q8 holds for both.
    assert!(!found.iter().any(|v| v.message.contains("without LeaveGroup")), "{report}");
}

// ---- Q9 -----------------------------------------------------------------------------------

#[test]
fn q9_fires_on_a_consumer_stuck_after_a_fetch_fault_heals_and_not_on_one_that_resumes() {
    let broker = broker(1);
    produce(&broker, 0, 5, 1);
    let rec = Recorder::new(broker.cluster());
    let bound = settings().progress_bound().plus("real-time slack (loopback, threads)", Duration::from_secs(5));
    let healed = AtomicBool::new(false);
    let judged = AtomicBool::new(false);
    std::thread::scope(|s| {
        for (group, parks) in [("q9-ok", false), ("q9-bad", true)] {
            let (rec, broker, judged) = (&rec, &broker, &judged);
            s.spawn(move || {
                let c = consumer(broker, rec, group, &format!("{group}-1"));
                let mut parked = false;
                while !judged.load(Ordering::SeqCst) {
                    if parked {
                        // "Waiting for the operator": never polls again.
                        std::thread::sleep(Duration::from_millis(50));
                        continue;
                    }
                    match next(&c, Duration::from_millis(100)) {
                        Some(Ok(r)) => {
                            process_then_commit(&c, &r);
                        }
                        Some(Err(e)) => {
                            eprintln!("{group}: consumer error: {e}");
                            parked = parks;
                        }
                        None => {}
                    }
                }
                stop_and_close(c);
            });
        }
        wait_until("both groups to process the first records", || {
            processed(&rec, "q9-ok").len() == 5 && processed(&rec, "q9-bad").len() == 5
        });
        // The fault: every fetch of the topic is refused (librdkafka reports the error to the
        // application); meanwhile more records arrive. Dropping the guard heals it.
        let refused = FaultAction::Error(ResponseError::TopicAuthorizationFailed);
        let fault = broker.cluster().install(Fault::new(ApiKey::Fetch, refused).topic(TOPIC));
        produce(&broker, 5, 10, 1);
        std::thread::sleep(Duration::from_secs(1));
        drop(fault);
        rec.heal("q9-ok");
        rec.heal("q9-bad");
        let heal_at = Instant::now();
        healed.store(true, Ordering::SeqCst);
        // Judge once the correct group made progress and the bound has passed for the other.
        wait_until("the correct group to resume", || processed(&rec, "q9-ok").len() == 10);
        while heal_at.elapsed() < bound.total() + Duration::from_secs(1) {
            std::thread::sleep(Duration::from_millis(50));
        }
        judged.store(true, Ordering::SeqCst);
    });
    assert!(healed.load(Ordering::SeqCst));
    assert_clean(&rec.judge(&Spec::at_least_once("q9-ok").progress_bound(bound.clone())), "q9-ok");
    let report = rec.judge(&Spec::at_least_once("q9-bad").progress_bound(bound));
    let found = violations_of(&report, Q9);
    assert_eq!(found.len(), 1, "{report}");
    for part in ["session.timeout.ms 3s", "max.poll.interval.ms (rebalance timeout) 5s", "real-time slack"] {
        assert!(found[0].message.contains(part), "{report}");
    }
}
