//! Q7, a processing error under at-least-once ends the consumer: after a record's processing
//! failed, its member neither commits past it nor carries on with later records of its
//! partition — until it processes that record (a retry that succeeded) or its hold ends
//! (revocation, leaving, a crash: the next holder gets the record again).
//!
//! At-least-once promises every record is processed; a consumer that logs a failure and moves
//! on drops the record for good once it commits past it. What Kafka's own frameworks do by
//! default agrees: Kafka Streams' `LogAndFailExceptionHandler` stops the stream thread, and a
//! plain `KafkaConsumer` loop that throws out of `poll()` never commits. Records already in
//! flight when the error happened (begun before it) may still finish; beginning a later record
//! after the error, processing one that had not begun, or committing an offset above the failed
//! record (a commit answered with a refusal excepted) is carrying on.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::models::event::{Event, TopicPartition, What};
use crate::models::facts::Facts;
use crate::models::holds::Holds;
use crate::models::model::{Model, Q7, Semantics, Spec, Violation};

#[derive(Debug)]
struct Failure {
    offset: i64,
    seq: u64,
    at: Duration,
    in_flight: BTreeSet<i64>,
}

/// Q7 (see the module docs).
#[derive(Debug)]
pub struct ErrorEndsConsumer {
    group: String,
    applies: bool,
    holds: Holds,
    begun: BTreeMap<(String, TopicPartition), BTreeSet<i64>>,
    open: BTreeMap<(String, TopicPartition), Failure>,
}

impl ErrorEndsConsumer {
    /// Q7 for `spec`'s group (it judges at-least-once groups only).
    pub fn new(spec: &Spec) -> ErrorEndsConsumer {
        ErrorEndsConsumer {
            group: spec.group().to_string(),
            applies: spec.semantics() == Semantics::AtLeastOnce,
            holds: Holds::default(),
            begun: BTreeMap::new(),
            open: BTreeMap::new(),
        }
    }

    /// Reports carrying on past the open failure of `key`, once: the failure is then closed.
    fn carried_on(&mut self, e: &Event, key: &(String, TopicPartition), what: String, offset: i64) -> Vec<Violation> {
        let Some(f) = self.open.remove(key) else { return Vec::new() };
        vec![
            Violation::new(
                Q7,
                &self.group,
                format!(
                    "#{} at {:?}: {what} after processing {} failed (#{} at {:?}) — it carried on past a failed \
                     record under at-least-once",
                    e.seq, e.at, f.offset, f.seq, f.at
                ),
            )
            .member(&e.member)
            .partition(&key.1)
            .offsets([f.offset, offset]),
        ]
    }
}

impl Model for ErrorEndsConsumer {
    fn name(&self) -> &'static str {
        Q7
    }

    fn on_event(&mut self, e: &Event) -> Vec<Violation> {
        if !self.applies {
            return Vec::new();
        }
        for (tp, _) in self.holds.apply(e) {
            self.open.remove(&(e.member.clone(), tp.clone()));
            self.begun.remove(&(e.member.clone(), tp));
        }
        let Some(tp) = e.what.tp() else { return Vec::new() };
        let key = (e.member.clone(), tp.clone());
        let failed = self.open.get(&key).map(|f| f.offset);
        match &e.what {
            What::Begin { offset, .. } => {
                self.begun.entry(key.clone()).or_default().insert(*offset);
                if failed.is_some_and(|f| *offset > f) {
                    return self.carried_on(e, &key, format!("began {offset}"), *offset);
                }
            }
            What::Process { offset, .. } => {
                let was_in_flight = self.begun.get_mut(&key).is_some_and(|b| b.remove(offset));
                if let Some(f) = self.open.get(&key) {
                    if *offset == f.offset {
                        self.open.remove(&key);
                    } else if *offset > f.offset && !(was_in_flight && f.in_flight.contains(offset)) {
                        return self.carried_on(e, &key, format!("processed {offset}"), *offset);
                    }
                }
            }
            What::Error { offset, .. } => {
                if let Some(b) = self.begun.get_mut(&key) {
                    b.remove(offset);
                }
                let in_flight = self.begun.get(&key).cloned().unwrap_or_default();
                let lower = self.open.get(&key).is_none_or(|f| *offset < f.offset);
                if lower {
                    self.open.insert(key, Failure { offset: *offset, seq: e.seq, at: e.at, in_flight });
                }
            }
            What::Commit { offset, answer, .. } if answer.may_have_stored() && failed.is_some_and(|f| *offset > f) => {
                return self.carried_on(e, &key, format!("committed {offset} ({answer})"), *offset);
            }
            _ => {}
        }
        Vec::new()
    }

    fn finish(&mut self, _facts: &Facts, _end: Duration) -> Vec<Violation> {
        Vec::new()
    }
}
