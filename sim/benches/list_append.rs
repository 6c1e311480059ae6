//! The list-append checker's cost (a bench binary: `cargo bench -p sim --bench list_append`).
//!
//! Builds a correct history of 100,000 operations over 16 keys — half appends (5 % unknown,
//! 2 % failed), half reads of up to 16 records each — with one subscriber per key delivered
//! every record across a reconnect, then measures:
//! - `check` over the history (what a test calls after a run);
//! - rebuilding the history from its history events (what the `ListAppend` check parses) and
//!   checking it.
//!
//! Prints the median and the slowest of a few repetitions. `--quick` does fewer.

use std::time::{Duration, Instant};

use sim::OpOutcome;
use sim::check::list_append::{self, History, Record};

const OPS: u64 = 100_000;
const KEYS: u64 = 16;

fn history() -> History {
    let mut h = History::new();
    let mut logs: Vec<Vec<String>> = vec![Vec::new(); KEYS as usize];
    let key = |k: u64| format!("topic-{k}");
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for i in 0..OPS {
        let k = next() % KEYS;
        let start = Duration::from_micros(i * 10);
        let end = start + Duration::from_micros(5 + next() % 40);
        if i % 2 == 0 {
            let value = format!("v{i}");
            let outcome = match next() % 100 {
                0..=1 => OpOutcome::Failed("NOT_ENOUGH_REPLICAS".into()),
                2..=6 => {
                    // Unknown: half of them took effect.
                    if next() % 2 == 0 {
                        logs[k as usize].push(value.clone());
                    }
                    OpOutcome::Indeterminate("connection reset".into())
                }
                _ => {
                    logs[k as usize].push(value.clone());
                    OpOutcome::Ok(Some(logs[k as usize].len() as u64 - 1))
                }
            };
            h.append(&format!("p{}", i % 8), &key(k), &value, start, end, outcome);
        } else {
            let log = &logs[k as usize];
            let from = if log.is_empty() { 0 } else { next() % log.len() as u64 };
            let records: Vec<Record> = (from..log.len() as u64)
                .take(16)
                .filter(|o| o % 7 != 3) // reads miss records
                .map(|o| Record::new(o, log[o as usize].clone()))
                .collect();
            h.read(&format!("c{}", i % 8), &key(k), start, end, OpOutcome::Ok(records));
        }
    }
    let end = Duration::from_micros(OPS * 10);
    for (k, log) in logs.iter().enumerate() {
        let k = k as u64;
        h.subscribe("s", &key(k), Some(0), Duration::ZERO);
        for (o, v) in log.iter().enumerate() {
            if o == log.len() / 2 {
                h.subscribe("s", &key(k), Some(o as u64), end);
            }
            h.deliver("s", &key(k), o as u64, v, end);
        }
        h.final_log(&key(k), 0, log.iter().enumerate().map(|(o, v)| (o as u64, v.clone())));
    }
    h
}

/// The history as the history events a `Recorder` in a simulation records.
fn entries(h: &History) -> Vec<sim::history::Entry> {
    use list_append::{Action, SubscriberAction, escape};
    let mut log = sim::history::History::new();
    let records =
        |rs: &[Record]| rs.iter().map(|r| format!("{}:{}", r.offset, escape(&r.value))).collect::<Vec<_>>().join(",");
    // Invocations and completions in time order, as a run records them.
    let mut events: Vec<(Duration, String, String, String)> = Vec::new();
    for op in h.ops() {
        let id = op.id.to_string();
        let (invoke, done) = match &op.action {
            Action::Append { value, outcome } => (
                format!("f=append process={} key={} value={}", op.process, op.key, value),
                match outcome {
                    OpOutcome::Ok(o) => {
                        ("list.ok", format!("offset={}", o.map_or("unknown".into(), |o| o.to_string())))
                    }
                    OpOutcome::Failed(_) => ("list.fail", "reason=x".into()),
                    OpOutcome::Indeterminate(_) => ("list.info", "reason=x".into()),
                },
            ),
            Action::Read { outcome } => (
                format!("f=read process={} key={}", op.process, op.key),
                match outcome {
                    OpOutcome::Ok(rs) => ("list.ok", format!("records={}", records(rs))),
                    _ => ("list.info", "reason=x".into()),
                },
            ),
        };
        events.push((op.start, "list.invoke".into(), id.clone(), invoke));
        events.push((op.end, done.0.into(), id, done.1));
    }
    events.sort_by_key(|e| e.0);
    for (at, kind, identity, detail) in events {
        log.record(at, &kind, &identity, &detail);
    }
    for e in h.subscriptions() {
        let detail = match &e.action {
            SubscriberAction::Subscribe { from } => format!("key={} from={}", e.key, from.unwrap_or(0)),
            SubscriberAction::Deliver(r) => format!("key={} offset={} value={}", e.key, r.offset, r.value),
        };
        let kind =
            if matches!(e.action, SubscriberAction::Subscribe { .. }) { "list.subscribe" } else { "list.deliver" };
        log.record(e.at, kind, &e.subscriber, &detail);
    }
    for (key, f) in h.finals() {
        log.record(
            Duration::from_micros(OPS * 10),
            "list.final",
            key,
            &format!("log_start={} records={}", f.log_start, records(&f.records)),
        );
    }
    log.entries().collect()
}

fn measure(label: &str, reps: usize, mut f: impl FnMut()) {
    let mut times: Vec<Duration> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    times.sort();
    println!("{label:<58} median {:>9.1?}  max {:>9.1?}  (n={reps})", times[reps / 2], times[reps - 1]);
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let reps = if quick { 3 } else { 11 };
    let h = history();
    let report = list_append::check(&h).unwrap_or_else(|v| panic!("the generated history is correct: {v:#?}"));
    println!(
        "history: {} ops, {} subscriber events, {} keys; {}",
        h.ops().len(),
        h.subscriptions().len(),
        h.finals().len(),
        report.summary()
    );
    measure("check(&History), 100k ops", reps, || {
        std::hint::black_box(list_append::check(std::hint::black_box(&h)).is_ok());
    });
    let entries = entries(&h);
    println!("history events: {}", entries.len());
    measure("History::from_entries + check (the ListAppend check's path)", reps, || {
        let rebuilt = History::from_entries(std::hint::black_box(&entries)).expect("the events parse");
        std::hint::black_box(list_append::check(&rebuilt).is_ok());
    });
}
