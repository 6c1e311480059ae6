//! What a sweep is configured with: the [`Mode`], the [`Seeds`] and the [`ConfigError`] a bad
//! value gives.

use std::collections::BTreeSet;
use std::ops::Range;
use std::str::FromStr;

use crate::seed::Seed;
use crate::swarm::SwarmError;

/// The most seeds one sweep runs.
pub const SEEDS_MAX: u64 = 10_000_000;

/// How a run draws its schedule.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// The schedule as drawn from the seed (default). Exact.
    #[default]
    Replay,
    /// The seed also draws perturbations (scheduler intervals, wider event spreads, yields between
    /// harness events) to widen the interleavings searched. Still exact per seed.
    Explore,
}

impl FromStr for Mode {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "replay" | "" => Ok(Mode::Replay),
            "explore" => Ok(Mode::Explore),
            other => {
                Err(ConfigError::Invalid { var: "SIM_MODE", value: other.to_string(), expected: "replay or explore" })
            }
        }
    }
}

/// Which seeds a sweep runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seeds {
    /// These seeds, in this order.
    List(Vec<u64>),
    /// A half-open range.
    Range(Range<u64>),
    /// This many fresh seeds from the OS's entropy (printed, so each replays).
    Random(usize),
    /// This many seeds from the build's seed base ([`crate::seed_base`]): `base, base+1, …`,
    /// different per commit, CI event, job and `SIM_SEED_SALT`.
    Build(u64),
}

impl From<Range<u64>> for Seeds {
    fn from(r: Range<u64>) -> Seeds {
        Seeds::Range(r)
    }
}

impl From<std::ops::RangeInclusive<u64>> for Seeds {
    fn from(r: std::ops::RangeInclusive<u64>) -> Seeds {
        Seeds::Range(*r.start()..r.end().saturating_add(1))
    }
}

impl From<Vec<u64>> for Seeds {
    fn from(v: Vec<u64>) -> Seeds {
        Seeds::List(v)
    }
}

impl FromStr for Seeds {
    type Err = ConfigError;
    /// `0..500`, `0..=9`, `random:200`, `build:1000`, `42`, or `1,5,9`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let bad = || ConfigError::Invalid {
            var: "SIM_SEEDS",
            value: s.to_string(),
            expected: "a range 0..500 or 0..=9, random:N, build:N, or a list 1,5,9",
        };
        let seed = |x: &str| x.parse::<Seed>().map(|s| s.0).map_err(|_| bad());
        if let Some(count) = t.strip_prefix("random:") {
            return count.trim().parse().map(Seeds::Random).map_err(|_| bad());
        }
        if let Some(count) = t.strip_prefix("build:") {
            return count.trim().parse().map(Seeds::Build).map_err(|_| bad());
        }
        let backwards = || ConfigError::Invalid {
            var: "SIM_SEEDS",
            value: s.to_string(),
            expected: "a range whose start is not above its end (0..500, 0..=9)",
        };
        if let Some((a, b)) = t.split_once("..=") {
            let (a, b) = (seed(a)?, seed(b)?);
            return if a <= b { Ok(Seeds::Range(a..b.saturating_add(1))) } else { Err(backwards()) };
        }
        if let Some((a, b)) = t.split_once("..") {
            let (a, b) = (seed(a)?, seed(b)?);
            return if a <= b { Ok(Seeds::Range(a..b)) } else { Err(backwards()) };
        }
        let items: Vec<&str> = t.split(',').map(str::trim).collect();
        if items.iter().any(|x| x.is_empty()) {
            return Err(bad());
        }
        items.into_iter().map(seed).collect::<Result<Vec<_>, _>>().map(Seeds::List)
    }
}

impl Seeds {
    /// How many seeds this is.
    pub fn len(&self) -> u64 {
        match self {
            Seeds::List(v) => v.len() as u64,
            Seeds::Range(r) => r.end.saturating_sub(r.start),
            Seeds::Random(n) => *n as u64,
            Seeds::Build(n) => *n,
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The seeds themselves.
    ///
    /// # Errors
    /// [`ConfigError::NoSeeds`] when empty; [`ConfigError::TooManySeeds`] above [`SEEDS_MAX`].
    pub fn resolve(&self) -> Result<Vec<Seed>, ConfigError> {
        match self.len() {
            0 => Err(ConfigError::NoSeeds(format!("{self:?}"))),
            n if n > SEEDS_MAX => Err(ConfigError::TooManySeeds(n)),
            _ => Ok(match self {
                Seeds::List(v) => v.iter().copied().map(Seed).collect(),
                Seeds::Range(r) => r.clone().map(Seed).collect(),
                Seeds::Random(n) => (0..*n).map(|_| Seed(os_random_u64())).collect(),
                Seeds::Build(n) => crate::seed_base::build_base().seeds(*n).collect(),
            }),
        }
    }
}

/// Parses `SIM_SHARD`'s `i/n` (`0 ≤ i < n`; spaces around either number are allowed).
///
/// # Errors
/// [`ConfigError::Invalid`] naming `SIM_SHARD` and the value: no `/`, a part that is not a
/// count (`a/b`, `-1/8`), `n = 0`, or `i ≥ n` (`8/8`).
pub fn parse_shard(text: &str) -> Result<(usize, usize), ConfigError> {
    let bad = || ConfigError::Invalid {
        var: "SIM_SHARD",
        value: text.to_string(),
        expected: "i/n with 0 <= i < n, such as 3/8 (shards count from 0)",
    };
    let (i, n) = text.trim().split_once('/').ok_or_else(bad)?;
    let (i, n): (usize, usize) = (i.trim().parse().map_err(|_| bad())?, n.trim().parse().map_err(|_| bad())?);
    if n == 0 || i >= n {
        return Err(bad());
    }
    Ok((i, n))
}

fn env_text(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The shard a sweep runs, as it reads `SIM_SHARD`: `None` when unset or empty, and when
/// `SIM_SEED` is set (a replay line runs its seed even in a shell a shard left `SIM_SHARD` in).
///
/// # Errors
/// As [`parse_shard`]: a binary calls this before its sweeps to refuse a bad value cleanly (a
/// sweep given one panics, which is how a `cargo test` simulation fails).
pub fn shard_from_env() -> Result<Option<(usize, usize)>, ConfigError> {
    match env_text("SIM_SHARD") {
        Some(text) if env_text("SIM_SEED").is_none() => parse_shard(&text).map(Some),
        _ => Ok(None),
    }
}

/// `SIM_SEEDS` as a sweep reads it: `None` when unset or empty.
///
/// # Errors
/// [`ConfigError::Invalid`] for a value that does not parse, [`ConfigError::NoSeeds`] for an
/// empty set (`build:0`, `5..5`), [`ConfigError::TooManySeeds`] above [`SEEDS_MAX`]: what the
/// sweep itself would refuse.
pub fn seeds_from_env() -> Result<Option<Seeds>, ConfigError> {
    let Some(text) = env_text("SIM_SEEDS") else { return Ok(None) };
    let seeds: Seeds = text.parse()?;
    match seeds.len() {
        0 => Err(ConfigError::NoSeeds(format!("SIM_SEEDS={text}"))),
        n if n > SEEDS_MAX => Err(ConfigError::TooManySeeds(n)),
        _ => Ok(Some(seeds)),
    }
}

/// What `SIM_DROP_FAULTS` takes.
const DROP_FAULTS_EXPECTED: &str = "fault numbers such as 2,5 (1-based, as an outcome's faults list numbers them)";

/// Parses `SIM_DROP_FAULTS`: fault numbers, comma-separated, each at least 1 (`2,5`).
///
/// # Errors
/// [`ConfigError::Invalid`] naming `SIM_DROP_FAULTS` and the value, for an empty item, a number
/// that does not parse, or 0.
pub(crate) fn parse_drop_faults(text: &str) -> Result<BTreeSet<usize>, ConfigError> {
    let bad =
        || ConfigError::Invalid { var: "SIM_DROP_FAULTS", value: text.to_string(), expected: DROP_FAULTS_EXPECTED };
    text.split(',').map(|item| item.trim().parse::<usize>().ok().filter(|n| *n > 0).ok_or_else(bad)).collect()
}

/// Parses `SIM_MAX_OPS`: a count of operations (`0` runs none).
///
/// # Errors
/// [`ConfigError::Invalid`] naming `SIM_MAX_OPS` and the value when it is not a count.
pub(crate) fn parse_max_ops(text: &str) -> Result<u64, ConfigError> {
    text.trim().parse().map_err(|_| ConfigError::Invalid {
        var: "SIM_MAX_OPS",
        value: text.to_string(),
        expected: "a count of operations each workload run starts at most, such as 7",
    })
}

/// The `SIM_DROP_FAULTS` text of `numbers` (`2,5`).
pub(crate) fn format_drop_faults(numbers: &BTreeSet<usize>) -> String {
    numbers.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
}

fn os_random_u64() -> u64 {
    let mut bytes = [0u8; 8];
    // Called on a sweep thread, never a simulation thread: this is the OS's entropy.
    // SAFETY: the buffer is valid for 8 bytes.
    let n = unsafe { crate::runtime::interpose::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if n != 8 {
        use std::hash::BuildHasher;
        return std::collections::hash_map::RandomState::new().hash_one(std::time::Instant::now());
    }
    u64::from_le_bytes(bytes)
}

/// A configuration error: an environment variable or builder value that cannot be used.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum ConfigError {
    /// A variable's value does not parse.
    #[error("{var}={value:?}: expected {expected}")]
    Invalid {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What it takes.
        expected: &'static str,
    },
    /// The seeds to run are none.
    #[error("no seeds to run ({0}): give SIM_SEEDS a non-empty range or list")]
    NoSeeds(String),
    /// More seeds than [`SEEDS_MAX`].
    #[error("{0} seeds is more than one sweep runs (SEEDS_MAX = 10000000): shard it with SIM_SHARD=i/n")]
    TooManySeeds(u64),
    /// `SIM_JSON` names a file that cannot be appended to.
    #[error("SIM_JSON={path:?}: cannot append to it: {reason}")]
    Json {
        /// The path.
        path: String,
        /// Why.
        reason: String,
    },
    /// A swarm override is wrong.
    #[error(transparent)]
    Swarm(#[from] SwarmError),
    /// [`crate::Simulation::minimize`] was given a seed that does not fail.
    #[error("simulation {simulation}: seed {seed} does not fail ({outcome}): nothing to minimize")]
    NothingToMinimize {
        /// The simulation.
        simulation: String,
        /// The seed.
        seed: Seed,
        /// How it ended (`passed`, or an excused violation).
        outcome: String,
    },
    /// A fuzz input (`SIM_FUZZ_INPUT`, a corpus entry) or a corpus directory cannot be read
    /// or written.
    #[error("fuzz input {path:?}: {reason}")]
    FuzzInput {
        /// The path.
        path: String,
        /// Why.
        reason: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_parse_every_documented_form() {
        assert_eq!("0..5".parse::<Seeds>(), Ok(Seeds::Range(0..5)));
        assert_eq!("3..=4".parse::<Seeds>(), Ok(Seeds::Range(3..5)));
        assert_eq!("random:7".parse::<Seeds>(), Ok(Seeds::Random(7)));
        assert_eq!("build:9".parse::<Seeds>(), Ok(Seeds::Build(9)));
        assert_eq!("42".parse::<Seeds>(), Ok(Seeds::List(vec![42])));
        assert_eq!("1, 5,0x10".parse::<Seeds>(), Ok(Seeds::List(vec![1, 5, 16])));
        for bad in ["", "5..1", "a..b", "random:x", "build:", "1,,3", "1,x"] {
            let err = bad.parse::<Seeds>().expect_err(bad);
            assert!(err.to_string().starts_with("SIM_SEEDS="), "{err}");
        }
        assert_eq!(Seeds::Random(5).resolve().map(|s| s.len()), Ok(5));
    }

    #[test]
    fn shards_parse_i_of_n_and_refuse_everything_else() {
        assert_eq!(parse_shard("3/8"), Ok((3, 8)));
        assert_eq!(parse_shard(" 1 /8 "), Ok((1, 8)));
        assert_eq!(parse_shard("0/1"), Ok((0, 1)));
        for bad in ["8/8", "0/0", "a/b", "1/1", "3", "-1/8", "/8", "1/", ""] {
            let err = parse_shard(bad).expect_err(bad);
            assert!(err.to_string().starts_with(&format!("SIM_SHARD={bad:?}: expected i/n")), "{err}");
        }
    }

    #[test]
    fn empty_and_huge_seed_sets_are_errors() {
        assert!(matches!("5..5".parse::<Seeds>().and_then(|s| s.resolve()), Err(ConfigError::NoSeeds(_))));
        let Err(ConfigError::Invalid { expected, .. }) = "5..2".parse::<Seeds>() else { panic!("5..2 parsed") };
        assert!(expected.contains("start is not above its end"), "{expected}");
        assert!(matches!("random:0".parse::<Seeds>().and_then(|s| s.resolve()), Err(ConfigError::NoSeeds(_))));
        assert!(matches!(
            "0..=18446744073709551615".parse::<Seeds>().and_then(|s| s.resolve()),
            Err(ConfigError::TooManySeeds(_))
        ));
        assert!(matches!(
            "0..100000000000".parse::<Seeds>().and_then(|s| s.resolve()),
            Err(ConfigError::TooManySeeds(100_000_000_000))
        ));
    }

    #[test]
    fn drop_faults_and_max_ops_parse_or_name_the_variable() {
        assert_eq!(parse_drop_faults("2,5"), Ok(BTreeSet::from([2, 5])));
        assert_eq!(parse_drop_faults(" 3 , 1,3"), Ok(BTreeSet::from([1, 3])));
        assert_eq!(format_drop_faults(&BTreeSet::from([5, 2])), "2,5");
        for bad in ["0", "1,,2", "x", "2;5", "-1", ","] {
            let err = parse_drop_faults(bad).expect_err(bad);
            assert_eq!(
                err.to_string(),
                format!(
                    "SIM_DROP_FAULTS={bad:?}: expected fault numbers such as 2,5 (1-based, as an outcome's faults list numbers them)"
                )
            );
        }
        assert_eq!(parse_max_ops("7"), Ok(7));
        assert_eq!(parse_max_ops("0"), Ok(0));
        let err = parse_max_ops("seven").expect_err("not a count");
        assert!(err.to_string().starts_with("SIM_MAX_OPS=\"seven\": expected a count"), "{err}");
    }

    #[test]
    fn modes_parse() {
        assert_eq!("explore".parse::<Mode>(), Ok(Mode::Explore));
        assert_eq!("replay".parse::<Mode>(), Ok(Mode::Replay));
        assert!("fast".parse::<Mode>().is_err());
    }
}
