//! Q5, every loss is explained: each record below the group's final committed offset that no
//! member processed is explained by a [`Cause`] the test allowed, with the evidence that cause
//! needs; an unexplained loss fails.
//!
//! A record is *lost* when the group will never read it again — it lies below the final
//! committed offset of its partition (the coordinator's last stored offset, or, without the
//! broker's facts, the last accepted commit the members recorded) and inside the log's offsets
//! (below the high watermark) — and no member of the group processed it. Records at or above the
//! committed offset are not lost: the next consumer resumes there. Explanations, tried in order:
//!
//! | cause | semantics | evidence |
//! |---|---|---|
//! | [`Cause::Retention`] | any | the record is below the partition's final log start |
//! | [`Cause::ResetLatest`] | any | the record is below the first offset the group began, processed or failed in the partition |
//! | [`Cause::ProcessingErrors`] | at-most-once | the record's processing failed ([`What::Error`]) |
//! | [`Cause::Crash`] | at-most-once | a member's accepted commit past the record (as it recorded it, or as the coordinator stored it when the member died before the answer came), then that member's crash |
//!
//! A consumer that skips records (a filter bug, a seek past a poison record) and commits past
//! them loses them with none of that evidence.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::models::event::{Answer, Event, TopicPartition, What};
use crate::models::facts::Facts;
use crate::models::model::{Cause, Explained, Model, OFFSETS_WALKED_MAX, Q5, Semantics, Spec, Violation};

/// Q5 (see the module docs).
#[derive(Debug)]
pub struct LossExplained {
    group: String,
    at_most_once: bool,
    causes: Vec<Cause>,
    touched: BTreeSet<TopicPartition>,
    processed: BTreeMap<TopicPartition, BTreeSet<i64>>,
    failed: BTreeMap<TopicPartition, BTreeSet<i64>>,
    floor: BTreeMap<TopicPartition, i64>,
    /// Accepted commits the members recorded: (partition, offset, member, seq).
    commits: Vec<(TopicPartition, i64, String, u64)>,
    /// Member → its crashes: (seq, at).
    crashes: BTreeMap<String, Vec<(u64, Duration)>>,
    explained: Vec<Explained>,
    /// An exactly-once group: Q10 judges its losses from the committed outputs.
    exactly_once: bool,
}

impl LossExplained {
    /// Q5 for `spec`'s group.
    pub fn new(spec: &Spec) -> LossExplained {
        let causes = [Cause::Retention, Cause::ResetLatest, Cause::ProcessingErrors, Cause::Crash]
            .into_iter()
            .filter(|c| spec.allows(*c))
            .collect();
        LossExplained {
            group: spec.group().to_string(),
            at_most_once: spec.semantics() == Semantics::AtMostOnce,
            causes,
            touched: BTreeSet::new(),
            processed: BTreeMap::new(),
            failed: BTreeMap::new(),
            floor: BTreeMap::new(),
            commits: Vec::new(),
            crashes: BTreeMap::new(),
            explained: Vec::new(),
            exactly_once: spec.semantics() == Semantics::ExactlyOnce,
        }
    }

    fn saw(&mut self, tp: &TopicPartition, offset: i64) {
        let floor = self.floor.entry(tp.clone()).or_insert(offset);
        *floor = (*floor).min(offset);
    }

    /// The cause explaining the loss of `offset`, with its evidence.
    fn explain(&self, tp: &TopicPartition, offset: i64, facts: &Facts) -> Option<(Cause, String)> {
        for cause in &self.causes {
            match cause {
                Cause::Retention => {
                    if let Some((log_start, _)) = facts.log_range(tp)
                        && offset < log_start
                    {
                        return Some((*cause, format!("the log starts at {log_start}")));
                    }
                }
                Cause::ResetLatest => {
                    if let Some(floor) = self.floor.get(tp)
                        && offset < *floor
                    {
                        return Some((*cause, format!("the group's first record was {floor}")));
                    }
                }
                Cause::ProcessingErrors => {
                    if self.at_most_once && self.failed.get(tp).is_some_and(|f| f.contains(&offset)) {
                        return Some((*cause, "its processing failed".to_string()));
                    }
                }
                Cause::Crash => {
                    if !self.at_most_once {
                        continue;
                    }
                    // The member's own record of the commit, or — when it died before the answer
                    // reached it — the coordinator's, from the member id of the incarnation that
                    // crashed (a commit on the wire lands after the crash).
                    let recorded =
                        self.commits.iter().filter(|(t, o, ..)| t == tp && *o > offset).find_map(|(_, o, m, s)| {
                            let (crashed, _) = self.crashes.get(m)?.iter().find(|(c, _)| c > s)?;
                            Some(format!("{m} committed {o} (#{s}) and crashed (#{crashed})"))
                        });
                    let stored = || {
                        facts
                            .commits
                            .iter()
                            .filter(|c| c.error == 0 && c.topic == tp.topic && c.partition == tp.partition)
                            .filter(|c| c.offset > offset)
                            .find_map(|c| {
                                let m = facts.client_of(&c.member_id)?;
                                let (from, until) = incarnation(facts, &c.member_id, m)?;
                                let (crashed, at) = self
                                    .crashes
                                    .get(m)?
                                    .iter()
                                    .find(|(_, at)| *at >= from && until.is_none_or(|u| *at < u))?;
                                Some(format!(
                                    "the coordinator stored {} from {m} (member id {}) at {:?}, and that incarnation \
                                     crashed (#{crashed} at {at:?})",
                                    c.offset, c.member_id, c.at
                                ))
                            })
                    };
                    if let Some(evidence) = recorded.or_else(stored) {
                        return Some((*cause, evidence));
                    }
                }
            }
        }
        None
    }

    /// Who first committed past `offset`: a member's name, from its events or the journal.
    fn committer(&self, tp: &TopicPartition, offset: i64, facts: &Facts) -> Option<String> {
        self.commits.iter().find(|(t, o, ..)| t == tp && *o > offset).map(|(_, _, m, _)| m.clone()).or_else(|| {
            facts
                .commits
                .iter()
                .find(|c| c.error == 0 && c.topic == tp.topic && c.partition == tp.partition && c.offset > offset)
                .map(|c| facts.client_of(&c.member_id).unwrap_or(&c.member_id).to_string())
        })
    }
}

impl Model for LossExplained {
    fn name(&self) -> &'static str {
        Q5
    }

    fn on_event(&mut self, e: &Event) -> Vec<Violation> {
        if let Some(tp) = e.what.tp() {
            self.touched.insert(tp.clone());
        }
        match &e.what {
            What::Begin { tp, offset } => self.saw(tp, *offset),
            What::Process { tp, offset, .. } => {
                self.saw(tp, *offset);
                self.processed.entry(tp.clone()).or_default().insert(*offset);
            }
            What::Error { tp, offset, .. } => {
                self.saw(tp, *offset);
                self.failed.entry(tp.clone()).or_default().insert(*offset);
            }
            What::Commit { tp, offset, answer: Answer::Accepted } => {
                self.commits.push((tp.clone(), *offset, e.member.clone(), e.seq));
            }
            What::Crash => self.crashes.entry(e.member.clone()).or_default().push((e.seq, e.at)),
            _ => {}
        }
        Vec::new()
    }

    fn finish(&mut self, facts: &Facts, _end: Duration) -> Vec<Violation> {
        if self.exactly_once {
            return Vec::new();
        }
        let mut partitions = self.touched.clone();
        partitions.extend(facts.commits.iter().map(|c| TopicPartition::new(&c.topic, c.partition)));
        let mut out = Vec::new();
        for tp in partitions {
            let recorded = self.commits.iter().rev().find(|(t, ..)| *t == tp).map(|(_, o, ..)| *o);
            let Some(committed) = facts.last_stored(&tp).or(recorded) else { continue };
            let upper = facts.log_range(&tp).map_or(committed, |(_, hw)| committed.min(hw));
            if upper > OFFSETS_WALKED_MAX {
                out.push(
                    Violation::new(
                        Q5,
                        &self.group,
                        format!(
                            "the final committed offset {committed} puts {upper} records below it: more than \
                             OFFSETS_WALKED_MAX ({OFFSETS_WALKED_MAX}) to judge one by one"
                        ),
                    )
                    .partition(&tp)
                    .offsets([committed]),
                );
                continue;
            }
            let done = self.processed.get(&tp);
            let mut unexplained = Vec::new();
            let mut explained: BTreeMap<(Cause, String), Vec<i64>> = BTreeMap::new();
            for offset in (0..upper).filter(|o| !done.is_some_and(|d| d.contains(o))) {
                match self.explain(&tp, offset, facts) {
                    Some(why) => explained.entry(why).or_default().push(offset),
                    None => unexplained.push(offset),
                }
            }
            for ((cause, evidence), offsets) in explained {
                self.explained.push(Explained {
                    group: self.group.clone(),
                    partition: tp.clone(),
                    offsets,
                    cause,
                    evidence,
                });
            }
            if let Some(first) = unexplained.first() {
                let mut v = Violation::new(
                    Q5,
                    &self.group,
                    format!(
                        "lost: below the final committed offset {committed}, never processed by any member, and no \
                         allowed cause explains it (allowed: {})",
                        if self.causes.is_empty() {
                            "none".to_string()
                        } else {
                            self.causes.iter().map(|c| format!("{c:?}")).collect::<Vec<_>>().join(", ")
                        }
                    ),
                )
                .partition(&tp);
                if let Some(m) = self.committer(&tp, *first, facts) {
                    v = v.member(&m);
                }
                out.push(v.offsets(unexplained));
            }
        }
        out
    }

    fn explained(&self) -> Vec<Explained> {
        self.explained.clone()
    }
}

/// When a member id first appears in a generation, and when the next member id of the same
/// client does (the next incarnation), if one does.
fn incarnation(facts: &Facts, member_id: &str, client: &str) -> Option<(Duration, Option<Duration>)> {
    let first_seen =
        |id: &str| facts.generations.iter().find(|g| g.members.iter().any(|m| m.member_id == id)).map(|g| g.at);
    let from = first_seen(member_id)?;
    let until = facts.member_ids_of(client).into_iter().filter_map(first_seen).filter(|at| *at > from).min();
    Some((from, until))
}
