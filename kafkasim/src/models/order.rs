//! Q6, order within a hold: while one member holds a partition — from its assignment to its
//! revocation — it processes the partition's records in increasing offset order.
//!
//! A member that assigns its partitions itself (it records no assignment) holds them from its
//! start to its leaving or crash.
//!
//! Kafka orders records per partition, and a consumer that owns a partition is expected to
//! apply them in that order (the `KafkaConsumer` javadoc: ordering is per partition). A worker
//! pool that processes one partition's records concurrently finishes them out of order;
//! processing records per partition on one worker keeps the order. Across holds the order
//! starts again: a new holder resumes from the committed offset and may redo records (at-least
//! once). A retry of a record that failed is not out of order (a failure is not a processing);
//! re-running a batch that was already processed is — record a batch's records as processed
//! once the batch succeeded.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::models::event::{Event, TopicPartition, What};
use crate::models::facts::Facts;
use crate::models::holds::Holds;
use crate::models::model::{Model, Q6, Spec, Violation};

/// Q6 (see the module docs).
#[derive(Debug)]
pub struct OrderWithinHold {
    group: String,
    holds: Holds,
    /// (member, partition, hold) → the last offset processed, its event.
    last: BTreeMap<(String, TopicPartition, Option<u64>), (i64, u64)>,
}

impl OrderWithinHold {
    /// Q6 for `spec`'s group.
    pub fn new(spec: &Spec) -> OrderWithinHold {
        OrderWithinHold { group: spec.group().to_string(), holds: Holds::default(), last: BTreeMap::new() }
    }
}

impl Model for OrderWithinHold {
    fn name(&self) -> &'static str {
        Q6
    }

    fn on_event(&mut self, e: &Event) -> Vec<Violation> {
        for (tp, hold) in self.holds.apply(e) {
            self.last.remove(&(e.member.clone(), tp, Some(hold)));
        }
        if matches!(e.what, What::Leave | What::Crash) {
            // Every hold of the member ends, those of partitions it assigned itself (no recorded
            // assignment, so no hold number) too: the next incarnation resumes from the committed
            // offset.
            self.last.retain(|(member, _, _), _| *member != e.member);
        }
        let What::Process { tp, offset, .. } = &e.what else { return Vec::new() };
        let key = (e.member.clone(), tp.clone(), self.holds.hold(&e.member, tp));
        let previous = self.last.insert(key, (*offset, e.seq));
        match previous {
            Some((before, seq)) if before >= *offset => vec![
                Violation::new(
                    Q6,
                    &self.group,
                    format!(
                        "#{} at {:?}: processed {offset} after {before} (#{seq}) within one hold of the partition",
                        e.seq, e.at
                    ),
                )
                .member(&e.member)
                .partition(tp)
                .offsets([before, *offset]),
            ],
            _ => Vec::new(),
        }
    }

    fn finish(&mut self, _facts: &Facts, _end: Duration) -> Vec<Violation> {
        Vec::new()
    }
}
