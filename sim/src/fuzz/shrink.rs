//! Shrinking a failing choice sequence: the smallest input (shortest, then lexicographically
//! smallest: "shortlex") the shrinker finds that still fails the same way.
//!
//! Because an exhausted input answers every draw with its simplest value, a shorter input and a
//! smaller byte are simpler runs (Hypothesis's choice-sequence shrinking, MacIver and Donaldson,
//! "Test-Case Reduction via Test-Case Generation", ECOOP 2020). The passes, repeated until a round
//! changes nothing or the budget is spent:
//! 1. trailing zero bytes are dropped (free: they read as the exhausted input does);
//! 2. with the run's draw spans ([`shrink_spans`]; the byte ranges each draw read, from
//!    [`crate::Source::spans`]): whole draws are deleted, last first, then zeroed, then each
//!    draw's value is lowered by binary search — a choice at a time, as Hypothesis shrinks blocks;
//! 3. the tail is cut, halving the cut on each refusal;
//! 4. chunks are deleted, largest first (sizes powers of two down to 1 byte);
//! 5. chunks of 8, 4, 2 and 1 bytes are zeroed;
//! 6. each remaining byte is lowered by binary search.
//!
//! Every candidate is run once by the caller's predicate (a run of the simulation); candidates
//! already tried are not run again. Like any greedy shrinker the result is small, not minimal, and
//! it is deterministic: the same input and predicate shrink to the same bytes.

use std::collections::HashSet;
use std::ops::Range;
use std::time::{Duration, Instant};

/// How much shrinking may cost.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// At most this many predicate calls (runs).
    pub runs: u32,
    /// At most this much wall time.
    pub wall: Duration,
}

impl Default for Budget {
    fn default() -> Self {
        Budget { runs: 2000, wall: Duration::from_secs(300) }
    }
}

/// What shrinking produced.
#[derive(Clone, Debug, PartialEq)]
pub struct Shrunk {
    /// The smallest failing input found.
    pub bytes: Vec<u8>,
    /// The length it started from, in bytes.
    pub original_len: usize,
    /// Predicate calls made.
    pub runs: u32,
    /// Wall time spent.
    pub wall: Duration,
    /// Whether it stopped because the budget ran out (the input may shrink further).
    pub budget_spent: bool,
}

/// The predicate: `Some(spans)` when the candidate still fails (its run's draw spans, or none).
type Predicate<'a> = &'a mut dyn FnMut(&[u8]) -> Option<Vec<Range<usize>>>;

struct Shrinker<'a> {
    best: Vec<u8>,
    spans: Vec<Range<usize>>,
    /// Hashes of the candidates already run (FNV-1a 64).
    tried: HashSet<u64>,
    runs: u32,
    started: Instant,
    budget: Budget,
    still_fails: Predicate<'a>,
}

impl Shrinker<'_> {
    fn spent(&self) -> bool {
        self.runs >= self.budget.runs || self.started.elapsed() >= self.budget.wall
    }

    /// Tries `candidate`; keeps it (trailing zeros dropped) if it still fails and is smaller.
    fn attempt(&mut self, mut candidate: Vec<u8>) -> bool {
        trim(&mut candidate);
        if !shortlex_less(&candidate, &self.best) || self.spent() || !self.tried.insert(crate::input::fnv1a(&candidate))
        {
            return false;
        }
        self.runs += 1;
        if let Some(spans) = (self.still_fails)(&candidate) {
            self.spans = spans.into_iter().filter(|s| s.end <= candidate.len()).collect();
            self.best = candidate;
            return true;
        }
        false
    }

    fn span(&self, i: usize) -> Option<Range<usize>> {
        self.spans.get(i).cloned().filter(|s| s.start < s.end && s.end <= self.best.len())
    }

    fn delete_spans(&mut self) {
        let mut i = self.spans.len();
        while i > 0 && !self.spent() {
            i = (i - 1).min(self.spans.len());
            let Some(span) = self.span(i) else { continue };
            let mut candidate = self.best[..span.start].to_vec();
            candidate.extend_from_slice(&self.best[span.end..]);
            self.attempt(candidate);
        }
    }

    fn zero_spans(&mut self) {
        let mut i = 0;
        while i < self.spans.len() && !self.spent() {
            if let Some(span) = self.span(i).filter(|s| self.best[s.clone()].iter().any(|b| *b != 0)) {
                let mut candidate = self.best.clone();
                candidate[span].fill(0);
                self.attempt(candidate);
            }
            i += 1;
        }
    }

    fn lower_spans(&mut self) {
        let mut i = 0;
        while i < self.spans.len() && !self.spent() {
            let Some(span) = self.span(i) else {
                i += 1;
                continue;
            };
            let value = self.best[span.clone()].iter().fold(0u64, |v, b| (v << 8) | u64::from(*b));
            let (mut lo, mut hi) = (0u64, value);
            while lo < hi && !self.spent() {
                let mid = lo + (hi - lo) / 2;
                let mut candidate = self.best.clone();
                let width = span.len();
                candidate[span.clone()].copy_from_slice(&mid.to_be_bytes()[8 - width..]);
                let before = (self.best.len(), self.spans.get(i).cloned());
                if self.attempt(candidate) {
                    if (self.best.len(), self.spans.get(i).cloned()) != before {
                        break;
                    }
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            i += 1;
        }
    }

    fn cut_tail(&mut self) {
        let mut cut = self.best.len() / 2;
        while cut > 0 && !self.spent() {
            let keep = self.best.len().saturating_sub(cut);
            if !self.attempt(self.best[..keep].to_vec()) {
                cut /= 2;
            }
        }
    }

    fn delete_chunks(&mut self) {
        let mut size = self.best.len().next_power_of_two() / 2;
        while size > 0 && !self.spent() {
            let mut i = self.best.len().saturating_sub(size);
            loop {
                let end = (i + size).min(self.best.len());
                let mut candidate = self.best[..i].to_vec();
                candidate.extend_from_slice(&self.best[end..]);
                self.attempt(candidate);
                if i == 0 || self.spent() {
                    break;
                }
                i = i.saturating_sub(size).min(self.best.len());
            }
            size /= 2;
        }
    }

    fn zero_chunks(&mut self) {
        for size in [8usize, 4, 2, 1] {
            let mut i = 0;
            while i < self.best.len() && !self.spent() {
                let end = (i + size).min(self.best.len());
                if self.best[i..end].iter().any(|b| *b != 0) {
                    let mut candidate = self.best.clone();
                    candidate[i..end].fill(0);
                    self.attempt(candidate);
                }
                i += size;
            }
        }
    }

    fn lower_bytes(&mut self) {
        let mut i = 0;
        while i < self.best.len() && !self.spent() {
            let (mut lo, mut hi) = (0u8, self.best[i]);
            while lo < hi && !self.spent() {
                let mid = lo + (hi - lo) / 2;
                let mut candidate = self.best.clone();
                candidate[i] = mid;
                let len = self.best.len();
                if self.attempt(candidate) {
                    if self.best.len() < len {
                        break;
                    }
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            i += 1;
        }
    }
}

/// Shrinks `bytes`, a failing input, while `still_fails` says a candidate fails the same way.
/// `still_fails` is not called on `bytes` itself (the caller knows it fails).
pub fn shrink(bytes: &[u8], budget: Budget, mut still_fails: impl FnMut(&[u8]) -> bool) -> Shrunk {
    shrink_spans(bytes, Vec::new(), budget, |candidate| still_fails(candidate).then(Vec::new))
}

/// [`shrink`] knowing where each draw's bytes are: `spans` are the byte ranges the failing
/// run's draws read ([`crate::Source::spans`]), and `still_fails` answers a candidate that
/// still fails with its own run's spans (`None` when it does not fail).
pub fn shrink_spans(
    bytes: &[u8],
    spans: Vec<Range<usize>>,
    budget: Budget,
    mut still_fails: impl FnMut(&[u8]) -> Option<Vec<Range<usize>>>,
) -> Shrunk {
    let mut best = bytes.to_vec();
    trim(&mut best);
    let spans = spans.into_iter().filter(|s| s.end <= best.len()).collect();
    let mut shrinker = Shrinker {
        best,
        spans,
        tried: HashSet::new(),
        runs: 0,
        started: Instant::now(),
        budget,
        still_fails: &mut still_fails,
    };
    loop {
        let before = shrinker.best.clone();
        shrinker.cut_tail();
        shrinker.delete_chunks();
        shrinker.delete_spans();
        shrinker.zero_spans();
        shrinker.lower_spans();
        shrinker.zero_chunks();
        shrinker.lower_bytes();
        if shrinker.best == before || shrinker.spent() {
            break;
        }
    }
    Shrunk {
        budget_spent: shrinker.spent(),
        bytes: shrinker.best,
        original_len: bytes.len(),
        runs: shrinker.runs,
        wall: shrinker.started.elapsed(),
    }
}

/// Drops trailing zero bytes: an exhausted input reads as zeros.
fn trim(bytes: &mut Vec<u8>) {
    while bytes.last() == Some(&0) {
        bytes.pop();
    }
}

fn shortlex_less(a: &[u8], b: &[u8]) -> bool {
    (a.len(), a) < (b.len(), b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_that_needs_two_bytes_shrinks_to_them() {
        // Fails when some byte is at least 200 and a later byte is 7.
        let fails = |b: &[u8]| b.iter().position(|x| *x >= 200).is_some_and(|i| b[i + 1..].contains(&7));
        let mut input: Vec<u8> = (0..600u32).map(|i| (i * 37 % 251) as u8).collect();
        input[100] = 250;
        input[400] = 7;
        assert!(fails(&input));
        let shrunk = shrink(&input, Budget::default(), fails);
        assert_eq!(shrunk.bytes, vec![200, 7], "{shrunk:?}");
        assert_eq!(shrunk.original_len, 600);
        assert!(!shrunk.budget_spent);
        let again = shrink(&input, Budget::default(), fails);
        assert_eq!((again.bytes, again.runs), (shrunk.bytes, shrunk.runs), "deterministic");
    }

    #[test]
    fn the_budget_stops_shrinking_and_says_so() {
        let input = vec![1u8; 64];
        let mut calls = 0;
        let shrunk = shrink(&input, Budget { runs: 5, wall: Duration::from_secs(60) }, |_| {
            calls += 1;
            false
        });
        assert_eq!((calls, shrunk.runs), (5, 5));
        assert!(shrunk.budget_spent);
        assert_eq!(shrunk.bytes, input, "nothing smaller failed");
    }

    #[test]
    fn trailing_zeros_go_without_a_run() {
        let shrunk = shrink(&[3, 0, 0], Budget::default(), |b| b.first() == Some(&3));
        assert_eq!(shrunk.bytes, vec![3]);
    }
}
