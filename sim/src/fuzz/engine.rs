//! Engines: what picks the next input to run.
//!
//! An [`Engine`] proposes inputs; the [campaign](super::campaign) runs each, keeps those that show
//! new behaviour in its queue and shrinks the failures. The engine here, [`Mutator`], is an
//! in-process mutational engine in the AFL/libFuzzer style (bit flips, random bytes, inserted,
//! deleted and duplicated chunks, splices of two queue entries), steered by the campaign's
//! behaviour signal rather than by compiler coverage: the pairs of consecutive history entry
//! kinds and the swarm values a run produced (see [`super::campaign::features`]). It needs no
//! instrumentation, so it runs in `cargo test` and in the main job on the stable toolchain.
//! Compiler-coverage engines (libFuzzer) drive [`crate::Simulation::run_fuzz`] from their own
//! process instead; see the fuzzing page of the docs.

use crate::input::Input;
use crate::seed::{Seed, Source};

/// Proposes the inputs a campaign runs.
pub trait Engine {
    /// The engine's name, for the campaign's summary line.
    fn name(&self) -> &str;
    /// The next input to run, given the queue of inputs kept so far (never empty).
    fn next(&mut self, queue: &[Input]) -> Input;
}

/// The in-process mutational engine (see the module docs), its choices drawn from a seed so a
/// campaign replays.
#[derive(Clone, Debug)]
pub struct Mutator {
    draws: Source,
    max_len: usize,
}

impl Mutator {
    /// A mutator whose choices come from `seed`; inputs grow to at most `max_len` bytes.
    pub fn new(seed: Seed, max_len: usize) -> Mutator {
        Mutator { draws: seed.path("fuzz/mutator").source(), max_len: max_len.max(1) }
    }

    fn mutate_once(&mut self, bytes: &mut Vec<u8>, other: &[u8]) {
        let d = &mut self.draws;
        let len = bytes.len();
        match d.below(8) {
            0 if len > 0 => {
                let i = d.below(len as u64) as usize;
                bytes[i] ^= 1 << d.below(8);
            }
            1 if len > 0 => {
                let i = d.below(len as u64) as usize;
                bytes[i] = d.below(256) as u8;
            }
            2 if len > 0 => {
                let i = d.below(len as u64) as usize;
                bytes[i] = *d.choose(&[0u8, 1, 0x7f, 0x80, 0xff]).unwrap_or(&0);
            }
            3 => {
                let at = d.range(0..=len as u64) as usize;
                let mut chunk = vec![0u8; d.range(1..=16) as usize];
                d.fill(&mut chunk);
                bytes.splice(at..at, chunk);
            }
            4 if len > 0 => {
                let at = d.below(len as u64) as usize;
                let n = d.range(1..=(len - at).min(32) as u64) as usize;
                bytes.drain(at..at + n);
            }
            5 if len > 0 => {
                let from = d.below(len as u64) as usize;
                let n = d.range(1..=(len - from).min(32) as u64) as usize;
                let chunk = bytes[from..from + n].to_vec();
                let at = d.range(0..=len as u64) as usize;
                bytes.splice(at..at, chunk);
            }
            6 if !other.is_empty() => {
                let keep = d.range(0..=len as u64) as usize;
                let from = d.below(other.len() as u64) as usize;
                bytes.truncate(keep);
                bytes.extend_from_slice(&other[from..]);
            }
            _ => {
                let mut chunk = vec![0u8; 8];
                d.fill(&mut chunk);
                let at = if len == 0 { 0 } else { d.below(len as u64) as usize };
                let end = (at + 8).min(bytes.len());
                bytes.splice(at..end, chunk);
            }
        }
        bytes.truncate(self.max_len);
    }
}

impl Engine for Mutator {
    fn name(&self) -> &str {
        "in-process mutator"
    }

    fn next(&mut self, queue: &[Input]) -> Input {
        let parent = self.draws.choose(queue).cloned().unwrap_or_else(|| Input::new(Vec::new(), Seed(0)));
        let other = self.draws.choose(queue).map(|i| i.bytes.to_vec()).unwrap_or_default();
        let mut bytes = parent.bytes.to_vec();
        for _ in 0..=self.draws.below(4) {
            self.mutate_once(&mut bytes, &other);
        }
        // Now and then a new root: the runtime's own randomness (HashMap order, tokio's RNG)
        // is explored too, not only under the roots the queue started with.
        let root = if self.draws.ratio(1, 16) { Seed(self.draws.below(1 << 16)) } else { parent.root };
        Input::new(bytes, root)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_replay_from_their_seed_stay_bounded_and_change_the_input() {
        let queue = vec![Input::new(vec![5u8; 40], Seed(3)), Input::new(Vec::new(), Seed(0))];
        let run = |seed| {
            let mut m = Mutator::new(Seed(seed), 64);
            (0..200).map(|_| m.next(&queue)).collect::<Vec<_>>()
        };
        let a = run(1);
        assert_eq!(a, run(1), "the same seed proposes the same inputs");
        assert_ne!(a, run(2));
        assert!(a.iter().all(|i| i.len() <= 64));
        assert!(a.iter().filter(|i| !queue.contains(i)).count() > 150, "most proposals are new inputs");
        assert!(a.iter().any(|i| i.root == Seed(3)) && a.iter().any(|i| i.root == Seed(0)), "roots follow the parent");
        assert!(a.iter().any(|i| i.root.0 > 3), "now and then a new root");
    }
}
