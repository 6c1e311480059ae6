//! `--canary SIMULATION[:ORACLE]`: a planted bug every fleet run must find, and what the merge
//! says when it did not.
//!
//! The syntax is checked whole: one `:` at most, no spaces or brackets (an oracle is written
//! `SIMULATION:ORACLE`, not as a signature's `[ORACLE]`). A canary not found is explained, since a
//! typo and a broken fleet look alike otherwise: the input holds no run of that simulation (the
//! simulations it does hold, and the nearest name), or it ran and never failed, or it failed only
//! with other oracles (listed with their counts).

use std::collections::BTreeMap;
use std::str::FromStr;

use crate::Error;
use crate::merge::{Signature, SimulationTotals};

/// Simulations listed in a hint before "and N more".
const LISTED_MAX: usize = 20;

/// A planted bug every fleet run must find: `SIMULATION` or `SIMULATION:ORACLE`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Canary {
    /// The simulation that must fail.
    pub simulation: String,
    /// The oracle its failure must name, if given.
    pub oracle: Option<String>,
}

impl FromStr for Canary {
    type Err = Error;
    /// `SIMULATION` or `SIMULATION:ORACLE`, spaces around the whole trimmed.
    fn from_str(s: &str) -> Result<Canary, Error> {
        let bad = |reason: String| Error::BadCanary { value: s.to_string(), reason };
        let text = s.trim();
        if let Some(c) = text.chars().find(|c| c.is_whitespace() || "[]".contains(*c)) {
            let hint = match text.split_once('[') {
                Some((sim, rest)) if !sim.trim().is_empty() => {
                    format!(": write {}:{}", sim.trim(), rest.trim_end_matches(']').trim())
                }
                _ => String::new(),
            };
            return Err(bad(format!(
                "{c:?} in it: names have no spaces or brackets, an oracle is written SIMULATION:ORACLE{hint}"
            )));
        }
        let (simulation, oracle) = match text.split_once(':') {
            Some((sim, oracle)) => (sim, Some(oracle)),
            None => (text, None),
        };
        if simulation.is_empty() {
            return Err(bad("the simulation before ':' is empty".to_string()));
        }
        match oracle {
            Some("") => Err(bad("the oracle after ':' is empty".to_string())),
            Some(o) if o.contains(':') => {
                Err(bad("more than one ':': one separates the simulation from the oracle".to_string()))
            }
            _ => Ok(Canary { simulation: simulation.to_string(), oracle: oracle.map(str::to_string) }),
        }
    }
}

impl std::fmt::Display for Canary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.oracle {
            Some(o) => write!(f, "{}:{o}", self.simulation),
            None => f.write_str(&self.simulation),
        }
    }
}

impl Canary {
    /// Whether this signature is this canary's failure (a divergence never is).
    pub fn matches(&self, signature: &Signature) -> bool {
        !signature.diverged
            && signature.simulation == self.simulation
            && self.oracle.as_ref().is_none_or(|o| signature.oracle.as_ref() == Some(o))
    }
}

/// A canary and what was found of it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CanaryFound {
    /// The canary.
    pub canary: String,
    /// Failing seeds that match it.
    pub failures: usize,
    /// The signatures they have.
    pub signatures: Vec<String>,
    /// Runs of its simulation in the inputs (passing ones included).
    pub runs: usize,
    /// Its simulation's failures by oracle (`-` for a failure naming none), when it has an oracle.
    pub other_oracles: BTreeMap<String, usize>,
    /// When not found: why, in one line ([`CanaryFound::of`]).
    pub hint: Option<String>,
}

impl CanaryFound {
    /// What the merge found of `canary` among `signatures`, its simulation's runs counted in
    /// `simulations` (the totals per simulation).
    pub fn of(
        canary: &Canary,
        signatures: &[Signature],
        simulations: &BTreeMap<String, SimulationTotals>,
    ) -> CanaryFound {
        let hits: Vec<&Signature> = signatures.iter().filter(|s| canary.matches(s)).collect();
        let failures = hits.iter().map(|s| s.count).sum();
        let runs = simulations.get(&canary.simulation).map_or(0, |t| t.runs);
        let mut other_oracles = BTreeMap::new();
        if canary.oracle.is_some() {
            for s in signatures.iter().filter(|s| !s.diverged && s.simulation == canary.simulation) {
                *other_oracles.entry(s.oracle.clone().unwrap_or_else(|| "-".to_string())).or_insert(0) += s.count;
            }
        }
        let hint = (failures == 0).then(|| hint(canary, runs, &other_oracles, simulations));
        CanaryFound {
            canary: canary.to_string(),
            failures,
            signatures: hits.iter().map(|s| s.signature.clone()).collect(),
            runs,
            other_oracles,
            hint,
        }
    }
}

/// Why a canary was not found, in one line.
fn hint(
    canary: &Canary,
    runs: usize,
    oracles: &BTreeMap<String, usize>,
    simulations: &BTreeMap<String, SimulationTotals>,
) -> String {
    let name = &canary.simulation;
    if runs == 0 {
        let mut seen: Vec<&str> = simulations.keys().map(String::as_str).take(LISTED_MAX).collect();
        let more = simulations.len().saturating_sub(LISTED_MAX);
        let more = if more > 0 { format!(" and {more} more") } else { String::new() };
        let nearest = nearest(name, simulations.keys().map(String::as_str))
            .map(|n| format!(" Did you mean {n}?"))
            .unwrap_or_default();
        if seen.is_empty() {
            seen.push("none");
        }
        return format!(
            "the inputs hold no run of {name} at all (a misspelled name, or shards that did not run it); the \
             simulations they hold: {}{more}.{nearest}",
            seen.join(", ")
        );
    }
    let ran = format!("{name} ran {runs} time{}", if runs == 1 { "" } else { "s" });
    if oracles.is_empty() {
        return format!("{ran} and never failed");
    }
    let listed: Vec<String> = oracles.iter().map(|(o, n)| format!("{o} ({n})")).collect();
    format!(
        "{ran} and failed only with other oracles: {} (an oracle is named as in the signature's [ORACLE])",
        listed.join(", ")
    )
}

/// The name closest to `name` by edit distance, if it is close (at most a third of its length,
/// and at least 1, edits away).
fn nearest<'a>(name: &str, names: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let bound = (name.chars().count() / 3).max(1);
    names.map(|n| (edit_distance(name, n), n)).filter(|(d, _)| *d <= bound).min().map(|(_, n)| n)
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1).min(row[j] + 1).min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canaries_parse_one_colon_and_refuse_spaces_brackets_and_empty_parts() {
        assert_eq!(
            "a_b:q-1".parse::<Canary>().ok(),
            Some(Canary { simulation: "a_b".into(), oracle: Some("q-1".into()) })
        );
        assert_eq!(" a ".parse::<Canary>().ok(), Some(Canary { simulation: "a".into(), oracle: None }));
        for (bad, reason) in [
            ("", "the simulation before ':' is empty"),
            (":o", "the simulation before ':' is empty"),
            ("sim:", "the oracle after ':' is empty"),
            ("sim::o", "more than one ':'"),
            ("sim:o:x", "more than one ':'"),
            ("sim [o]", "write sim:o"),
            ("sim:[o]", "no spaces or brackets"),
        ] {
            let err = bad.parse::<Canary>().expect_err(bad).to_string();
            assert!(err.contains("expected SIMULATION or SIMULATION:ORACLE") && err.contains(reason), "{bad:?}: {err}");
        }
    }

    #[test]
    fn the_nearest_name_is_a_close_one() {
        let names = ["orderstatus_late_commit_churn", "orderstatus", "wallet"];
        assert_eq!(nearest("orderstatus_late_commit_chrn", names.into_iter()), Some("orderstatus_late_commit_churn"));
        assert_eq!(nearest("shoppingcart", names.into_iter()), None, "nothing close");
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
