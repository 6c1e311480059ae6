//! The transaction coordinator's state: one entry per transactional id (KIP-98).
//!
//! Semantics (Apache Kafka 4.2's `TransactionCoordinator` with transaction version 1, the one
//! clients get when they stay at EndTxn ≤ v4 and Produce ≤ v11, which is all [`crate::codec`]
//! advertises):
//! - InitProducerId with a new transactional id hands out a producer id at epoch 0; for a known
//!   id it bumps the epoch, which fences the previous producer (its requests get
//!   `PRODUCER_FENCED`, or `INVALID_PRODUCER_EPOCH` at versions before KIP-588); an open
//!   transaction is aborted first and that call answers `CONCURRENT_TRANSACTIONS` (the client
//!   retries and gets the next epoch);
//! - a transaction opens with its first AddPartitionsToTxn or AddOffsetsToTxn (`Empty` or
//!   `Complete*` → `Ongoing`) and ends with EndTxn, which writes a commit or abort marker to
//!   every partition it added and, on commit, makes its TxnOffsetCommit offsets the groups'
//!   committed offsets. Markers are written at once, so the `Prepare*` states Kafka passes
//!   through never last past the request;
//! - EndTxn repeating the outcome the transaction already had answers `NONE` (a retry); the
//!   other outcome, or EndTxn with no transaction, is `INVALID_TXN_STATE`;
//! - a transaction open longer than its timeout is aborted by the coordinator with an epoch
//!   bump, at the first check of `transaction.abort.timed.out.transaction.cleanup.interval.ms`
//!   (10 s, counted from the cluster's start) after it expires.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::groups::Committed;

/// `transaction.max.timeout.ms`: the longest timeout InitProducerId accepts.
pub const TRANSACTION_TIMEOUT_MAX: Duration = Duration::from_secs(900);
/// `transaction.abort.timed.out.transaction.cleanup.interval.ms`.
pub const TIMEOUT_CHECK_INTERVAL: Duration = Duration::from_secs(10);
/// The transaction state topic, created on the first transactional FindCoordinator.
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";
/// `transaction.state.log.num.partitions`.
pub const TRANSACTION_STATE_PARTITIONS: i32 = 50;

/// Where a transaction is (Kafka's `TransactionState`, without the transient `Prepare*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnState {
    /// No transaction since InitProducerId.
    Empty,
    /// Partitions or offsets added, not ended.
    Ongoing,
    /// The last transaction committed.
    CompleteCommit,
    /// The last transaction aborted.
    CompleteAbort,
}

/// One transactional id's metadata.
#[derive(Debug, Clone)]
pub struct TxnMeta {
    /// The producer id.
    pub producer_id: i64,
    /// The current epoch.
    pub epoch: i16,
    /// The transaction timeout InitProducerId gave.
    pub timeout: Duration,
    /// The state.
    pub state: TxnState,
    /// The partitions of the open transaction.
    pub partitions: BTreeSet<(String, i32)>,
    /// Offsets TxnOffsetCommit sent in the open transaction: (group, topic, partition).
    pub offsets: BTreeMap<(String, String, i32), Committed>,
    /// When the open transaction started (time since the cluster was built).
    pub started: Duration,
    /// Counts transactions, so a timeout timer knows whether its transaction is still open.
    pub serial: u64,
}

/// How a request's producer id and epoch compare to the transactional id's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mismatch {
    /// No such transactional id, or another producer id: `INVALID_PRODUCER_ID_MAPPING` (49).
    UnknownProducer,
    /// An older (or other) epoch: `PRODUCER_FENCED` (90), `INVALID_PRODUCER_EPOCH` (47) below
    /// the request version that knows the newer code (KIP-588).
    Fenced,
}

/// Every transactional id's metadata.
#[derive(Debug, Default)]
pub struct Transactions {
    ids: BTreeMap<String, TxnMeta>,
    serials: u64,
}

impl Transactions {
    /// The metadata of `id`.
    pub fn get(&self, id: &str) -> Option<&TxnMeta> {
        self.ids.get(id)
    }

    /// Every transactional id, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &TxnMeta)> {
        self.ids.iter()
    }

    /// A new transactional id with `producer_id` at epoch 0.
    pub fn insert(&mut self, id: &str, producer_id: i64, timeout: Duration) -> &mut TxnMeta {
        self.ids.insert(
            id.to_string(),
            TxnMeta {
                producer_id,
                epoch: 0,
                timeout,
                state: TxnState::Empty,
                partitions: BTreeSet::new(),
                offsets: BTreeMap::new(),
                started: Duration::ZERO,
                serial: 0,
            },
        );
        self.ids.get_mut(id).expect("just inserted")
    }

    /// The metadata of `id` when `(producer_id, epoch)` is its current producer.
    ///
    /// # Errors
    /// [`Mismatch`].
    pub fn current(&mut self, id: &str, producer_id: i64, epoch: i16) -> Result<&mut TxnMeta, Mismatch> {
        let meta = self.ids.get_mut(id).ok_or(Mismatch::UnknownProducer)?;
        if meta.producer_id != producer_id {
            return Err(Mismatch::UnknownProducer);
        }
        if meta.epoch != epoch {
            return Err(Mismatch::Fenced);
        }
        Ok(meta)
    }

    /// Opens a transaction on `meta` if none is open, at `now`; returns its serial when it
    /// opened one (to arm its timeout).
    pub fn open(&mut self, id: &str, now: Duration) -> Option<u64> {
        let meta = self.ids.get_mut(id)?;
        if meta.state == TxnState::Ongoing {
            return None;
        }
        self.serials += 1;
        meta.state = TxnState::Ongoing;
        meta.started = now;
        meta.serial = self.serials;
        meta.partitions.clear();
        meta.offsets.clear();
        Some(self.serials)
    }

    /// Ends the open transaction of `id`: its state becomes `Complete*`; returns the
    /// partitions to write markers to and the offsets to commit (empty on abort).
    pub fn end(&mut self, id: &str, commit: bool) -> Ended {
        let Some(meta) = self.ids.get_mut(id) else { return Ended::default() };
        meta.state = if commit { TxnState::CompleteCommit } else { TxnState::CompleteAbort };
        let partitions = std::mem::take(&mut meta.partitions);
        let offsets = std::mem::take(&mut meta.offsets);
        Ended {
            producer: (meta.producer_id, meta.epoch),
            partitions: partitions.into_iter().collect(),
            offsets: if commit { offsets.into_iter().collect() } else { Vec::new() },
        }
    }

    /// The transactional ids whose transaction `serial` is still open.
    pub fn open_with_serial(&self, serial: u64) -> Option<&str> {
        self.ids.iter().find(|(_, m)| m.state == TxnState::Ongoing && m.serial == serial).map(|(id, _)| id.as_str())
    }

    /// Bumps the epoch of `id` (fencing its producer); returns the new epoch.
    pub fn bump(&mut self, id: &str) -> Option<i16> {
        let meta = self.ids.get_mut(id)?;
        meta.epoch = meta.epoch.checked_add(1).unwrap_or(0);
        Some(meta.epoch)
    }

    /// Forgets a deleted topic's partitions and offsets in open transactions.
    pub fn forget_topic(&mut self, topic: &str) {
        for meta in self.ids.values_mut() {
            meta.partitions.retain(|(t, _)| t != topic);
            meta.offsets.retain(|(_, t, _), _| t != topic);
        }
    }
}

/// What ending a transaction leaves to do.
#[derive(Debug, Default)]
pub struct Ended {
    /// The producer id and epoch the markers carry.
    pub producer: (i64, i16),
    /// The partitions to write a marker to.
    pub partitions: Vec<(String, i32)>,
    /// The offsets to commit: (group, topic, partition) and the offset.
    pub offsets: Vec<((String, String, i32), Committed)>,
}

/// When the coordinator aborts a transaction that started at `started` with `timeout`: the
/// first multiple of [`TIMEOUT_CHECK_INTERVAL`] after it expires.
pub fn abort_at(started: Duration, timeout: Duration) -> Duration {
    let expires = started + timeout;
    let step = TIMEOUT_CHECK_INTERVAL.as_millis();
    let checks = expires.as_millis().div_ceil(step).max(1);
    let at = checks * step;
    let at = if at <= expires.as_millis() { at + step } else { at };
    Duration::from_millis(u64::try_from(at).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transaction_opens_once_and_ends_with_its_partitions() {
        let mut t = Transactions::default();
        t.insert("tx", 1000, Duration::from_secs(60));
        assert_eq!(t.current("tx", 1000, 1).err(), Some(Mismatch::Fenced));
        assert_eq!(t.current("tx", 7, 0).err(), Some(Mismatch::UnknownProducer));
        assert_eq!(t.current("nope", 1000, 0).err(), Some(Mismatch::UnknownProducer));
        let serial = t.open("tx", Duration::from_secs(3)).expect("opens");
        assert_eq!(t.open("tx", Duration::from_secs(4)), None, "already open");
        t.current("tx", 1000, 0).expect("current").partitions.insert(("a".into(), 0));
        assert_eq!(t.open_with_serial(serial), Some("tx"));
        let ended = t.end("tx", false);
        assert_eq!(ended.partitions, vec![("a".to_string(), 0)]);
        assert_eq!(t.get("tx").map(|m| m.state), Some(TxnState::CompleteAbort));
        assert_eq!(t.open_with_serial(serial), None);
        assert_eq!(t.bump("tx"), Some(1));
    }

    #[test]
    fn a_timed_out_transaction_is_aborted_at_the_next_ten_second_check() {
        let s = Duration::from_secs;
        assert_eq!(abort_at(s(0), s(60)), s(70), "a check exactly at expiry sees it not yet expired");
        assert_eq!(abort_at(s(3), s(60)), s(70));
        assert_eq!(abort_at(Duration::from_millis(9_999), Duration::from_millis(1)), s(20));
        assert_eq!(abort_at(s(1), s(1)), s(10));
    }
}
