//! The batch analysis: [`check`] and [`analyze`] judge a whole [`History`] by the rules.

use std::collections::{BTreeMap, BTreeSet};

use super::lookup::Lookup;
use super::model::{Action, FinalLog, History, Offset, Op, OpId, Record, SubscriberAction, SubscriberEvent};
use super::report::{Gap, Report, Rule, Violation};
use crate::outcome::OpOutcome;

/// Checks a history (see the module docs): its [`Report`] when no rule is broken, else the
/// violations (at most [`Report::VIOLATIONS_PER_RULE_MAX`] per rule).
///
/// # Errors
/// The violations, by rule then key.
pub fn check(history: &History) -> Result<Report, Vec<Violation>> {
    let report = analyze(history);
    if report.is_valid() { Ok(report) } else { Err(report.violations) }
}

/// Checks a history and returns the whole [`Report`], violations included.
pub fn analyze(history: &History) -> Report {
    Analysis::new(history).run()
}

/// What the rules shared by the batch analysis and the per-event check say about a value seen
/// on `key` whose append (if any) went to `writer_key`: `None` when it is no phantom.
pub(super) fn phantom(key: &str, writer_key: Option<&str>) -> Option<String> {
    match writer_key {
        None => Some("nobody appended it".to_string()),
        Some(w) if w != key => Some(format!("it was appended to key {w}")),
        Some(_) => None,
    }
}

/// A subscriber's position on one key, for rule 7's order: the highest offset delivered, and
/// whether the subscriber is going over offsets it already had (reported once per episode).
#[derive(Clone, Debug, Default)]
pub(super) struct Cursor {
    max: Option<Offset>,
    behind: bool,
}

impl Cursor {
    /// Takes a delivery at `offset`: the highest offset already delivered when `offset` is not
    /// above it and this starts an episode of going back.
    pub(super) fn deliver(&mut self, offset: Offset) -> Option<Offset> {
        match self.max {
            Some(max) if offset <= max => {
                let first = !self.behind;
                self.behind = true;
                first.then_some(max)
            }
            _ => {
                self.max = Some(offset);
                self.behind = false;
                None
            }
        }
    }
}

/// Violations, at most [`Report::VIOLATIONS_PER_RULE_MAX`] per rule.
#[derive(Default)]
struct Sink {
    list: Vec<Violation>,
    per_rule: BTreeMap<Rule, usize>,
    suppressed: u64,
}

impl Sink {
    fn push(&mut self, v: Violation) {
        let n = self.per_rule.entry(v.rule).or_default();
        if *n < Report::VIOLATIONS_PER_RULE_MAX {
            *n += 1;
            self.list.push(v);
        } else {
            self.suppressed += 1;
        }
    }
}

/// A key's final log, indexed.
struct FinalView<'h> {
    log_start: Offset,
    /// Offset → value.
    at: Lookup<Offset, &'h str>,
    /// Value → its first offset.
    first: Lookup<&'h str, Offset>,
    /// The records, by offset.
    sorted: Vec<&'h Record>,
}

impl<'h> FinalView<'h> {
    fn offset_of(&self, value: &str) -> Option<Offset> {
        self.first.get(value).copied()
    }

    fn describe(&self, offset: Offset) -> String {
        match self.at.get(&offset) {
            Some(v) => format!("the final log holds {v} there"),
            None => "the final log holds nothing there".to_string(),
        }
    }
}

/// Where a value was seen, for rules 5 and 6.
#[derive(Default)]
struct Sightings {
    offsets: BTreeSet<Offset>,
    by: Vec<String>,
    ops: Vec<OpId>,
}

impl Sightings {
    const BY_MAX: usize = 5;

    fn add(&mut self, offset: Offset, by: impl FnOnce() -> String, op: Option<OpId>) {
        self.offsets.insert(offset);
        if self.by.len() < Self::BY_MAX {
            self.by.push(by());
        }
        if let Some(op) = op
            && !self.ops.contains(&op)
            && self.ops.len() < Self::BY_MAX
        {
            self.ops.push(op);
        }
    }
}

/// Who saw a value below a key's final log start.
#[derive(Clone, Copy)]
enum Witness<'h> {
    /// An append acknowledged at that offset.
    Ack(&'h Op),
    /// A read that held it there.
    Read(&'h Op),
    /// A subscriber it was delivered to there.
    Deliver(&'h str),
}

impl Witness<'_> {
    fn describe(self, value: &str) -> String {
        match self {
            Witness::Ack(op) => format!("{} by {} was acknowledged with {value}", op.id, op.process),
            Witness::Read(op) => format!("{} by {} saw {value}", op.id, op.process),
            Witness::Deliver(subscriber) => format!("subscriber {subscriber} got {value}"),
        }
    }

    fn op(self) -> Option<OpId> {
        match self {
            Witness::Ack(op) | Witness::Read(op) => Some(op.id),
            Witness::Deliver(_) => None,
        }
    }
}

/// Observations of values the final log does not hold — below its log start (dropped by
/// retention) or acknowledged at an offset — judged against each other: the final log cannot
/// judge them, but one value at two offsets, or two values at one offset, are wrong anywhere.
#[derive(Default)]
struct Unjudged<'h> {
    /// Offset → the first value seen there, and by whom.
    at: Lookup<Offset, (&'h str, Witness<'h>)>,
    /// Value → the first offset it was seen at, and by whom.
    of: Lookup<&'h str, (Offset, Witness<'h>)>,
}

impl<'h> Unjudged<'h> {
    /// Takes `value` seen at `offset` by `witness`; returns the other offset the value was seen
    /// at, and the other value seen at this offset, with their witnesses.
    fn observe(&mut self, offset: Offset, value: &'h str, witness: Witness<'h>) -> Conflicts<'h> {
        let elsewhere = *self.of.entry(value).or_insert((offset, witness));
        let other = *self.at.entry(offset).or_insert((value, witness));
        Conflicts {
            elsewhere: (elsewhere.0 != offset).then_some(elsewhere),
            other: (other.0 != value).then_some(other),
        }
    }
}

/// What an unjudged observation contradicts: the value seen at another offset, another value
/// seen at this offset (each with its witness).
struct Conflicts<'h> {
    elsewhere: Option<(Offset, Witness<'h>)>,
    other: Option<(&'h str, Witness<'h>)>,
}

struct Analysis<'h> {
    history: &'h History,
    report: Report,
    sink: Sink,
    /// Value → the (first) append of it.
    writers: Lookup<&'h str, &'h Op>,
    /// (key, value) → where a phantom value was seen.
    phantoms: BTreeMap<(&'h str, &'h str), Sightings>,
    /// value → where a failed append's value was seen.
    failed_seen: BTreeMap<&'h str, Sightings>,
    /// The current key's observations the final log cannot judge.
    unjudged: Unjudged<'h>,
}

/// An outcome in a violation's words.
fn word<T>(outcome: &OpOutcome<T>) -> &'static str {
    match outcome {
        OpOutcome::Ok(_) => "acknowledged",
        OpOutcome::Failed(_) => "failed",
        OpOutcome::Indeterminate(_) => "unknown",
    }
}

fn append_parts(op: &Op) -> Option<(&str, &OpOutcome<Option<Offset>>)> {
    match &op.action {
        Action::Append { value, outcome } => Some((value.as_str(), outcome)),
        Action::Read { .. } => None,
    }
}

impl<'h> Analysis<'h> {
    fn new(history: &'h History) -> Analysis<'h> {
        Analysis {
            history,
            report: Report::default(),
            sink: Sink::default(),
            writers: Lookup::default(),
            phantoms: BTreeMap::new(),
            failed_seen: BTreeMap::new(),
            unjudged: Unjudged::default(),
        }
    }

    fn run(mut self) -> Report {
        self.index_writers();
        self.judge_keys();
        self.report_sightings();
        let mut violations = self.sink.list;
        violations.sort_by(|a, b| (a.rule, &a.key, &a.offsets).cmp(&(b.rule, &b.key, &b.offsets)));
        self.report.violations = violations;
        self.report.suppressed = self.sink.suppressed;
        self.report
    }

    /// Indexes the appends by value, and the precondition that each value is appended once.
    fn index_writers(&mut self) {
        let h = self.history;
        let mut twice: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
        for op in h.ops() {
            if let Some((value, _)) = append_parts(op) {
                match self.writers.get(value) {
                    None => {
                        self.writers.insert(value, op);
                    }
                    Some(first) => twice.entry(value).or_insert_with(|| vec![first]).push(op),
                }
            }
        }
        for (value, ops) in twice {
            let list: Vec<String> = ops.iter().map(|o| format!("{} by {} on {}", o.id, o.process, o.key)).collect();
            self.sink.push(Violation {
                rule: Rule::UniqueValues,
                key: ops[0].key.clone(),
                value: Some(value.to_string()),
                offsets: Vec::new(),
                ops: ops.iter().map(|o| o.id).collect(),
                detail: format!(
                    "appended {} times ({}): the checker needs each value appended once; record a client's retry as \
                     one operation",
                    ops.len(),
                    list.join(", ")
                ),
            });
        }
    }

    /// Judges each key: its final read, its appends and reads, rule 4, and its subscribers.
    fn judge_keys(&mut self) {
        let h = self.history;
        // Group by key, and subscriber events by (subscriber, key) in time order.
        let mut by_key: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
        for op in h.ops() {
            by_key.entry(op.key.as_str()).or_default().push(op);
        }
        let mut subs: BTreeMap<(&str, &str), Vec<&SubscriberEvent>> = BTreeMap::new();
        for e in h.subscriptions() {
            subs.entry((e.key.as_str(), e.subscriber.as_str())).or_default().push(e);
        }
        for events in subs.values_mut() {
            events.sort_by_key(|e| e.at);
        }
        let mut keys: BTreeSet<&str> = by_key.keys().copied().collect();
        keys.extend(subs.keys().map(|(k, _)| *k));
        keys.extend(h.finals().keys().map(String::as_str));
        self.report.keys = keys.len();

        for key in keys {
            let finals = h.finals().get(key).map(|log| self.final_view(key, log));
            if finals.is_none() {
                self.sink.push(Violation {
                    rule: Rule::FinalRead,
                    key: key.to_string(),
                    value: None,
                    offsets: Vec::new(),
                    ops: Vec::new(),
                    detail: "no final read of this key: rules 1-4 and 7 cannot judge it".to_string(),
                });
            }
            let ops = by_key.get(key).map(Vec::as_slice).unwrap_or_default();
            self.unjudged = Unjudged::default();
            self.appends(key, ops, finals.as_ref());
            self.reads(key, ops, finals.as_ref());
            if let Some(f) = &finals {
                self.real_time(key, ops, f);
            }
            for (&(_, subscriber), events) in subs.range((key, "")..).take_while(|((k, _), _)| *k == key) {
                self.subscriber(key, subscriber, events, finals.as_ref());
            }
        }
    }

    /// Rules 5 and 6, from where phantom and failed values were seen.
    fn report_sightings(&mut self) {
        for ((key, value), seen) in std::mem::take(&mut self.phantoms) {
            let why = phantom(key, self.writers.get(value).map(|op| op.key.as_str())).unwrap_or_default();
            self.sink.push(Violation {
                rule: Rule::PhantomValue,
                key: key.to_string(),
                value: Some(value.to_string()),
                offsets: seen.offsets.into_iter().collect(),
                ops: seen.ops,
                detail: format!("seen by {}, but {why}", seen.by.join(", ")),
            });
        }
        for (value, seen) in std::mem::take(&mut self.failed_seen) {
            let writer = self.writers.get(value).copied().expect("a failed append's value is indexed");
            self.sink.push(Violation {
                rule: Rule::FailedAppeared,
                key: writer.key.clone(),
                value: Some(value.to_string()),
                offsets: seen.offsets.into_iter().collect(),
                ops: std::iter::once(writer.id).chain(seen.ops).collect(),
                detail: format!(
                    "{} by {} definitely failed ({}), yet it was seen by {}",
                    writer.id,
                    writer.process,
                    match append_parts(writer) {
                        Some((_, OpOutcome::Failed(why))) => why.as_str(),
                        _ => "",
                    },
                    seen.by.join(", ")
                ),
            });
        }
    }

    /// A value seen on `key` at `offset`: rules 5 and 6.
    fn sighting(&mut self, key: &'h str, record: &'h Record, by: impl FnOnce() -> String, op: Option<OpId>) {
        let value = record.value.as_str();
        let writer = self.writers.get(value).copied();
        if phantom(key, writer.map(|w| w.key.as_str())).is_some() {
            self.phantoms.entry((key, value)).or_default().add(record.offset, by, op);
        } else if writer.and_then(append_parts).is_some_and(|(_, outcome)| outcome.is_failed()) {
            self.failed_seen.entry(value).or_default().add(record.offset, by, op);
        }
    }

    fn final_view(&mut self, key: &'h str, log: &'h FinalLog) -> FinalView<'h> {
        let mut sorted: Vec<&Record> = log.records.iter().collect();
        sorted.sort_by_key(|r| r.offset);
        let mut view =
            FinalView { log_start: log.log_start, at: Lookup::default(), first: Lookup::default(), sorted: Vec::new() };
        let mut dups: BTreeMap<&str, Vec<Offset>> = BTreeMap::new();
        for r in sorted {
            if r.offset < log.log_start {
                self.sink.push(Violation {
                    rule: Rule::FinalRead,
                    key: key.to_string(),
                    value: Some(r.value.clone()),
                    offsets: vec![r.offset, log.log_start],
                    ops: Vec::new(),
                    detail: "the final read holds a record below its own log start".to_string(),
                });
                continue;
            }
            if let Some(other) = view.at.get(&r.offset) {
                if *other != r.value {
                    self.sink.push(Violation {
                        rule: Rule::FinalRead,
                        key: key.to_string(),
                        value: Some(r.value.clone()),
                        offsets: vec![r.offset],
                        ops: Vec::new(),
                        detail: format!("the final read holds two values at one offset: {other} and {}", r.value),
                    });
                }
                continue;
            }
            view.at.insert(r.offset, r.value.as_str());
            view.sorted.push(r);
            self.report.final_records += 1;
            match view.first.get(r.value.as_str()) {
                None => {
                    view.first.insert(r.value.as_str(), r.offset);
                }
                Some(&first) => dups.entry(r.value.as_str()).or_insert_with(|| vec![first]).push(r.offset),
            }
            self.sighting(key, r, || "the final log".to_string(), None);
        }
        for (value, offsets) in dups {
            let ops = self.writers.get(value).map(|w| vec![w.id]).unwrap_or_default();
            self.sink.push(Violation {
                rule: Rule::ValueAtTwoOffsets,
                key: key.to_string(),
                value: Some(value.to_string()),
                detail: format!("the final log holds it {} times", offsets.len()),
                offsets,
                ops,
            });
        }
        view
    }

    /// Rules 1 and 2 (acknowledged offsets), and the unknown counts.
    fn appends(&mut self, key: &str, ops: &[&'h Op], finals: Option<&FinalView<'h>>) {
        for &op in ops {
            let Some((value, outcome)) = append_parts(op) else { continue };
            self.report.appends.add(outcome);
            let Some(f) = finals else { continue };
            let found = f.offset_of(value);
            if let (OpOutcome::Ok(Some(acked)), None) = (outcome, found) {
                // Unjudged by the final log; reads and deliveries below its start are judged
                // against it (values are unique, so acknowledgements never conflict).
                self.unjudged.observe(*acked, value, Witness::Ack(op));
            }
            match (outcome, found) {
                (OpOutcome::Ok(Some(acked)), Some(at)) if *acked != at => self.sink.push(Violation {
                    rule: Rule::ValueAtTwoOffsets,
                    key: key.to_string(),
                    value: Some(value.to_string()),
                    offsets: vec![*acked, at],
                    ops: vec![op.id],
                    detail: format!(
                        "{} by {} was acknowledged at offset {acked}, but the final log holds it at {at} ({})",
                        op.id,
                        op.process,
                        f.describe(*acked)
                    ),
                }),
                (OpOutcome::Ok(_), Some(_)) => {}
                (OpOutcome::Ok(Some(acked)), None) if *acked < f.log_start => self.report.below_log_start += 1,
                (OpOutcome::Ok(None), None) if f.log_start > 0 => self.report.unverifiable += 1,
                (OpOutcome::Ok(acked), None) => self.sink.push(Violation {
                    rule: Rule::AcknowledgedLost,
                    key: key.to_string(),
                    value: Some(value.to_string()),
                    offsets: acked.iter().copied().collect(),
                    ops: vec![op.id],
                    detail: format!(
                        "{} by {} was acknowledged at {:?}{}, but the final log does not hold it{}",
                        op.id,
                        op.process,
                        op.end,
                        acked.map(|o| format!(" with offset {o}")).unwrap_or_default(),
                        acked.map(|o| format!(" ({})", f.describe(o))).unwrap_or_default()
                    ),
                }),
                (OpOutcome::Indeterminate(_), Some(_)) => self.report.unknown_in_log += 1,
                (OpOutcome::Indeterminate(_), None) => self.report.unknown_absent += 1,
                (OpOutcome::Failed(_), _) => {}
            }
        }
    }

    /// Rule 3, and rules 5 and 6 for what reads hold.
    fn reads(&mut self, key: &'h str, ops: &[&'h Op], finals: Option<&FinalView<'h>>) {
        for &op in ops {
            let Action::Read { outcome } = &op.action else { continue };
            self.report.reads.add(outcome);
            let OpOutcome::Ok(records) = outcome else { continue };
            self.report.records_read += records.len() as u64;
            let mut wrong: Vec<(Offset, &str, String)> = Vec::new();
            for r in records {
                self.sighting(key, r, || format!("{} (read by {})", op.id, op.process), Some(op.id));
                let Some(f) = finals else { continue };
                if r.offset < f.log_start {
                    match self.below_log_start(key, r, Witness::Read(op), f) {
                        Some(why) => wrong.push((r.offset, r.value.as_str(), why)),
                        None => self.report.below_log_start += 1,
                    }
                } else if f.at.get(&r.offset).copied() != Some(r.value.as_str()) {
                    wrong.push((r.offset, r.value.as_str(), f.describe(r.offset)));
                }
            }
            if let Some((_, first, _)) = wrong.first() {
                let shown: Vec<String> =
                    wrong.iter().take(5).map(|(o, v, f)| format!("at {o} it saw {v}, {f}")).collect();
                self.sink.push(Violation {
                    rule: Rule::ReadDisagrees,
                    key: key.to_string(),
                    value: Some(first.to_string()),
                    offsets: wrong.iter().map(|(o, _, _)| *o).collect(),
                    ops: vec![op.id],
                    detail: format!(
                        "{} by {} disagrees with the final log at {} offset(s): {}{}",
                        op.id,
                        op.process,
                        wrong.len(),
                        shown.join("; "),
                        if wrong.len() > 5 { "; …" } else { "" }
                    ),
                });
            }
        }
    }

    /// A record read or delivered below the final log's start, which cannot say what was there:
    /// judged against where the final log holds its value (rules 3 and 7: the returned words)
    /// and against the other observations the final log cannot judge (rule 2 for a value at two
    /// offsets, pushed here; rules 3 and 7 for two values at one offset, returned). `None`: it
    /// contradicts nothing (counted as below the log start).
    fn below_log_start(&mut self, key: &str, r: &'h Record, witness: Witness<'h>, f: &FinalView<'h>) -> Option<String> {
        let value = r.value.as_str();
        if let Some(at) = f.offset_of(value) {
            return Some(format!("below the log start {}, but the final log holds {value} at {at}", f.log_start));
        }
        let conflicts = self.unjudged.observe(r.offset, value, witness);
        if let Some((at, first)) = conflicts.elsewhere {
            let mut seen = [(at, first), (r.offset, witness)];
            seen.sort_by_key(|(offset, _)| *offset);
            let shown: Vec<String> = seen.iter().map(|(o, w)| format!("{} at {o}", w.describe(value))).collect();
            self.sink.push(Violation {
                rule: Rule::ValueAtTwoOffsets,
                key: key.to_string(),
                value: Some(value.to_string()),
                offsets: seen.iter().map(|(o, _)| *o).collect(),
                ops: seen.iter().filter_map(|(_, w)| w.op()).collect(),
                detail: format!(
                    "seen at two offsets, which the final log does not hold (below the log start {}): {}",
                    f.log_start,
                    shown.join(", ")
                ),
            });
        }
        conflicts
            .other
            .map(|(other, first)| format!("below the log start {}, where {}", f.log_start, first.describe(other)))
    }

    /// Rule 4: sweep appends by start time, holding the acknowledged append that ended before
    /// with the highest offset. An unknown append found in the final log takes part as the later
    /// one only (its end is unknown, so nothing is known to follow it).
    fn real_time(&mut self, key: &str, ops: &[&'h Op], f: &FinalView<'h>) {
        struct Placed<'o> {
            op: &'o Op,
            value: &'o str,
            offset: Offset,
        }
        let mut acked: Vec<Placed<'h>> = Vec::new();
        let mut later: Vec<Placed<'h>> = Vec::new();
        for &op in ops {
            let Some((value, outcome)) = append_parts(op) else { continue };
            let offset = match (outcome, f.offset_of(value)) {
                (OpOutcome::Failed(_), _) | (OpOutcome::Indeterminate(_), None) | (OpOutcome::Ok(None), None) => {
                    continue;
                }
                (_, Some(at)) => at,
                (OpOutcome::Ok(Some(acked)), None) => *acked,
            };
            if outcome.is_ok() {
                acked.push(Placed { op, value, offset });
            }
            later.push(Placed { op, value, offset });
        }
        acked.sort_by_key(|p| p.op.end);
        later.sort_by_key(|p| p.op.start);
        let mut next = 0;
        let mut highest: Option<&Placed<'h>> = None;
        for b in &later {
            while next < acked.len() && acked[next].op.end < b.op.start {
                if highest.is_none_or(|h| acked[next].offset > h.offset) {
                    highest = Some(&acked[next]);
                }
                next += 1;
            }
            if let Some(a) = highest
                && a.offset > b.offset
            {
                self.sink.push(Violation {
                    rule: Rule::RealTimeOrder,
                    key: key.to_string(),
                    value: Some(b.value.to_string()),
                    offsets: vec![a.offset, b.offset],
                    ops: vec![a.op.id, b.op.id],
                    detail: format!(
                        "{} ({} by {}) was acknowledged at {:?}, before {} ({} by {}, {}) was sent at {:?}, yet {} sits \
                         at offset {} and {} at offset {}",
                        a.op.id,
                        a.value,
                        a.op.process,
                        a.op.end,
                        b.op.id,
                        b.value,
                        b.op.process,
                        append_parts(b.op).map_or("", |(_, o)| word(o)),
                        b.op.start,
                        a.value,
                        a.offset,
                        b.value,
                        b.offset
                    ),
                });
            }
        }
    }

    /// Rule 7 for one subscriber on one key, rules 5 and 6 for what it got, and its gaps.
    fn subscriber(
        &mut self,
        key: &'h str,
        subscriber: &'h str,
        events: &[&'h SubscriberEvent],
        finals: Option<&FinalView<'h>>,
    ) {
        let got = self.deliveries(key, subscriber, events, finals);
        // Without a final read there is nothing to miss; without a start (subscribed from where
        // the server put it, and nothing delivered) nothing was expected.
        let (Some(f), Some(start)) = (finals, got.start) else { return };
        self.report.gaps.extend(gaps(key, subscriber, f, start, &got));
    }

    /// Rule 7's order and rules 5 and 6 for each delivery to one subscriber on one key, and what
    /// the final log says of them (rule 7's agreement); returns what it was delivered.
    fn deliveries(
        &mut self,
        key: &'h str,
        subscriber: &'h str,
        events: &[&'h SubscriberEvent],
        finals: Option<&FinalView<'h>>,
    ) -> Delivered {
        let mut cursor = Cursor::default();
        let mut subscribes: Vec<usize> = Vec::new();
        let mut start: Option<Offset> = None;
        let mut delivered: BTreeMap<Offset, usize> = BTreeMap::new();
        let mut wrong: Vec<(Offset, &str, String)> = Vec::new();
        for (i, e) in events.iter().enumerate() {
            match &e.action {
                SubscriberAction::Subscribe { from } => {
                    if subscribes.is_empty() {
                        start = *from;
                    }
                    subscribes.push(i);
                }
                SubscriberAction::Deliver(r) => {
                    self.report.deliveries += 1;
                    start.get_or_insert(r.offset);
                    delivered.entry(r.offset).or_insert(i);
                    self.sighting(key, r, || format!("subscriber {subscriber}"), None);
                    if let Some(max) = cursor.deliver(r.offset) {
                        let reconnected = subscribes
                            .last()
                            .is_some_and(|&s| delivered.get(&max).is_some_and(|&at| s > at) && subscribes.len() > 1);
                        self.sink.push(Violation {
                            rule: Rule::SubscriberOrder,
                            key: key.to_string(),
                            value: Some(r.value.clone()),
                            offsets: vec![max, r.offset],
                            ops: Vec::new(),
                            detail: format!(
                                "subscriber {subscriber} got offset {} at {:?} after it had got offset {max}{}",
                                r.offset,
                                e.at,
                                if reconnected { " (it reconnected in between)" } else { "" }
                            ),
                        });
                    }
                    if let Some(f) = finals {
                        if r.offset < f.log_start {
                            match self.below_log_start(key, r, Witness::Deliver(subscriber), f) {
                                Some(why) => wrong.push((r.offset, r.value.as_str(), why)),
                                None => self.report.below_log_start += 1,
                            }
                        } else if f.at.get(&r.offset).copied() != Some(r.value.as_str()) {
                            wrong.push((r.offset, r.value.as_str(), f.describe(r.offset)));
                        }
                    }
                }
            }
        }
        self.subscriber_disagrees(key, subscriber, &wrong);
        Delivered { subscribes, start, delivered }
    }

    /// Rule 7's agreement: the records delivered to `subscriber` that the final log does not hold
    /// at the same offset (offset, value, what the final log says), as one violation.
    fn subscriber_disagrees(&mut self, key: &str, subscriber: &str, wrong: &[(Offset, &str, String)]) {
        if let Some((_, first, _)) = wrong.first() {
            let shown: Vec<String> = wrong.iter().take(5).map(|(o, v, f)| format!("at {o} it got {v}, {f}")).collect();
            self.sink.push(Violation {
                rule: Rule::SubscriberDisagrees,
                key: key.to_string(),
                value: Some(first.to_string()),
                offsets: wrong.iter().map(|(o, _, _)| *o).collect(),
                ops: Vec::new(),
                detail: format!(
                    "subscriber {subscriber} got {} record(s) the final log does not hold at the same offset: {}{}",
                    wrong.len(),
                    shown.join("; "),
                    if wrong.len() > 5 { "; …" } else { "" }
                ),
            });
        }
    }
}

/// What one subscriber on one key was delivered: the events that (re)subscribed it (indices into
/// its events), the offset it started from, and each offset delivered with its first event.
struct Delivered {
    subscribes: Vec<usize>,
    start: Option<Offset>,
    delivered: BTreeMap<Offset, usize>,
}

/// The records of the final log at or above `start` that `subscriber` was never delivered, as
/// gaps: each marked when a reconnect lies inside it and when it is the log's tail.
fn gaps(key: &str, subscriber: &str, f: &FinalView<'_>, start: Offset, got: &Delivered) -> Vec<Gap> {
    let reconnects = got.subscribes.get(1..).unwrap_or_default();
    let reconnect_between = |after: Option<usize>, before: Option<usize>| {
        reconnects.iter().any(|&s| after.is_none_or(|a| s > a) && before.is_none_or(|b| s < b))
    };
    // An open gap: (first, last, records, the delivery before it); closed by the delivery
    // after it, or by the end of the log (its tail).
    let close = |(first, last, records, after): (Offset, Offset, u64, Option<usize>), before: Option<usize>| Gap {
        subscriber: subscriber.to_string(),
        key: key.to_string(),
        first,
        last,
        records,
        across_reconnect: reconnect_between(after, before),
        tail: before.is_none(),
    };
    let mut open: Option<(Offset, Offset, u64, Option<usize>)> = None;
    let mut last_delivered: Option<usize> = None;
    let mut gaps = Vec::new();
    for r in f.sorted.iter().filter(|r| r.offset >= start) {
        if let Some(&at) = got.delivered.get(&r.offset) {
            gaps.extend(open.take().map(|gap| close(gap, Some(at))));
            last_delivered = Some(at);
        } else {
            let gap = open.get_or_insert((r.offset, r.offset, 0, last_delivered));
            gap.1 = r.offset;
            gap.2 += 1;
        }
    }
    gaps.extend(open.map(|gap| close(gap, None)));
    gaps
}

#[cfg(test)]
mod tests {
    use super::Cursor;

    #[test]
    fn a_cursor_reports_one_violation_per_episode_of_going_back() {
        let mut c = Cursor::default();
        assert_eq!(c.deliver(1), None);
        assert_eq!(c.deliver(2), None);
        assert_eq!(c.deliver(1), Some(2));
        assert_eq!(c.deliver(2), None, "the same episode");
        assert_eq!(c.deliver(3), None);
        assert_eq!(c.deliver(3), Some(3), "a new episode");
    }
}
