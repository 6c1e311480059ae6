//! Where a history keeps its entries in memory: fixed-size blocks of records and of text, taken
//! from a process-wide pool and given back to it when the history is dropped.
//!
//! Why a pool: a sweep runs each seed on a fresh thread, and a buffer grown from nothing on it
//! takes a page fault for every new page (measured: 13% of a round-trip benchmark's time went to
//! the kernel, most of it that). Why blocks: each stays below glibc's mmap threshold (128 KiB),
//! so the pooled memory is ordinary heap memory. One pooled 256 KiB buffer was an mmapped chunk
//! never freed, which kept glibc from raising its dynamic mmap and trim thresholds as it does
//! when such a chunk is freed; a later run streaming 64 KiB writes then had its heap trimmed and
//! faulted back in over and over (25,000 page faults, ten times slower).

use std::collections::VecDeque;
use std::sync::Mutex;

/// One kept entry: where its text is and its fields' lengths.
#[derive(Debug, Clone, Copy)]
pub(super) struct Record {
    pub at_nanos: u64,
    pub hash: u64,
    /// The text block holding its fields (counting every block the log ever had).
    text_block: u64,
    text_offset: u32,
    pub kind_len: u32,
    pub identity_len: u32,
    pub detail_len: u32,
}

/// Records per block (40 KiB).
const RECORDS_PER_BLOCK: usize = 1024;
/// Bytes per text block; an entry's text longer than this gets a block of its own (not pooled).
const TEXT_BLOCK_BYTES: usize = 32 << 10;
/// Blocks of each kind the pool keeps at most (about 10 MiB of records, 8 MiB of text).
const BLOCKS_KEPT_MAX: usize = 256;

/// Emptied blocks, for the next log of the process.
struct Pool {
    records: Vec<Vec<Record>>,
    texts: Vec<String>,
}

static POOL: Mutex<Pool> = Mutex::new(Pool { records: Vec::new(), texts: Vec::new() });

fn pool() -> std::sync::MutexGuard<'static, Pool> {
    POOL.lock().unwrap_or_else(|p| p.into_inner())
}

/// The entries kept in memory, oldest first (see the module docs).
#[derive(Debug, Default)]
pub(super) struct Log {
    records: VecDeque<Vec<Record>>,
    /// The oldest kept record's place in `records[0]`.
    first: usize,
    len: usize,
    texts: VecDeque<String>,
    /// Text blocks dropped from the front so far.
    texts_dropped: u64,
}

impl Log {
    /// Entries kept.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Appends an entry.
    ///
    /// # Panics
    /// If a field is 4 GiB or longer.
    pub(super) fn push(&mut self, at_nanos: u64, hash: u64, kind: &str, identity: &str, detail: &str) {
        let len = |field: &str| u32::try_from(field.len()).expect("a history field is shorter than 4 GiB");
        let bytes = kind.len() + identity.len() + detail.len();
        if self.texts.back().is_none_or(|t| t.capacity() - t.len() < bytes) {
            let block = if bytes <= TEXT_BLOCK_BYTES {
                pool().texts.pop().unwrap_or_else(|| String::with_capacity(TEXT_BLOCK_BYTES))
            } else {
                String::with_capacity(bytes)
            };
            self.texts.push_back(block);
        }
        let text_block = self.texts_dropped + self.texts.len() as u64 - 1;
        let text = self.texts.back_mut().expect("a text block was just made");
        let text_offset = u32::try_from(text.len()).expect("a text block is shorter than 4 GiB");
        text.push_str(kind);
        text.push_str(identity);
        text.push_str(detail);
        if self.records.back().is_none_or(|b| b.len() == RECORDS_PER_BLOCK) {
            let block = pool().records.pop().unwrap_or_else(|| Vec::with_capacity(RECORDS_PER_BLOCK));
            self.records.push_back(block);
        }
        let record = Record {
            at_nanos,
            hash,
            text_block,
            text_offset,
            kind_len: len(kind),
            identity_len: len(identity),
            detail_len: len(detail),
        };
        self.records.back_mut().expect("a record block was just made").push(record);
        self.len += 1;
    }

    /// Forgets the oldest entry; blocks no kept entry uses go back to the pool.
    pub(super) fn pop_front(&mut self) {
        if self.len == 0 {
            return;
        }
        self.len -= 1;
        self.first += 1;
        if self.first == RECORDS_PER_BLOCK || self.len == 0 {
            if let Some(block) = self.records.pop_front() {
                give_records(block);
            }
            self.first = 0;
        }
        let keep_from = self.get(0).map_or(self.texts_dropped + self.texts.len() as u64, |r| r.text_block);
        while self.texts_dropped < keep_from {
            if let Some(block) = self.texts.pop_front() {
                give_text(block);
            }
            self.texts_dropped += 1;
        }
    }

    /// The `i`-th kept entry's record, oldest first.
    pub(super) fn get(&self, i: usize) -> Option<&Record> {
        if i >= self.len {
            return None;
        }
        let at = self.first + i;
        self.records.get(at / RECORDS_PER_BLOCK)?.get(at % RECORDS_PER_BLOCK)
    }

    /// The newest entry's record.
    pub(super) fn last(&self) -> Option<&Record> {
        self.len.checked_sub(1).and_then(|i| self.get(i))
    }

    /// A record's three fields: kind, identity, detail.
    pub(super) fn fields(&self, r: &Record) -> (&str, &str, &str) {
        let block = &self.texts[(r.text_block - self.texts_dropped) as usize];
        let start = r.text_offset as usize;
        let (kind_end, identity_end) = (start + r.kind_len as usize, start + (r.kind_len + r.identity_len) as usize);
        let detail_end = identity_end + r.detail_len as usize;
        (&block[start..kind_end], &block[kind_end..identity_end], &block[identity_end..detail_end])
    }
}

fn give_records(mut block: Vec<Record>) {
    block.clear();
    let mut pool = pool();
    if pool.records.len() < BLOCKS_KEPT_MAX {
        pool.records.push(block);
    }
}

fn give_text(mut block: String) {
    if block.capacity() != TEXT_BLOCK_BYTES {
        return;
    }
    block.clear();
    let mut pool = pool();
    if pool.texts.len() < BLOCKS_KEPT_MAX {
        pool.texts.push(block);
    }
}

impl Clone for Log {
    fn clone(&self) -> Self {
        let mut copy = Log::default();
        for i in 0..self.len {
            let r = self.get(i).expect("i is below len");
            let (kind, identity, detail) = self.fields(r);
            copy.push(r.at_nanos, r.hash, kind, identity, detail);
        }
        copy
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        for block in std::mem::take(&mut self.records) {
            give_records(block);
        }
        for block in std::mem::take(&mut self.texts) {
            give_text(block);
        }
    }
}
