//! Copies of a record value that an idempotent producer appended again under a higher epoch,
//! and the excuses for them that the [`ListAppend`] check takes.
//!
//! Where it comes from: librdkafka bumps an idempotent producer's epoch when a batch it sent
//! times out (`message.timeout.ms`): it cannot know whether the batch was persisted, so it drains
//! the in-flight requests, bumps the epoch and restarts sequences at 0 for the messages still
//! queued, retries of a possibly persisted batch included (`rd_kafka_idemp_drain_epoch_bump`,
//! `rd_kafka_toppar_pid_change`; INTRODUCTION.md, "Message timeout considerations"). The broker
//! deduplicates by producer id, epoch and sequence (KIP-98, KIP-360): a batch under a new epoch is
//! new to it, so a retry whose first attempt was persisted is appended a second time. The
//! maintainer confirms it: "it can have duplications in case messages time out … because the epoch
//! needs to be bumped there" (confluentinc/librdkafka#4953). kafkasim's client does the same
//! (`rdkafka::producer::sender`).
//!
//! So a value at several offsets of a partition is such a copy only when every copy after the
//! first was written by the same producer id under a higher epoch than the copy before it. A
//! duplicate under one epoch (a deduplication bug of the client or the broker), a copy by another
//! producer id, or one by a producer without idempotence is not, and stays a rule-2 violation.

use std::collections::BTreeMap;

use sim::Ctx;
use sim::check::list_append::{FinalLog, ListAppend, Offset, Recorder};

use super::{final_log, key};
use crate::introspect::{BatchView, PartitionView};
use crate::{Cluster, Error};

/// A copy of a value appended again by an epoch bump (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EpochBumpCopy {
    /// The checker's key (`topic-partition`).
    pub key: String,
    /// The value.
    pub value: String,
    /// The copy's offset.
    pub offset: Offset,
    /// The first copy's offset.
    pub first_offset: Offset,
    /// The producer id that wrote every copy.
    pub producer_id: i64,
    /// The first copy's epoch.
    pub first_epoch: i16,
    /// This copy's epoch.
    pub epoch: i16,
}

impl EpochBumpCopy {
    /// Why the copy is excused, in the checker's report.
    pub fn reason(&self) -> String {
        format!(
            "producer {} appended it again at {} under epoch {} after its epoch-{} copy at {}: an idempotent \
             producer's epoch bump after a message timeout (librdkafka#4953)",
            self.producer_id, self.offset, self.epoch, self.first_epoch, self.first_offset
        )
    }
}

/// The batch of `view` holding `offset`.
fn batch_of(view: &PartitionView, offset: Offset) -> Option<&BatchView> {
    let offset = i64::try_from(offset).ok()?;
    let i = view.batches.partition_point(|b| b.last_offset < offset);
    view.batches.get(i).filter(|b| b.base_offset <= offset)
}

/// The epoch-bump copies in `log`, the final read of the partition `view` shows: for each value
/// at several offsets whose copies were all written by one idempotent producer id under
/// increasing epochs, every copy but the first. Values with any other copy are left out.
pub fn epoch_bump_copies(view: &PartitionView, log: &FinalLog) -> Vec<EpochBumpCopy> {
    let mut offsets: BTreeMap<&str, Vec<Offset>> = BTreeMap::new();
    for r in &log.records {
        offsets.entry(r.value.as_str()).or_default().push(r.offset);
    }
    let key = key(&view.topic, view.partition);
    let mut copies = Vec::new();
    for (value, mut at) in offsets.into_iter().filter(|(_, at)| at.len() > 1) {
        at.sort_unstable();
        let Some(batches) = at.iter().map(|o| batch_of(view, *o)).collect::<Option<Vec<_>>>() else { continue };
        let first = batches[0];
        let bumped = first.producer_id >= 0
            && batches
                .windows(2)
                .all(|w| w[1].producer_id == first.producer_id && w[1].producer_epoch > w[0].producer_epoch);
        if !bumped {
            continue;
        }
        copies.extend(at.iter().zip(&batches).skip(1).map(|(offset, b)| EpochBumpCopy {
            key: key.clone(),
            value: value.to_string(),
            offset: *offset,
            first_offset: at[0],
            producer_id: first.producer_id,
            first_epoch: first.producer_epoch,
            epoch: b.producer_epoch,
        }));
    }
    copies
}

/// Records the final read of every partition of `topic` into the run's list-append recorder, as
/// [`super::record_final_logs`] does, and excuses its epoch-bump copies for the [`ListAppend`]
/// check ([`ListAppend::excuse`]). Returns the copies excused.
///
/// # Errors
/// As [`final_log`]; `UNKNOWN_TOPIC_OR_PARTITION` when the topic does not exist.
pub async fn record_final_logs_excusing(
    ctx: &Ctx,
    cluster: &Cluster,
    topic: &str,
) -> Result<Vec<EpochBumpCopy>, Error> {
    let recorder = Recorder::of(ctx);
    let missing = || Error::Response(kafka_protocol::ResponseError::UnknownTopicOrPartition);
    cluster.partition(topic, 0).ok_or_else(missing)?;
    let mut excused = Vec::new();
    let mut partition = 0;
    while cluster.partition(topic, partition).is_some() {
        let log = final_log(cluster, topic, partition).await?;
        // Read after the log: every offset the log holds has its batch (nothing is produced now).
        let view = cluster.partition(topic, partition).ok_or_else(missing)?;
        let copies = epoch_bump_copies(&view, &log);
        recorder.final_log(&key(topic, partition), log.log_start, log.records);
        for copy in copies {
            ListAppend::excuse(ctx, &copy.key, copy.offset, &copy.value, &copy.reason());
            excused.push(copy);
        }
        partition += 1;
    }
    Ok(excused)
}

#[cfg(test)]
mod tests {
    use sim::check::list_append::Record;

    use super::*;

    /// A partition of one-record batches: (producer id, epoch) per offset.
    fn view(batches: &[(i64, i16)]) -> PartitionView {
        PartitionView {
            topic: "orders".into(),
            partition: 1,
            leader: 0,
            leader_epoch: 0,
            log_start: 0,
            high_watermark: batches.len() as i64,
            last_stable_offset: batches.len() as i64,
            batches: (0i64..)
                .zip(batches)
                .map(|(o, &(producer_id, producer_epoch))| BatchView {
                    base_offset: o,
                    last_offset: o,
                    producer_id,
                    producer_epoch,
                    base_sequence: 0,
                    bytes: 70,
                })
                .collect(),
        }
    }

    fn log(values: &[&str]) -> FinalLog {
        FinalLog { log_start: 0, records: (0u64..).zip(values).map(|(o, v)| Record::new(o, *v)).collect() }
    }

    #[test]
    fn a_copy_under_a_higher_epoch_of_the_same_producer_id_is_listed() {
        let copies = epoch_bump_copies(&view(&[(1000, 0), (1000, 0), (1000, 1)]), &log(&["x", "a", "a"]));
        assert_eq!(
            copies,
            vec![EpochBumpCopy {
                key: "orders-1".into(),
                value: "a".into(),
                offset: 2,
                first_offset: 1,
                producer_id: 1000,
                first_epoch: 0,
                epoch: 1,
            }]
        );
        assert!(copies[0].reason().contains("librdkafka#4953"), "{}", copies[0].reason());
    }

    #[test]
    fn a_copy_under_the_same_epoch_another_producer_id_or_without_idempotence_is_not() {
        assert_eq!(epoch_bump_copies(&view(&[(1000, 1), (1000, 1)]), &log(&["a", "a"])), vec![], "same epoch");
        assert_eq!(epoch_bump_copies(&view(&[(1000, 0), (1001, 1)]), &log(&["a", "a"])), vec![], "another id");
        assert_eq!(epoch_bump_copies(&view(&[(-1, -1), (-1, -1)]), &log(&["a", "a"])), vec![], "no idempotence");
        assert_eq!(epoch_bump_copies(&view(&[(1000, 1), (1000, 0)]), &log(&["a", "a"])), vec![], "a lower epoch");
    }

    #[test]
    fn every_copy_must_raise_the_epoch_again() {
        let v = view(&[(1000, 0), (1000, 1), (1000, 1)]);
        assert_eq!(epoch_bump_copies(&v, &log(&["a", "a", "a"])), vec![], "two copies under epoch 1");
        let v = view(&[(1000, 0), (1000, 1), (1000, 2)]);
        let offsets: Vec<Offset> = epoch_bump_copies(&v, &log(&["a", "a", "a"])).iter().map(|c| c.offset).collect();
        assert_eq!(offsets, vec![1, 2]);
    }
}
