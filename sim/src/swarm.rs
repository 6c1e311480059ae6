//! The swarm: the named dimensions of one run (topology, latencies, fault rates, workload
//! weights), each drawn from its own stream.
//!
//! Swarm testing (Groce et al., "Swarm Testing", ISSTA 2012) draws a different configuration per
//! seed instead of one "everything on" mix, so that some runs have no faults of a kind at all.
//! Each dimension is drawn once per run from the stream `swarm/<name>`, so declaring a new
//! dimension never changes the values of the others. Ranges should include their zero (one
//! node, zero latency, no faults): the low end of a range is drawn with probability 1/8 and the
//! high end with probability 1/16, the rest uniformly, and the low end is also what a shrinking
//! fuzzer converges to. Each drawn dimension's simplest value — the low end of a range, `false`
//! for a flag, the first option of a choice — is kept as `SIM_SWARM` text
//! ([`Swarm::simplest`], [`crate::Outcome::swarm_simplest`]) for [`crate::minimize`] to knock
//! the dimension out to.
//!
//! Every dimension can be pinned from test code ([`crate::Simulation::swarm`]) or from the
//! environment: `SIM_SWARM="latency=0ms,replicas=1"`. Values parse as the dimension's kind:
//! integers (`3`), durations (`0ms`, `250us`, `1.5s`, `2m`, `1h`), ratios (`0.1`), flags
//! (`true`/`false`/`1`/`0`) and choices (the option's name). A pinned value outside the declared
//! range is used as given.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::RangeInclusive;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::seed::{Source, Tree};

/// One drawn (or pinned) dimension value.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub enum Value {
    /// An integer dimension (counts, replicas, sizes).
    Int(u64),
    /// A duration dimension (latencies, timeouts).
    Duration(Duration),
    /// A ratio in `0.0..=1.0` (fault rates, probabilities).
    Ratio(f64),
    /// A flag (a feature or a fault kind on or off).
    Flag(bool),
    /// One of a fixed set of named options.
    Choice(String),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(v) => write!(f, "{v}"),
            Value::Duration(d) => f.write_str(&format_duration(*d)),
            Value::Ratio(r) => write!(f, "{r}"),
            Value::Flag(b) => write!(f, "{b}"),
            Value::Choice(c) => f.write_str(c),
        }
    }
}

/// A `SIM_SWARM` (or [`crate::Simulation::swarm`]) value that does not fit its dimension.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum SwarmError {
    /// The override list is not `name=value[,name=value…]`.
    #[error("SIM_SWARM: expected name=value[,name=value…], got {0:?}")]
    Syntax(String),
    /// The value does not parse as the dimension's kind.
    #[error("swarm dimension {name:?}: cannot use {value:?} as {expected}")]
    Value {
        /// The dimension.
        name: String,
        /// The value given.
        value: String,
        /// What the dimension takes.
        expected: String,
    },
    /// Overrides name dimensions this simulation never drew.
    #[error("swarm overrides name dimensions this simulation does not draw: {unknown:?} (it draws: {known:?})")]
    Unknown {
        /// The names never drawn.
        unknown: Vec<String>,
        /// The names drawn.
        known: Vec<String>,
    },
}

/// Parses `name=value[,name=value…]` (the `SIM_SWARM` format) into overrides.
///
/// # Errors
/// [`SwarmError::Syntax`] when an item has no `=` or an empty name.
pub fn parse_overrides(text: &str) -> Result<BTreeMap<String, String>, SwarmError> {
    let mut out = BTreeMap::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, value) = item.split_once('=').ok_or_else(|| SwarmError::Syntax(text.to_string()))?;
        let name = name.trim();
        if name.is_empty() {
            return Err(SwarmError::Syntax(text.to_string()));
        }
        out.insert(name.to_string(), value.trim().to_string());
    }
    Ok(out)
}

/// Parses a duration: a decimal number followed by `ns`, `us`/`µs`, `ms`, `s`, `m` or `h`.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (number, unit) = t.split_at(split);
    let number: f64 = number.parse().ok()?;
    let scale = match unit.trim() {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return None,
    };
    Duration::try_from_secs_f64(number * scale).ok()
}

/// Formats a duration the way [`parse_duration`] reads it (`0ms`, `1.5s`, `250us`).
pub fn format_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        "0ms".to_string()
    } else if nanos.is_multiple_of(1_000_000_000) {
        format!("{}s", nanos / 1_000_000_000)
    } else if nanos.is_multiple_of(1_000_000) {
        format!("{}ms", nanos / 1_000_000)
    } else if nanos.is_multiple_of(1_000) {
        format!("{}us", nanos / 1_000)
    } else {
        format!("{nanos}ns")
    }
}

#[derive(Debug)]
struct State {
    tree: Tree,
    overrides: BTreeMap<String, String>,
    drawn: BTreeMap<String, Value>,
    /// Each drawn dimension's simplest value, as `SIM_SWARM` text.
    simplest: BTreeMap<String, String>,
    errors: Vec<SwarmError>,
}

/// The swarm of one run. Cheap to clone (a handle); each dimension is drawn once and then
/// returned unchanged for the rest of the run.
#[derive(Debug, Clone)]
pub struct Swarm {
    state: Arc<Mutex<State>>,
}

impl Swarm {
    /// A swarm drawing from `tree` with the given overrides (name → value text).
    pub fn new(tree: Tree, overrides: BTreeMap<String, String>) -> Swarm {
        Swarm {
            state: Arc::new(Mutex::new(State {
                tree,
                overrides,
                drawn: BTreeMap::new(),
                simplest: BTreeMap::new(),
                errors: Vec::new(),
            })),
        }
    }

    /// The dimension `name`: drawn once (or pinned), with `simplest` (its simplest value as
    /// `SIM_SWARM` text) kept for [`Swarm::simplest`].
    fn dimension(
        &self,
        name: &str,
        simplest: String,
        draw: impl FnOnce(&mut Source) -> Value,
        parse: impl FnOnce(&str) -> Result<Value, String>,
    ) -> Value {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(value) = state.drawn.get(name) {
            return value.clone();
        }
        let value = match state.overrides.get(name).cloned() {
            Some(text) => match parse(&text) {
                Ok(value) => value,
                Err(expected) => {
                    state.errors.push(SwarmError::Value { name: name.to_string(), value: text, expected });
                    let mut source = state.tree.source(&format!("swarm/{name}"));
                    draw(&mut source)
                }
            },
            None => {
                let mut source = state.tree.source(&format!("swarm/{name}"));
                draw(&mut source)
            }
        };
        state.drawn.insert(name.to_string(), value.clone());
        state.simplest.insert(name.to_string(), simplest);
        value
    }

    /// An integer dimension in `range` (edges favoured, see the module docs).
    pub fn int(&self, name: &str, range: RangeInclusive<u64>) -> u64 {
        let (lo, hi) = (*range.start(), *range.end());
        let value = self.dimension(
            name,
            lo.min(hi).to_string(),
            |s| Value::Int(edge_biased(s, lo, hi)),
            |t| t.trim().parse().map(Value::Int).map_err(|_| "an integer".to_string()),
        );
        match value {
            Value::Int(v) => v,
            other => {
                panic!("swarm dimension {name:?} was drawn as {other:?}, now asked as an integer")
            }
        }
    }

    /// A duration dimension in `range` (nanosecond resolution, edges favoured).
    pub fn duration(&self, name: &str, range: RangeInclusive<Duration>) -> Duration {
        let lo = u64::try_from(range.start().as_nanos()).unwrap_or(u64::MAX);
        let hi = u64::try_from(range.end().as_nanos()).unwrap_or(u64::MAX);
        let value = self.dimension(
            name,
            format_duration(Duration::from_nanos(lo.min(hi))),
            |s| Value::Duration(Duration::from_nanos(edge_biased(s, lo, hi))),
            |t| parse_duration(t).map(Value::Duration).ok_or_else(|| "a duration such as 0ms, 250us, 1.5s".to_string()),
        );
        match value {
            Value::Duration(v) => v,
            other => {
                panic!("swarm dimension {name:?} was drawn as {other:?}, now asked as a duration")
            }
        }
    }

    /// A ratio dimension in `range` (clamped to `0.0..=1.0`, resolution 2^-32, edges favoured).
    pub fn ratio(&self, name: &str, range: RangeInclusive<f64>) -> f64 {
        let lo = range.start().clamp(0.0, 1.0);
        let hi = range.end().clamp(lo, 1.0);
        let value = self.dimension(
            name,
            Value::Ratio(lo).to_string(),
            |s| {
                const STEPS: u64 = 1 << 32;
                let step = edge_biased(s, 0, STEPS) as f64 / STEPS as f64;
                Value::Ratio(lo + (hi - lo) * step)
            },
            |t| match t.trim().parse::<f64>() {
                Ok(v) if (0.0..=1.0).contains(&v) => Ok(Value::Ratio(v)),
                _ => Err("a ratio in 0.0..=1.0".to_string()),
            },
        );
        match value {
            Value::Ratio(v) => v,
            other => {
                panic!("swarm dimension {name:?} was drawn as {other:?}, now asked as a ratio")
            }
        }
    }

    /// A flag dimension, `true` with probability `p` (the simplest value is `false`).
    pub fn flag(&self, name: &str, p: f64) -> bool {
        let value = self.dimension(
            name,
            "false".to_string(),
            |s| Value::Flag(s.bool(p)),
            |t| match t.trim() {
                "true" | "1" | "on" | "yes" => Ok(Value::Flag(true)),
                "false" | "0" | "off" | "no" => Ok(Value::Flag(false)),
                _ => Err("a flag (true/false)".to_string()),
            },
        );
        match value {
            Value::Flag(v) => v,
            other => panic!("swarm dimension {name:?} was drawn as {other:?}, now asked as a flag"),
        }
    }

    /// One of `options` (uniform; the simplest is the first).
    ///
    /// # Panics
    /// If `options` is empty.
    pub fn choice<'a>(&self, name: &str, options: &[&'a str]) -> &'a str {
        assert!(!options.is_empty(), "swarm dimension {name:?}: no options to choose from");
        let value = self.dimension(
            name,
            options[0].to_string(),
            |s| Value::Choice((*s.choose(options).expect("options are not empty")).to_string()),
            |t| match options.iter().find(|o| **o == t.trim()) {
                Some(o) => Ok(Value::Choice((*o).to_string())),
                None => Err(format!("one of {options:?}")),
            },
        );
        match value {
            Value::Choice(c) => options.iter().find(|o| **o == c).copied().unwrap_or(options[0]),
            other => {
                panic!("swarm dimension {name:?} was drawn as {other:?}, now asked as a choice")
            }
        }
    }

    /// Whether `SIM_SWARM` (or the overrides given to [`Swarm::new`]) names the dimension.
    pub fn overridden(&self, name: &str) -> bool {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).overrides.contains_key(name)
    }

    /// Every dimension drawn so far, by name.
    pub fn values(&self) -> BTreeMap<String, Value> {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).drawn.clone()
    }

    /// Every dimension drawn so far with its simplest value as `SIM_SWARM` text: an integer's,
    /// a duration's or a ratio's low end, `false` for a flag, a choice's first option.
    pub fn simplest(&self) -> BTreeMap<String, String> {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).simplest.clone()
    }

    /// The dimensions as `name=value,…` (the `SIM_SWARM` format), sorted by name.
    pub fn describe(&self) -> String {
        self.values().iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
    }

    /// Problems with the overrides: values that did not parse, and names never drawn.
    pub fn errors(&self) -> Vec<SwarmError> {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let mut errors = state.errors.clone();
        let unknown: Vec<String> = state.overrides.keys().filter(|k| !state.drawn.contains_key(*k)).cloned().collect();
        if !unknown.is_empty() {
            errors.push(SwarmError::Unknown { unknown, known: state.drawn.keys().cloned().collect() });
        }
        errors
    }
}

/// `lo` with probability 1/8, `hi` with 1/16, else uniform in `lo..=hi`.
fn edge_biased(source: &mut Source, lo: u64, hi: u64) -> u64 {
    let (lo, hi) = (lo.min(hi), hi.max(lo));
    match source.below(16) {
        0 | 1 => lo,
        2 => hi,
        _ => source.range(lo..=hi),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seed::{Seed, Tree};

    #[test]
    fn overrides_parse_and_report_syntax_errors() {
        let o = parse_overrides("latency=0ms, replicas=1").expect("valid");
        assert_eq!(o.get("latency").map(String::as_str), Some("0ms"));
        assert_eq!(o.get("replicas").map(String::as_str), Some("1"));
        assert!(matches!(parse_overrides("latency"), Err(SwarmError::Syntax(_))));
        assert!(matches!(parse_overrides("=3"), Err(SwarmError::Syntax(_))));
    }

    #[test]
    fn durations_parse_and_format_round_trip() {
        for (text, d) in [
            ("0ms", Duration::ZERO),
            ("250us", Duration::from_micros(250)),
            ("1.5s", Duration::from_millis(1500)),
            ("2m", Duration::from_secs(120)),
            ("1h", Duration::from_secs(3600)),
        ] {
            assert_eq!(parse_duration(text), Some(d), "{text}");
            assert_eq!(parse_duration(&format_duration(d)), Some(d));
        }
        assert_eq!(parse_duration("5 parsecs"), None);
        assert_eq!(parse_duration("ms"), None);
    }

    #[test]
    fn a_dimension_is_drawn_once_and_independently_of_others() {
        let a = Swarm::new(Tree::new(Seed(9)), BTreeMap::new());
        let first = a.int("replicas", 1..=3);
        assert_eq!(a.int("replicas", 1..=3), first, "drawn once per run");
        let b = Swarm::new(Tree::new(Seed(9)), BTreeMap::new());
        let _ = b.duration("latency", Duration::ZERO..=Duration::from_millis(5));
        assert_eq!(b.int("replicas", 1..=3), first, "another dimension drawn first changes nothing");
        assert_eq!(a.describe(), format!("replicas={first}"));
    }

    #[test]
    fn simplest_values_are_the_low_ends_false_and_the_first_option_and_parse_back() {
        let s = Swarm::new(Tree::new(Seed(3)), BTreeMap::new());
        let _ = s.int("replicas", 1..=3);
        let _ = s.duration("latency", Duration::from_millis(2)..=Duration::from_millis(50));
        let _ = s.ratio("loss", 0.25..=0.5);
        let _ = s.flag("nemesis", 0.9);
        let _ = s.choice("mode", &["safe", "quick"]);
        let simplest = s.simplest();
        let text: Vec<String> = simplest.iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(text, ["latency=2ms", "loss=0.25", "mode=safe", "nemesis=false", "replicas=1"]);
        let pinned = Swarm::new(Tree::new(Seed(3)), simplest);
        assert_eq!(pinned.int("replicas", 1..=3), 1);
        assert_eq!(
            pinned.duration("latency", Duration::from_millis(2)..=Duration::from_millis(50)),
            Duration::from_millis(2)
        );
        assert_eq!(pinned.ratio("loss", 0.25..=0.5), 0.25);
        assert!(!pinned.flag("nemesis", 0.9));
        assert_eq!(pinned.choice("mode", &["safe", "quick"]), "safe");
        assert!(pinned.errors().is_empty(), "{:?}", pinned.errors());
    }

    #[test]
    fn pinned_values_win_and_bad_ones_are_reported() {
        let overrides = parse_overrides("replicas=7,mode=fast,on=yes").expect("valid");
        let s = Swarm::new(Tree::new(Seed(1)), overrides);
        assert_eq!(s.int("replicas", 1..=3), 7);
        let _ = s.choice("mode", &["safe", "quick"]);
        assert!(s.flag("on", 0.0));
        let errors = s.errors();
        assert_eq!(errors.len(), 1);
        assert!(errors[0].to_string().contains("one of [\"safe\", \"quick\"]"), "{}", errors[0]);
    }
}
