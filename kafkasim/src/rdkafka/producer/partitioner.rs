//! Partitioners, as librdkafka's `partitioner` property names them (librdkafka
//! `CONFIGURATION.md`; `rdkafka_msg.c`'s `rd_kafka_msg_partitioner_*`):
//!
//! | name | keyed | null (and, for `consistent_random`, empty) key |
//! |---|---|---|
//! | `consistent_random` (default) | CRC-32 of the key mod partitions | random |
//! | `consistent` | CRC-32 | CRC-32 of nothing: partition 0 |
//! | `murmur2_random` | Java's murmur2, positive, mod partitions (the Java producer's) | random |
//! | `murmur2` | murmur2 | murmur2 of nothing |
//! | `fnv1a_random` / `fnv1a` | FNV-1a 32 | random / FNV-1a of nothing |
//! | `random` | random | random |
//!
//! "Random" draws from the run's seeded stream inside a simulation, `fastrand` outside.

/// A partitioner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Partitioner {
    /// `random`.
    Random,
    /// `consistent`.
    Consistent,
    /// `consistent_random`.
    ConsistentRandom,
    /// `murmur2`.
    Murmur2,
    /// `murmur2_random`.
    Murmur2Random,
    /// `fnv1a`.
    Fnv1a,
    /// `fnv1a_random`.
    Fnv1aRandom,
}

/// Where random partitions come from.
#[derive(Debug)]
pub enum Random {
    /// The run's seeded stream.
    Sim(sim::Source),
    /// `fastrand`, outside a simulation.
    Fast(fastrand::Rng),
}

impl Random {
    /// The run's stream for `label` inside a simulation, else a `fastrand` generator.
    pub fn current(label: &str) -> Random {
        match sim::Ctx::try_current() {
            Some(ctx) => Random::Sim(ctx.source(label)),
            None => Random::Fast(fastrand::Rng::new()),
        }
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u32) -> u32 {
        match self {
            Random::Sim(s) => u32::try_from(s.below(u64::from(n))).expect("below n fits n's type"),
            Random::Fast(r) => r.u32(0..n),
        }
    }
}

impl Partitioner {
    /// The partitioner named `name`, as librdkafka spells it.
    pub fn parse(name: &str) -> Option<Partitioner> {
        Some(match name {
            "random" => Partitioner::Random,
            "consistent" => Partitioner::Consistent,
            "consistent_random" => Partitioner::ConsistentRandom,
            "murmur2" => Partitioner::Murmur2,
            "murmur2_random" => Partitioner::Murmur2Random,
            "fnv1a" => Partitioner::Fnv1a,
            "fnv1a_random" => Partitioner::Fnv1aRandom,
            _ => return None,
        })
    }

    /// The partition in `0..partitions` (`partitions > 0`) for `key`.
    pub fn partition(self, key: Option<&[u8]>, partitions: u32, random: &mut Random) -> i32 {
        assert!(partitions > 0, "partitioning needs at least one partition");
        let hashed = match (self, key) {
            (Partitioner::Random, _) => None,
            (Partitioner::ConsistentRandom, Some(k)) if !k.is_empty() => Some(crc32(k)),
            (Partitioner::ConsistentRandom, _) => None,
            (Partitioner::Consistent, k) => Some(crc32(k.unwrap_or_default())),
            (Partitioner::Murmur2Random | Partitioner::Fnv1aRandom, None) => None,
            (Partitioner::Murmur2 | Partitioner::Murmur2Random, k) => {
                Some(murmur2(k.unwrap_or_default()) & 0x7fff_ffff)
            }
            (Partitioner::Fnv1a | Partitioner::Fnv1aRandom, k) => Some(fnv1a(k.unwrap_or_default())),
        };
        let p = hashed.map_or_else(|| random.below(partitions), |h| h % partitions);
        i32::try_from(p).expect("a partition below a partition count")
    }
}

/// CRC-32 (IEEE 802.3, reflected, as zlib's and librdkafka's `rd_crc32`).
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

/// Murmur2 as the Java client computes it (`Utils.murmur2`, seed `0x9747b28c`).
pub fn murmur2(data: &[u8]) -> u32 {
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let mut h: u32 = 0x9747_b28c ^ (data.len() as u32);
    let chunks = data.chunks_exact(4);
    let tail = chunks.remainder();
    for c in chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M) ^ k;
    }
    match tail.len() {
        3 => {
            h ^= u32::from(tail[2]) << 16;
            h ^= u32::from(tail[1]) << 8;
            h ^= u32::from(tail[0]);
            h = h.wrapping_mul(M);
        }
        2 => {
            h ^= u32::from(tail[1]) << 8;
            h ^= u32::from(tail[0]);
            h = h.wrapping_mul(M);
        }
        1 => {
            h ^= u32::from(tail[0]);
            h = h.wrapping_mul(M);
        }
        _ => {}
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h
}

/// FNV-1a, 32 bits.
pub fn fnv1a(data: &[u8]) -> u32 {
    data.iter().fold(0x811c_9dc5u32, |h, &b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_match_the_reference_values() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926, "the CRC-32 check value");
        // Java's Utils.murmur2 test vectors (as signed ints in Kafka's UtilsTest).
        assert_eq!(murmur2(b"21") as i32, -973_932_308);
        assert_eq!(murmur2(b"foobar") as i32, -790_332_482);
        assert_eq!(murmur2(b"a-little-bit-long-string") as i32, -985_981_536);
        assert_eq!(fnv1a(b"a"), 0xe40c_292c);
    }

    #[test]
    fn keys_hash_and_null_keys_draw() {
        let mut r = Random::Fast(fastrand::Rng::with_seed(1));
        let p = Partitioner::ConsistentRandom;
        assert_eq!(p.partition(Some(b"k1"), 7, &mut r), (crc32(b"k1") % 7) as i32);
        assert_eq!(Partitioner::Consistent.partition(None, 7, &mut r), 0);
        let drawn: std::collections::BTreeSet<i32> = (0..100).map(|_| p.partition(None, 3, &mut r)).collect();
        assert_eq!(drawn.len(), 3, "null keys spread over the partitions");
    }
}
