//! What the consumer knows of each assigned partition — where fetching starts or stands, the
//! application's position, the stored and committed offsets, paused or not — and the queue of
//! fetched messages and errors `recv()` serves, in the order the fetcher got them (librdkafka's
//! consumer queue).
//!
//! Offsets follow librdkafka (`INTRODUCTION.md`, "Offset management"): the position, a stored
//! and a committed offset are each the *next* offset to read. A seek, a pause and a reassignment
//! bump the partition's version, and queued messages of an older version are dropped unread
//! (librdkafka's op versions), so a seek's first message is the one seeked to.

use std::collections::{BTreeMap, VecDeque};

use tokio::time::Instant;

use crate::rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode as Code};
use crate::rdkafka::message::{Message as _, OwnedMessage};
use crate::rdkafka::topic_partition_list::{Offset, TopicPartitionList};

/// A topic partition.
pub(crate) type Tp = (String, i32);

/// Messages queued per partition beyond which it is not fetched (librdkafka's
/// `queued.min.messages` default).
pub(crate) const QUEUED_MIN_MESSAGES: usize = 100_000;

/// Where a partition's fetching starts or stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Start {
    /// Fetch from this offset.
    At(i64),
    /// Look up the committed offset (through the group), else `auto.offset.reset`.
    Committed,
    /// ListOffsets at `timestamp` (-2 earliest, -1 latest), then `tail` records back.
    List {
        /// The ListOffsets timestamp.
        timestamp: i64,
        /// Records before it to start at (`Offset::OffsetTail`).
        tail: i64,
    },
    /// `auto.offset.reset=error` hit: not fetched until a seek.
    Failed,
}

impl Start {
    /// Where `offset` (as given to `assign`/`seek`) starts.
    pub(crate) fn of(offset: Offset) -> Start {
        match offset {
            Offset::Offset(n) if n >= 0 => Start::At(n),
            Offset::Beginning => Start::List { timestamp: -2, tail: 0 },
            Offset::End => Start::List { timestamp: -1, tail: 0 },
            Offset::OffsetTail(n) => Start::List { timestamp: -1, tail: n.max(0) },
            Offset::Stored | Offset::Invalid | Offset::Offset(_) => Start::Committed,
        }
    }
}

/// One assigned partition.
#[derive(Debug, Clone)]
pub(crate) struct Partition {
    /// What the fetcher does next for it.
    pub start: Start,
    /// A request for it (fetch, ListOffsets, committed lookup) is in flight.
    pub busy: bool,
    /// Bumped by seek, pause and reassignment: answers and queued messages of older versions
    /// are dropped.
    pub version: u64,
    /// Messages of this version queued.
    pub buffered: usize,
    /// Not fetched before this (backoff after an error).
    pub not_before: Option<Instant>,
    /// The offset given to `assign` (raw), reported by `assignment()`.
    pub assigned: i64,
    /// The next offset the application reads (the last returned + 1, or a seek's).
    pub app_position: Option<i64>,
    /// The stored offset and its metadata.
    pub stored: Option<(i64, Option<String>)>,
    /// The offset last committed by this consumer (or looked up).
    pub committed: Option<i64>,
    /// Paused: not fetched.
    pub paused: bool,
}

/// An entry of the consumer queue.
#[derive(Debug)]
pub(crate) enum Queued {
    /// A fetched message.
    Message {
        /// Its partition.
        tp: Tp,
        /// The partition's version when it was fetched.
        version: u64,
        /// The message.
        message: OwnedMessage,
    },
    /// An error for the application (`auto.offset.reset=error`, a fetch error).
    Error {
        /// The partition it is about (dropped with the partition), if any.
        tp: Option<(Tp, u64)>,
        /// The error.
        error: KafkaError,
    },
    /// A commit's result for the commit callback.
    Commit(KafkaResult<()>, TopicPartitionList),
}

/// Everything the handles and the fetcher share.
#[derive(Debug, Default)]
pub(crate) struct State {
    /// The assignment.
    pub partitions: BTreeMap<Tp, Partition>,
    /// The consumer queue.
    pub queue: VecDeque<Queued>,
    /// The subscribed topics.
    pub subscription: Vec<String>,
    /// The assignment was lost (set while the callbacks of a lost assignment run, until the
    /// next assignment).
    pub lost: bool,
    /// Partition counts of the topics the metadata knows (librdkafka's toppars: what
    /// `store_offset` of an unassigned partition tells apart).
    pub partition_counts: BTreeMap<String, usize>,
    versions: u64,
}

impl State {
    fn next_version(&mut self) -> u64 {
        self.versions += 1;
        self.versions
    }

    /// Adds `tp` starting at `offset` (a partition already assigned restarts there).
    pub(crate) fn add(&mut self, tp: Tp, offset: Offset) {
        let version = self.next_version();
        let raw = offset.to_raw().unwrap_or(-1001);
        let old = self.partitions.remove(&tp);
        self.partitions.insert(
            tp,
            Partition {
                start: Start::of(offset),
                busy: false,
                version,
                buffered: 0,
                not_before: None,
                assigned: raw,
                app_position: None,
                stored: old.as_ref().and_then(|o| o.stored.clone()),
                committed: old.and_then(|o| o.committed),
                paused: false,
            },
        );
    }

    /// Removes `tp` from the assignment (its queued messages are dropped as they come up).
    pub(crate) fn remove(&mut self, tp: &Tp) {
        self.partitions.remove(tp);
    }

    /// Seeks `tp` to `offset`: fetching restarts there, queued messages are dropped.
    ///
    /// # Errors
    /// `Seek("Local: Unknown partition")` when `tp` is not assigned.
    pub(crate) fn seek(&mut self, tp: &Tp, offset: Offset) -> KafkaResult<()> {
        let version = self.next_version();
        let p =
            self.partitions.get_mut(tp).ok_or_else(|| KafkaError::Seek(Code::UnknownPartition.description().into()))?;
        p.version = version;
        p.buffered = 0;
        p.busy = false;
        p.not_before = None;
        p.start = Start::of(offset);
        if let Start::At(n) = p.start {
            p.app_position = Some(n);
        }
        Ok(())
    }

    /// Pauses or resumes `tp` (not assigned: ignored). A pause drops what is queued; a resume
    /// fetches from the application's position.
    pub(crate) fn set_paused(&mut self, tp: &Tp, paused: bool) {
        let version = self.next_version();
        let Some(p) = self.partitions.get_mut(tp) else { return };
        if p.paused == paused {
            return;
        }
        p.paused = paused;
        if paused {
            p.version = version;
            p.buffered = 0;
            p.busy = false;
            if let (Some(pos), Start::At(_)) = (p.app_position, p.start) {
                p.start = Start::At(pos);
            }
        }
    }

    /// Stores `offset` (the next to read) for `tp`.
    ///
    /// # Errors
    /// As librdkafka 2.x's `rd_kafka_offset_store`: `StoreOffset(State)` when `tp` is a known
    /// partition not assigned, `StoreOffset(UnknownPartition)` when the consumer knows no such
    /// partition.
    pub(crate) fn store(&mut self, tp: &Tp, offset: i64, metadata: Option<String>) -> KafkaResult<()> {
        let Some(p) = self.partitions.get_mut(tp) else {
            let known = self.partition_counts.get(&tp.0).is_some_and(|n| usize::try_from(tp.1).is_ok_and(|i| i < *n));
            return Err(KafkaError::StoreOffset(if known { Code::State } else { Code::UnknownPartition }));
        };
        p.stored = Some((offset, metadata));
        Ok(())
    }

    /// The stored offsets not yet committed, of `only` (or the whole assignment).
    pub(crate) fn to_commit(&self, only: Option<&[Tp]>) -> Vec<(Tp, i64, Option<String>)> {
        self.partitions
            .iter()
            .filter(|(tp, _)| only.is_none_or(|o| o.contains(tp)))
            .filter_map(|(tp, p)| {
                let (offset, metadata) = p.stored.clone()?;
                // A logical (negative) stored offset is not committed: librdkafka's OffsetCommit
                // skips offsets < 0 (`rd_kafka_topic_partition_list_count_abs_offsets`).
                (offset >= 0 && p.committed != Some(offset)).then(|| (tp.clone(), offset, metadata))
            })
            .collect()
    }

    /// Notes a successful commit of `offset` for `tp`.
    pub(crate) fn committed(&mut self, tp: &Tp, offset: i64) {
        if let Some(p) = self.partitions.get_mut(tp) {
            p.committed = Some(offset);
        }
    }

    /// Takes the next entry for the application: a message (storing its offset + 1 when
    /// `auto_store`), an error, or a commit result; stale messages are dropped on the way.
    /// Returns it and whether the fetcher should look again (a partition's queue drained).
    pub(crate) fn pop(&mut self, auto_store: bool) -> (Option<Queued>, bool) {
        let mut wake = false;
        while let Some(entry) = self.queue.pop_front() {
            match entry {
                Queued::Message { tp, version, message } => {
                    let Some(p) = self.partitions.get_mut(&tp).filter(|p| p.version == version) else { continue };
                    p.buffered = p.buffered.saturating_sub(1);
                    wake |= p.buffered == 0;
                    let next = message.offset() + 1;
                    p.app_position = Some(next);
                    if auto_store {
                        p.stored = Some((next, None));
                    }
                    return (Some(Queued::Message { tp, version, message }), wake);
                }
                Queued::Error { tp: Some((tp, version)), error } => {
                    if self.partitions.get(&tp).is_some_and(|p| p.version == version) {
                        return (Some(Queued::Error { tp: Some((tp, version)), error }), wake);
                    }
                }
                other => return (Some(other), wake),
            }
        }
        (None, wake)
    }

    /// The assignment as a list (offsets as given to `assign`).
    pub(crate) fn assignment(&self) -> TopicPartitionList {
        let mut tpl = TopicPartitionList::with_capacity(self.partitions.len());
        for ((t, p), part) in &self.partitions {
            let _ = tpl.add_partition_offset(t, *p, Offset::from_raw(part.assigned));
        }
        tpl
    }

    /// The application's positions (`Offset::Invalid` before the first message or seek).
    pub(crate) fn positions(&self) -> TopicPartitionList {
        let mut tpl = TopicPartitionList::with_capacity(self.partitions.len());
        for ((t, p), part) in &self.partitions {
            let offset = part.app_position.map_or(Offset::Invalid, Offset::Offset);
            let _ = tpl.add_partition_offset(t, *p, offset);
        }
        tpl
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rdkafka::message::Timestamp;

    fn msg(offset: i64) -> OwnedMessage {
        OwnedMessage::new(None, None, "t".into(), Timestamp::NotAvailable, 0, offset, None)
    }

    #[test]
    fn a_seek_drops_what_was_queued_and_popping_stores_the_next_offset() {
        let mut st = State::default();
        let tp: Tp = ("t".into(), 0);
        st.add(tp.clone(), Offset::Offset(3));
        let v = st.partitions[&tp].version;
        for o in 3..6 {
            st.queue.push_back(Queued::Message { tp: tp.clone(), version: v, message: msg(o) });
        }
        st.partitions.get_mut(&tp).expect("assigned").buffered = 3;
        let (first, _) = st.pop(true);
        assert!(matches!(first, Some(Queued::Message { ref message, .. }) if message.offset() == 3));
        assert_eq!(st.partitions[&tp].stored, Some((4, None)));
        assert_eq!(st.to_commit(None), vec![(tp.clone(), 4, None)]);
        st.committed(&tp, 4);
        assert!(st.to_commit(None).is_empty());
        st.seek(&tp, Offset::Offset(1)).expect("assigned");
        assert!(st.pop(true).0.is_none(), "messages queued before the seek are dropped");
        assert_eq!((st.partitions[&tp].start, st.partitions[&tp].app_position), (Start::At(1), Some(1)));
        assert!(st.seek(&("u".into(), 0), Offset::End).is_err());
        assert!(matches!(st.store(&("u".into(), 0), 1, None), Err(KafkaError::StoreOffset(Code::UnknownPartition))));
        st.partition_counts.insert("u".into(), 1);
        assert!(matches!(st.store(&("u".into(), 0), 1, None), Err(KafkaError::StoreOffset(Code::State))));
    }
}
