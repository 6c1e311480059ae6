//! The [`ListAppend`] check: the checker fed by history events inside a simulation.
//!
//! An *excuse* ([`ListAppend::excuse`]) names a copy of a value at an offset of the final log
//! that a dependency is documented to write again (kafkasim's `history::epoch_bump`: an
//! idempotent producer's epoch bump, librdkafka#4953). A rule-2 violation whose every offset but
//! the lowest is excused for its value is reported as excused ([`Verdict::Excused`]), not as a
//! failure; nothing else is excused.

use std::collections::BTreeMap;

use super::analysis::{Cursor, analyze, phantom};
use super::codec::{Fed, Feed, escape, unescape};
use super::lookup::Lookup;
use super::model::{Action, Offset, Op, Record};
use super::report::{Rule, Violation};
use crate::check::{Check, Verdict};
use crate::history::Entry;
use crate::outcome::OpOutcome;
use crate::run::Ctx;

/// The list-append checker as a [`Check`] (oracle `list-append`), fed by history events.
///
/// Per event it judges what needs no final read — rule 5 (a value seen that no append sent so
/// far wrote, or one appended to another key) and rule 7's order — so a violation stops the run
/// where it happened; when the run's body returns it judges the whole history with [`analyze`]
/// and records the summary (`list-append.report`) and each gap (`list-append.gap`, at most
/// [`ListAppend::GAPS_RECORDED_MAX`]).
///
/// The events it reads (a [`Recorder`](super::Recorder) from [`Recorder::of`](super::Recorder::of) records them; any code may). The
/// detail is space-separated `name=value` fields whose values are [`escape`](super::escape)d; records are
/// `offset:value` joined by `,`; an unknown offset is `unknown`:
///
/// | kind | identity | detail |
/// |---|---|---|
/// | `list.invoke` | the operation (unique among open ones) | `f=append process=P key=K value=V` or `f=read process=P key=K` |
/// | `list.ok` | the operation | an append: `offset=N` (or `unknown`); a read: `records=3:a,4:b` |
/// | `list.fail` | the operation | `reason=R` (definitely failed) |
/// | `list.info` | the operation | `reason=R` (unknown outcome) |
/// | `list.subscribe` | the subscriber | `key=K from=N` (or `unknown`) |
/// | `list.deliver` | the subscriber | `key=K offset=N value=V` |
/// | `list.final` | the key | `log_start=N records=…` |
///
/// Times are the events' times: an operation starts at its `list.invoke` and ends at its
/// completion; one never completed is unknown. Record `list.invoke` before sending, so that
/// nothing can observe a value before its append is known. Every key needs a `list.final`
/// before the body returns ([`Rule::FinalRead`]). Another `list.*` kind, or one that does not
/// parse, is a [`Rule::Event`] violation.
///
/// One more kind, outside `list.*`, excuses a copy ([`ListAppend::excuse`] records it; see the
/// module docs): `list-append.excuse`, identity the key, detail `offset=N value=V reason=R`.
/// Each excused violation is recorded (`list-append.excused`) and the run ends excused when no
/// other violation is left.
#[derive(Default)]
pub struct ListAppend {
    feed: Feed,
    /// Value → the key it was appended to, for rule 5 per event.
    writers: Lookup<String, String>,
    cursors: BTreeMap<(String, String), Cursor>,
    /// (key, offset) → the value excused there and why.
    excuses: BTreeMap<(String, Offset), (String, String)>,
}

impl ListAppend {
    /// Gaps recorded in the history at the end of a run, at most.
    pub const GAPS_RECORDED_MAX: usize = 100;
    /// Kind of the event excusing a value's copy at an offset ([`ListAppend::excuse`]).
    pub const KIND_EXCUSE: &'static str = "list-append.excuse";
    /// Kind of the event recording a violation excused at the end of the run.
    pub const KIND_EXCUSED: &'static str = "list-append.excused";

    /// A checker with nothing seen yet.
    pub fn new() -> ListAppend {
        ListAppend::default()
    }

    /// Records into the run's history that the copy of `value` at `offset` of `key`'s final log
    /// was written again by a dependency for `reason` (a documented behaviour, not a bug of the
    /// system under test). Only rule 2 is excused, and only for this value at this offset.
    pub fn excuse(ctx: &Ctx, key: &str, offset: Offset, value: &str, reason: &str) {
        ctx.record(
            Self::KIND_EXCUSE,
            key,
            format!("offset={offset} value={} reason={}", escape(value), escape(reason)),
        );
    }

    /// Takes a `list-append.excuse` event.
    fn take_excuse(&mut self, event: &Entry) -> Verdict {
        let mut fields = BTreeMap::new();
        for t in event.detail.split(' ').filter(|t| !t.is_empty()) {
            if let Some((name, raw)) = t.split_once('=') {
                fields.insert(name, raw);
            }
        }
        let offset = fields.get("offset").and_then(|o| o.parse::<Offset>().ok());
        let value = fields.get("value").and_then(|v| unescape(v));
        let reason = fields.get("reason").and_then(|r| unescape(r));
        match (offset, value, reason) {
            (Some(offset), Some(value), Some(reason)) => {
                self.excuses.insert((event.identity.clone(), offset), (value, reason));
                Verdict::Pass
            }
            _ => Verdict::Violation(
                Violation {
                    rule: Rule::Event,
                    key: event.identity.clone(),
                    value: None,
                    offsets: Vec::new(),
                    ops: Vec::new(),
                    detail: format!("an excuse needs offset=N value=V reason=R: event {event}"),
                }
                .to_string(),
            ),
        }
    }

    /// Why `v` is excused: a rule-2 violation whose every offset but the lowest holds an excused
    /// copy of its value.
    fn excuse_of(&self, v: &Violation) -> Option<&str> {
        if v.rule != Rule::ValueAtTwoOffsets {
            return None;
        }
        let value = v.value.as_deref()?;
        let first = v.offsets.iter().min()?;
        let mut why = None;
        for offset in v.offsets.iter().filter(|o| *o != first) {
            let (excused, reason) = self.excuses.get(&(v.key.clone(), *offset))?;
            if excused != value {
                return None;
            }
            why.get_or_insert(reason.as_str());
        }
        why
    }

    fn seen(writers: &Lookup<String, String>, key: &str, records: &[Record], by: impl FnOnce() -> String) -> Verdict {
        for r in records {
            if let Some(why) = phantom(key, writers.get(&r.value).map(String::as_str)) {
                let v = Violation {
                    rule: Rule::PhantomValue,
                    key: key.to_string(),
                    value: Some(r.value.clone()),
                    offsets: vec![r.offset],
                    ops: Vec::new(),
                    detail: format!("seen by {}, but {why} (so far)", by()),
                };
                return Verdict::Violation(v.to_string());
            }
        }
        Verdict::Pass
    }
}

impl Check for ListAppend {
    fn name(&self) -> &str {
        "list-append"
    }

    fn wants(&self, kind: &str) -> bool {
        kind == Self::KIND_EXCUSE || kind.starts_with("list.")
    }

    fn on_event(&mut self, event: &Entry) -> Verdict {
        if event.kind == Self::KIND_EXCUSE {
            return self.take_excuse(event);
        }
        match self.feed.apply(event) {
            Err(v) => Verdict::Violation(v.to_string()),
            Ok(Fed::Nothing | Fed::Subscribed) => Verdict::Pass,
            Ok(Fed::Appending { key, value }) => {
                self.writers.entry(value).or_insert(key);
                Verdict::Pass
            }
            Ok(Fed::Read(id)) => match self.feed.done.get(&id) {
                Some(op @ Op { action: Action::Read { outcome: OpOutcome::Ok(records) }, .. }) => {
                    Self::seen(&self.writers, &op.key, records, || format!("{id} (read by {})", op.process))
                }
                _ => Verdict::Pass,
            },
            Ok(Fed::Final(key)) => match self.feed.history.finals().get(&key) {
                Some(log) => Self::seen(&self.writers, &key, &log.records, || "the final log".to_string()),
                None => Verdict::Pass,
            },
            Ok(Fed::Delivered { subscriber, key, record }) => {
                let by = || format!("subscriber {subscriber}");
                if let Verdict::Violation(v) = Self::seen(&self.writers, &key, std::slice::from_ref(&record), by) {
                    return Verdict::Violation(v);
                }
                let cursor = self.cursors.entry((subscriber.clone(), key.clone())).or_default();
                match cursor.deliver(record.offset) {
                    None => Verdict::Pass,
                    Some(max) => Verdict::Violation(
                        Violation {
                            rule: Rule::SubscriberOrder,
                            key,
                            value: Some(record.value),
                            offsets: vec![max, record.offset],
                            ops: Vec::new(),
                            detail: format!(
                                "subscriber {subscriber} got offset {} after it had got offset {max}",
                                record.offset
                            ),
                        }
                        .to_string(),
                    ),
                }
            }
        }
    }

    fn finish(&mut self, ctx: &Ctx) -> Verdict {
        // Called once, when the body returned: the events seen so far are the whole history.
        let mut report = analyze(&std::mem::take(&mut self.feed).history(ctx.elapsed()));
        let mut excused = Vec::new();
        let mut kept = Vec::new();
        for v in std::mem::take(&mut report.violations) {
            match self.excuse_of(&v) {
                Some(why) => excused.push(format!("{v} (excused: {why})")),
                None => kept.push(v),
            }
        }
        report.violations = kept;
        let summary = report.summary();
        let summary =
            if excused.is_empty() { summary } else { format!("{summary}; {} excused violation(s)", excused.len()) };
        ctx.record("list-append.report", "list-append", summary);
        for gap in report.gaps.iter().take(Self::GAPS_RECORDED_MAX) {
            ctx.record("list-append.gap", &gap.subscriber, gap.to_string());
        }
        for e in &excused {
            ctx.record(Self::KIND_EXCUSED, "list-append", e);
        }
        const SHOWN: usize = 10;
        if report.is_valid() {
            return match excused.first() {
                None => Verdict::Pass,
                Some(_) => Verdict::Excused(format!(
                    "{}{}",
                    excused.iter().take(SHOWN).cloned().collect::<Vec<_>>().join("; "),
                    if excused.len() > SHOWN {
                        format!(" (and {} more)", excused.len() - SHOWN)
                    } else {
                        String::new()
                    }
                )),
            };
        }
        let shown: Vec<String> = report.violations.iter().take(SHOWN).map(Violation::to_string).collect();
        let more = report.violations.len().saturating_sub(SHOWN) as u64 + report.suppressed;
        Verdict::Violation(format!(
            "{}{}",
            shown.join("; "),
            if more > 0 { format!(" (and {more} more)") } else { String::new() }
        ))
    }
}
