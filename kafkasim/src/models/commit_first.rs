//! Q4, commit first under at-most-once: before a record's processing begins, a commit past it
//! was acknowledged.
//!
//! At-most-once reads, saves the position, then processes (Kafka's *Message Delivery
//! Semantics*): the saved position must be durable — the commit answered `Accepted` — before
//! the effect can happen, or a crash in between reprocesses the record on restart. So at each
//! record's [`What::Begin`] (or its [`What::Process`] when no begin was recorded) some member of
//! the group must already have an accepted commit of an offset above the record's. A commit
//! sent but not yet answered, or answered with an error, does not count.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::models::event::{Answer, Event, TopicPartition, What};
use crate::models::facts::Facts;
use crate::models::model::{Model, Q4, Semantics, Spec, Violation};

/// Q4 (see the module docs).
#[derive(Debug)]
pub struct CommitFirst {
    group: String,
    applies: bool,
    committed: BTreeMap<TopicPartition, i64>,
    begun: BTreeSet<(String, TopicPartition, i64)>,
}

impl CommitFirst {
    /// Q4 for `spec`'s group (it judges at-most-once groups only).
    pub fn new(spec: &Spec) -> CommitFirst {
        CommitFirst {
            group: spec.group().to_string(),
            applies: spec.semantics() == Semantics::AtMostOnce,
            committed: BTreeMap::new(),
            begun: BTreeSet::new(),
        }
    }

    fn judge(&self, e: &Event, tp: &TopicPartition, offset: i64, what: &str) -> Vec<Violation> {
        let committed = self.committed.get(tp).copied();
        if committed.is_some_and(|c| c > offset) {
            return Vec::new();
        }
        let highest = committed.map_or_else(|| "none".to_string(), |c| c.to_string());
        vec![
            Violation::new(
                Q4,
                &self.group,
                format!(
                    "#{} at {:?}: {what} before any acknowledged commit past it (highest acknowledged: {highest}); \
                     at-most-once commits, then processes",
                    e.seq, e.at
                ),
            )
            .member(&e.member)
            .partition(tp)
            .offsets([offset]),
        ]
    }
}

impl Model for CommitFirst {
    fn name(&self) -> &'static str {
        Q4
    }

    fn on_event(&mut self, e: &Event) -> Vec<Violation> {
        if !self.applies {
            return Vec::new();
        }
        match &e.what {
            What::Commit { tp, offset, answer: Answer::Accepted } => {
                let c = self.committed.entry(tp.clone()).or_insert(*offset);
                *c = (*c).max(*offset);
            }
            What::Begin { tp, offset } => {
                self.begun.insert((e.member.clone(), tp.clone(), *offset));
                return self.judge(e, tp, *offset, "processing began");
            }
            What::Process { tp, offset, .. } | What::Error { tp, offset, .. } => {
                let begun = self.begun.remove(&(e.member.clone(), tp.clone(), *offset));
                if !begun && matches!(e.what, What::Process { .. }) {
                    return self.judge(e, tp, *offset, "processed");
                }
            }
            _ => {}
        }
        Vec::new()
    }

    fn finish(&mut self, _facts: &Facts, _end: Duration) -> Vec<Violation> {
        Vec::new()
    }
}
