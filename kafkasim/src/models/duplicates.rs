//! Q3, no duplicates under at-most-once: no record is processed twice in the group — not by
//! two members, not by one member after a restart or a rebalance.
//!
//! At-most-once saves the position before processing (Kafka's *Message Delivery Semantics*), so
//! whoever reads the partition next starts after every record already handed to processing. A
//! consumer that processes first and commits later (or commits asynchronously and carries on)
//! reprocesses, after a crash or a rebalance, what it had processed but not yet committed.
//! A failed processing is not a processing: a record may fail, then succeed once.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::models::event::{Event, TopicPartition, What};
use crate::models::facts::Facts;
use crate::models::model::{Model, Q3, Semantics, Spec, Violation};

/// Q3 (see the module docs).
#[derive(Debug)]
pub struct NoDuplicates {
    group: String,
    applies: bool,
    first: BTreeMap<(TopicPartition, i64), (String, u64, Duration)>,
}

impl NoDuplicates {
    /// Q3 for `spec`'s group (it judges at-most-once groups only).
    pub fn new(spec: &Spec) -> NoDuplicates {
        NoDuplicates {
            group: spec.group().to_string(),
            applies: spec.semantics() == Semantics::AtMostOnce,
            first: BTreeMap::new(),
        }
    }
}

impl Model for NoDuplicates {
    fn name(&self) -> &'static str {
        Q3
    }

    fn on_event(&mut self, e: &Event) -> Vec<Violation> {
        let What::Process { tp, offset, .. } = &e.what else { return Vec::new() };
        if !self.applies {
            return Vec::new();
        }
        match self.first.get(&(tp.clone(), *offset)) {
            None => {
                self.first.insert((tp.clone(), *offset), (e.member.clone(), e.seq, e.at));
                Vec::new()
            }
            Some((member, seq, at)) => vec![
                Violation::new(
                    Q3,
                    &self.group,
                    format!(
                        "#{} at {:?}: processed again; first processed by {member} (#{seq} at {at:?}) under \
                         at-most-once",
                        e.seq, e.at
                    ),
                )
                .member(&e.member)
                .partition(tp)
                .offsets([*offset]),
            ],
        }
    }

    fn finish(&mut self, _facts: &Facts, _end: Duration) -> Vec<Violation> {
        Vec::new()
    }
}
