//! The history: the harness-owned log of a run's events and its incremental, stable hash.
//!
//! Every harness event (driver events, network deliveries, faults, lifecycle events) and every
//! event a test records with [`crate::Ctx::record`] is appended as an [`Entry`]: its index, the
//! fake time since the run started, a kind, an identity and a detail. The hash is a chain:
//! `h(i) = xxh3_64(h(i-1) ‖ entry i)`, so two runs with equal hashes recorded the same entries in
//! the same order, and the entry hashes of two diverging runs name the first event where they
//! differ ([`diff`]). XXH3 is a fixed, specified algorithm: hashes compare across processes,
//! machines and versions of this crate.
//!
//! The log keeps at most [`History::ENTRIES_MAX`] entries in memory (the oldest are dropped from
//! the log, never from the hash), so a long run cannot exhaust memory.

mod log;

use std::fmt;
use std::time::Duration;

use xxhash_rust::xxh3::xxh3_64;

use log::{Log, Record};

/// Formats fake elapsed time as seconds with microseconds, right-aligned: `    1.250000s` (how
/// entries, trace lines and reports print fake time).
pub fn format_elapsed(d: Duration) -> String {
    format!("{:>5}.{:06}s", d.as_secs(), d.subsec_micros())
}

/// One event in a history.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Entry {
    /// Position in the history, from 0.
    pub index: u64,
    /// Fake time since the run started, in nanoseconds.
    pub at_nanos: u64,
    /// What happened (`"driver.event"`, `"net.deliver"`, or a test's own kind).
    pub kind: String,
    /// Who it happened to (a node, a connection, an operation id).
    pub identity: String,
    /// Free-form detail (payload summary, outcome).
    pub detail: String,
    /// The chained hash after this entry.
    pub hash: u64,
}

impl Entry {
    /// The fake time since the run started.
    pub fn at(&self) -> Duration {
        Duration::from_nanos(self.at_nanos)
    }
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{} {} {} {}", self.index, format_elapsed(self.at()), self.kind, self.identity)?;
        if !self.detail.is_empty() {
            write!(f, " {}", self.detail)?;
        }
        Ok(())
    }
}

/// A run's history: the bounded log and the chained hash (see the module docs).
///
/// Entries are kept compactly (their text in blocks, a fixed-size record each) and handed out as
/// [`Entry`] values made on request: recording an event allocates nothing once the blocks are
/// there, and a dropped history's blocks go to the next one made in the process ([`log`]).
#[derive(Debug, Clone)]
pub struct History {
    log: Log,
    next_index: u64,
    hash: u64,
    /// The bytes of the entry being hashed (kept to save an allocation per entry).
    scratch: Vec<u8>,
    /// Entries kept at most ([`History::ENTRIES_MAX`]; smaller in tests).
    entries_max: usize,
}

impl Default for History {
    fn default() -> Self {
        History::new()
    }
}

impl History {
    /// Entries kept in memory; older entries still count in the hash.
    pub const ENTRIES_MAX: usize = 1_000_000;

    /// An empty history. Its hash is the hash of nothing (`xxh3_64("")`).
    pub fn new() -> History {
        History {
            log: Log::default(),
            next_index: 0,
            hash: xxh3_64(b""),
            scratch: Vec::new(),
            entries_max: Self::ENTRIES_MAX,
        }
    }

    /// Appends an event; returns its index.
    ///
    /// # Panics
    /// If a field is 4 GiB or longer.
    pub fn record(&mut self, at: Duration, kind: &str, identity: &str, detail: &str) -> u64 {
        let at_nanos = u64::try_from(at.as_nanos()).unwrap_or(u64::MAX);
        // The hashed bytes: previous hash, time, then each field's length and bytes, hashed in
        // one shot (one-shot XXH3 is several times cheaper than its streaming state for short
        // inputs; the digest is the same).
        let scratch = &mut self.scratch;
        scratch.clear();
        scratch.extend_from_slice(&self.hash.to_le_bytes());
        scratch.extend_from_slice(&at_nanos.to_le_bytes());
        for field in [kind, identity, detail] {
            scratch.extend_from_slice(&(field.len() as u64).to_le_bytes());
            scratch.extend_from_slice(field.as_bytes());
        }
        self.hash = xxh3_64(scratch);
        if self.log.len() == self.entries_max {
            self.log.pop_front();
        }
        self.log.push(at_nanos, self.hash, kind, identity, detail);
        let index = self.next_index;
        self.next_index += 1;
        index
    }

    /// The entry a record describes, with its index.
    fn materialize(&self, index: u64, r: &Record) -> Entry {
        let (kind, identity, detail) = self.log.fields(r);
        Entry {
            index,
            at_nanos: r.at_nanos,
            kind: kind.to_string(),
            identity: identity.to_string(),
            detail: detail.to_string(),
            hash: r.hash,
        }
    }

    /// The chained hash of every entry recorded so far.
    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// How many entries were recorded (including any dropped from memory).
    pub fn len(&self) -> u64 {
        self.next_index
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.next_index == 0
    }

    /// The index of the oldest entry still in memory.
    fn first_kept(&self) -> u64 {
        self.next_index - self.log.len() as u64
    }

    /// The entry with this index, if still in memory.
    pub fn entry(&self, index: u64) -> Option<Entry> {
        let offset = usize::try_from(index.checked_sub(self.first_kept())?).ok()?;
        self.log.get(offset).map(|r| self.materialize(index, r))
    }

    /// The fake time of the last entry recorded, in nanoseconds (0 if none is kept).
    pub fn last_at_nanos(&self) -> u64 {
        self.log.last().map_or(0, |r| r.at_nanos)
    }

    /// The entries still in memory, oldest first.
    pub fn entries(&self) -> impl Iterator<Item = Entry> + '_ {
        let first = self.first_kept();
        (0..self.log.len()).zip(first..).filter_map(|(i, index)| self.log.get(i).map(|r| self.materialize(index, r)))
    }

    /// The entries still in memory, oldest first, moved out.
    pub fn into_entries(self) -> Vec<Entry> {
        self.entries().collect()
    }
}

/// Where two histories first differ.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Divergence {
    /// The index of the first differing entry.
    pub index: u64,
    /// That entry in the first history (`None`: the first history ended there).
    pub left: Option<Entry>,
    /// That entry in the second history (`None`: the second history ended there).
    pub right: Option<Entry>,
}

impl fmt::Display for Divergence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |e: &Option<Entry>| e.as_ref().map_or_else(|| "(history ended)".to_string(), Entry::to_string);
        write!(f, "first divergent event #{}: {} ≠ {}", self.index, show(&self.left), show(&self.right))
    }
}

/// The first entry where two histories differ (comparing index, time, kind, identity and
/// detail), or `None` when they are equal. Entries dropped from memory are not compared; a
/// difference there still shows in the hashes.
pub fn diff(left: &[Entry], right: &[Entry]) -> Option<Divergence> {
    let same = |a: &Entry, b: &Entry| {
        a.index == b.index
            && a.at_nanos == b.at_nanos
            && a.kind == b.kind
            && a.identity == b.identity
            && a.detail == b.detail
    };
    let len = left.len().max(right.len());
    (0..len).find_map(|i| match (left.get(i), right.get(i)) {
        (Some(a), Some(b)) if same(a, b) => None,
        (a, b) => {
            Some(Divergence { index: a.or(b).map_or(i as u64, |e| e.index), left: a.cloned(), right: b.cloned() })
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history(events: &[(&str, &str)]) -> History {
        let mut h = History::new();
        for (i, (kind, who)) in events.iter().enumerate() {
            h.record(Duration::from_millis(i as u64), kind, who, "");
        }
        h
    }

    #[test]
    fn equal_histories_have_equal_hashes_and_no_divergence() {
        let a = history(&[("send", "a"), ("recv", "b")]);
        let b = history(&[("send", "a"), ("recv", "b")]);
        assert_eq!(a.hash(), b.hash());
        assert_eq!(diff(&a.entries().collect::<Vec<_>>(), &b.entries().collect::<Vec<_>>()), None);
    }

    #[test]
    fn diff_names_the_first_divergent_event() {
        let a: Vec<Entry> = history(&[("send", "a"), ("recv", "b"), ("ack", "a")]).entries().collect();
        let b: Vec<Entry> = history(&[("send", "a"), ("recv", "c")]).entries().collect();
        let d = diff(&a, &b).expect("they differ");
        assert_eq!(d.index, 1);
        assert_eq!(d.left.as_ref().map(|e| e.identity.as_str()), Some("b"));
        assert_eq!(d.right.as_ref().map(|e| e.identity.as_str()), Some("c"));
        assert!(d.to_string().starts_with("first divergent event #1: #1 "), "{d}");
        let shorter: Vec<Entry> = a[..2].to_vec();
        let d = diff(&a, &shorter).expect("one is longer");
        assert_eq!((d.index, d.right), (2, None));
    }

    #[test]
    fn the_chained_hash_is_xxh3_over_the_previous_hash_time_and_length_prefixed_fields() {
        let mut h = History::new();
        h.record(Duration::from_nanos(7), "net.deliver", "conn#1", "64 bytes");
        let mut streamed = xxhash_rust::xxh3::Xxh3::new();
        streamed.update(&xxh3_64(b"").to_le_bytes());
        streamed.update(&7u64.to_le_bytes());
        for field in ["net.deliver", "conn#1", "64 bytes"] {
            streamed.update(&(field.len() as u64).to_le_bytes());
            streamed.update(field.as_bytes());
        }
        assert_eq!(h.hash(), streamed.digest());
        assert_eq!(h.entry(0).map(|e| e.hash), Some(streamed.digest()));
    }

    #[test]
    fn a_full_history_drops_its_oldest_entries_from_memory_but_not_from_the_hash() {
        let mut bounded = History::new();
        bounded.entries_max = 3;
        let mut unbounded = History::new();
        for i in 0..50u64 {
            let (who, detail) = (format!("node-{i}"), "x".repeat(i as usize % 7));
            bounded.record(Duration::from_nanos(i), "send", &who, &detail);
            unbounded.record(Duration::from_nanos(i), "send", &who, &detail);
        }
        assert_eq!((bounded.len(), bounded.hash()), (unbounded.len(), unbounded.hash()));
        let kept: Vec<Entry> = bounded.entries().collect();
        let last: Vec<Entry> = unbounded.entries().skip(47).collect();
        assert_eq!(kept, last);
        assert_eq!(bounded.entry(46), None);
        assert_eq!(bounded.entry(49).map(|e| (e.identity, e.detail)), Some(("node-49".into(), "x".repeat(0))));
        assert_eq!(bounded.last_at_nanos(), 49);
    }

    #[test]
    fn kept_entries_across_many_blocks_and_long_details_read_back_as_recorded() {
        let mut bounded = History::new();
        bounded.entries_max = 1_500;
        let mut unbounded = History::new();
        for i in 0..5_000u64 {
            // Every 700th detail is longer than a text block (an entry's own block).
            let detail = if i % 700 == 0 { "y".repeat(40 << 10) } else { format!("{i} bytes") };
            let who = format!("conn#{}", i % 13);
            bounded.record(Duration::from_nanos(i), "net.deliver", &who, &detail);
            unbounded.record(Duration::from_nanos(i), "net.deliver", &who, &detail);
        }
        assert_eq!(bounded.hash(), unbounded.hash());
        let kept: Vec<Entry> = bounded.entries().collect();
        assert_eq!(kept.len(), 1_500);
        assert_eq!(kept, unbounded.entries().skip(3_500).collect::<Vec<_>>());
        assert_eq!(bounded.entry(4_200).map(|e| e.detail.len()), Some(40 << 10));
        assert_eq!(bounded.clone().entries().collect::<Vec<_>>(), kept);
    }

    #[test]
    fn a_history_made_after_another_was_dropped_starts_empty_and_a_clone_is_equal() {
        let mut first = History::new();
        first.record(Duration::from_nanos(1), "send", "a", "x");
        let copy = first.clone();
        assert_eq!((copy.len(), copy.hash()), (first.len(), first.hash()));
        assert_eq!(copy.entries().collect::<Vec<_>>(), first.entries().collect::<Vec<_>>());
        drop(first);
        drop(copy);
        let second = History::new();
        assert_eq!((second.len(), second.hash(), second.entries().count()), (0, History::new().hash(), 0));
        assert_eq!(second.log.len(), 0);
    }

    #[test]
    fn field_boundaries_count_in_the_hash() {
        let mut a = History::new();
        a.record(Duration::ZERO, "ab", "c", "");
        let mut b = History::new();
        b.record(Duration::ZERO, "a", "bc", "");
        assert_ne!(a.hash(), b.hash());
    }
}
