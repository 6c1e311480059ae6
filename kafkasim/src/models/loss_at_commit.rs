//! Q1, no loss at commit (at-least-once): every record below an offset a member commits was
//! processed, by some member of the group, before the commit.
//!
//! At each commit a member records whose answer is not a refusal (accepted, or unknown: it may
//! have been stored) of offset `O` for a partition, the records from the group's previous
//! accepted commit (or, before any, the first offset the group began, processed or failed in
//! that partition) up to `O - 1` must all have been processed already. A commit made before the
//! group saw any record of the partition is judged at the end, from the first record the group
//! ever saw there (or the log start), against what was processed before the commit. Under at-least-once the
//! position is saved after processing (Kafka's *Message Delivery Semantics*); a commit ahead of
//! processing loses the records in between if the member dies before processing them.
//!
//! A record the commit covers that the group never saw may have been deleted by retention: when
//! [`Cause::Retention`] is allowed, such findings wait for the end and records below the final
//! log start are excused. At the end, if the broker stored commits of the group but the history
//! holds none, the model says so: it cannot judge commits nobody recorded (record automatic
//! commits from rdkafka's `commit_callback`).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::models::event::{Answer, Event, TopicPartition, What};
use crate::models::facts::Facts;
use crate::models::model::{Cause, Model, OFFSETS_WALKED_MAX, Q1, Semantics, Spec, Violation};

/// A commit to judge: whose, which offset, and where judging starts.
#[derive(Debug)]
struct Judged {
    seq: u64,
    at: Duration,
    member: String,
    tp: TopicPartition,
    offset: i64,
    answer: Answer,
    /// The group's previous accepted commit, if any.
    from: Option<i64>,
}

/// Q1 (see the module docs).
#[derive(Debug)]
pub struct NoLossAtCommit {
    group: String,
    applies: bool,
    retention: bool,
    /// Partition → offset → the event that first processed it.
    processed: BTreeMap<TopicPartition, BTreeMap<i64, u64>>,
    floor: BTreeMap<TopicPartition, i64>,
    last_accepted: BTreeMap<TopicPartition, i64>,
    commits_recorded: u64,
    /// Commits judged at the end: made before the group saw any record of the partition, or
    /// waiting for the final log start (retention allowed).
    deferred: Vec<Judged>,
}

impl NoLossAtCommit {
    /// Q1 for `spec`'s group (it judges at-least-once groups only).
    pub fn new(spec: &Spec) -> NoLossAtCommit {
        NoLossAtCommit {
            group: spec.group().to_string(),
            applies: spec.semantics() == Semantics::AtLeastOnce,
            retention: spec.allows(Cause::Retention),
            processed: BTreeMap::new(),
            floor: BTreeMap::new(),
            last_accepted: BTreeMap::new(),
            commits_recorded: 0,
            deferred: Vec::new(),
        }
    }

    fn saw(&mut self, tp: &TopicPartition, offset: i64) {
        let floor = self.floor.entry(tp.clone()).or_insert(offset);
        *floor = (*floor).min(offset);
    }

    /// The records in `from..commit` not processed before the commit, above `log_start`.
    fn missing(&self, c: &Judged, from: i64, log_start: i64) -> Option<Violation> {
        let from = from.max(log_start);
        if c.offset.saturating_sub(from) > OFFSETS_WALKED_MAX {
            return Some(
                Violation::new(
                    Q1,
                    &self.group,
                    format!(
                        "#{} at {:?}: committed {} ({}), {} offsets past {from}: more than OFFSETS_WALKED_MAX \
                         ({OFFSETS_WALKED_MAX}) records it cannot all have processed",
                        c.seq,
                        c.at,
                        c.offset,
                        c.answer,
                        c.offset.saturating_sub(from)
                    ),
                )
                .member(&c.member)
                .partition(&c.tp)
                .offsets([from, c.offset]),
            );
        }
        let done = self.processed.get(&c.tp);
        let missing: Vec<i64> =
            (from..c.offset).filter(|o| done.and_then(|d| d.get(o)).is_none_or(|seq| *seq >= c.seq)).collect();
        if missing.is_empty() {
            return None;
        }
        Some(
            Violation::new(
                Q1,
                &self.group,
                format!(
                    "#{} at {:?}: committed {} ({}) before these records were processed by any member \
                     (at-least-once processes, then commits)",
                    c.seq, c.at, c.offset, c.answer
                ),
            )
            .member(&c.member)
            .partition(&c.tp)
            .offsets(missing),
        )
    }
}

impl Model for NoLossAtCommit {
    fn name(&self) -> &'static str {
        Q1
    }

    fn on_event(&mut self, e: &Event) -> Vec<Violation> {
        if !self.applies {
            return Vec::new();
        }
        match &e.what {
            What::Begin { tp, offset } | What::Error { tp, offset, .. } => self.saw(tp, *offset),
            What::Process { tp, offset, .. } => {
                self.saw(tp, *offset);
                self.processed.entry(tp.clone()).or_default().entry(*offset).or_insert(e.seq);
            }
            What::Commit { tp, offset, answer } => {
                self.commits_recorded += 1;
                if !answer.may_have_stored() {
                    return Vec::new();
                }
                let c = Judged {
                    seq: e.seq,
                    at: e.at,
                    member: e.member.clone(),
                    tp: tp.clone(),
                    offset: *offset,
                    answer: *answer,
                    from: self.last_accepted.get(tp).copied(),
                };
                if *answer == Answer::Accepted {
                    let last = self.last_accepted.entry(tp.clone()).or_insert(*offset);
                    *last = (*last).max(*offset);
                }
                match c.from.or(self.floor.get(tp).copied()) {
                    Some(from) if !self.retention => return self.missing(&c, from, i64::MIN).into_iter().collect(),
                    _ => self.deferred.push(c),
                }
            }
            _ => {}
        }
        Vec::new()
    }

    fn finish(&mut self, facts: &Facts, _end: Duration) -> Vec<Violation> {
        if !self.applies {
            return Vec::new();
        }
        let mut out = Vec::new();
        for c in &self.deferred {
            let (log_start, _) = facts.log_range(&c.tp).unwrap_or((0, 0));
            // Before the group saw any record of the partition, judging starts at the first it
            // ever saw, or at the log start when it never saw one.
            let from = c.from.or(self.floor.get(&c.tp).copied()).unwrap_or(log_start);
            let floor = if self.retention { log_start } else { i64::MIN };
            out.extend(self.missing(c, from, floor));
        }
        let stored = facts.commits.iter().filter(|c| c.error == 0 && !c.member_id.is_empty()).count();
        if stored > 0 && self.commits_recorded == 0 {
            out.push(Violation::new(
                Q1,
                &self.group,
                format!(
                    "the coordinator stored {stored} commits from the group's members but the history records no \
                     commit: record them (MemberRecorder::commit; rdkafka's commit_callback for automatic commits)"
                ),
            ));
        }
        out
    }
}
