//! The idempotent producer's state (KIP-98): its producer id and epoch, from InitProducerId,
//! and each partition's next sequence number. A batch is stamped once, with `(id, epoch, base
//! sequence)`, and keeps its stamp across retries, so the broker can recognise a retry of a batch
//! it already appended (a duplicate: answered with the original offset). A batch that expires
//! after it was sent leaves a possible gap in its partition's sequences: the producer bumps its
//! epoch (KIP-360, InitProducerId v3+ with the current id and epoch), which restarts every
//! partition's sequences at 0, as librdkafka's `rd_kafka_idemp_drain_epoch_bump` does.

use std::collections::BTreeMap;

/// The InitProducerId version sent (v3+ can bump an epoch; kafkasim serves 0–4).
pub const INIT_PRODUCER_ID_VERSION: i16 = 4;

/// A batch's stamp: `(producer id, epoch, base sequence)`.
pub type Stamp = (i64, i16, i32);

/// The producer id's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PidState {
    /// None yet: InitProducerId must be sent.
    Needed,
    /// The current id and epoch.
    Assigned(i64, i16),
    /// The epoch must be bumped: InitProducerId with this id and epoch.
    BumpNeeded(i64, i16),
}

/// The state.
#[derive(Debug)]
pub struct Idempotence {
    /// The id.
    pub pid: PidState,
    next_sequence: BTreeMap<(String, i32), i32>,
}

impl Default for Idempotence {
    fn default() -> Self {
        Idempotence { pid: PidState::Needed, next_sequence: BTreeMap::new() }
    }
}

impl Idempotence {
    /// The current id and epoch, when assigned.
    pub fn assigned(&self) -> Option<(i64, i16)> {
        match self.pid {
            PidState::Assigned(id, epoch) => Some((id, epoch)),
            _ => None,
        }
    }

    /// Takes in InitProducerId's answer: sequences restart at 0 under the new epoch.
    pub fn set(&mut self, id: i64, epoch: i16) {
        self.pid = PidState::Assigned(id, epoch);
        self.next_sequence.clear();
    }

    /// The epoch must be bumped (a sent batch expired).
    pub fn bump(&mut self) {
        if let PidState::Assigned(id, epoch) = self.pid {
            self.pid = PidState::BumpNeeded(id, epoch);
        }
    }

    /// A stamp for `count` records of `topic`-`partition`, `None` without an id; the stamp kept
    /// when `previous` is under the current epoch (a retry).
    pub fn stamp(&mut self, topic: &str, partition: i32, count: usize, previous: Option<Stamp>) -> Option<Stamp> {
        let (id, epoch) = self.assigned()?;
        if let Some(p) = previous.filter(|p| (p.0, p.1) == (id, epoch)) {
            return Some(p);
        }
        let next = self.next_sequence.entry((topic.to_string(), partition)).or_insert(0);
        let base = *next;
        let count = i32::try_from(count).expect("a batch holds at most batch.num.messages records");
        // Sequences wrap at i32::MAX (KIP-98).
        *next = next.wrapping_add(count) & i32::MAX;
        Some((id, epoch, base))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_keep_their_stamp_and_a_bump_restarts_sequences() {
        let mut i = Idempotence::default();
        assert_eq!(i.stamp("t", 0, 3, None), None, "no id yet");
        i.set(1000, 0);
        let first = i.stamp("t", 0, 3, None);
        assert_eq!(first, Some((1000, 0, 0)));
        assert_eq!(i.stamp("t", 0, 3, first), first, "a retry keeps its sequence");
        assert_eq!(i.stamp("t", 0, 2, None), Some((1000, 0, 3)));
        assert_eq!(i.stamp("t", 1, 1, None), Some((1000, 0, 0)), "per partition");
        i.bump();
        assert_eq!(i.pid, PidState::BumpNeeded(1000, 0));
        i.set(1000, 1);
        assert_eq!(i.stamp("t", 0, 3, first), Some((1000, 1, 0)), "restamped under the new epoch");
    }
}
