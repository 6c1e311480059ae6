//! The search's memory: the linearized set as a [`Bitset`], the [`Cache`] of (set, state) pairs
//! seen, and the hashes that key it.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};

/// No node, no entry: the end of a list or of a chain.
pub(super) const NIL: u32 = u32::MAX;

/// The linearized set, one bit per operation of the partition.
pub(super) struct Bitset {
    pub(super) words: Vec<u64>,
}

impl Bitset {
    pub(super) fn new(n: usize) -> Bitset {
        Bitset { words: vec![0; n.div_ceil(64).max(1)] }
    }

    pub(super) fn set(&mut self, k: u32) {
        self.words[k as usize / 64] |= 1 << (k % 64);
    }

    pub(super) fn clear(&mut self, k: u32) {
        self.words[k as usize / 64] &= !(1 << (k % 64));
    }
}

/// The (linearized set, state) pairs seen: a map from the combined hash to a chain of entries in
/// flat arenas (no allocation per entry beyond the arenas' growth).
pub(super) struct Cache<S> {
    heads: HashMap<u64, u32, BuildHasherDefault<PassThrough>>,
    words_per_set: usize,
    sets: Vec<u64>,
    states: Vec<S>,
    chain: Vec<u32>,
    /// Bytes held, estimated as each entry's set words, its state's inline size and the map's
    /// overhead.
    pub(super) bytes: u64,
}

impl<S: Eq> Cache<S> {
    pub(super) fn new(words_per_set: usize) -> Cache<S> {
        Cache {
            heads: HashMap::default(),
            words_per_set,
            sets: Vec::new(),
            states: Vec::new(),
            chain: Vec::new(),
            bytes: 0,
        }
    }

    /// Inserts the pair unless present; whether it was inserted.
    pub(super) fn insert(&mut self, h: u64, set: &[u64], state: &S) -> bool
    where
        S: Clone,
    {
        let w = self.words_per_set;
        let head = self.heads.get(&h).copied().unwrap_or(NIL);
        let mut k = head;
        while k != NIL {
            let i = k as usize;
            if self.states[i] == *state && self.sets[i * w..(i + 1) * w] == *set {
                return false;
            }
            k = self.chain[i];
        }
        let index = self.states.len() as u32;
        self.sets.extend_from_slice(set);
        self.states.push(state.clone());
        self.chain.push(head);
        self.heads.insert(h, index);
        self.bytes += (w * 8 + std::mem::size_of::<S>() + 4 + 16) as u64;
        true
    }
}

/// A hasher for keys that are already well mixed.
#[derive(Default)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

/// A fast non-cryptographic hasher for states (FxHash's multiply-rotate; the result is mixed
/// again before use).
#[derive(Default)]
struct StateHasher(u64);

impl StateHasher {
    const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;

    fn add(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(Self::K);
    }
}

impl Hasher for StateHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("chunks of 8")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(last));
        }
    }

    fn write_u8(&mut self, v: u8) {
        self.add(u64::from(v));
    }

    fn write_u32(&mut self, v: u32) {
        self.add(u64::from(v));
    }

    fn write_u64(&mut self, v: u64) {
        self.add(v);
    }

    fn write_usize(&mut self, v: usize) {
        self.add(v as u64);
    }
}

/// The hash of a model state, for the cache key.
pub(super) fn state_hash<S: Hash>(state: &S) -> u64 {
    let mut h = StateHasher::default();
    state.hash(&mut h);
    h.finish()
}

/// SplitMix64's finaliser: spreads every input bit over the output.
pub(super) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
