//! Q10, exactly-once: a consume-transform-produce group ([`Spec::exactly_once`]) writes, for
//! every input record below the offset the group committed, exactly one output record that a
//! `read_committed` consumer reads, and none for the records above it. Judged at the end from
//! the broker ([`Facts::of_pipeline`]: the group's stored offsets and the committed records of both
//! topics); each output record names its input in a [`SOURCE_HEADER`] header.
//!
//! Source: KIP-98 (*Exactly Once Delivery and Transactional Messaging*): a transaction that
//! holds the output records and the input's offsets (`sendOffsetsToTransaction`, TxnOffsetCommit)
//! commits or aborts them together, and a producer with the same `transactional.id` fences the
//! old one and aborts its open transaction. What breaks it: offsets committed outside the
//! transaction (a crash between the two commits writes the output twice), records produced
//! outside it (an abort keeps them), or a restart without fencing.
//!
//! Not judged: transforms that write zero or several records per input (one per input is the
//! rule), and the order of the outputs.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::models::event::{Event, TopicPartition};
use crate::models::facts::{Facts, SOURCE_HEADER};
use crate::models::model::{Model, Q10, Spec, Violation};

/// Q10 (see the module docs). Passes every group that is not [`Spec::exactly_once`].
#[derive(Debug, Clone)]
pub struct ExactlyOnce {
    group: String,
    pipeline: Option<(String, String)>,
}

impl ExactlyOnce {
    /// Q10 for `spec`.
    pub fn new(spec: &Spec) -> ExactlyOnce {
        ExactlyOnce {
            group: spec.group().to_string(),
            pipeline: spec.pipeline().map(|(i, o)| (i.to_string(), o.to_string())),
        }
    }
}

impl Model for ExactlyOnce {
    fn name(&self) -> &'static str {
        Q10
    }

    fn on_event(&mut self, _event: &Event) -> Vec<Violation> {
        Vec::new()
    }

    fn finish(&mut self, facts: &Facts, _end: Duration) -> Vec<Violation> {
        let Some((input, output)) = &self.pipeline else { return Vec::new() };
        let mut out = Vec::new();
        // Input record → the output offsets that name it.
        let mut outputs: BTreeMap<(TopicPartition, i64), Vec<i64>> = BTreeMap::new();
        for (tp, records) in facts.records.iter().filter(|(tp, _)| &tp.topic == output) {
            let unnamed: Vec<i64> = records.iter().filter(|r| r.source.is_none()).map(|r| r.offset).collect();
            if !unnamed.is_empty() {
                out.push(
                    Violation::new(
                        Q10,
                        &self.group,
                        format!("committed output records without a {SOURCE_HEADER} header"),
                    )
                    .partition(tp)
                    .offsets(unnamed),
                );
            }
            for r in records {
                if let Some(source) = &r.source {
                    outputs.entry(source.clone()).or_default().push(r.offset);
                }
            }
        }
        for (tp, records) in facts.records.iter().filter(|(tp, _)| &tp.topic == input) {
            let committed = facts.committed.get(tp).copied().unwrap_or(-1);
            let (mut lost, mut twice, mut early) = (Vec::new(), Vec::new(), Vec::new());
            let mut detail = Vec::new();
            for r in records {
                let written = outputs.remove(&(tp.clone(), r.offset)).unwrap_or_default();
                if r.offset < committed {
                    match written.len() {
                        0 => lost.push(r.offset),
                        1 => {}
                        _ => {
                            twice.push(r.offset);
                            detail.push(format!("{} -> {output} offsets {written:?}", r.offset));
                        }
                    }
                } else if !written.is_empty() {
                    early.push(r.offset);
                }
            }
            let at =
                if committed < 0 { "no committed offset".to_string() } else { format!("committed offset {committed}") };
            if !twice.is_empty() {
                let why = format!("input records with more than one committed output ({})", detail.join(", "));
                out.push(Violation::new(Q10, &self.group, why).partition(tp).offsets(twice));
            }
            if !lost.is_empty() {
                let why = format!("input records below the {at} with no committed output");
                out.push(Violation::new(Q10, &self.group, why).partition(tp).offsets(lost));
            }
            if !early.is_empty() {
                let why = format!(
                    "input records at or above the {at} with a committed output: the output was committed without its offset"
                );
                out.push(Violation::new(Q10, &self.group, why).partition(tp).offsets(early));
            }
        }
        for ((tp, offset), written) in outputs {
            let why = format!(
                "committed outputs at {output} offsets {written:?} name an input record that is not in the log"
            );
            out.push(Violation::new(Q10, &self.group, why).partition(&tp).offsets([offset]));
        }
        out
    }
}
