//! A fast map for lookups, the same in and out of a simulation.

use std::collections::HashMap;

/// A map for lookups only (never iterated where order could show): a fast, fixed hash, so the
/// checker costs the same in and out of a simulation.
pub(super) type Lookup<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<FxHasher>>;

/// The Fx hash (rustc's): a multiply and a rotate per word; fine for keys no adversary picks.
#[derive(Default, Clone, Copy)]
pub(super) struct FxHasher(u64);

impl std::hash::Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let word = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
            self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
        }
        for &b in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(SEED);
        }
    }

    fn write_u64(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}
