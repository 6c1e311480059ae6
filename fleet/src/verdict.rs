//! What the fleet was told to expect, and the verdict: each signature's [`Status`], the canaries
//! found or missing, and the exit code.
//!
//! - `--expected SIMULATION`: that simulation's failures are planted bugs (listed, not new).
//! - `--known FILE`: one signature per line (blank lines and lines starting with `#` skipped; a
//!   signature itself may contain `#`, so there are no trailing comments): listed as known.
//! - `--canary SIMULATION[:ORACLE]`: that simulation must fail at least once (with that oracle,
//!   when named) or the fleet failed to find its planted bug: exit 2. A canary is expected.
//!
//! Exit 1 when any signature is new, 2 when a canary is missing (2 wins over 1), else 0.

use std::collections::BTreeSet;
use std::path::Path;
use std::str::FromStr;

use crate::merge::Signature;
pub use crate::merge::Status;
use crate::{Error, Exit};

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
    /// Splits at the first `:` (simulation names have none).
    fn from_str(s: &str) -> Result<Canary, Error> {
        let (simulation, oracle) = match s.split_once(':') {
            Some((sim, oracle)) => (sim.trim(), Some(oracle.trim())),
            None => (s.trim(), None),
        };
        if simulation.is_empty() || oracle.is_some_and(str::is_empty) {
            return Err(Error::BadCanary(s.to_string()));
        }
        Ok(Canary { simulation: simulation.to_string(), oracle: oracle.map(str::to_string) })
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

/// What the merge is told to expect.
#[derive(Clone, Debug, Default)]
pub struct Policy {
    /// `--canary`.
    pub canaries: Vec<Canary>,
    /// `--expected` (canaries' simulations are added).
    pub expected: BTreeSet<String>,
    /// The signatures of `--known` files.
    pub known: BTreeSet<String>,
}

impl Policy {
    /// The policy of these options; `known` files are read.
    ///
    /// Errors: [`Error::Io`] for a `--known` file that cannot be read.
    pub fn new(canaries: Vec<Canary>, expected: Vec<String>, known: &[impl AsRef<Path>]) -> Result<Policy, Error> {
        let mut policy = Policy { expected: expected.into_iter().collect(), ..Policy::default() };
        policy.expected.extend(canaries.iter().map(|c| c.simulation.clone()));
        policy.canaries = canaries;
        for file in known {
            let file = file.as_ref();
            let text = std::fs::read_to_string(file).map_err(Error::io(file))?;
            policy.known.extend(parse_known(&text));
        }
        Ok(policy)
    }

    /// The status of a signature.
    pub fn status(&self, signature: &Signature) -> Status {
        if !signature.diverged && self.canaries.iter().any(|c| c.matches(signature)) {
            Status::Canary
        } else if !signature.diverged && self.expected.contains(&signature.simulation) {
            Status::Expected
        } else if self.known.contains(&signature.signature) {
            Status::Known
        } else {
            Status::New
        }
    }
}

/// The signatures of a `--known` file's text.
pub fn parse_known(text: &str) -> impl Iterator<Item = String> + '_ {
    text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(str::to_string)
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
}

/// The merge's verdict.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Verdict {
    /// Signatures with status new.
    pub new: usize,
    /// Each canary, found or not.
    pub canaries: Vec<CanaryFound>,
}

impl Verdict {
    /// The verdict over signatures whose status is already set.
    pub fn of(policy: &Policy, signatures: &[Signature]) -> Verdict {
        let canaries = policy
            .canaries
            .iter()
            .map(|c| {
                let hits: Vec<&Signature> = signatures.iter().filter(|s| c.matches(s)).collect();
                CanaryFound {
                    canary: c.to_string(),
                    failures: hits.iter().map(|s| s.count).sum(),
                    signatures: hits.iter().map(|s| s.signature.clone()).collect(),
                }
            })
            .collect();
        Verdict { new: signatures.iter().filter(|s| s.status == Status::New).count(), canaries }
    }

    /// The canaries not found.
    pub fn missing(&self) -> impl Iterator<Item = &CanaryFound> {
        self.canaries.iter().filter(|c| c.failures == 0)
    }

    /// 2 when a canary is missing, else 1 when a signature is new, else 0.
    pub fn exit(&self) -> Exit {
        if self.missing().next().is_some() {
            Exit::CanaryMissing
        } else if self.new > 0 {
            Exit::New
        } else {
            Exit::Clean
        }
    }
}
