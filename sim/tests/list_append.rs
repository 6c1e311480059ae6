//! The list-append checker (`sim::check::list_append`): each rule fires on a deliberately wrong,
//! hand-built history — naming the rule, the value and the offsets — and stays quiet on the
//! correct history next to it; the checker as a `Check` fed by history events inside a
//! simulation passes a correct run, replays it, and fails a wrong one with the rule named.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sim::check::list_append::{self, Gap, History, ListAppend, Record, Recorder, Report, Rule, Violation};
use sim::{Class, Ctx, Failure, OpOutcome, Simulation};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn ok(offset: u64) -> OpOutcome<Option<u64>> {
    OpOutcome::Ok(Some(offset))
}

fn unknown<T>() -> OpOutcome<T> {
    OpOutcome::Indeterminate("connection reset".into())
}

fn failed<T>() -> OpOutcome<T> {
    OpOutcome::Failed("NOT_ENOUGH_REPLICAS".into())
}

fn saw(records: &[(u64, &str)]) -> OpOutcome<Vec<Record>> {
    OpOutcome::Ok(records.iter().map(|(o, v)| Record::new(*o, *v)).collect())
}

fn quiet(h: &History) -> Report {
    match list_append::check(h) {
        Ok(report) => report,
        Err(violations) => panic!("expected no violation, got: {violations:#?}"),
    }
}

/// The violations, asserting every one is of `rule`.
fn only(h: &History, rule: Rule) -> Vec<Violation> {
    let violations = list_append::check(h).expect_err("a wrong history is caught");
    let rules: BTreeSet<Rule> = violations.iter().map(|v| v.rule).collect();
    assert_eq!(rules, BTreeSet::from([rule]), "{violations:#?}");
    violations
}

/// A correct history over two keys exercising every kind of observation: concurrent appends,
/// acknowledged (with and without offsets), failed and unknown (in the log and not), reads
/// with gaps, a failed and an unknown read, two subscribers (one reconnecting past a record,
/// one behind), and a key whose log start moved past two records.
fn correct() -> History {
    let mut h = History::new();
    h.append("p1", "k", "a", ms(0), ms(5), ok(0));
    h.append("p2", "k", "b", ms(1), ms(9), unknown());
    h.append("p3", "k", "c", ms(2), ms(4), failed());
    h.append("p1", "k", "d", ms(6), ms(8), ok(2));
    h.append("p2", "k", "e", ms(10), ms(11), unknown());
    h.append("p3", "k", "f", ms(3), ms(12), OpOutcome::Ok(None));
    h.read("r1", "k", ms(7), ms(9), saw(&[(0, "a"), (2, "d")]));
    h.read("r1", "k", ms(10), ms(11), failed());
    h.read("r2", "k", ms(10), ms(30), unknown());
    h.subscribe("s1", "k", Some(0), ms(0));
    h.deliver("s1", "k", 0, "a", ms(5));
    h.subscribe("s1", "k", Some(2), ms(13));
    h.deliver("s1", "k", 2, "d", ms(14));
    h.deliver("s1", "k", 3, "f", ms(15));
    h.subscribe("s2", "k", Some(0), ms(0));
    h.deliver("s2", "k", 0, "a", ms(6));
    h.final_log("k", 0, [(0, "a"), (1, "b"), (2, "d"), (3, "f")]);

    h.append("p1", "t", "x0", ms(0), ms(1), ok(0));
    h.append("p1", "t", "x1", ms(2), ms(3), OpOutcome::Ok(None));
    h.append("p1", "t", "x2", ms(4), ms(5), ok(2));
    h.append("p1", "t", "x3", ms(6), ms(7), ok(3));
    h.read("r1", "t", ms(5), ms(6), saw(&[(0, "x0"), (2, "x2")]));
    h.final_log("t", 2, [(2, "x2"), (3, "x3")]);
    h
}

#[test]
fn a_correct_history_passes_with_gaps_unknowns_and_retention_counted() {
    let report = quiet(&correct());
    assert_eq!(report.keys, 2);
    assert_eq!((report.appends.ok, report.appends.failed, report.appends.unknown), (7, 1, 2));
    assert_eq!((report.unknown_in_log, report.unknown_absent), (1, 1));
    assert_eq!((report.reads.ok, report.reads.failed, report.reads.unknown), (2, 1, 1));
    assert_eq!(report.records_read, 4);
    assert_eq!(report.deliveries, 4);
    assert_eq!(report.final_records, 6);
    assert_eq!(report.below_log_start, 2, "x0's acknowledgement and its read at offset 0");
    assert_eq!(report.unverifiable, 1, "x1: acknowledged without an offset, absent, log start 2");
    let gap = |subscriber: &str, first, last, records, across_reconnect, tail| Gap {
        subscriber: subscriber.into(),
        key: "k".into(),
        first,
        last,
        records,
        across_reconnect,
        tail,
    };
    assert_eq!(report.gaps, vec![gap("s1", 1, 1, 1, true, false), gap("s2", 1, 3, 3, false, true)]);
    assert_eq!(
        report.gaps[0].to_string(),
        "subscriber s1 on k missed 1 record(s) at offsets 1..=1 (across a reconnect)"
    );
}

// ---- rule 1 -----------------------------------------------------------------------------------

#[test]
fn rule_1_fires_on_an_acknowledged_append_missing_from_the_final_read() {
    let mut h = History::new();
    h.append("p1", "k", "a", ms(0), ms(1), ok(0));
    let lost = h.append("p1", "k", "b", ms(2), ms(3), ok(1));
    let lost_no_offset = h.append("p2", "k", "c", ms(2), ms(3), OpOutcome::Ok(None));
    h.final_log("k", 0, [(0, "a")]);
    let v = only(&h, Rule::AcknowledgedLost);
    assert_eq!(v.len(), 2);
    assert_eq!(
        (v[0].value.as_deref(), v[0].offsets.as_slice(), v[0].ops.as_slice()),
        (Some("c"), &[][..], &[lost_no_offset][..])
    );
    assert_eq!(
        (v[1].value.as_deref(), v[1].offsets.as_slice(), v[1].ops.as_slice()),
        (Some("b"), &[1][..], &[lost][..])
    );
    assert!(v[1].to_string().starts_with("rule 1 acknowledged-lost: key k value b offsets [1]: "), "{}", v[1]);
    assert!(v[1].detail.contains("the final log holds nothing there"), "{}", v[1]);
}

#[test]
fn rule_1_is_quiet_when_the_missing_append_was_unknown_or_below_the_log_start() {
    let mut h = History::new();
    h.append("p1", "k", "a", ms(0), ms(1), ok(0));
    h.append("p1", "k", "b", ms(2), ms(3), unknown());
    h.append("p1", "k", "c", ms(4), ms(5), ok(1));
    h.final_log("k", 1, [(1, "c")]);
    let report = quiet(&h);
    assert_eq!((report.unknown_absent, report.below_log_start), (1, 1));
}

// ---- rule 2 -----------------------------------------------------------------------------------

#[test]
fn rule_2_fires_on_a_value_at_two_offsets_of_the_final_log() {
    let mut h = History::new();
    let a = h.append("p1", "k", "a", ms(0), ms(1), unknown());
    h.append("p1", "k", "b", ms(2), ms(3), ok(1));
    h.final_log("k", 0, [(0, "a"), (1, "b"), (2, "a")]);
    let v = only(&h, Rule::ValueAtTwoOffsets);
    assert_eq!(
        (v[0].value.as_deref(), v[0].offsets.as_slice(), v[0].ops.as_slice()),
        (Some("a"), &[0, 2][..], &[a][..])
    );
}

#[test]
fn rule_2_fires_on_an_append_acknowledged_at_one_offset_sitting_at_another() {
    let mut h = History::new();
    h.append("p1", "k", "b", ms(0), ms(1), unknown());
    h.append("p2", "k", "a", ms(0), ms(2), ok(0));
    h.final_log("k", 0, [(0, "b"), (1, "a")]);
    let v = only(&h, Rule::ValueAtTwoOffsets);
    assert_eq!((v[0].value.as_deref(), v[0].offsets.as_slice()), (Some("a"), &[0, 1][..]));
    assert!(v[0].detail.contains("acknowledged at offset 0, but the final log holds it at 1"), "{}", v[0]);
}

#[test]
fn rule_2_is_quiet_on_an_acknowledgement_without_an_offset() {
    let mut h = History::new();
    h.append("p1", "k", "b", ms(0), ms(1), unknown());
    h.append("p2", "k", "a", ms(0), ms(2), OpOutcome::Ok(None));
    h.final_log("k", 0, [(0, "b"), (1, "a")]);
    quiet(&h);
}

// ---- rule 3 -----------------------------------------------------------------------------------

#[test]
fn rule_3_fires_on_a_read_that_disagrees_with_the_final_log() {
    let mut h = History::new();
    h.append("p1", "k", "a", ms(0), ms(1), ok(0));
    h.append("p1", "k", "b", ms(2), ms(3), ok(1));
    let read = h.read("r", "k", ms(4), ms(5), saw(&[(0, "b"), (1, "b"), (7, "a")]));
    h.final_log("k", 0, [(0, "a"), (1, "b")]);
    let v = only(&h, Rule::ReadDisagrees);
    assert_eq!(v.len(), 1, "one violation per read");
    assert_eq!(
        (v[0].value.as_deref(), v[0].offsets.as_slice(), v[0].ops.as_slice()),
        (Some("b"), &[0, 7][..], &[read][..])
    );
    assert!(v[0].detail.contains("at 0 it saw b, the final log holds a there"), "{}", v[0]);
    assert!(v[0].detail.contains("at 7 it saw a, the final log holds nothing there"), "{}", v[0]);
}

#[test]
fn rule_3_is_quiet_on_reads_that_miss_records() {
    let mut h = History::new();
    h.append("p1", "k", "a", ms(0), ms(1), ok(0));
    h.append("p1", "k", "b", ms(2), ms(3), ok(1));
    h.append("p1", "k", "c", ms(4), ms(5), ok(2));
    h.read("r", "k", ms(6), ms(7), saw(&[(0, "a"), (2, "c")]));
    h.read("r", "k", ms(6), ms(7), saw(&[]));
    h.final_log("k", 0, [(0, "a"), (1, "b"), (2, "c")]);
    quiet(&h);
}

// ---- rule 4 -----------------------------------------------------------------------------------

#[test]
fn rule_4_fires_on_an_append_acknowledged_before_another_was_sent_sitting_later() {
    let mut h = History::new();
    let a = h.append("p1", "k", "a", ms(0), ms(5), ok(1));
    let b = h.append("p2", "k", "b", ms(6), ms(9), ok(0));
    h.final_log("k", 0, [(0, "b"), (1, "a")]);
    let v = only(&h, Rule::RealTimeOrder);
    assert_eq!(
        (v[0].value.as_deref(), v[0].offsets.as_slice(), v[0].ops.as_slice()),
        (Some("b"), &[1, 0][..], &[a, b][..])
    );
    assert!(v[0].detail.contains("was acknowledged at 5ms, before op#2"), "{}", v[0]);
}

#[test]
fn rule_4_fires_on_an_unknown_append_sent_after_an_acknowledged_one_and_found_before_it() {
    let mut h = History::new();
    h.append("p1", "k", "a", ms(0), ms(5), ok(1));
    h.append("p2", "k", "b", ms(6), ms(9), unknown());
    h.final_log("k", 0, [(0, "b"), (1, "a")]);
    let v = only(&h, Rule::RealTimeOrder);
    assert_eq!(v[0].offsets, vec![1, 0]);
}

#[test]
fn rule_4_is_quiet_on_concurrent_appends_in_either_order() {
    let mut h = History::new();
    h.append("p1", "k", "a", ms(0), ms(6), ok(1));
    h.append("p2", "k", "b", ms(6), ms(9), ok(0)); // sent at the instant a was acknowledged
    h.append("p3", "k", "c", ms(1), ms(20), unknown());
    h.append("p3", "k", "d", ms(21), ms(22), ok(3));
    h.final_log("k", 0, [(0, "b"), (1, "a"), (2, "c"), (3, "d")]);
    quiet(&h);
}

// ---- rule 5 -----------------------------------------------------------------------------------

#[test]
fn rule_5_fires_on_a_value_nobody_appended_and_on_one_appended_to_another_key() {
    let mut h = History::new();
    h.append("p1", "j", "y", ms(0), ms(1), ok(0));
    h.append("p1", "k", "a", ms(0), ms(1), ok(0));
    h.read("r", "k", ms(2), ms(3), saw(&[(1, "z")]));
    h.deliver("s", "k", 1, "z", ms(4));
    h.final_log("j", 0, [(0, "y")]);
    h.final_log("k", 0, [(0, "a"), (1, "z"), (2, "y")]);
    let v = only(&h, Rule::PhantomValue);
    assert_eq!(v.len(), 2, "one violation per value: {v:#?}");
    assert_eq!((v[0].value.as_deref(), v[0].offsets.as_slice()), (Some("z"), &[1][..]));
    assert!(v[0].detail.contains("nobody appended it"), "{}", v[0]);
    assert!(v[0].detail.contains("the final log") && v[0].detail.contains("subscriber s"), "{}", v[0]);
    assert_eq!((v[1].value.as_deref(), v[1].offsets.as_slice()), (Some("y"), &[2][..]));
    assert!(v[1].detail.contains("it was appended to key j"), "{}", v[1]);
}

#[test]
fn rule_5_is_quiet_on_values_seen_on_the_key_they_were_appended_to() {
    let mut h = History::new();
    h.append("p1", "j", "y", ms(0), ms(1), ok(0));
    h.append("p1", "k", "z", ms(0), ms(1), unknown());
    h.read("r", "k", ms(2), ms(3), saw(&[(0, "z")]));
    h.read("r", "j", ms(2), ms(3), saw(&[(0, "y")]));
    h.final_log("j", 0, [(0, "y")]);
    h.final_log("k", 0, [(0, "z")]);
    quiet(&h);
}

// ---- rule 6 -----------------------------------------------------------------------------------

#[test]
fn rule_6_fires_on_a_definitely_failed_append_that_appears() {
    let mut h = History::new();
    h.append("p1", "k", "a", ms(0), ms(1), ok(0));
    let c = h.append("p1", "k", "c", ms(2), ms(3), failed());
    let read = h.read("r", "k", ms(4), ms(5), saw(&[(1, "c")]));
    h.final_log("k", 0, [(0, "a"), (1, "c")]);
    let v = only(&h, Rule::FailedAppeared);
    assert_eq!(v.len(), 1, "one violation per value");
    assert_eq!(
        (v[0].value.as_deref(), v[0].offsets.as_slice(), v[0].ops.as_slice()),
        (Some("c"), &[1][..], &[c, read][..])
    );
    assert!(v[0].detail.contains("definitely failed (NOT_ENOUGH_REPLICAS)"), "{}", v[0]);
}

#[test]
fn rule_6_is_quiet_when_the_same_append_was_unknown() {
    let mut h = History::new();
    h.append("p1", "k", "a", ms(0), ms(1), ok(0));
    h.append("p1", "k", "c", ms(2), ms(3), unknown());
    h.read("r", "k", ms(4), ms(5), saw(&[(1, "c")]));
    h.final_log("k", 0, [(0, "a"), (1, "c")]);
    assert_eq!(quiet(&h).unknown_in_log, 1);
}

// ---- rule 7 -----------------------------------------------------------------------------------

fn subscribed_log() -> History {
    let mut h = History::new();
    for (i, v) in ["a", "b", "c", "d"].iter().enumerate() {
        h.append("p1", "k", v, ms(i as u64 * 2), ms(i as u64 * 2 + 1), ok(i as u64));
    }
    h.final_log("k", 0, [(0, "a"), (1, "b"), (2, "c"), (3, "d")]);
    h.subscribe("s", "k", Some(0), ms(0));
    h.deliver("s", "k", 0, "a", ms(1));
    h.deliver("s", "k", 1, "b", ms(3));
    h
}

#[test]
fn rule_7_fires_on_a_subscriber_going_back_after_a_reconnect() {
    let mut h = subscribed_log();
    h.subscribe("s", "k", Some(0), ms(4));
    h.deliver("s", "k", 0, "a", ms(5));
    h.deliver("s", "k", 1, "b", ms(5));
    h.deliver("s", "k", 2, "c", ms(6));
    let v = only(&h, Rule::SubscriberOrder);
    assert_eq!(v.len(), 1, "one violation per episode of going back: {v:#?}");
    assert_eq!((v[0].value.as_deref(), v[0].offsets.as_slice()), (Some("a"), &[1, 0][..]));
    assert!(v[0].detail.contains("(it reconnected in between)"), "{}", v[0]);
}

#[test]
fn rule_7_fires_on_a_delivered_record_not_in_the_final_log_at_its_offset() {
    let mut h = subscribed_log();
    h.deliver("s", "k", 2, "d", ms(6));
    h.deliver("s", "k", 9, "c", ms(7));
    let v = only(&h, Rule::SubscriberDisagrees);
    assert_eq!((v[0].value.as_deref(), v[0].offsets.as_slice()), (Some("d"), &[2, 9][..]));
    assert!(v[0].detail.contains("at 2 it got d, the final log holds c there"), "{}", v[0]);
}

#[test]
fn rule_7_reports_skipped_records_as_gaps_with_their_offsets_not_as_violations() {
    let mut h = subscribed_log();
    h.subscribe("s", "k", Some(3), ms(6));
    h.deliver("s", "k", 3, "d", ms(7));
    // Subscribed from wherever the server put it, and got nothing yet: nothing was expected.
    h.subscribe("t", "k", None, ms(7));
    let report = quiet(&h);
    assert_eq!(
        report.gaps,
        vec![Gap {
            subscriber: "s".into(),
            key: "k".into(),
            first: 2,
            last: 2,
            records: 1,
            across_reconnect: true,
            tail: false
        }]
    );
}

// ---- preconditions ----------------------------------------------------------------------------

#[test]
fn a_value_appended_twice_or_a_key_without_a_final_read_is_a_precondition_violation() {
    let mut h = History::new();
    h.append("p1", "k", "a", ms(0), ms(1), ok(0));
    h.append("p1", "k", "a", ms(2), ms(3), unknown());
    h.final_log("k", 0, [(0, "a")]);
    let v = only(&h, Rule::UniqueValues);
    assert!(v[0].to_string().starts_with("precondition unique-values: key k value a: appended 2 times"), "{}", v[0]);

    let mut h = History::new();
    h.append("p1", "k", "a", ms(0), ms(1), ok(0));
    let v = only(&h, Rule::FinalRead);
    assert_eq!(v[0].key, "k");
}

#[test]
fn violations_are_bounded_per_rule_and_the_rest_counted() {
    let mut h = History::new();
    for i in 0..150u64 {
        h.append("p", "k", &format!("v{i}"), ms(i), ms(i), ok(i));
    }
    h.final_log::<&str>("k", 0, []);
    let report = list_append::analyze(&h);
    assert_eq!(report.violations.len(), Report::VIOLATIONS_PER_RULE_MAX);
    assert_eq!(report.suppressed, 50);
}

// ---- the checker inside a simulation ----------------------------------------------------------

/// A tiny log service for the simulation tests, with two plantable bugs.
#[derive(Default)]
struct Log {
    records: Vec<String>,
    /// Acknowledge every fifth append without storing it.
    lose_every_fifth: bool,
}

/// Appenders, readers and one subscriber on one key, recording through the run's recorder;
/// `redeliver` makes the subscriber start over after a "reconnect".
async fn log_scenario(ctx: Ctx, lose: bool, redeliver: bool) -> Result<(), Failure> {
    ctx.add_check(ListAppend::new());
    let log = Arc::new(Mutex::new(Log { lose_every_fifth: lose, ..Log::default() }));
    let recorder = Recorder::of(&ctx);
    let mut tasks = tokio::task::JoinSet::new();
    for p in 0..3 {
        let (log, recorder, ctx) = (log.clone(), recorder.clone(), ctx.clone());
        tasks.spawn(async move {
            let mut source = ctx.source(&format!("appender/{p}"));
            for n in 0..10 {
                let value = format!("p{p}-{n}");
                let pending = recorder.append(&format!("p{p}"), "k", &value);
                tokio::time::sleep(source.duration(ms(0)..=ms(20))).await;
                let offset = {
                    let mut log = log.lock().expect("log");
                    let offset = log.records.len() as u64;
                    if !(log.lose_every_fifth && n % 5 == 4) {
                        log.records.push(value);
                    }
                    offset
                };
                tokio::time::sleep(source.duration(ms(0)..=ms(20))).await;
                match source.below(10) {
                    0 => pending.unknown("timed out"),
                    _ => pending.ok(Some(offset)),
                }
            }
        });
    }
    {
        let (log, recorder, ctx) = (log.clone(), recorder.clone(), ctx.clone());
        tasks.spawn(async move {
            let mut source = ctx.source("reader");
            for _ in 0..10 {
                tokio::time::sleep(source.duration(ms(5)..=ms(30))).await;
                let pending = recorder.read("reader", "k");
                let records: Vec<Record> = {
                    let log = log.lock().expect("log");
                    let from = source.below(log.records.len() as u64 + 1);
                    (from..log.records.len() as u64).map(|o| Record::new(o, log.records[o as usize].clone())).collect()
                };
                pending.ok(records);
            }
        });
    }
    {
        let (log, recorder) = (log.clone(), recorder.clone());
        tasks.spawn(async move {
            let mut position = 0u64;
            recorder.subscribe("s", "k", Some(position));
            for round in 0..20 {
                tokio::time::sleep(ms(15)).await;
                let batch: Vec<(u64, String)> = {
                    let log = log.lock().expect("log");
                    (position..log.records.len() as u64).map(|o| (o, log.records[o as usize].clone())).collect()
                };
                for (o, v) in batch {
                    recorder.deliver("s", "k", o, &v);
                    position = o + 1;
                }
                if round == 10 {
                    if redeliver {
                        position = 0;
                    }
                    recorder.subscribe("s", "k", Some(position));
                }
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.map_err(|e| Failure::correctness("task", e.to_string()))?;
    }
    let records: Vec<Record> = {
        let log = log.lock().expect("log");
        log.records.iter().enumerate().map(|(o, v)| Record::new(o as u64, v.clone())).collect()
    };
    recorder.final_log("k", 0, records);
    // The events in the run's history say what the recorder holds.
    let from_events =
        History::from_entries(ctx.history().entries()).map_err(|v| Failure::correctness("events", v.to_string()))?;
    if from_events != recorder.history() {
        return Err(Failure::correctness("events", "the history rebuilt from events differs from the recorder's"));
    }
    Ok(())
}

#[test]
fn the_check_passes_a_correct_run_fed_by_history_events_and_it_replays() {
    let report =
        Simulation::new("list_append_correct").seeds(0..12).repeat(2).run(|ctx| log_scenario(ctx, false, false));
    report.assert_passed();
    assert!(report.outcomes.iter().all(|o| o.events > 60), "the operations are in the history");
}

#[test]
fn the_check_fails_a_run_whose_service_loses_acknowledged_appends_naming_rule_1() {
    let report = Simulation::new("list_append_lossy").seeds(0..4).confirm(0).run(|ctx| log_scenario(ctx, true, false));
    assert_eq!(report.failures().count(), report.outcomes.len(), "every seed loses appends: {report}");
    for outcome in &report.outcomes {
        let failure = outcome.failure.as_ref().expect("every seed loses appends");
        assert_eq!((failure.class, failure.oracle.as_deref()), (Class::Correctness, Some("list-append")), "{failure}");
        assert!(failure.message.contains("rule 1 acknowledged-lost: key k value p"), "{failure}");
    }
}

#[test]
fn the_check_stops_a_run_at_the_event_where_a_subscriber_goes_back_naming_rule_7() {
    let report =
        Simulation::new("list_append_redeliver").seeds(0..4).confirm(0).run(|ctx| log_scenario(ctx, false, true));
    assert_eq!(report.failures().count(), report.outcomes.len(), "every seed redelivers: {report}");
    for outcome in &report.outcomes {
        let failure = outcome.failure.as_ref().expect("every seed redelivers");
        assert_eq!((failure.class, failure.oracle.as_deref()), (Class::Correctness, Some("list-append")), "{failure}");
        assert!(failure.message.starts_with("rule 7 subscriber-order: key k value "), "{failure}");
        assert!(failure.message.contains("offsets ["), "{failure}");
        // Found at the delivery (round 11, at 180 ms), not when the body returned.
        assert!(failure.at().is_some_and(|at| at < ms(200)), "{failure:?}");
    }
}

#[test]
fn a_malformed_list_event_is_a_violation_of_the_event_precondition() {
    let report = Simulation::new("list_append_malformed").seeds(0..1).confirm(0).run(|ctx: Ctx| async move {
        ctx.add_check(ListAppend::new());
        ctx.record("list.ok", "op#7", "offset=3");
        Ok(())
    });
    let failure = report.first_failure().and_then(|o| o.failure.clone()).expect("caught");
    assert_eq!(failure.oracle.as_deref(), Some("list-append"));
    assert!(failure.message.starts_with("precondition event: "), "{failure}");
    assert!(failure.message.contains("no open operation has this identity"), "{failure}");
}

#[test]
fn a_wall_clock_recorder_records_what_a_simulation_one_does() {
    let recorder = Recorder::wall();
    let a = recorder.append("p", "k", "a");
    let r = recorder.read("r", "k");
    a.ok(Some(0));
    r.ok(vec![Record::new(0, "a")]);
    drop(recorder.append("p", "k", "b")); // dropped without an outcome: unknown
    recorder.subscribe("s", "k", None);
    recorder.deliver("s", "k", 0, "a");
    recorder.final_log("k", 0, vec![Record::new(0, "a")]);
    let h = recorder.history();
    assert_eq!(h.ops().len(), 3);
    assert!(
        matches!(&h.ops()[2].action, list_append::Action::Append { outcome: OpOutcome::Indeterminate(why), .. } if why == "dropped without an outcome")
    );
    let report = recorder.check().expect("correct");
    assert_eq!((report.appends.ok, report.unknown_absent, report.deliveries), (1, 1, 1));
}

// ---- below the log start ----------------------------------------------------------------------

#[test]
fn below_the_log_start_a_value_the_final_log_holds_at_another_offset_disagrees() {
    let mut h = History::new();
    h.append("p1", "k", "a", ms(0), ms(1), ok(5));
    h.append("p1", "k", "b", ms(2), ms(3), ok(6));
    let read = h.read("r", "k", ms(4), ms(5), saw(&[(2, "b")]));
    h.subscribe("s", "k", Some(0), ms(0));
    h.deliver("s", "k", 3, "a", ms(6));
    h.final_log("k", 5, [(5, "a"), (6, "b")]);
    let violations = list_append::check(&h).expect_err("b read at 2 and a delivered at 3 sit at 6 and 5");
    let rules: Vec<Rule> = violations.iter().map(|v| v.rule).collect();
    assert_eq!(rules, vec![Rule::ReadDisagrees, Rule::SubscriberDisagrees], "{violations:#?}");
    let (r, s) = (&violations[0], &violations[1]);
    assert_eq!((r.value.as_deref(), r.offsets.as_slice(), r.ops.as_slice()), (Some("b"), &[2][..], &[read][..]));
    assert!(r.detail.contains("at 2 it saw b, below the log start 5, but the final log holds b at 6"), "{r}");
    assert_eq!((s.value.as_deref(), s.offsets.as_slice()), (Some("a"), &[3][..]));
    assert!(s.detail.contains("at 3 it got a, below the log start 5, but the final log holds a at 5"), "{s}");
}

#[test]
fn below_the_log_start_observations_are_judged_against_each_other() {
    let below = |extra: &dyn Fn(&mut History)| {
        let mut h = History::new();
        h.append("p1", "k", "a", ms(0), ms(1), ok(0));
        h.append("p1", "k", "b", ms(2), ms(3), ok(1));
        h.append("p1", "k", "c", ms(4), ms(5), OpOutcome::Ok(None));
        h.append("p1", "k", "d", ms(6), ms(7), ok(9));
        h.read("r", "k", ms(8), ms(9), saw(&[(0, "a"), (1, "b")]));
        h.subscribe("s", "k", Some(0), ms(0));
        h.deliver("s", "k", 1, "b", ms(10));
        h.deliver("s", "k", 2, "c", ms(10));
        h.final_log("k", 9, [(9, "d")]);
        extra(&mut h);
        h
    };
    let report = quiet(&below(&|_| {}));
    assert_eq!(report.below_log_start, 6, "consistent observations below the log start are counted, not judged");

    // A value at two offsets: acknowledged at 0, read at 3.
    let h = below(&|h| {
        h.read("r2", "k", ms(11), ms(12), saw(&[(3, "a")]));
    });
    let v = only(&h, Rule::ValueAtTwoOffsets);
    assert_eq!((v[0].value.as_deref(), v[0].offsets.as_slice()), (Some("a"), &[0, 3][..]));
    assert!(v[0].detail.contains("below the log start 9"), "{}", v[0]);

    // Two values at one offset: b was acknowledged at 1, a read holds c there.
    let h = below(&|h| {
        h.read("r2", "k", ms(11), ms(12), saw(&[(2, "c"), (1, "c")]));
    });
    let violations = list_append::check(&h).expect_err("c at 1 and at 2");
    let rules: BTreeSet<Rule> = violations.iter().map(|v| v.rule).collect();
    assert_eq!(rules, BTreeSet::from([Rule::ReadDisagrees, Rule::ValueAtTwoOffsets]), "{violations:#?}");
    let r = violations.iter().find(|v| v.rule == Rule::ReadDisagrees).expect("rule 3");
    assert!(r.detail.contains("at 1 it saw c, below the log start 9, where op#2 by p1 was acknowledged with b"), "{r}");

    // A delivery that contradicts a read below the log start.
    let h = below(&|h| {
        h.subscribe("s2", "k", Some(0), ms(0));
        h.deliver("s2", "k", 0, "b", ms(11));
    });
    let violations = list_append::check(&h).expect_err("b at 0 and at 1");
    let rules: BTreeSet<Rule> = violations.iter().map(|v| v.rule).collect();
    assert_eq!(rules, BTreeSet::from([Rule::SubscriberDisagrees, Rule::ValueAtTwoOffsets]), "{violations:#?}");
}
