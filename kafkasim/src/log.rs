//! Partitions: an append-only log of record batches, with offsets, a high watermark and a log
//! start offset.
//!
//! Semantics (Apache Kafka's `UnifiedLog`, record batch format v2 from
//! <https://kafka.apache.org/documentation/#recordbatch>):
//! - a batch is stored as the producer sent it, with its base offset (bytes 0..8) and partition
//!   leader epoch (bytes 12..16) rewritten by the broker — both outside the batch's CRC, which
//!   covers attributes onward — and its records numbered `base ..= base + count - 1`;
//! - the high watermark is the log end offset: every replica is in sync at once (replication is
//!   not modelled), so `acks=1` and `acks=all` acknowledge the same thing;
//! - a fetch returns whole batches, starting with the one holding the fetch offset even if it
//!   starts before it (the client skips the records below its offset), up to a byte budget; the
//!   first batch of a fetch response goes out whatever its size (KIP-74), no other (Kafka would
//!   send a truncated last batch that clients drop; here it is left out);
//! - transactions (KIP-98): a transactional batch opens its producer's transaction on the
//!   partition at its base offset; a control batch (an EndTxn marker) closes it; the last stable
//!   offset (LSO) is the first offset of the earliest open transaction, else the high watermark;
//!   an aborted transaction is remembered as `(producer id, first offset, marker offset)` for
//!   `read_committed` fetches (Kafka's `.txnindex`);
//! - segments (Kafka's `LogSegment`s, with its `UnifiedLog.maybeRoll` rule): a new segment starts
//!   before an append that would take the last one past `segment.bytes`, or when the batch's max
//!   timestamp is more than `segment.ms` past the first batch of the last segment (its creation
//!   time when that batch has none); a segment is the unit retention deletes;
//! - retention ([`PartitionLog::delete_expired`], `UnifiedLog.deleteOldSegments`, run by the
//!   cluster every `log.retention.check.interval.ms` of the clock): oldest first, the segments whose
//!   largest timestamp is more than `retention.ms` old, then those whose removal keeps the log at
//!   or above `retention.bytes`; the last segment too when it holds records (the log rolls an empty
//!   one first), and the log start offset moves to the first offset kept;
//! - compaction ([`PartitionLog::clean`], Kafka's log cleaner, run by the cluster every
//!   `log.cleaner.backoff.ms` while a compacted log is dirty enough): see the `compaction`
//!   module; offsets never move, batches are rewritten without the records a later record with
//!   the same key replaced;
//! - a hard cap beyond [`crate::broker::ClusterBuilder::partition_bytes_max`]: the oldest
//!   batches are dropped at once and the log start offset moves past them (not Kafka: a bound on
//!   the fake's memory).

mod batch;
pub mod compaction;
mod filter;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::RecordBatchDecoder;

use batch::{BASE_OFFSET, LEADER_EPOCH, is_log_append_time};
pub use batch::{
    BATCH_HEADER_BYTES, BatchError, IncomingBatch, Marker, RECORDS_PER_BATCH_MAX, marker_batch, validate_batch,
};

/// A batch in the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredBatch {
    /// The offset of its first record.
    pub base_offset: i64,
    /// The offset of its last record.
    pub last_offset: i64,
    /// The largest record timestamp, milliseconds since the epoch.
    pub max_timestamp: i64,
    /// The producer id (-1 for a non-idempotent producer).
    pub producer_id: i64,
    /// The producer epoch (-1 for a non-idempotent producer).
    pub producer_epoch: i16,
    /// The sequence of its first record (-1 without idempotence).
    pub base_sequence: i32,
    /// The bytes as stored (base offset and leader epoch rewritten).
    pub bytes: Bytes,
}

/// An aborted transaction in a partition: what a `read_committed` fetch lists so the consumer
/// drops its records (Fetch's `aborted_transactions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    /// The producer id.
    pub producer_id: i64,
    /// The offset of the transaction's first batch in this partition.
    pub first_offset: i64,
    /// The offset of its abort marker.
    pub last_offset: i64,
}

/// How a partition's log rolls segments and how much it may hold: the topic's `segment.bytes`
/// and `segment.ms`, and the cluster's cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogLimits {
    /// `segment.bytes`: the most bytes one segment holds (a batch larger than that gets a segment
    /// of its own).
    pub segment_bytes: usize,
    /// `segment.ms`, milliseconds.
    pub segment_ms: i64,
    /// [`crate::broker::ClusterBuilder::partition_bytes_max`].
    pub partition_bytes_max: usize,
}

impl LogLimits {
    /// Kafka's defaults (1 GiB segments, 7 days) and no cap.
    pub const DEFAULT: LogLimits =
        LogLimits { segment_bytes: 1 << 30, segment_ms: 604_800_000, partition_bytes_max: usize::MAX };
}

/// A segment: the batches from `base_offset` up to the next segment's base offset.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Segment {
    base_offset: i64,
    bytes: usize,
    /// The largest record timestamp in it (-1 when empty).
    largest_timestamp: i64,
    /// The max timestamp of its first batch (-1 when empty): what `segment.ms` counts from.
    first_timestamp: i64,
    /// When it was created, milliseconds since the epoch.
    created_ms: i64,
    /// When a batch was last appended to it (the segment file's modification time).
    modified_ms: i64,
}

impl Segment {
    fn new(base_offset: i64, created_ms: i64) -> Segment {
        Segment {
            base_offset,
            bytes: 0,
            largest_timestamp: -1,
            first_timestamp: -1,
            created_ms,
            modified_ms: created_ms,
        }
    }

    /// What `retention.ms` counts from: the largest record timestamp, else the time of the last
    /// append (Kafka's `LogSegment.largestTimestamp`).
    fn retention_timestamp(&self) -> i64 {
        if self.largest_timestamp >= 0 { self.largest_timestamp } else { self.modified_ms }
    }
}

/// One partition's log.
#[derive(Debug, Clone, Default)]
pub struct PartitionLog {
    batches: VecDeque<StoredBatch>,
    /// Never empty once a batch was appended; the last is the active segment.
    segments: VecDeque<Segment>,
    log_start: i64,
    log_end: i64,
    bytes: usize,
    /// Open transactions: producer id → the offset of its first batch here.
    open: std::collections::BTreeMap<i64, i64>,
    aborted: Vec<AbortedTxn>,
    /// Where the last cleaning ended (Kafka's cleaner checkpoint): the next one's first dirty
    /// offset.
    first_dirty: i64,
}

impl PartitionLog {
    /// The first offset still in the log.
    pub fn log_start(&self) -> i64 {
        self.log_start
    }

    /// The high watermark: here the log end offset (see the module doc).
    pub fn high_watermark(&self) -> i64 {
        self.log_end
    }

    /// The last stable offset: the first offset of the earliest open transaction, else the
    /// high watermark.
    pub fn last_stable_offset(&self) -> i64 {
        self.open.values().copied().min().unwrap_or(self.log_end).max(self.log_start)
    }

    /// Whether `producer_id` has an open transaction here.
    pub fn has_open_transaction(&self, producer_id: i64) -> bool {
        self.open.contains_key(&producer_id)
    }

    /// The aborted transactions a `read_committed` fetch from `offset` up to `end` (exclusive)
    /// must list: those whose records overlap that range, by first offset.
    pub fn aborted_between(&self, offset: i64, end: i64) -> Vec<AbortedTxn> {
        let mut out: Vec<AbortedTxn> =
            self.aborted.iter().filter(|a| a.last_offset >= offset && a.first_offset < end).copied().collect();
        out.sort_by_key(|a| a.first_offset);
        out
    }

    /// Appends an EndTxn marker batch ([`marker_batch`]) and closes its producer's open
    /// transaction here, if any (an added partition the transaction never wrote to gets a
    /// marker too, as Kafka writes one to every partition of the transaction); returns the
    /// marker's offset. An abort is remembered for `read_committed` fetches.
    pub fn append_marker(
        &mut self,
        batch: &IncomingBatch,
        leader_epoch: i32,
        marker: Marker,
        limits: &LogLimits,
        now_ms: i64,
    ) -> i64 {
        let producer_id = batch.info.producer_id;
        let first = self.open.remove(&producer_id);
        let at = self.append(batch, leader_epoch, limits, now_ms);
        if marker == Marker::Abort
            && let Some(first_offset) = first
        {
            self.aborted.push(AbortedTxn { producer_id, first_offset, last_offset: at });
        }
        at
    }

    /// The batches in offset order.
    pub fn batches(&self) -> impl Iterator<Item = &StoredBatch> {
        self.batches.iter()
    }

    /// Bytes held.
    pub fn size_bytes(&self) -> usize {
        self.bytes
    }

    /// The number of segments (at least one once a batch was appended).
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// Starts a new segment before appending `batch` at `now_ms` when the active one is full or
    /// old (the module doc's rule).
    fn maybe_roll(&mut self, batch: &IncomingBatch, limits: &LogLimits, now_ms: i64) {
        let roll = match self.segments.back() {
            None => true,
            Some(seg) => {
                let since = if seg.first_timestamp >= 0 { seg.first_timestamp } else { seg.created_ms };
                let waited = if seg.first_timestamp >= 0 { batch.max_timestamp } else { now_ms }.saturating_sub(since);
                seg.bytes > 0
                    && (seg.bytes.saturating_add(batch.bytes.len()) > limits.segment_bytes
                        || waited > limits.segment_ms)
            }
        };
        if roll {
            self.segments.push_back(Segment::new(self.log_end, now_ms));
        }
    }

    /// Appends a validated batch under `leader_epoch` at `now_ms` (milliseconds since the epoch;
    /// a segment's creation time); returns its base offset. Drops the oldest batches while the
    /// log holds more than `limits.partition_bytes_max` bytes (never the new one).
    pub fn append(&mut self, batch: &IncomingBatch, leader_epoch: i32, limits: &LogLimits, now_ms: i64) -> i64 {
        self.maybe_roll(batch, limits, now_ms);
        let base = self.log_end;
        let mut bytes = BytesMut::from(&batch.bytes[..]);
        bytes[BASE_OFFSET].copy_from_slice(&base.to_be_bytes());
        bytes[LEADER_EPOCH].copy_from_slice(&leader_epoch.to_be_bytes());
        let count = i64::from(batch.info.record_count);
        assert!(count >= 1, "log: a batch holds at least one record (validate_batch checks)");
        assert!(
            self.batches.back().is_none_or(|b| b.last_offset < base),
            "log: batch offsets increase (the last batch ends before the log end offset)"
        );
        if batch.info.transactional && !batch.info.control {
            self.open.entry(batch.info.producer_id).or_insert(base);
        }
        self.batches.push_back(StoredBatch {
            base_offset: base,
            last_offset: base + count - 1,
            max_timestamp: batch.max_timestamp,
            producer_id: batch.info.producer_id,
            producer_epoch: batch.info.producer_epoch,
            base_sequence: batch.info.base_sequence,
            bytes: bytes.freeze(),
        });
        self.bytes += batch.bytes.len();
        self.log_end = base + count;
        let seg = self.segments.back_mut().expect("maybe_roll made one");
        seg.bytes += batch.bytes.len();
        seg.largest_timestamp = seg.largest_timestamp.max(batch.max_timestamp);
        seg.modified_ms = now_ms;
        if seg.first_timestamp < 0 {
            seg.first_timestamp = batch.max_timestamp;
        }
        while self.bytes > limits.partition_bytes_max && self.batches.len() > 1 {
            let dropped = self.batches.pop_front().expect("more than one batch");
            self.bytes = self.bytes.checked_sub(dropped.bytes.len()).expect("log: bytes held count every batch");
            self.log_start = dropped.last_offset + 1;
            let first = self.segments.front_mut().expect("a batch is in a segment");
            first.bytes = first.bytes.checked_sub(dropped.bytes.len()).expect("log: a segment counts its batches");
            first.base_offset = self.log_start;
            if first.bytes == 0 && self.segments.len() > 1 {
                self.segments.pop_front();
            }
        }
        self.trimmed();
        base
    }

    /// Retention (the module doc's rule) at `now_ms`, milliseconds since the epoch: deletes the
    /// oldest segments older than `retention_ms`, then those beyond `retention_bytes`; returns the
    /// number of records deleted.
    pub fn delete_expired(&mut self, retention_ms: Option<u64>, retention_bytes: Option<u64>, now_ms: i64) -> i64 {
        let before = self.log_start;
        if let Some(ms) = retention_ms.and_then(|ms| i64::try_from(ms).ok()) {
            let n = self
                .segments
                .iter()
                .take_while(|s| s.bytes > 0 && now_ms.saturating_sub(s.retention_timestamp()) > ms)
                .count();
            self.delete_segments(n, now_ms);
        }
        if let Some(limit) = retention_bytes.and_then(|b| usize::try_from(b).ok())
            && self.bytes >= limit
        {
            let mut over = self.bytes - limit;
            let n = self
                .segments
                .iter()
                .take_while(|s| {
                    let fits = s.bytes > 0 && over >= s.bytes;
                    if fits {
                        over -= s.bytes;
                    }
                    fits
                })
                .count();
            self.delete_segments(n, now_ms);
        }
        self.log_start - before
    }

    /// When [`PartitionLog::delete_expired`] will next delete something, in milliseconds since
    /// the epoch (`i64::MIN`: now); `None` while nothing would ever expire. Only the oldest
    /// segment counts: deletion stops at the first segment kept.
    pub fn retention_due_ms(&self, retention_ms: Option<u64>, retention_bytes: Option<u64>) -> Option<i64> {
        let first = self.segments.front().filter(|s| s.bytes > 0)?;
        if retention_bytes
            .and_then(|b| usize::try_from(b).ok())
            .is_some_and(|limit| self.bytes >= limit.saturating_add(first.bytes))
        {
            return Some(i64::MIN);
        }
        let ms = i64::try_from(retention_ms?).ok()?;
        Some(first.retention_timestamp().saturating_add(ms).saturating_add(1))
    }

    /// Deletes the `n` oldest segments; when that is all of them, an empty one starts at the
    /// log end offset (Kafka rolls before deleting the active segment).
    fn delete_segments(&mut self, n: usize, now_ms: i64) {
        if n == 0 {
            return;
        }
        if n == self.segments.len() {
            self.segments.push_back(Segment::new(self.log_end, now_ms));
        }
        for _ in 0..n {
            let seg = self.segments.pop_front().expect("n is at most the segment count");
            self.bytes = self.bytes.checked_sub(seg.bytes).expect("log: bytes held count every segment");
        }
        let next = self.segments.front().map_or(self.log_end, |s| s.base_offset);
        while self.batches.front().is_some_and(|b| b.base_offset < next) {
            self.batches.pop_front();
        }
        self.log_start = next;
        self.trimmed();
    }

    /// After the log start offset moved: forgets aborted transactions wholly before it.
    fn trimmed(&mut self) {
        let start = self.log_start;
        self.aborted.retain(|a| a.last_offset >= start);
        assert!(
            self.log_start <= self.log_end,
            "log: log start {} <= log end offset (high watermark) {}",
            self.log_start,
            self.log_end
        );
    }

    /// Whole batches from the one holding `offset` up to the one before `end` (the high
    /// watermark, or the last stable offset for `read_committed`), within `bytes_max` bytes and
    /// one segment (Kafka's `LocalLog.read` reads the first segment with data at or after
    /// `offset`, never past it: the next fetch reads the next); with `at_least_one`, the first
    /// batch whatever its size (KIP-74: the first batch of a fetch response). `offset` must be
    /// within `log_start ..= high_watermark`.
    pub fn read(&self, offset: i64, end: i64, bytes_max: usize, at_least_one: bool) -> Vec<Bytes> {
        let mut out = Vec::new();
        let mut size = 0usize;
        let first = self.batches.iter().find(|b| b.last_offset >= offset).map_or(self.log_end, |b| b.base_offset);
        let segment_end =
            self.segments.iter().find(|s| s.base_offset > first).map_or(i64::MAX, |s| s.base_offset).min(end);
        for batch in self.batches.iter().filter(|b| b.last_offset >= offset).take_while(|b| b.base_offset < segment_end)
        {
            let exempt = at_least_one && out.is_empty();
            if !exempt && size + batch.bytes.len() > bytes_max {
                break;
            }
            size += batch.bytes.len();
            out.push(batch.bytes.clone());
            if size >= bytes_max {
                break;
            }
        }
        out
    }

    /// The first offset whose record timestamp is at or after `timestamp_ms`, with that record's
    /// timestamp (ListOffsets by time, KIP-79); `None` when no record is that late.
    pub fn offset_for_timestamp(&self, timestamp_ms: i64) -> Option<(i64, i64)> {
        for batch in self.batches.iter().filter(|b| b.max_timestamp >= timestamp_ms) {
            if is_log_append_time(&batch.bytes) {
                // Every record of the batch has the log append time.
                return Some((batch.base_offset, batch.max_timestamp));
            }
            let mut buf = batch.bytes.clone();
            let Ok(set) = RecordBatchDecoder::decode(&mut buf) else { continue };
            if let Some(r) = set.records.iter().find(|r| r.timestamp >= timestamp_ms) {
                return Some((r.offset, r.timestamp));
            }
        }
        None
    }

    /// The offset and timestamp of the record with the largest timestamp (ListOffsets
    /// `MAX_TIMESTAMP`, -3, KIP-734); the earliest such record on ties.
    pub fn max_timestamp(&self) -> Option<(i64, i64)> {
        let best = self.batches.iter().map(|b| b.max_timestamp).max()?;
        self.offset_for_timestamp(best)
    }
}
