//! Compaction (`cleanup.policy=compact`), as Apache Kafka 4.2's log cleaner does it
//! (`LogCleanerManager.grabFilthiestCompactedLog`/`cleanableOffsets`, `Cleaner.doClean`,
//! `CleanedTransactionMetadata`):
//! - what may be cleaned: from the first dirty offset (where the last cleaning ended; the log
//!   start offset at first) up to the first uncleanable offset: the lowest of the active
//!   segment's base offset, the last stable offset, and the first dirty segment whose largest
//!   timestamp is within `min.compaction.lag.ms` of now, rounded down to a segment's base;
//! - when: the dirty bytes over all bytes (whole segments) above `min.cleanable.dirty.ratio`, or
//!   some dirty bytes and a dirty segment whose first batch is older than
//!   `max.compaction.lag.ms`;
//! - how: an offset map of each key's last offset in the dirty range (aborted transactions'
//!   records left out), then every segment below the first uncleanable offset is rewritten, in
//!   groups that fit `segment.bytes`: a record stays when no later record has its key; a record
//!   without a key goes; a tombstone (no value) stays until its batch's delete horizon, which
//!   the first cleaning that keeps it sets to now + `delete.retention.ms`; an aborted
//!   transaction's records go; a transaction marker goes once its transaction has no batch left,
//!   after a delete horizon of its own;
//! - what stays even when empty: a producer's last batch (its sequence and epoch) and the last
//!   batch of the cleaned range (its last offset), as 61-byte headers;
//! - what does not move: offsets, the log start offset, the high watermark; the cleaned range
//!   ends at the first uncleanable offset, where the next cleaning starts.
//!
//! Not modelled: the dedupe buffer's size (every dirty key fits), the cleaner's I/O throttle,
//! producer state expiry (`producer.id.expiration.ms`), message format before v2.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use bytes::Bytes;

use super::filter::{self, Parsed, RawRecord};
use super::{AbortedTxn, PartitionLog, Segment, StoredBatch};

#[cfg(test)]
mod tests;

/// A compacted topic's cleaner settings (its topic configs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CleanerConfig {
    /// `min.cleanable.dirty.ratio`: dirty bytes over all bytes above which the log is cleaned.
    pub min_cleanable_ratio: f64,
    /// `min.compaction.lag.ms`: a segment with a record newer than this stays dirty.
    pub min_lag_ms: i64,
    /// `max.compaction.lag.ms`: a dirty segment whose first batch is older than this is cleaned
    /// whatever the ratio.
    pub max_lag_ms: i64,
    /// `delete.retention.ms`: how long a tombstone (and an empty transaction's marker) stays
    /// after the cleaning that first kept it.
    pub delete_retention_ms: i64,
    /// `segment.bytes`: the most bytes a group of cleaned segments merged into one may hold.
    pub segment_bytes: usize,
}

impl CleanerConfig {
    /// Kafka's defaults: ratio 0.5, no minimum lag, no maximum lag, tombstones kept a day, 1 GiB.
    pub const DEFAULT: CleanerConfig = CleanerConfig {
        min_cleanable_ratio: 0.5,
        min_lag_ms: 0,
        max_lag_ms: i64::MAX,
        delete_retention_ms: 86_400_000,
        segment_bytes: 1 << 30,
    };
}

/// What one cleaning did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cleaned {
    /// The first dirty offset it started from.
    pub from: i64,
    /// The first offset it did not clean (the next cleaning's first dirty offset).
    pub to: i64,
    /// Records removed.
    pub records_removed: u64,
    /// Bytes held before and after.
    pub bytes: (usize, usize),
}

/// The range a cleaning would cover and whether it is due.
struct ToClean {
    first_dirty: i64,
    first_uncleanable: i64,
    due: bool,
}

/// A producer's last batch in the log (Kafka's `lastRecordsOfActiveProducers`).
struct LastRecord {
    last_data_offset: Option<i64>,
    epoch: i16,
}

/// The transactions seen so far in one pass over the log (Kafka's `CleanedTransactionMetadata`).
#[derive(Default)]
struct TxnPass {
    /// Aborted transactions not yet reached, by first offset.
    pending: VecDeque<AbortedTxn>,
    /// Open aborted transactions: producer id → whether one of its batches was seen.
    aborted: HashMap<i64, bool>,
    /// Producers with a batch of a (to be) committed transaction seen.
    committed: BTreeSet<i64>,
}

impl TxnPass {
    fn new(log: &PartitionLog) -> TxnPass {
        let mut pending: Vec<AbortedTxn> = log.aborted.clone();
        pending.sort_by_key(|a| a.first_offset);
        TxnPass { pending: pending.into(), ..TxnPass::default() }
    }

    fn reach(&mut self, offset: i64) {
        while self.pending.front().is_some_and(|a| a.first_offset <= offset) {
            let a = self.pending.pop_front().expect("checked");
            self.aborted.insert(a.producer_id, false);
        }
    }

    /// A data batch: whether it belongs to an aborted transaction.
    fn data(&mut self, b: &StoredBatch, transactional: bool) -> bool {
        self.reach(b.last_offset);
        if !transactional {
            return false;
        }
        if let Some(seen) = self.aborted.get_mut(&b.producer_id) {
            *seen = true;
            return true;
        }
        self.committed.insert(b.producer_id);
        false
    }

    /// A marker: whether its transaction has no batch left in the log (so it may go).
    fn marker(&mut self, b: &StoredBatch, parsed: &Parsed) -> bool {
        self.reach(b.last_offset);
        let abort =
            parsed.records.first().and_then(|r| r.key.as_ref()).is_some_and(|k| k.get(2..4) == Some(&[0u8, 0][..]));
        if abort {
            !self.aborted.remove(&b.producer_id).unwrap_or(false)
        } else {
            !self.committed.remove(&b.producer_id)
        }
    }
}

/// Whether a batch stays without its records, goes, or goes only when it ends up empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Retention {
    Delete,
    RetainEmpty,
    DeleteEmpty,
}

impl PartitionLog {
    /// The segments holding offsets in `from .. to` (Kafka's `logSegments(from, to)`), as
    /// indexes.
    fn segments_between(&self, from: i64, to: i64) -> std::ops::Range<usize> {
        let start = self.segments.iter().rposition(|s| s.base_offset <= from).unwrap_or(0);
        let end = self.segments.iter().position(|s| s.base_offset >= to).unwrap_or(self.segments.len());
        start..end.max(start)
    }

    fn to_clean(&self, cfg: &CleanerConfig, now_ms: i64) -> Option<ToClean> {
        let active = self.segments.back()?.base_offset;
        let first_dirty = if self.first_dirty < self.log_start || self.first_dirty > self.log_end {
            self.log_start
        } else {
            self.first_dirty
        };
        let non_active = self.segments_between(first_dirty, active);
        let mut uncleanable = self.last_stable_offset().min(active);
        if cfg.min_lag_ms > 0
            && let Some(s) =
                self.segments.range(non_active.clone()).find(|s| s.largest_timestamp > now_ms - cfg.min_lag_ms)
        {
            uncleanable = uncleanable.min(s.base_offset);
        }
        let uncleanable = uncleanable.max(first_dirty);
        // Rounded down to the base of the segment holding it.
        let first_uncleanable =
            self.segments.range(self.segments_between(uncleanable, active)).next().map_or(active, |s| s.base_offset);
        let bytes = |r: std::ops::Range<usize>| self.segments.range(r).map(|s| s.bytes).sum::<usize>();
        let clean_bytes = bytes(self.segments_between(-1, first_dirty));
        let cleanable_bytes = bytes(self.segments_between(first_dirty.min(first_uncleanable), first_uncleanable));
        let total = clean_bytes + cleanable_bytes;
        if total == 0 {
            return None;
        }
        let ratio = cleanable_bytes as f64 / total as f64;
        let cutoff = now_ms.saturating_sub(cfg.max_lag_ms.max(0));
        let need_now = self
            .segments
            .range(non_active)
            .map(|s| s.first_timestamp)
            .filter(|t| *t > 0)
            .min()
            .is_some_and(|earliest| earliest < cutoff);
        let due = (need_now && cleanable_bytes > 0) || ratio > cfg.min_cleanable_ratio;
        Some(ToClean { first_dirty, first_uncleanable, due })
    }

    /// Whether a cleaning is due at `now_ms` (the module doc's rule).
    pub fn clean_due(&self, cfg: &CleanerConfig, now_ms: i64) -> bool {
        self.to_clean(cfg, now_ms).is_some_and(|t| t.due)
    }

    /// When a cleaning will next be due with no more appends, milliseconds since the epoch
    /// (`now_ms` if it is due now); `None` if only an append (or the end of a transaction) can
    /// make one due.
    pub fn clean_due_ms(&self, cfg: &CleanerConfig, now_ms: i64) -> Option<i64> {
        let t = self.to_clean(cfg, now_ms)?;
        if t.due {
            return Some(now_ms);
        }
        let active = self.segments.back()?.base_offset;
        let dirty = self.segments_between(t.first_dirty, active);
        let mut next = None::<i64>;
        if cfg.min_lag_ms > 0 {
            // A segment held back by the minimum lag becomes cleanable after it.
            next = self
                .segments
                .range(dirty.clone())
                .map(|s| s.largest_timestamp)
                .filter(|ts| *ts > now_ms - cfg.min_lag_ms)
                .map(|ts| ts + cfg.min_lag_ms + 1)
                .min();
        }
        if cfg.max_lag_ms < i64::MAX / 2 {
            let lag = self
                .segments
                .range(dirty)
                .map(|s| s.first_timestamp)
                .filter(|ts| *ts > 0)
                .min()
                .map(|ts| ts.saturating_add(cfg.max_lag_ms) + 1);
            next = match (next, lag) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        next.filter(|at| *at > now_ms).filter(|at| {
            // Only if the log would then be due (the ratio may still be too low).
            self.to_clean(cfg, *at).is_some_and(|t| t.due)
        })
    }

    /// One cleaning at `now_ms` if one is due (the module doc's rules).
    pub fn clean(&mut self, cfg: &CleanerConfig, now_ms: i64) -> Option<Cleaned> {
        let t = self.to_clean(cfg, now_ms).filter(|t| t.due)?;
        let (from, to) = (t.first_dirty, t.first_uncleanable);
        let bytes_before = self.bytes;
        let parsed: Vec<Option<Parsed>> =
            self.batches.iter().take_while(|b| b.base_offset < to).map(|b| filter::parse(&b.bytes)).collect();
        let map = self.offset_map(&parsed, from, to);
        let latest = to - 1;
        let last_records = self.last_records();
        let mut pass = TxnPass::new(self);
        let mut kept: Vec<StoredBatch> = Vec::new();
        let mut removed = 0u64;
        let mut observed: BTreeSet<(i64, i64)> = BTreeSet::new();
        for (b, p) in self.batches.iter().zip(&parsed) {
            let Some(p) = p else {
                kept.push(b.clone());
                continue;
            };
            let can_discard = if p.control { pass.marker(b, p) } else { pass.data(b, p.transactional) };
            let discard_records =
                if p.control { can_discard && p.delete_horizon.is_some_and(|h| h <= now_ms) } else { can_discard };
            let last_of_producer = last_records.get(&b.producer_id).is_some_and(|l| match l.last_data_offset {
                Some(o) => b.last_offset == o,
                None => p.control && b.producer_epoch == l.epoch,
            });
            let retention = if (b.producer_id >= 0 && last_of_producer) || b.last_offset + 1 == to {
                Retention::RetainEmpty
            } else if discard_records {
                Retention::Delete
            } else {
                Retention::DeleteEmpty
            };
            let count = p.records.len() as u64;
            if retention == Retention::Delete {
                removed += count;
                continue;
            }
            let keep = |r: &RawRecord| -> bool {
                if discard_records {
                    false
                } else if p.control || r.offset > latest {
                    true
                } else if let Some(key) = &r.key {
                    let newest = r.offset >= map.get(key).copied().unwrap_or(-1);
                    let tombstone_stays = p.delete_horizon.is_none_or(|h| now_ms < h);
                    newest && (r.has_value || tombstone_stays)
                } else {
                    false
                }
            };
            let retained: Vec<&RawRecord> = p.records.iter().filter(|r| keep(r)).collect();
            removed += count - retained.len() as u64;
            if b.producer_id >= 0 && p.transactional {
                observed.insert((b.producer_id, b.base_offset));
            }
            if !retained.is_empty() {
                let tombstones = retained.iter().any(|r| !r.has_value);
                let set_horizon = (tombstones || (can_discard && p.control)) && p.delete_horizon.is_none();
                if retained.len() == p.records.len() && !set_horizon {
                    kept.push(b.clone());
                } else {
                    let horizon = if set_horizon {
                        Some(now_ms.saturating_add(cfg.delete_retention_ms))
                    } else {
                        p.delete_horizon
                    };
                    let (bytes, max_timestamp) = filter::rebuild(&b.bytes, &retained, horizon);
                    kept.push(StoredBatch { max_timestamp, bytes, ..b.clone() });
                }
            } else if retention == Retention::RetainEmpty {
                kept.push(StoredBatch { bytes: filter::empty_header(&b.bytes), ..b.clone() });
            }
        }
        // Aborted transactions with no batch left need no index entry.
        self.aborted.retain(|a| {
            a.last_offset >= to
                || observed.range((a.producer_id, a.first_offset)..(a.producer_id, a.last_offset)).next().is_some()
        });
        self.regroup(kept, to, cfg.segment_bytes);
        self.first_dirty = to;
        Some(Cleaned { from, to, records_removed: removed, bytes: (bytes_before, self.bytes) })
    }

    /// Each key's last offset among the records in `from .. to` outside aborted transactions.
    fn offset_map(&self, parsed: &[Option<Parsed>], from: i64, to: i64) -> HashMap<Bytes, i64> {
        let mut pass = TxnPass::new(self);
        let mut map = HashMap::new();
        for (b, p) in self.batches.iter().zip(parsed).take_while(|(b, _)| b.base_offset < to) {
            let Some(p) = p else { continue };
            if p.control {
                pass.marker(b, p);
                continue;
            }
            if pass.data(b, p.transactional) {
                continue;
            }
            for r in p.records.iter().filter(|r| r.offset >= from) {
                if let Some(key) = &r.key {
                    map.insert(key.clone(), r.offset);
                }
            }
        }
        map
    }

    /// Each producer's last batch in the log.
    fn last_records(&self) -> BTreeMap<i64, LastRecord> {
        let mut last: BTreeMap<i64, LastRecord> = BTreeMap::new();
        for b in self.batches.iter().filter(|b| b.producer_id >= 0) {
            let control = filter::parse(&b.bytes).is_some_and(|p| p.control);
            let entry =
                last.entry(b.producer_id).or_insert(LastRecord { last_data_offset: None, epoch: b.producer_epoch });
            entry.epoch = b.producer_epoch;
            if !control {
                entry.last_data_offset = Some(b.last_offset);
            }
        }
        last
    }

    /// Replaces the batches below `to` by `kept` and the segments below `to` by groups of them
    /// (consecutive segments whose bytes before cleaning fit in `segment_bytes`, Kafka's
    /// `groupSegmentsBySize`), each keeping its first segment's base offset and creation time
    /// and its last segment's modification time.
    fn regroup(&mut self, kept: Vec<StoredBatch>, to: i64, segment_bytes: usize) {
        let cleaned = self.segments.iter().take_while(|s| s.base_offset < to).count();
        let old: Vec<Segment> = self.segments.drain(..cleaned).collect();
        let mut groups: Vec<Segment> = Vec::new();
        let mut group_bytes = 0usize;
        for s in old {
            match groups.last_mut() {
                Some(g) if group_bytes + s.bytes <= segment_bytes => {
                    group_bytes += s.bytes;
                    g.modified_ms = s.modified_ms;
                }
                _ => {
                    group_bytes = s.bytes;
                    groups.push(Segment { bytes: 0, largest_timestamp: -1, first_timestamp: -1, ..s });
                }
            }
        }
        let rest: Vec<StoredBatch> = self.batches.drain(..).filter(|b| b.base_offset >= to).collect();
        for b in &kept {
            let g = groups
                .iter_mut()
                .rev()
                .find(|g| g.base_offset <= b.base_offset)
                .expect("a kept batch was in a cleaned segment");
            g.bytes += b.bytes.len();
            g.largest_timestamp = g.largest_timestamp.max(b.max_timestamp);
            if g.first_timestamp < 0 {
                g.first_timestamp = b.max_timestamp;
            }
        }
        for g in groups.into_iter().rev() {
            self.segments.push_front(g);
        }
        self.batches = kept.into_iter().chain(rest).collect();
        self.bytes = self.segments.iter().map(|s| s.bytes).sum();
    }
}
