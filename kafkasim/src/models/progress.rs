//! Q9, progress after healing: after a fault heals ([`What::Heal`]), when records were waiting
//! for the group, some member processes one of them within the [`ProgressBound`] computed from
//! the consumers' settings ([`crate::models::ConsumerSettings`]).
//!
//! Records were *waiting* at the heal in a partition the group had touched (assigned,
//! processed, committed) when the partition's high watermark at the heal is above the group's
//! position there: its highest accepted commit, or the record after the highest it processed,
//! or the log's beginning when it has neither (a group allowed [`crate::models::Cause::ResetLatest`]
//! does not wait for records it never positioned on). Progress is a [`What::Process`] of a
//! waiting partition's record after the heal. A consumer stuck after the heal — its loop parked
//! on an error, its partitions paused for good, its member gone — shows none.
//!
//! Judged as soon as an event of the group comes after the bound, and at the end: a history
//! that ends before heal + bound with no progress yet fails too, saying the run must go on until
//! the bound (the model cannot tell a slow consumer from a stuck one earlier).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::models::event::{Answer, Event, TopicPartition, What};
use crate::models::facts::Facts;
use crate::models::model::{Cause, Model, Q9, Spec, Violation};
use crate::models::settings::ProgressBound;

#[derive(Debug)]
struct Heal {
    seq: u64,
    at: Duration,
    /// Partition → (the group's position, the high watermark) at the heal.
    waiting: BTreeMap<TopicPartition, (i64, i64)>,
    judged: bool,
}

/// Q9 (see the module docs).
#[derive(Debug)]
pub struct ProgressAfterHeal {
    group: String,
    bound: ProgressBound,
    reset_latest: bool,
    touched: BTreeSet<TopicPartition>,
    position: BTreeMap<TopicPartition, i64>,
    heals: Vec<Heal>,
}

impl ProgressAfterHeal {
    /// Q9 for `spec`'s group, with its bound ([`Spec::bound`]).
    pub fn new(spec: &Spec) -> ProgressAfterHeal {
        ProgressAfterHeal {
            group: spec.group().to_string(),
            bound: spec.bound().clone(),
            reset_latest: spec.allows(Cause::ResetLatest),
            touched: BTreeSet::new(),
            position: BTreeMap::new(),
            heals: Vec::new(),
        }
    }

    fn advance(&mut self, tp: &TopicPartition, to: i64) {
        let p = self.position.entry(tp.clone()).or_insert(to);
        *p = (*p).max(to);
    }

    fn late(&self, h: &Heal, now: Duration, what: &str) -> Violation {
        let waiting: Vec<String> = h.waiting.iter().map(|(tp, (from, hw))| format!("{tp} {from}..{hw}")).collect();
        Violation::new(
            Q9,
            &self.group,
            format!(
                "no record processed within {} after the heal (#{} at {:?}); waiting: {}; {what} (at {now:?})",
                self.bound,
                h.seq,
                h.at,
                waiting.join(", ")
            ),
        )
    }
}

impl Model for ProgressAfterHeal {
    fn name(&self) -> &'static str {
        Q9
    }

    fn on_event(&mut self, e: &Event) -> Vec<Violation> {
        let deadline = |h: &Heal| h.at + self.bound.total();
        let mut out = Vec::new();
        // Any event past a heal's bound with no progress yet: too late.
        let late: Vec<usize> =
            (0..self.heals.len()).filter(|i| !self.heals[*i].judged && e.at > deadline(&self.heals[*i])).collect();
        for i in late {
            out.push(self.late(&self.heals[i], e.at, &format!("#{} came after the bound", e.seq)));
            self.heals[i].judged = true;
        }
        if let Some(tp) = e.what.tp() {
            self.touched.insert(tp.clone());
        }
        match &e.what {
            What::Process { tp, offset, .. } => {
                for h in self.heals.iter_mut().filter(|h| !h.judged && h.waiting.contains_key(tp)) {
                    h.judged = true;
                }
                self.advance(tp, offset + 1);
            }
            What::Commit { tp, offset, answer: Answer::Accepted } => self.advance(tp, *offset),
            What::Heal { high_watermarks } => {
                let waiting: BTreeMap<TopicPartition, (i64, i64)> = self
                    .touched
                    .iter()
                    .filter_map(|tp| {
                        let hw = *high_watermarks.get(tp)?;
                        let from = match self.position.get(tp) {
                            Some(p) => *p,
                            None if self.reset_latest => return None,
                            None => 0,
                        };
                        (hw > from).then(|| (tp.clone(), (from, hw)))
                    })
                    .collect();
                let judged = waiting.is_empty();
                self.heals.push(Heal { seq: e.seq, at: e.at, waiting, judged });
            }
            _ => {}
        }
        out
    }

    fn finish(&mut self, _facts: &Facts, end: Duration) -> Vec<Violation> {
        let total = self.bound.total();
        let mut out = Vec::new();
        for h in self.heals.iter().filter(|h| !h.judged) {
            let what = if end >= h.at + total {
                "none by the end of the history".to_string()
            } else {
                format!(
                    "the history ends {:?} after the heal, before the bound: run until heal + bound to judge",
                    end.saturating_sub(h.at)
                )
            };
            out.push(self.late(h, end, &what));
        }
        out
    }
}
