//! Seeds, the seed tree, and the [`Source`] every choice in a run is drawn from.
//!
//! A run has one root [`Seed`]. Every component asks for its own stream by a label path
//! (`"swarm/latency"`, `"driver/ties"`, `"runtime/getrandom"`): the child seed is a stable hash of
//! the root and the path, so adding a component (a new label) never reshuffles the streams of the
//! others, and a value drawn today is drawn identically by every later version of this crate.
//!
//! A [`Source`] has one of two feeds:
//! - a seeded PRNG (ChaCha8 from `rand_chacha`, keyed from the child seed), infinite;
//! - finite fuzz bytes (from a fuzzer, or an [`arbitrary::Unstructured`]), shared by every stream
//!   of the run in draw order. When the bytes run out every draw returns its *simplest* value
//!   (the low end of a range, `false`, the first option), so a fuzzer that shrinks its input
//!   moves the run toward fewer faults, fewer nodes and zero delays.
//!
//! The draw functions ([`Source::below`], [`Source::range`], [`Source::ratio`], [`Source::bool`],
//! [`Source::choose`], [`Source::shuffle`], [`Source::weighted`], [`Source::duration`]) are
//! implemented here rather than taken from `rand`, so their values never change with a `rand`
//! release. `tests/seed_pinned.rs` pins their output for fixed seeds.

use std::fmt;
use std::ops::{Bound, RangeBounds, RangeInclusive};
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};

/// The root of every choice in a run: a plain `u64`.
///
/// Displayed in decimal; parsed from decimal or `0x`-prefixed hexadecimal.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, serde::Serialize, serde::Deserialize)]
pub struct Seed(pub u64);

impl Seed {
    /// The child seed for one label: a stable hash (FNV-1a 64 over the parent's bytes and the
    /// label, then the SplitMix64 finalizer). Labels are compared byte for byte.
    pub fn child(self, label: &str) -> Seed {
        const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
        const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
        let mut hash = FNV_OFFSET;
        for byte in self.0.to_le_bytes().iter().chain([0xffu8].iter()).chain(label.as_bytes()) {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(FNV_PRIME);
        }
        Seed(splitmix64(hash))
    }

    /// The seed at a `/`-separated label path: `seed.path("a/b") == seed.child("a").child("b")`.
    /// Empty segments are skipped.
    pub fn path(self, path: &str) -> Seed {
        path.split('/').filter(|s| !s.is_empty()).fold(self, Seed::child)
    }

    /// A PRNG-fed [`Source`] keyed from this seed.
    pub fn source(self) -> Source {
        Source::from_seed(self)
    }

    /// 32 bytes derived from this seed (SplitMix64 expansion), for keying other generators.
    pub fn bytes32(self) -> [u8; 32] {
        let mut out = [0u8; 32];
        let mut state = self.0;
        for chunk in out.chunks_exact_mut(8) {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            chunk.copy_from_slice(&splitmix64(state).to_le_bytes());
        }
        out
    }
}

impl fmt::Display for Seed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A seed that could not be parsed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("not a seed: {0:?} (expected a decimal u64 or 0x-prefixed hex)")]
pub struct ParseSeedError(pub String);

impl FromStr for Seed {
    type Err = ParseSeedError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => t.parse::<u64>(),
        };
        parsed.map(Seed).map_err(|_| ParseSeedError(s.to_string()))
    }
}

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Lemire's multiply-shift: a 64-bit draw scaled into `0..n`.
fn lemire(raw: u64, n: u64) -> u64 {
    ((u128::from(raw) * u128::from(n)) >> 64) as u64
}

/// Finite fuzz bytes, consumed front to back by every stream of a run.
#[derive(Debug, Default)]
struct ByteFeed {
    data: Vec<u8>,
    pos: usize,
    /// The byte ranges the draws read, in draw order (draws past the end read none).
    spans: Vec<std::ops::Range<usize>>,
}

impl ByteFeed {
    /// Reads `n` bytes as a big-endian integer; missing bytes read as zero.
    fn take(&mut self, n: usize) -> u64 {
        debug_assert!(n <= 8, "a draw takes at most 8 bytes");
        if self.pos < self.data.len() && n > 0 {
            self.spans.push(self.pos..(self.pos + n).min(self.data.len()));
        }
        let mut value = 0u64;
        for _ in 0..n {
            let byte = self.data.get(self.pos).copied().unwrap_or(0);
            self.pos = (self.pos + 1).min(self.data.len());
            value = (value << 8) | u64::from(byte);
        }
        value
    }

    fn exhausted(&self) -> bool {
        self.pos >= self.data.len()
    }
}

#[derive(Debug, Clone)]
enum Feed {
    Prng(Box<ChaCha8Rng>),
    Bytes(Arc<Mutex<ByteFeed>>),
    /// A PRNG that also writes every value it answers to a shared [`Tape`], encoded the way the
    /// byte feed decodes it, so the tape fed back as fuzz bytes answers the same values.
    Recording(Box<ChaCha8Rng>, Tape),
}

/// The choice bytes of a run, written by recording sources in draw order (see
/// [`Tree::recording`]). Fed back with [`Source::from_bytes`] (as one run's fuzz input, under
/// the same root seed) every draw answers the value the recorded run drew.
#[derive(Debug, Clone, Default)]
pub struct Tape {
    bytes: Arc<Mutex<Vec<u8>>>,
}

impl Tape {
    /// An empty tape.
    pub fn new() -> Tape {
        Tape::default()
    }

    /// The bytes written so far.
    pub fn bytes(&self) -> Vec<u8> {
        self.bytes.lock().map(|b| b.clone()).unwrap_or_else(|p| p.into_inner().clone())
    }

    /// Appends the low `n` bytes of `value`, big-endian (what the byte feed's `take(n)` reads).
    fn write(&self, value: u64, n: usize) {
        let mut bytes = self.bytes.lock().unwrap_or_else(|p| p.into_inner());
        bytes.extend_from_slice(&value.to_be_bytes()[8 - n..]);
    }
}

/// A stream of choices: a seeded PRNG or finite fuzz bytes (see the module docs).
///
/// Cloning a PRNG source copies its state (both copies then draw the same values); cloning a
/// byte-fed source shares the one byte feed.
#[derive(Debug, Clone)]
pub struct Source {
    feed: Feed,
}

impl Source {
    /// A PRNG source keyed from `seed` (ChaCha8, 32-byte key from [`Seed::bytes32`]).
    pub fn from_seed(seed: Seed) -> Source {
        Source { feed: Feed::Prng(Box::new(ChaCha8Rng::from_seed(seed.bytes32()))) }
    }

    /// A source fed by finite fuzz bytes. When they run out every draw returns its simplest
    /// value (see the module docs).
    pub fn from_bytes(bytes: impl Into<Vec<u8>>) -> Source {
        Source { feed: Feed::Bytes(Arc::new(Mutex::new(ByteFeed { data: bytes.into(), pos: 0, spans: Vec::new() }))) }
    }

    /// A source fed by the rest of an [`arbitrary::Unstructured`] (as handed out by a
    /// `fuzz_target!` taking `Unstructured`, or by `arbitrary` in a property test). The
    /// `Unstructured` is left empty.
    pub fn from_unstructured(u: &mut arbitrary::Unstructured<'_>) -> Source {
        let rest = std::mem::replace(u, arbitrary::Unstructured::new(&[]));
        Source::from_bytes(rest.take_rest().to_vec())
    }

    /// A PRNG source keyed from `seed` that writes every value it answers to `tape`.
    pub fn recording(seed: Seed, tape: Tape) -> Source {
        Source { feed: Feed::Recording(Box::new(ChaCha8Rng::from_seed(seed.bytes32())), tape) }
    }

    /// Whether this is a byte-fed source whose bytes are used up. A PRNG is never exhausted.
    pub fn is_exhausted(&self) -> bool {
        match &self.feed {
            Feed::Prng(_) | Feed::Recording(..) => false,
            Feed::Bytes(feed) => feed.lock().map(|f| f.exhausted()).unwrap_or(true),
        }
    }

    /// For a byte-fed source: the byte ranges its draws (and its siblings') read so far, in
    /// draw order — where one choice ends and the next begins, for a shrinker. Empty otherwise.
    pub fn spans(&self) -> Vec<std::ops::Range<usize>> {
        match &self.feed {
            Feed::Bytes(feed) => feed.lock().map(|f| f.spans.clone()).unwrap_or_default(),
            _ => Vec::new(),
        }
    }

    /// Whether the source is fed by fuzz bytes.
    pub fn is_fuzz(&self) -> bool {
        matches!(self.feed, Feed::Bytes(_))
    }

    /// A second source drawing from the same feed as this one: a copy of the PRNG keyed from
    /// `seed`, or the same shared bytes.
    pub(crate) fn sibling(&self, seed: Seed) -> Source {
        match &self.feed {
            Feed::Prng(_) => Source::from_seed(seed),
            Feed::Recording(_, tape) => Source::recording(seed, tape.clone()),
            Feed::Bytes(feed) => Source { feed: Feed::Bytes(Arc::clone(feed)) },
        }
    }

    /// A raw 64-bit draw. From fuzz bytes: the next 8 bytes, big-endian, zero when exhausted.
    pub fn u64(&mut self) -> u64 {
        self.raw(8)
    }

    fn raw(&mut self, bytes: usize) -> u64 {
        match &mut self.feed {
            Feed::Prng(rng) => rng.next_u64(),
            Feed::Recording(rng, tape) => {
                let value = rng.next_u64();
                tape.write(value, bytes);
                value
            }
            Feed::Bytes(feed) => match feed.lock() {
                Ok(mut f) => f.take(bytes),
                Err(poisoned) => poisoned.into_inner().take(bytes),
            },
        }
    }

    /// A value in `0..n`, uniform (PRNG: Lemire's multiply-shift, bias below `n / 2^64`;
    /// fuzz bytes: as many bytes as `n - 1` needs, modulo `n`). Zero bytes give 0.
    ///
    /// # Panics
    /// If `n == 0` (an empty range has no value to draw).
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "Source::below(0): an empty range has no value to draw");
        if n == 1 {
            return 0;
        }
        let width = (64 - (n - 1).leading_zeros() as usize).div_ceil(8);
        match &mut self.feed {
            Feed::Prng(rng) => lemire(rng.next_u64(), n),
            Feed::Recording(rng, tape) => {
                let value = lemire(rng.next_u64(), n);
                tape.write(value, width);
                value
            }
            Feed::Bytes(_) => self.raw(width) % n,
        }
    }

    /// A value in `range` (any `u64` range form: `a..b`, `a..=b`, `a..`), uniform.
    /// The simplest value is the low end.
    ///
    /// # Panics
    /// If the range is empty.
    pub fn range(&mut self, range: impl RangeBounds<u64>) -> u64 {
        let lo = match range.start_bound() {
            Bound::Included(&v) => v,
            Bound::Excluded(&v) => v.checked_add(1).expect("Source::range: empty range"),
            Bound::Unbounded => 0,
        };
        let hi = match range.end_bound() {
            Bound::Included(&v) => v,
            Bound::Excluded(&v) => v.checked_sub(1).expect("Source::range: empty range"),
            Bound::Unbounded => u64::MAX,
        };
        assert!(lo <= hi, "Source::range: empty range {lo}..={hi}");
        match (hi - lo).checked_add(1) {
            Some(span) => lo + self.below(span),
            None => self.u64(),
        }
    }

    /// `true` with probability `numerator / denominator`; the simplest value is `false`.
    ///
    /// # Panics
    /// If `denominator == 0` or `numerator > denominator`.
    pub fn ratio(&mut self, numerator: u64, denominator: u64) -> bool {
        assert!(
            denominator > 0 && numerator <= denominator,
            "Source::ratio({numerator}, {denominator}): need 0 <= numerator <= denominator > 0"
        );
        self.below(denominator) >= denominator - numerator
    }

    /// `true` with probability `p` (clamped to `0.0..=1.0`, resolution 2^-53); the simplest
    /// value is `false`.
    pub fn bool(&mut self, p: f64) -> bool {
        const SCALE: u64 = 1 << 53;
        let p = if p.is_nan() { 0.0 } else { p.clamp(0.0, 1.0) };
        let hits = (p * SCALE as f64).round() as u64;
        self.below(SCALE) >= SCALE - hits
    }

    /// One element of `items`, uniform; `None` when empty. The simplest is the first.
    pub fn choose<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        if items.is_empty() {
            return None;
        }
        let index = self.below(items.len() as u64) as usize;
        items.get(index)
    }

    /// Shuffles `items` in place (Fisher–Yates). Zero draws leave the order unchanged.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = i - self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }

    /// An index into `weights`, with probability proportional to its weight; `None` when the
    /// weights are empty or all zero. The simplest is the first index with a non-zero weight.
    pub fn weighted(&mut self, weights: &[u64]) -> Option<usize> {
        let total: u128 = weights.iter().map(|&w| u128::from(w)).sum();
        if total == 0 {
            return None;
        }
        let total = u64::try_from(total).expect("Source::weighted: total weight exceeds u64::MAX");
        let mut point = self.below(total);
        for (index, &weight) in weights.iter().enumerate() {
            if point < weight {
                return Some(index);
            }
            point -= weight;
        }
        unreachable!("a point below the total weight falls in some bucket")
    }

    /// A duration in `range`, uniform at nanosecond resolution; the simplest is the low end.
    ///
    /// # Panics
    /// If the range is empty or wider than `u64::MAX` nanoseconds (about 584 years).
    pub fn duration(&mut self, range: RangeInclusive<Duration>) -> Duration {
        let lo = u64::try_from(range.start().as_nanos()).expect("Source::duration: bound too large");
        let hi = u64::try_from(range.end().as_nanos()).expect("Source::duration: bound too large");
        Duration::from_nanos(self.range(lo..=hi))
    }

    /// Fills `buf` with drawn bytes (zeros once fuzz bytes run out).
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let value = self.raw(chunk.len()).to_be_bytes();
            chunk.copy_from_slice(&value[8 - chunk.len()..]);
        }
    }

    /// A value of any type implementing [`arbitrary::Arbitrary`], built from
    /// `size_hint` bytes drawn from this source (at most 4 KiB).
    ///
    /// # Errors
    /// Whatever `T::arbitrary_take_rest` returns for those bytes.
    pub fn arbitrary<T>(&mut self) -> arbitrary::Result<T>
    where
        T: for<'a> arbitrary::Arbitrary<'a>,
    {
        const LIMIT: usize = 4096;
        let (lower, upper) = T::size_hint(0);
        let len = upper.unwrap_or(lower.saturating_add(64)).min(LIMIT);
        let mut bytes = vec![0u8; len];
        self.fill(&mut bytes);
        T::arbitrary_take_rest(arbitrary::Unstructured::new(&bytes))
    }
}

/// The seed tree of one run: its root and, when fuzzing, the shared byte feed.
///
/// [`Tree::source`] gives each label path its own stream (see the module docs).
#[derive(Debug, Clone)]
pub struct Tree {
    root: Seed,
    fuzz: Option<Source>,
    tape: Option<Tape>,
}

impl Tree {
    /// A tree of PRNG streams under `root`.
    pub fn new(root: Seed) -> Tree {
        Tree { root, fuzz: None, tape: None }
    }

    /// A tree of PRNG streams under `root` whose draws are also written to `tape`, in draw
    /// order across all streams ([`Tree::prng`] streams are not: they stay keyed from the root
    /// when the tape is replayed).
    pub fn recording(root: Seed, tape: Tape) -> Tree {
        Tree { root, fuzz: None, tape: Some(tape) }
    }

    /// A tree whose streams all read the one byte feed of `fuzz` (in draw order). `root` still
    /// keys what must not come from the fuzzer (the runtime's `getrandom` stream).
    pub fn fuzzed(root: Seed, fuzz: Source) -> Tree {
        Tree { root, fuzz: Some(fuzz), tape: None }
    }

    /// The root seed.
    pub fn root(&self) -> Seed {
        self.root
    }

    /// The stream for a `/`-separated label path.
    pub fn source(&self, path: &str) -> Source {
        let seed = self.root.path(path);
        match (&self.fuzz, &self.tape) {
            (Some(fuzz), _) => fuzz.sibling(seed),
            (None, Some(tape)) => Source::recording(seed, tape.clone()),
            (None, None) => Source::from_seed(seed),
        }
    }

    /// The stream for a label path, always from the PRNG even when fuzzing (for draws that must
    /// not consume fuzz bytes, such as the bytes answered to `getrandom`).
    pub fn prng(&self, path: &str) -> Source {
        Source::from_seed(self.root.path(path))
    }
}
