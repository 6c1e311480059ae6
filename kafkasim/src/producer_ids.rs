//! Idempotent producers: producer ids, epochs and per-partition sequence numbers.
//!
//! Semantics (KIP-98, Apache Kafka's `ProducerStateManager`):
//! - `InitProducerId` without a transactional id hands out a fresh producer id at epoch 0; with a
//!   known id and its current epoch (KIP-360, v3+) it bumps the epoch, resetting sequences;
//! - per (producer id, partition) the broker remembers the last [`RETAINED_BATCHES`] batches;
//!   a batch whose sequence range equals a remembered one is a duplicate: it is not appended
//!   again and its original base offset is returned with no error;
//! - a batch from an older epoch is refused with `INVALID_PRODUCER_EPOCH` (47); a newer epoch
//!   must start at sequence 0; otherwise the first sequence must be the last one plus one
//!   (wrapping at `i32::MAX`), else `OUT_OF_ORDER_SEQUENCE_NUMBER` (45); a producer the
//!   partition has no state for may start at any sequence (`ProducerAppendInfo.checkSequence`
//!   accepts any first sequence when the partition knows no epoch for the producer; measured
//!   against Apache Kafka 4.2 by fidelity's differential suite).

use std::collections::{BTreeMap, VecDeque};

/// Batches remembered per producer and partition for duplicate detection (Kafka keeps 5, the
/// most in-flight requests an idempotent producer may have).
pub const RETAINED_BATCHES: usize = 5;

/// The most producer ids the cluster hands out in one run.
pub const PRODUCER_IDS_MAX: i64 = 1 << 40;

/// The outcome of checking a batch's sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceCheck {
    /// Append it.
    Append,
    /// Already appended at this base offset: answer it, append nothing.
    Duplicate(i64),
    /// Refuse with this error code.
    Refuse(i16),
}

#[derive(Debug, Clone, Default)]
struct PartitionProducer {
    epoch: i16,
    /// (first sequence, last sequence, base offset), oldest first.
    recent: VecDeque<(i32, i32, i64)>,
}

/// The cluster's producer ids and sequence state.
#[derive(Debug, Default)]
pub struct ProducerIds {
    next_id: i64,
    epochs: BTreeMap<i64, i16>,
    partitions: BTreeMap<(i64, String, i32), PartitionProducer>,
}

impl ProducerIds {
    /// `InitProducerId`: a new id at epoch 0, or — given a known `(id, epoch)` that is current —
    /// the same id with the epoch bumped. `Err(code)` for an unknown or stale id
    /// (`INVALID_PRODUCER_EPOCH`, 47).
    pub fn init(&mut self, existing: Option<(i64, i16)>) -> Result<(i64, i16), i16> {
        if let Some((id, epoch)) = existing.filter(|(id, _)| *id >= 0) {
            let Some(current) = self.epochs.get_mut(&id) else {
                return Err(47);
            };
            if *current != epoch {
                return Err(47);
            }
            *current = current.wrapping_add(1).max(0);
            return Ok((id, *current));
        }
        assert!(self.next_id < PRODUCER_IDS_MAX, "producer ids exhausted (PRODUCER_IDS_MAX)");
        let id = 1000 + self.next_id;
        self.next_id += 1;
        self.epochs.insert(id, 0);
        Ok((id, 0))
    }

    /// Sets the current epoch of `id` (a transactional id's InitProducerId or a coordinator's
    /// abort bumped it): batches of older epochs are refused from now on.
    pub fn fence(&mut self, id: i64, epoch: i16) {
        self.epochs.insert(id, epoch);
    }

    /// Checks a batch's `(producer id, epoch, first..=last sequence)` for `topic`/`partition`.
    pub fn check(&self, producer: (i64, i16), topic: &str, partition: i32, first: i32, last: i32) -> SequenceCheck {
        let (id, epoch) = producer;
        if id < 0 {
            return SequenceCheck::Append;
        }
        if let Some(current) = self.epochs.get(&id)
            && epoch < *current
        {
            return SequenceCheck::Refuse(47);
        }
        let Some(state) = self.partitions.get(&(id, topic.to_string(), partition)) else {
            return SequenceCheck::Append;
        };
        if epoch < state.epoch {
            return SequenceCheck::Refuse(47);
        }
        if epoch > state.epoch {
            return if first == 0 { SequenceCheck::Append } else { SequenceCheck::Refuse(45) };
        }
        if let Some((_, _, offset)) = state.recent.iter().find(|(f, l, _)| *f == first && *l == last) {
            return SequenceCheck::Duplicate(*offset);
        }
        let expected = state.recent.back().map_or(0, |(_, l, _)| if *l == i32::MAX { 0 } else { l + 1 });
        if first == expected { SequenceCheck::Append } else { SequenceCheck::Refuse(45) }
    }

    /// Remembers an appended batch.
    pub fn appended(&mut self, producer: (i64, i16), topic: &str, partition: i32, seq: (i32, i32), base_offset: i64) {
        let (id, epoch) = producer;
        if id < 0 {
            return;
        }
        let entry = self.epochs.entry(id).or_insert(epoch);
        *entry = (*entry).max(epoch);
        let state = self.partitions.entry((id, topic.to_string(), partition)).or_default();
        if epoch != state.epoch {
            state.epoch = epoch;
            state.recent.clear();
        }
        state.recent.push_back((seq.0, seq.1, base_offset));
        while state.recent.len() > RETAINED_BATCHES {
            state.recent.pop_front();
        }
    }

    /// Forgets a deleted topic's sequences.
    pub fn forget_topic(&mut self, topic: &str) {
        self.partitions.retain(|(_, t, _), _| t != topic);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_duplicates_and_epochs_follow_kip_98() {
        let mut ids = ProducerIds::default();
        let (pid, epoch) = ids.init(None).expect("fresh id");
        assert_eq!(ids.check((pid, epoch), "t", 0, 3, 4), SequenceCheck::Append, "a new producer starts anywhere");
        assert_eq!(ids.check((pid, epoch), "t", 0, 0, 4), SequenceCheck::Append);
        ids.appended((pid, epoch), "t", 0, (0, 4), 10);
        assert_eq!(ids.check((pid, epoch), "t", 0, 0, 4), SequenceCheck::Duplicate(10));
        assert_eq!(ids.check((pid, epoch), "t", 0, 6, 7), SequenceCheck::Refuse(45), "a gap");
        assert_eq!(ids.check((pid, epoch), "t", 0, 5, 7), SequenceCheck::Append);
        let (same, bumped) = ids.init(Some((pid, epoch))).expect("bump");
        assert_eq!((same, bumped), (pid, 1));
        assert_eq!(ids.check((pid, 0), "t", 0, 5, 7), SequenceCheck::Refuse(47), "a fenced epoch");
        assert_eq!(ids.check((pid, 1), "t", 0, 0, 0), SequenceCheck::Append, "a new epoch restarts at 0");
        assert_eq!(ids.init(Some((pid, 0))), Err(47), "a stale epoch cannot bump");
    }

    #[test]
    fn only_the_last_five_batches_are_remembered() {
        let mut ids = ProducerIds::default();
        let p = ids.init(None).expect("fresh id");
        for i in 0..6 {
            ids.appended(p, "t", 0, (i, i), i64::from(i));
        }
        assert_eq!(ids.check(p, "t", 0, 0, 0), SequenceCheck::Refuse(45), "the oldest fell out");
        assert_eq!(ids.check(p, "t", 0, 1, 1), SequenceCheck::Duplicate(1));
    }
}
